"""`kadmin` command line: a click group whose commands reach the cluster through ZooKeeper (--zookeeper) or the
Kafka Admin APIs (--bootstrap-server), build one result object either way and print it (admin_cli.output).

Global options come before the command: `kadmin --zookeeper localhost:2181 create-topic orders ...`,
`kadmin --bootstrap-server localhost:9092 --output json describe-topic orders`. Each command's module holds its
result class and its two sources (`*_zk`, `*_admin`); this module parses options, picks the source, waits where
asked (progress on stderr) and turns failures into one line on stderr with the exit statuses of
admin_cli.errors (0 ok, 1 refused, 2 usage, 3 unreachable or timed out).

`groups ...` always speaks the Kafka protocol (consumer groups live in the brokers): with --zookeeper alone it
finds the registered brokers (/brokers/ids) to bootstrap from. `transactions ...` does the same for the
partitions' side (DescribeProducers, abort's WriteTxnMarkers); with --zookeeper, list, describe and the
coordinators' side of find-hanging read `__transaction_state` itself (leaders from ZooKeeper, the log fetched up
to the high watermark and replayed as a coordinator loads it), since Kafka's kafka-transactions.sh has no
ZooKeeper mode to follow: the state the log holds, so a transition still being written may not show yet.

`users ...` manages SCRAM credentials as kafka-configs.sh --entity-type users does (admin_cli.users).
`--command-config FILE` (Kafka client properties: security.protocol, sasl.*, ssl.*) is how every connection
kadmin opens to the brokers reaches a secured listener; with --zookeeper, the brokers registered there are
reached on their endpoints of that security protocol. A file that cannot be read or holds bad properties is a
usage error.
"""
from __future__ import annotations

import logging
import re
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass

import click
from click.core import ParameterSource
from click.exceptions import NoArgsIsHelpError

from zk import LIBRARY_LOGGER as ZK_LOGGER
from zk import admin as zk_admin
from zk.assignment import parse_replica_assignment
from zk.client import KafkaZkClient, ZkError
from kbroker.common.admin_errors import AdminError
from kbroker.config import ConfigError, read_properties
from kbroker.protocol.acls import CLUSTER_NAME, AclBindingFilter, ResourcePattern, operation, valid_principal
from kbroker.protocol.client import (Errors, KafkaError, TimedOut, TopicPartition, Unreachable, error_text,
                                     parse_bootstrap)
from kbroker.protocol.client.security import ClientSecurity

from . import acls as acl_ops
from . import cluster as cluster_ops
from . import configs as config_ops
from . import elect as elect_ops
from . import groups as group_ops
from . import reassign as reassign_ops
from . import topics as topic_ops
from . import transactions as txn_ops
from . import users as user_ops
from .errors import EXIT_REFUSED, EXIT_UNREACHABLE, WaitTimedOut, describe_failure
from .kafka_client import PREFERRED, UNCLEAN, AdminClient
from .output import Output, progress

# The ZooKeeper library logs every failed connection attempt; with no logging configured Python would print those
# on stderr.
# kadmin reports failures itself, in one line.
logging.getLogger(ZK_LOGGER).addHandler(logging.NullHandler())


class _Failure(click.ClickException):
    """A one-line error with its exit status."""

    def __init__(self, message: str, exit_code: int = EXIT_REFUSED):
        super().__init__(message)
        self.exit_code = exit_code


class _Kadmin(click.Group):
    """click's group, but a usage error is one line on stderr (click prints the usage and a hint too), and the
    failures of admin operations become one line with their exit status (admin_cli.errors)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
            code = rv if isinstance(rv, int) else 0
        except NoArgsIsHelpError as e:  # a bare group: show its help, as click does
            e.show()
            code = e.exit_code
        except click.UsageError as e:
            hint = f" (see '{e.ctx.command_path} --help')" if e.ctx is not None else ""
            click.echo(f"Error: {e.format_message()}{hint}", err=True)
            code = e.exit_code
        except click.ClickException as e:
            e.show()
            code = e.exit_code
        except click.Abort:
            click.echo("Aborted!", err=True)
            code = 1
        except Exception as e:
            failure = describe_failure(e)
            if failure is None:
                raise
            click.echo(f"Error: {failure[0]}", err=True)
            code = failure[1]
        if standalone_mode:
            sys.exit(code)
        return code


@dataclass
class _Settings:
    """The global options, for the commands."""
    zookeeper: str | None
    bootstrap_server: str | None
    zk_timeout: float
    request_timeout: float
    out: Output
    security: ClientSecurity | None = None      # --command-config: how to reach the brokers' listener


class _Source:
    """The way to the cluster the global options chose: a started KafkaZkClient or an AdminClient."""

    def __init__(self, zk: KafkaZkClient | None = None, admin: AdminClient | None = None):
        self.zk, self.admin = zk, admin

    def call(self, zk_fn, admin_fn, *args, **kwargs):
        """zk_fn(zk, ...) or admin_fn(admin, ...), whichever way kadmin reaches the cluster."""
        if self.zk is not None:
            return zk_fn(self.zk, *args, **kwargs)
        return admin_fn(self.admin, *args, **kwargs)


def _settings(ctx: click.Context) -> _Settings:
    return ctx.find_object(_Settings)


@contextmanager
def _zk(ctx: click.Context):
    """A started KafkaZkClient on --zookeeper; not reaching it is exit 3."""
    s = _settings(ctx)
    timeout_ms = int(s.zk_timeout * 1000)
    client = KafkaZkClient(s.zookeeper, session_timeout_ms=timeout_ms, connection_timeout_ms=timeout_ms)
    try:
        client.start()
    except ZkError as e:
        raise _Failure(str(e), EXIT_UNREACHABLE) from None
    try:
        yield client
    except ZkError as e:
        raise _Failure(*describe_failure(e, s.zookeeper)) from None
    finally:
        client.close()


def _servers(ctx: click.Context) -> list[tuple[str, int]]:
    try:
        return parse_bootstrap(_settings(ctx).bootstrap_server)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--bootstrap-server") from None


@contextmanager
def _cluster(ctx: click.Context, timeout: float | None = None):
    """The _Source for the command: ZooKeeper with --zookeeper, the Admin APIs with --bootstrap-server (each
    request given `timeout` seconds, default --request-timeout)."""
    s = _settings(ctx)
    if s.bootstrap_server:
        client = AdminClient(_servers(ctx), timeout=timeout or s.request_timeout, security=s.security)
        try:
            yield _Source(admin=client)
        finally:
            client.close()
    elif s.zookeeper:
        with _zk(ctx) as zk:
            yield _Source(zk=zk)
    else:
        raise click.UsageError("--zookeeper HOST:PORT[/chroot] or --bootstrap-server HOST:PORT is required (or "
                               "set KADMIN_ZOOKEEPER or KADMIN_BOOTSTRAP_SERVER).")


def _wait(poll, description: str, timeout: float, what, total: int | None = None, interval: float = 0.2) -> None:
    """Poll until poll() -> (done, finished) says finished, showing description and done/total as progress on
    stderr; after timeout seconds WaitTimedOut (exit 3): "Timed out after Ns waiting for {what(done)}"."""
    deadline = time.monotonic() + timeout
    with progress(description, total) as update:
        while True:
            done, finished = poll()
            update(done)
            if finished:
                return
            if time.monotonic() >= deadline:
                raise WaitTimedOut(f"Timed out after {timeout:g}s waiting for {what(done)}")
            time.sleep(interval)


EXIT_STATUSES = """\b
Exit status:
  0  done
  1  refused or failed (unknown topic, invalid config, ...)
  2  usage error
  3  cluster unreachable, or a request or wait timed out"""


@click.group(cls=_Kadmin, context_settings={"help_option_names": ["-h", "--help"]},
             epilog=EXIT_STATUSES)
@click.option("--zookeeper", envvar="KADMIN_ZOOKEEPER", show_envvar=True, metavar="HOST:PORT[/chroot]",
              help="Reach the cluster through ZooKeeper, as Kafka's --zookeeper tools do.")
@click.option("--bootstrap-server", envvar="KADMIN_BOOTSTRAP_SERVER", show_envvar=True,
              metavar="HOST:PORT[,HOST:PORT]", help="Reach the cluster through the brokers' Admin APIs instead.")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True,
              envvar="KADMIN_OUTPUT", show_envvar=True,
              help="Tables for people, or one JSON document (its shape is in each command's help).")
@click.option("--zk-timeout", type=click.FloatRange(min=0, min_open=True), default=10.0, show_default=True,
              metavar="SECONDS", help="Give up connecting to ZooKeeper after this long.")
@click.option("--request-timeout", type=click.FloatRange(min=0, min_open=True), default=30.0, show_default=True,
              metavar="SECONDS", help="Give up on a request to the brokers after this long (retries included).")
@click.option("--command-config", envvar="KADMIN_COMMAND_CONFIG", show_envvar=True, metavar="FILE",
              help="Kafka client properties for reaching the brokers' listener (security.protocol, sasl.mechanism, "
                   "sasl.jaas.config, ssl.truststore.location, ...), as Kafka's tools take them.")
@click.pass_context
def cli(ctx, zookeeper, bootstrap_server, output, zk_timeout, request_timeout, command_config):
    """Administer a kbroker (or Kafka 2.8) cluster, as Kafka's kafka-topics.sh, kafka-configs.sh,
    kafka-reassign-partitions.sh, kafka-leader-election.sh, kafka-consumer-groups.sh and kafka-acls.sh do.

    Give --zookeeper or --bootstrap-server: every command works either way and shows the same thing for the
    same cluster state (groups always talk to the brokers, found through ZooKeeper if need be). What only
    ZooKeeper holds shows only with --zookeeper: topics marked for deletion, configs of a broker that is not
    running. Refusals carry the error each path gets from Kafka (a bad config value: INVALID_CONFIG through
    ZooKeeper, INVALID_REQUEST from the brokers). With both on the command line kadmin refuses;
    --bootstrap-server wins over KADMIN_ZOOKEEPER from the environment.

    Tables are for people; --output json prints one JSON document per command instead. Errors are one line on
    stderr, with Kafka's error name when the cluster gave one. Waits (reassign, elect-leaders, --wait) show
    progress on stderr.
    """
    if zookeeper and bootstrap_server:
        if ctx.get_parameter_source("zookeeper") == ParameterSource.ENVIRONMENT:
            zookeeper = None
        elif ctx.get_parameter_source("bootstrap_server") == ParameterSource.ENVIRONMENT:
            bootstrap_server = None
        else:
            raise click.UsageError("Give only one of --zookeeper and --bootstrap-server.")
    security = _command_config(command_config) if command_config else None
    ctx.obj = _Settings(zookeeper, bootstrap_server, zk_timeout, request_timeout, Output(output == "json"), security)


def _command_config(path: str) -> ClientSecurity:
    """The ClientSecurity of a Kafka client properties file; a usage error (exit 2) naming what is wrong."""
    try:
        return ClientSecurity.from_properties(read_properties(path))
    except (OSError, UnicodeDecodeError) as e:
        message = f"cannot read {path}: {getattr(e, 'strerror', None) or e}"
    except ConfigError as e:
        message = str(e)
    except KafkaError as e:
        message = f"{path}: {e}"
    raise click.BadParameter(message, param_hint="--command-config")


def _out(ctx: click.Context) -> Output:
    return _settings(ctx).out


def parse_config_args(pairs) -> dict[str, str]:
    """['retention.ms=1000', ...] -> {'retention.ms': '1000'}; later settings of a name win.
    Raises ValueError for an item that is not exactly one key=value."""
    config = {}
    for pair in pairs:
        parts = re.split(r"\s*=\s*", pair.strip())
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise ValueError(f"'{pair}' is not in the form key=value")
        config[parts[0]] = parts[1]
    return config


def _config_option(f):
    return click.option("--config", "configs", multiple=True, metavar="KEY=VALUE",
                        help="A topic config override (repeatable), e.g. retention.ms=86400000.")(f)


def _wait_timeout_option(default: float, what: str):
    return click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=default,
                        show_default=True, metavar="SECONDS", help=f"Give up waiting for {what} after this long "
                                                                   "(exit 3).")


# ---- topics ----------------------------------------------------------------------------------------------------

@cli.command("create-topic")
@click.argument("name")
@click.option("--partitions", type=click.IntRange(min=1),
              help="Number of partitions (through --bootstrap-server: num.partitions when omitted).")
@click.option("--replication-factor", type=click.IntRange(1, 32767),
              help="Replicas per partition (through --bootstrap-server: default.replication.factor when omitted).")
@click.option("--replica-assignment", metavar="B:B,B:B,...",
              help="Explicit replicas: partitions separated by ',', broker ids by ':' (first = preferred "
                   "leader). Replaces --partitions and --replication-factor.")
@_config_option
@click.option("--wait", is_flag=True, help="Return only once every partition has a leader.")
@_wait_timeout_option(30.0, "the leaders (with --wait)")
@click.pass_context
def create_topic(ctx, name, partitions, replication_factor, replica_assignment, configs, wait, timeout):
    """Create topic NAME (kafka-topics.sh --create).

    Nothing is written if the name, the configs, the partition count, the replication factor (at most the live
    brokers) or the assignment is refused. JSON: {"topic", "partitions", "replication_factor", "config"}.
    """
    try:
        config = parse_config_args(configs)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--config") from None
    assignment = None
    if replica_assignment is not None:
        if partitions is not None or replication_factor is not None:
            raise click.UsageError("--replica-assignment cannot be combined with --partitions or "
                                   "--replication-factor.")
        try:
            assignment = parse_replica_assignment(replica_assignment)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--replica-assignment") from None
    elif (partitions is None or replication_factor is None) and not ctx.find_object(_Settings).bootstrap_server:
        raise click.UsageError("--partitions and --replication-factor are required with --zookeeper (unless "
                               "--replica-assignment is given); through --bootstrap-server they default to the "
                               "brokers' num.partitions and default.replication.factor.")
    if zk_admin.has_collision_chars(name):
        click.echo("WARNING: topics with a period ('.') or underscore ('_') could collide in metric names. "
                   "To avoid issues it is best to use either, but not both.", err=True)
    with _cluster(ctx) as src:
        result = src.call(topic_ops.create_topic_zk, topic_ops.create_topic_admin, name, partitions,
                          replication_factor, assignment, config)
        if wait:
            def poll():
                done, total = src.call(topic_ops.leaders_zk, topic_ops.leaders_admin, name)
                return done, total > 0 and done == total
            _wait(poll, f"Waiting for the leaders of topic {name}", timeout,
                  lambda done: f"the leaders of topic '{name}' (created; {done} of {result.partitions} "
                               "partition(s) have one).", result.partitions)
    _out(ctx).emit(result)


@cli.command("list-topics")
@click.pass_context
def list_topics(ctx):
    """List topics, one per line (kafka-topics.sh --list). JSON: {"topics": [{"name", "marked_for_deletion"}]}."""
    with _cluster(ctx) as src:
        result = src.call(topic_ops.list_topics_zk, topic_ops.list_topics_admin)
    _out(ctx).emit(result)


@cli.command("describe-topic")
@click.argument("name", required=False)
@click.option("--under-replicated-partitions", "under_replicated", is_flag=True,
              help="Only partitions with fewer in-sync replicas than replicas (kafka-topics.sh's option).")
@click.option("--unavailable-partitions", "unavailable", is_flag=True,
              help="Only partitions without a leader or whose leader is not a live broker.")
@click.pass_context
def describe_topic(ctx, name, under_replicated, unavailable):
    """Show topic NAME's partitions, leaders, replicas and ISR (kafka-topics.sh --describe); every topic when
    NAME is omitted.

    Rows of offline and under-replicated partitions are marked in a Status column, and Adding/Removing
    columns appear while a partition is being reassigned. With --under-replicated-partitions or
    --unavailable-partitions only the matching partitions are printed, one row each with its topic and no
    topic header, and nothing at all when none matches (as kafka-topics.sh).

    JSON: {"topics": [{"name", "topic_id", "partition_count", "replication_factor", "config",
    "marked_for_deletion", "partitions": [{"partition", "leader", "replicas", "isr", "adding", "removing",
    "status"}]}]}.
    """
    if under_replicated and unavailable:
        raise click.UsageError("--under-replicated-partitions and --unavailable-partitions cannot be combined.")
    only = "under-replicated" if under_replicated else "unavailable" if unavailable else None
    with _cluster(ctx) as src:
        result = src.call(topic_ops.describe_topics_zk, topic_ops.describe_topics_admin, name, only)
    _out(ctx).emit(result)


@cli.command("delete-topic")
@click.argument("name")
@click.option("--wait", is_flag=True, help="Return only once the controller has deleted the topic.")
@_wait_timeout_option(60.0, "the deletion (with --wait)")
@click.pass_context
def delete_topic(ctx, name, wait, timeout):
    """Mark topic NAME for deletion; the controller deletes it (kafka-topics.sh --delete).

    JSON: {"topic", "marked_for_deletion": true, "deleted": true only after --wait}.
    """
    with _cluster(ctx) as src:
        result = src.call(topic_ops.delete_topic_zk, topic_ops.delete_topic_admin, name)
        if src.zk is not None and not wait:
            click.echo("Note: This will have no impact if delete.topic.enable is not set to true.", err=True)
        if wait:
            _wait(lambda: (0, src.call(topic_ops.gone_zk, topic_ops.gone_admin, name)),
                  f"Waiting for the controller to delete topic {name}", timeout,
                  lambda _: f"the controller to delete topic '{name}' (it is marked for deletion; is "
                            "delete.topic.enable true?).")
            result.deleted = True
    _out(ctx).emit(result)


# ---- configs ---------------------------------------------------------------------------------------------------

def _entity_options(f):
    f = click.option("--broker-defaults", is_flag=True,
                     help="The brokers' cluster-wide defaults (kafka-configs.sh --entity-type brokers "
                          "--entity-default).")(f)
    f = click.option("--broker", type=click.IntRange(min=0), metavar="ID", help="The dynamic configs of broker ID.")(f)
    return click.option("--topic", metavar="TOPIC", help="The topic's config overrides.")(f)


def _entity(topic, broker, broker_defaults) -> config_ops.Entity | None:
    given = [x for x in (topic is not None, broker is not None, broker_defaults) if x]
    if len(given) > 1:
        raise click.UsageError("Give only one of --topic, --broker and --broker-defaults.")
    if topic is not None:
        return config_ops.Entity("topic", topic)
    if broker is not None:
        return config_ops.Entity("broker", str(broker))
    return config_ops.Entity("broker", None) if broker_defaults else None


@cli.command("alter-config")
@_entity_options
@click.option("--add-config", "add_configs", multiple=True, metavar="K=V[,K2=V2...]",
              help="Configs to add or replace, comma-separated (repeatable); a list value goes in brackets, "
                   "e.g. cleanup.policy=[compact,delete].")
@click.option("--delete-config", "delete_configs", multiple=True, metavar="K[,K2...]",
              help="Configs to remove, comma-separated (repeatable); each must be set.")
@click.pass_context
def alter_config(ctx, topic, broker, broker_defaults, add_configs, delete_configs):
    """Change the dynamic configs of a topic, a broker or the brokers' defaults (kafka-configs.sh --alter).

    Merges into the current overrides and validates the result (nothing is written if a name or value is
    refused); the brokers apply the change live. JSON: {"entity_type", "entity_name", "set", "deleted"}.
    """
    entity = _entity(topic, broker, broker_defaults)
    if entity is None:
        raise click.UsageError("Give the entity to alter: --topic TOPIC, --broker ID or --broker-defaults.")
    try:
        to_add = config_ops.parse_add_config(add_configs)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--add-config") from None
    try:
        to_delete = config_ops.parse_delete_config(delete_configs)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--delete-config") from None
    if not to_add and not to_delete:
        raise click.UsageError("At least one of --add-config or --delete-config must be given.")
    if entity.kind == "topic" and "message.format.version" in to_add:
        click.echo(f"WARNING: The configuration message.format.version={to_add['message.format.version']} is "
                   "specified. This configuration will be ignored if the version is newer than the "
                   "inter.broker.protocol.version specified in the broker.", err=True)
    with _cluster(ctx) as src:
        result = src.call(config_ops.alter_config_zk, config_ops.alter_config_admin, entity, to_add, to_delete)
    _out(ctx).emit(result)


@cli.command("describe-config")
@_entity_options
@click.option("--all", "all_configs", is_flag=True,
              help="Every config with its value and source, not only the overrides (--bootstrap-server only).")
@click.pass_context
def describe_config(ctx, topic, broker, broker_defaults, all_configs):
    """Show the dynamic configs of a topic, a broker or the brokers' defaults (kafka-configs.sh --describe);
    every topic's when no entity is given.

    JSON: {"entities": [{"entity_type", "entity_name", "configs": [{"name", "value", "source", "sensitive"}]}]};
    with --all each config also has "read_only" and "synonyms".
    """
    entity = _entity(topic, broker, broker_defaults)
    if all_configs and not _settings(ctx).bootstrap_server:
        raise click.UsageError("--all needs --bootstrap-server: only the brokers know every config's value "
                               "(ZooKeeper holds the overrides).")
    with _cluster(ctx) as src:
        if src.zk is not None:
            result = config_ops.describe_configs_zk(src.zk, entity)
        else:
            result = config_ops.describe_configs_admin(src.admin, entity, all_configs)
    _out(ctx).emit(result)


# ---- reassignment and elections --------------------------------------------------------------------------------

def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise _Failure(f"Cannot read {path}: {e}") from None


def _reassignment_poll(src: _Source, plan, dirs_admin, moves):
    """poll() for _wait: (partitions and log dir moves done, finished) of the plan."""
    def poll():
        if src.zk is not None:
            statuses = reassign_ops.reassignment_status(src.zk, plan)
            finished = all(st.done for st in statuses) and not reassign_ops.reassignment_in_progress(src.zk)
        else:
            statuses = reassign_ops.reassignment_status_admin(src.admin, plan)
            finished = all(st.done for st in statuses)
        moved = [m for m in reassign_ops.log_dir_status(dirs_admin, moves) if m.done] if moves else []
        return sum(1 for st in statuses if st.done) + len(moved), finished and len(moved) == len(moves)
    return poll


@contextmanager
def _log_dir_admin(ctx: click.Context, src: _Source, moves):
    """The AdminClient that sends AlterReplicaLogDirs and DescribeLogDirs for the plan's log_dirs: the command's
    own with --bootstrap-server, else one on the brokers registered in ZooKeeper; None without log_dirs."""
    if not moves or src.admin is not None:
        yield src.admin
        return
    s = _settings(ctx)
    client = AdminClient(_registered_brokers(ctx, src.zk), timeout=s.request_timeout, security=s.security)
    try:
        yield client
    finally:
        client.close()


@cli.command("reassign")
@click.option("--reassignment-json-file", "plan_file", required=True, metavar="FILE",
              type=click.Path(exists=True, dir_okay=False),
              help='The plan: {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}]}.')
@click.option("--execute", is_flag=True, help="Start the reassignment (what reassign does anyway).")
@click.option("--verify", is_flag=True,
              help="Only report whether each partition of the plan has been reassigned (exit 1 if not all).")
@click.option("--no-wait", is_flag=True, help="Return once the reassignment is started.")
@_wait_timeout_option(600.0, "the reassignment")
@click.pass_context
def reassign(ctx, plan_file, execute, verify, no_wait, timeout):
    """Move partitions to other brokers, and replicas to other log dirs (kafka-reassign-partitions.sh).

    Validates the plan (existing partitions, non-empty lists of distinct live brokers, each partition once;
    nothing is started otherwise; refused while another reassignment runs), prints the current assignment as a
    plan for rollback, starts the reassignment and waits until the controller has moved every partition. A
    "log_dirs" list beside "replicas" ("any" = no preference) moves each replica to that log dir of its broker
    (AlterReplicaLogDirs, sent to the brokers before and after the reassignment starts); waiting and --verify
    then also follow those moves.

    JSON: {"rollback": plan, "started": ["t-0", ...], "log_dir_moves": ["t-0-2", ...], "status": [{"topic",
    "partition", "target", "current", "state": "complete" | "in-progress" | "different" | "gone"}], "log_dirs":
    [{"topic", "partition", "broker", "target", "current", "future", "state": "complete" | "in-progress" |
    "missing" | "elsewhere" | "cancelled"}] (both null with --no-wait)}; with --verify {"status": [...],
    "log_dirs": [...]}.
    """
    if execute and verify:
        raise click.UsageError("--execute and --verify cannot be combined.")
    out = _out(ctx)
    plan, moves = reassign_ops.parse_plan(_read_text(plan_file))
    if verify:
        with _cluster(ctx) as src, _log_dir_admin(ctx, src, moves) as dirs_admin:
            reassign_ops.check_partitions_exist(src.call(reassign_ops.current_assignment,
                                                         reassign_ops.current_assignment_admin, plan), plan)
            statuses = src.call(reassign_ops.reassignment_status, reassign_ops.reassignment_status_admin, plan)
            verified = reassign_ops.ReassignmentStatus(
                statuses, reassign_ops.log_dir_status(dirs_admin, moves) if moves else [])
        out.emit(verified)
        ctx.exit(0 if verified.succeeded else EXIT_REFUSED)
    with _cluster(ctx) as src, _log_dir_admin(ctx, src, moves) as dirs_admin:
        if src.zk is not None:
            if reassign_ops.reassignment_in_progress(src.zk):
                raise AdminError(reassign_ops.EXISTING_REASSIGNMENT)
            current = reassign_ops.validate_plan(src.zk, plan)
        else:
            current = reassign_ops.validate_plan_admin(src.admin, plan)
        result = reassign_ops.Reassignment(current, plan)
        if not out.json:
            result.render_rollback(out)
        # Before the reassignment: a replica the broker has not got yet gets its dir remembered there.
        result.moved = reassign_ops.alter_log_dirs(dirs_admin, moves) if moves else set()
        src.call(reassign_ops.start_reassignment, reassign_ops.start_reassignment_admin, plan)
        if not out.json:
            result.render_started(out)
        pending = {r: d for r, d in moves.items() if r not in result.moved}
        if pending:
            def start_moves():
                accepted = reassign_ops.alter_log_dirs(dirs_admin, pending)
                result.moved |= accepted
                for r in accepted:
                    del pending[r]
                return len(moves) - len(pending), not pending
            _wait(start_moves, "Starting log directory moves", timeout,
                  lambda done: f"log directory moves to start: {len(moves) - done} replica(s) not on their broker "
                               "yet.", len(moves), interval=0.1)
        if not out.json:
            result.render_moves_started(out, result.moved)
        if no_wait:
            if out.json:
                out.emit(result)
            return
        total = len(plan) + len(moves)
        what = "partition(s) and log dir move(s) still under way; they carry" if moves else \
            "partition(s) still being reassigned; the controller carries"
        try:
            _wait(_reassignment_poll(src, plan, dirs_admin, moves), f"Reassigning {len(plan)} partition(s)",
                  timeout, lambda done: f"the reassignment: {total - done} of {total} {what} on (check with "
                                        "--verify).", total)
            timed_out = None
        except WaitTimedOut as e:
            timed_out = e
        result.statuses = src.call(reassign_ops.reassignment_status, reassign_ops.reassignment_status_admin, plan)
        result.moves = reassign_ops.log_dir_status(dirs_admin, moves) if moves else []
    if out.json:
        out.emit(result)
    else:
        result.render_status(out)
    if timed_out is not None:
        raise timed_out
    failed = [st for st in result.statuses if not st.succeeded]
    if failed:
        raise _Failure(f"{len(failed)} of {len(plan)} partition(s) did not reach their target replicas (the "
                       "controller refused or undid them; see its state-change log).")
    unmoved = [m for m in result.moves if not m.done]
    if unmoved:
        raise _Failure(f"{len(unmoved)} of {len(moves)} replica(s) did not reach their target log dir.")


@cli.command("elect-leaders")
@click.option("--preferred", is_flag=True, help="Elect each partition's preferred (first assigned) replica.")
@click.option("--unclean", is_flag=True,
              help="Elect any live replica, even out of the ISR, where there is no leader (--bootstrap-server "
                   "only: the ElectLeaders API).")
@click.option("--election-type", type=click.Choice(["preferred", "unclean"], case_sensitive=False),
              help="As kafka-leader-election.sh: the same as --preferred or --unclean.")
@click.option("--topic", metavar="TOPIC", help="The partitions of this topic (all of them, or --partition).")
@click.option("--partition", type=click.IntRange(min=0), metavar="P", help="Only this partition of --topic.")
@click.option("--all-topic-partitions", is_flag=True, help="Every partition of every topic.")
@click.option("--path-to-json-file", "json_file", type=click.Path(exists=True, dir_okay=False), metavar="FILE",
              help='The partitions: {"partitions":[{"topic":"t","partition":0}]}.')
@_wait_timeout_option(60.0, "the controller")
@click.pass_context
def elect_leaders(ctx, preferred, unclean, election_type, topic, partition, all_topic_partitions, json_file,
                  timeout):
    """Elect partition leaders (kafka-leader-election.sh): move leadership back to preferred replicas, or
    (unclean) give leaderless partitions any live replica.

    With --zookeeper, writes /admin/preferred_replica_election and waits until the controller has processed it;
    with --bootstrap-server, sends ElectLeaders to the controller. Reports per partition; exit 1 if any could
    not be elected. JSON: {"election_type", "elected": [{"topic", "partition"}], "not_needed": [...],
    "failed": [{"topic", "partition", "error", "message"}]}.
    """
    kinds = {k for k, on in (("preferred", preferred), ("unclean", unclean)) if on}
    if election_type:
        kinds.add(election_type.lower())
    if len(kinds) != 1:
        raise click.UsageError("Give exactly one election type: --preferred or --unclean.")
    if kinds == {"unclean"} and not _settings(ctx).bootstrap_server:
        raise click.UsageError("Unclean leader election is only possible through the Admin API (ElectLeaders): "
                               "give --bootstrap-server instead of --zookeeper.")
    if sum(bool(x) for x in (topic, all_topic_partitions, json_file)) != 1:
        raise click.UsageError("One and only one of the following options is required: --all-topic-partitions, "
                               "--topic, --path-to-json-file")
    if partition is not None and not topic:
        raise click.UsageError("--partition needs --topic.")
    requested = elect_ops.parse_election_file(_read_text(json_file)) if json_file else None
    with _cluster(ctx, timeout) as src:
        unknown = []
        if all_topic_partitions:
            partitions = src.call(elect_ops.all_partitions, elect_ops.all_partitions_admin)
        elif topic:
            partitions = src.call(elect_ops.topic_partitions, elect_ops.topic_partitions_admin, topic, partition)
        else:
            existing = set(src.call(reassign_ops.current_assignment, reassign_ops.current_assignment_admin,
                                    requested))
            partitions = [tp for tp in requested if tp in existing]
            unknown = [tp for tp in requested if tp not in existing]
            if not partitions:
                raise AdminError("None of the partitions in the election file exists: "
                                 + ",".join(reassign_ops.tp_name(tp) for tp in unknown))
        if partitions:
            def waiting():
                return progress(f"Waiting for the controller to elect the leaders of {len(partitions)} "
                                "partition(s)")
            if src.zk is not None:
                result = elect_ops.elect_preferred(src.zk, partitions, timeout, waiting=waiting)
            else:
                with waiting():
                    result = elect_ops.elect_admin(src.admin, UNCLEAN if kinds == {"unclean"} else PREFERRED,
                                                   partitions)
        else:
            result = elect_ops.ElectionResult(election_type=kinds.pop())
    for tp in unknown:
        result.failed[tp] = (elect_ops.NO_PARTITION, "This partition does not exist.")
    _out(ctx).emit(result)
    if result.failed:
        raise _Failure(f"{len(result.failed)} replica(s) could not be elected")


# ---- cluster ---------------------------------------------------------------------------------------------------

@cli.group("cluster")
def cluster():
    """Cluster-wide information."""


@cluster.command("describe")
@click.pass_context
def cluster_describe(ctx):
    """Show the cluster id, the controller and the live brokers. JSON: {"cluster_id", "controller_id",
    "brokers": [{"id", "host", "port", "rack"}]}."""
    with _cluster(ctx) as src:
        result = src.call(cluster_ops.describe_cluster_zk, cluster_ops.describe_cluster_admin)
    _out(ctx).emit(result)


# ---- ACLs ------------------------------------------------------------------------------------------------------

@cli.group("acls")
def acls():
    """ACLs (kafka-acls.sh): with --zookeeper, the ACL znodes and change notifications Kafka's AclAuthorizer
    writes; with --bootstrap-server, DescribeAcls, CreateAcls and DeleteAcls (brokers need
    authorizer.class.name=kafka.security.authorizer.AclAuthorizer, else SECURITY_DISABLED)."""


def _acl_resource_options(f):
    for decorator in reversed([
        click.option("--topic", "topics", multiple=True, metavar="NAME", help="A topic (repeatable; '*': all)."),
        click.option("--group", "groups", multiple=True, metavar="NAME", help="A consumer group (repeatable)."),
        click.option("--cluster", "cluster_resource", is_flag=True, help="The cluster resource (kafka-cluster)."),
        click.option("--transactional-id", "transactional_ids", multiple=True, metavar="ID",
                     help="A transactional id (repeatable)."),
        click.option("--delegation-token", "delegation_tokens", multiple=True, metavar="ID",
                     help="A delegation token (repeatable)."),
        click.option("--resource-pattern-type", "pattern_type", default="literal", show_default=True,
                     type=click.Choice(["literal", "prefixed", "any", "match"], case_sensitive=False),
                     help="How resource names match: literal names, prefixes; to list and remove also any "
                          "(both kinds, exact name) or match (every pattern that applies to the name)."),
    ]):
        f = decorator(f)
    return f


def _acl_entry_options(f):
    for decorator in reversed([
        click.option("--allow-principal", "allow_principals", multiple=True, metavar="Type:name",
                     help="Principal to allow, e.g. User:alice, User:* (repeatable)."),
        click.option("--deny-principal", "deny_principals", multiple=True, metavar="Type:name",
                     help="Principal to deny (repeatable)."),
        click.option("--allow-host", "allow_hosts", multiple=True, metavar="IP",
                     help="Host the allowed principals may come from (repeatable; default *)."),
        click.option("--deny-host", "deny_hosts", multiple=True, metavar="IP",
                     help="Host the denied principals are refused from (repeatable; default *)."),
        click.option("--operation", "operations", multiple=True, metavar="OP",
                     help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                          "AlterConfigs, IdempotentWrite or All (repeatable; default All)."),
    ]):
        f = decorator(f)
    return f


def _acl_patterns(topics, groups, cluster_resource, transactional_ids, delegation_tokens, pattern_type,
                  stored: bool) -> list:
    """The resource patterns the options name; stored: only literal or prefixed (to add)."""
    kind = pattern_type.upper()
    if stored and kind not in ("LITERAL", "PREFIXED"):
        raise click.BadParameter("only literal or prefixed patterns can be added", param_hint="--resource-pattern-type")
    named = [("Topic", n) for n in topics] + [("Group", n) for n in groups] + \
        [("TransactionalId", n) for n in transactional_ids] + [("DelegationToken", n) for n in delegation_tokens] + \
        ([("Cluster", CLUSTER_NAME)] if cluster_resource else [])
    if any(not name for _, name in named):
        raise click.BadParameter("resource names cannot be empty")
    return [ResourcePattern(t, n, kind) for t, n in named]


def _acl_bindings(patterns, allow_principals, deny_principals, allow_hosts, deny_hosts, operations) -> list:
    for p in (*allow_principals, *deny_principals):
        if not valid_principal(p):
            raise click.BadParameter(f"expected a principal in format principalType:principalName but got {p}",
                                     param_hint="--allow-principal/--deny-principal")
    try:
        ops = list(dict.fromkeys(operation(o) for o in operations)) or ["All"]
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--operation") from None
    result = acl_ops.bindings(patterns, allow_principals, deny_principals, allow_hosts, deny_hosts, ops)
    problem = acl_ops.unsupported(result)
    if problem:
        raise click.UsageError(problem)
    return result


@acls.command("list")
@_acl_resource_options
@click.option("--principal", "principals", multiple=True, metavar="Type:name",
              help="Only the ACLs of this principal (repeatable).")
@click.pass_context
def acls_list(ctx, topics, groups, cluster_resource, transactional_ids, delegation_tokens, pattern_type, principals):
    """List ACLs (kafka-acls.sh --list): of the resources given (every resource when none), with
    --resource-pattern-type literal (default), prefixed, any or match.

    JSON: {"acls": [{"resource_type", "name", "pattern_type", "principal", "host", "operation", "permission"}]}.
    """
    patterns = _acl_patterns(topics, groups, cluster_resource, transactional_ids, delegation_tokens, pattern_type,
                             stored=False)
    kind = pattern_type.upper() if patterns else "ANY"
    resources = [(p.resource_type, p.name) for p in patterns] or [(None, None)]
    filters = [AclBindingFilter(t, n, kind, principal) for t, n in resources for principal in principals or [None]]
    found = []
    with _cluster(ctx) as src:
        for f in filters:
            found += src.call(acl_ops.list_acls_zk, acl_ops.list_acls_admin, f).acls
    _out(ctx).emit(acl_ops.AclListing(sorted(set(found))))


@acls.command("add")
@_acl_resource_options
@_acl_entry_options
@click.option("--producer", is_flag=True, help="The ACLs a producer needs: Write, Describe, Create on the topics; "
                                              "Write, Describe on the transactional ids.")
@click.option("--idempotent", is_flag=True, help="With --producer: IdempotentWrite on the cluster too.")
@click.option("--consumer", is_flag=True, help="The ACLs a consumer needs: Read, Describe on the topics; Read on "
                                              "the groups.")
@click.pass_context
def acls_add(ctx, topics, groups, cluster_resource, transactional_ids, delegation_tokens, pattern_type,
             allow_principals, deny_principals, allow_hosts, deny_hosts, operations, producer, idempotent, consumer):
    """Add ACLs (kafka-acls.sh --add): every principal x host x operation on every resource given, e.g.
    `kadmin acls add --allow-principal User:alice --operation Read --topic orders`, or the ACLs a producer or a
    consumer needs (`--consumer --topic orders --group billing`).

    JSON: {"added": [binding, ...]}, bindings as `acls list` shows them.
    """
    patterns = _acl_patterns(topics, groups, cluster_resource, transactional_ids, delegation_tokens, pattern_type,
                             stored=True)
    if not patterns:
        raise click.UsageError("Give at least one resource: --topic, --group, --cluster, --transactional-id or "
                               "--delegation-token.")
    if not allow_principals and not deny_principals:
        raise click.UsageError("Give --allow-principal or --deny-principal.")
    if producer or consumer:
        if operations:
            raise click.UsageError("--operation cannot be combined with --producer or --consumer.")
        per_pattern = acl_ops.convenience_operations(patterns, producer, consumer, idempotent)
        if not per_pattern:
            raise click.UsageError("--producer needs --topic or --transactional-id; --consumer needs --topic or "
                                   "--group.")
        wanted = [b for p, ops in per_pattern
                  for b in _acl_bindings([p], allow_principals, deny_principals, allow_hosts, deny_hosts, ops)]
    elif idempotent:
        raise click.UsageError("--idempotent only goes with --producer.")
    else:
        wanted = _acl_bindings(patterns, allow_principals, deny_principals, allow_hosts, deny_hosts, operations)
    with _cluster(ctx) as src:
        result = src.call(acl_ops.add_acls_zk, acl_ops.add_acls_admin, wanted)
    _out(ctx).emit(result)


@acls.command("remove")
@_acl_resource_options
@_acl_entry_options
@click.pass_context
def acls_remove(ctx, topics, groups, cluster_resource, transactional_ids, delegation_tokens, pattern_type,
                allow_principals, deny_principals, allow_hosts, deny_hosts, operations):
    """Remove ACLs (kafka-acls.sh --remove): without principals every ACL of the resources given, else the
    bindings the options name (operation All unless --operation is given).

    JSON: {"removed": [binding, ...]}.
    """
    patterns = _acl_patterns(topics, groups, cluster_resource, transactional_ids, delegation_tokens, pattern_type,
                             stored=False)
    if not patterns:
        raise click.UsageError("Give at least one resource: --topic, --group, --cluster, --transactional-id or "
                               "--delegation-token.")
    if allow_principals or deny_principals:
        filters = [AclBindingFilter(b.pattern.resource_type, b.pattern.name, b.pattern.pattern_type,
                                    b.entry.principal, b.entry.host, b.entry.operation, b.entry.permission)
                   for b in _acl_bindings(patterns, allow_principals, deny_principals, allow_hosts, deny_hosts,
                                          operations)]
    else:
        filters = [AclBindingFilter(p.resource_type, p.name, p.pattern_type) for p in patterns]
    with _cluster(ctx) as src:
        result = src.call(acl_ops.remove_acls_zk, acl_ops.remove_acls_admin, filters)
    _out(ctx).emit(result)


# ---- consumer groups (Kafka protocol) --------------------------------------------------------------------------

def _bootstrap_from_zookeeper(ctx: click.Context) -> list[tuple[str, int]]:
    """The endpoints of the brokers registered in /brokers/ids (see _registered_brokers)."""
    with _zk(ctx) as zk:
        return _registered_brokers(ctx, zk)


def _registered_brokers(ctx: click.Context, zk: KafkaZkClient) -> list[tuple[str, int]]:
    """The endpoints speaking kadmin's security protocol (PLAINTEXT unless --command-config says otherwise)."""
    s = _settings(ctx)
    zookeeper, protocol = s.zookeeper, s.security.protocol if s.security else "PLAINTEXT"
    brokers = zk.get_all_brokers()
    servers = [a for _, info in sorted(brokers.items()) if (a := cluster_ops.endpoint_address(info, protocol))]
    if not servers:
        if brokers:
            raise Unreachable(f"None of the brokers registered in ZooKeeper at {zookeeper} has a {protocol} "
                              "listener; give --bootstrap-server HOST:PORT.")
        raise Unreachable(f"No brokers are registered in ZooKeeper at {zookeeper} (/brokers/ids is empty): this "
                          "command needs a running broker.")
    return servers


@contextmanager
def _admin(ctx: click.Context, timeout: float):
    """An AdminClient on --bootstrap-server (or on the brokers registered in --zookeeper's /brokers/ids)."""
    s = _settings(ctx)
    if s.bootstrap_server:
        servers = _servers(ctx)
    elif s.zookeeper:
        servers = _bootstrap_from_zookeeper(ctx)
    else:
        raise click.UsageError("--bootstrap-server HOST:PORT is required (or --zookeeper HOST:PORT, to find the "
                               "brokers through ZooKeeper).")
    client = AdminClient(servers, timeout=timeout, security=s.security)
    try:
        yield client
    finally:
        client.close()


def _timeout_option(f):
    return click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=30.0, show_default=True,
                        metavar="SECONDS",
                        help="Give up on each request to the cluster after this long, exit 3 (retries included: a "
                             "coordinator that is loading or moving, or a partition leader moving, is waited for).")(f)


def _group_selection(groups, all_groups, admin) -> list[str]:
    """The groups named, or every consumer group with --all-groups."""
    if all_groups:
        return [g for g, _ in group_ops.list_consumer_groups(admin)]
    return list(dict.fromkeys(groups))


def _each_group(groups, work, failed: list[str]):
    """(group, work(group)) for each group. A group the cluster refuses (KafkaError) is reported, added to
    failed and skipped, so the others go on; an unreachable cluster or a timeout ends the command."""
    for group in groups:
        try:
            result = work(group)
        except (Unreachable, TimedOut):
            raise
        except KafkaError as e:
            _error(str(e))
            failed.append(group)
            continue
        yield group, result


def _require_groups(groups, all_groups):
    if not groups and not all_groups:
        raise click.UsageError("Give at least one GROUP (or --all-groups).")
    if groups and all_groups:
        raise click.UsageError("Give GROUP... or --all-groups, not both.")


def _error(message: str) -> None:
    click.echo(f"Error: {message}", err=True)


@cli.group("groups")
def groups():
    """Consumer groups (kafka-consumer-groups.sh), through the Kafka protocol: --bootstrap-server HOST:PORT, or
    --zookeeper to find the brokers."""


@groups.command("list")
@click.option("--state", "states", is_flag=False, flag_value="", default=None, metavar="[STATE,...]",
              help="Show each group's state; with a value, only groups in these states (e.g. stable,empty).")
@_timeout_option
@click.pass_context
def groups_list(ctx, states, timeout):
    """List the consumer groups, one per line (ListGroups to every broker). JSON: {"groups": [{"group",
    "state"}]}."""
    wanted = None
    if states:
        try:
            wanted = group_ops.parse_states(states)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--state") from None
    with _admin(ctx, timeout) as admin:
        listed = group_ops.list_consumer_groups(admin)
    if states is not None:
        listed = [(g, s or "Unknown") for g, s in listed if wanted is None or s in wanted]
    _out(ctx).emit(group_ops.GroupList(listed, states is not None))


@groups.command("describe")
@click.argument("group_ids", metavar="[GROUP]...", nargs=-1)
@click.option("--all-groups", is_flag=True, help="Every consumer group.")
@click.option("--offsets", "offsets_view", is_flag=True,
              help="Partitions with committed offsets, log end offsets and lag (the default).")
@click.option("--members", "members_view", is_flag=True, help="The members and how many partitions each has.")
@click.option("--state", "state_view", is_flag=True, help="Coordinator, assignment strategy, state, member count.")
@click.option("--verbose", is_flag=True, help="With --members: each member's assigned partitions.")
@_timeout_option
@click.pass_context
def groups_describe(ctx, group_ids, all_groups, offsets_view, members_view, state_view, verbose, timeout):
    """Describe consumer groups: per partition the committed offset (CURRENT-OFFSET), the high watermark
    (LOG-END-OFFSET), the LAG between them and the member it is assigned to (kafka-consumer-groups.sh
    --describe). Exit 1 if a group does not exist. JSON: {"groups": [{"group", "state", and "offsets",
    "members" or "coordinator"/"assignment_strategy"/"members" by view}]}."""
    _require_groups(group_ids, all_groups)
    if sum((offsets_view, members_view, state_view)) > 1:
        raise click.UsageError("Give at most one of --offsets, --members, --state.")
    if verbose and not members_view:
        raise click.UsageError("--verbose goes with --members.")
    view = "members" if members_view else "state" if state_view else "offsets"
    out = _out(ctx)
    views, failed = [], []
    with _admin(ctx, timeout) as admin:
        def describe(group):
            desc = group_ops.describe_consumer_group(admin, group)
            return desc, group_ops.collect_offsets(admin, desc) if view == "offsets" else None

        for _, (desc, rows) in _each_group(_group_selection(group_ids, all_groups, admin), describe, failed):
            notice = group_ops.state_notice(desc)
            if notice:
                click.echo(notice, err=True)
            v = group_ops.GroupView(desc, view, rows, verbose)
            views.append(v)
            if not out.json:
                v.render(out)
    if out.json:
        out.emit(group_ops.GroupViews(views))
    if failed:
        ctx.exit(EXIT_REFUSED)


_RESET_SCENARIOS = ("--to-earliest", "--to-latest", "--to-current", "--to-offset", "--shift-by", "--to-datetime",
                    "--by-duration")


@groups.command("reset-offsets")
@click.argument("group_ids", metavar="[GROUP]...", nargs=-1)
@click.option("--all-groups", is_flag=True, help="Every consumer group.")
@click.option("--topic", "topics", multiple=True, metavar="TOPIC[:P,P,...]",
              help="A topic (every partition) or some of its partitions; repeatable.")
@click.option("--all-topics", is_flag=True, help="Every partition the group has committed offsets for.")
@click.option("--to-earliest", is_flag=True, help="The log start offset.")
@click.option("--to-latest", is_flag=True, help="The log end offset (high watermark).")
@click.option("--to-current", is_flag=True, help="The committed offset (the log end where none).")
@click.option("--to-offset", type=int, metavar="N", help="Offset N (kept within the log's range).")
@click.option("--shift-by", type=int, metavar="N", help="The committed offset plus N (N may be negative).")
@click.option("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss[ZONE]",
              help="The first offset with a timestamp at or after this time (no zone: UTC).")
@click.option("--by-duration", metavar="PnDTnHnMnS", help="As --to-datetime, for now minus this duration.")
@click.option("--dry-run", is_flag=True, help="Only show the new offsets (the default).")
@click.option("--execute", is_flag=True, help="Commit the new offsets.")
@_timeout_option
@click.pass_context
def groups_reset_offsets(ctx, group_ids, all_groups, topics, all_topics, to_earliest, to_latest, to_current,
                         to_offset, shift_by, to_datetime, by_duration, dry_run, execute, timeout):
    """Reset the committed offsets of inactive consumer groups (kafka-consumer-groups.sh --reset-offsets).

    Prints GROUP TOPIC PARTITION NEW-OFFSET; only with --execute are the offsets committed. A group with active
    members is refused (exit 1): stop its consumers first. JSON: {"executed", "groups": [{"group", "offsets":
    [{"topic", "partition", "new_offset"}]}]}.
    """
    _require_groups(group_ids, all_groups)
    if dry_run and execute:
        raise click.UsageError("Give only one of --execute and --dry-run.")
    if bool(topics) == bool(all_topics):
        raise click.UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
    given = [(name, v) for name, v in (("--to-earliest", to_earliest or None), ("--to-latest", to_latest or None),
                                       ("--to-current", to_current or None), ("--to-offset", to_offset),
                                       ("--shift-by", shift_by), ("--to-datetime", to_datetime),
                                       ("--by-duration", by_duration)) if v is not None]
    if len(given) != 1:
        raise click.UsageError(f"Give exactly one of {', '.join(_RESET_SCENARIOS)}.")
    name, value = given[0]
    try:
        if name == "--to-datetime":
            spec = group_ops.ResetSpec("to-datetime", group_ops.parse_datetime(value))
        elif name == "--by-duration":
            spec = group_ops.ResetSpec("by-duration", group_ops.parse_duration(value))
        elif name in ("--to-offset", "--shift-by"):
            spec = group_ops.ResetSpec(name[2:], value)
        else:
            spec = group_ops.ResetSpec(name[2:])
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint=name) from None
    for t in topics:
        try:
            group_ops.parse_topic_arg(t)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--topic") from None
    if not dry_run and not execute:
        click.echo("WARN: No action will be performed as the --execute option is missing. In a future major "
                   "release, the default behavior of this command will be to prompt the user before executing the "
                   "reset rather than doing a dry run. You should add the --dry-run option explicitly if you are "
                   "scripting this command and want to keep the current default behavior without prompting.",
                   err=True)

    def warn(message):
        click.echo(f"WARN: {message}", err=True)
    plans, failed = {}, []
    with _admin(ctx, timeout) as admin:
        def reset(group):
            desc = admin.describe_group(group)
            if desc.protocol_type not in group_ops.CONSUMER_PROTOCOL_TYPES and desc.state != "Dead":
                raise KafkaError(Errors.INCONSISTENT_GROUP_PROTOCOL, f"Group '{group}' is not a consumer group "
                                                                     f"(protocol type '{desc.protocol_type}').")
            if desc.state not in ("Empty", "Dead"):
                raise KafkaError(Errors.NON_EMPTY_GROUP, f"Assignments can only be reset if the group '{group}' "
                                                         f"is inactive, but the current state is {desc.state}.")
            tps = group_ops.partitions_to_reset(admin, group, list(topics), all_topics)
            plan = group_ops.prepare_reset(admin, group, tps, spec, warn)
            if execute:
                group_ops.commit_reset(admin, group, plan)
            return plan

        plans.update(_each_group(_group_selection(group_ids, all_groups, admin), reset, failed))
    _out(ctx).emit(group_ops.ResetPlans(plans, execute))
    if failed:
        ctx.exit(EXIT_REFUSED)


@groups.command("delete")
@click.argument("group_ids", metavar="[GROUP]...", nargs=-1)
@click.option("--all-groups", is_flag=True, help="Every consumer group.")
@_timeout_option
@click.pass_context
def groups_delete(ctx, group_ids, all_groups, timeout):
    """Delete consumer groups and their committed offsets (DeleteGroups; only groups without active members).
    Exit 1 if any could not be deleted. JSON: {"deleted": [group], "failed": [{"group", "error"}]}."""
    _require_groups(group_ids, all_groups)
    with _admin(ctx, timeout) as admin:
        selected = _group_selection(group_ids, all_groups, admin)
        result = group_ops.GroupsDeleted(admin.delete_groups(selected) if selected else {})
    for g, code in result.failed.items():
        _error(f"Group '{g}' could not be deleted due to: {error_text(code)}")
    _out(ctx).emit(result)
    if result.failed:
        ctx.exit(EXIT_REFUSED)


# ---- transactions ------------------------------------------------------------------------------------------------

@contextmanager
def _txn_cluster(ctx: click.Context, timeout: float):
    """(AdminClient, KafkaZkClient or None) for list/describe/find-hanging: with --zookeeper, ZooKeeper too (the
    `__transaction_state` partitions' leaders are read there) and the client bootstraps from the brokers
    registered in it (as groups do)."""
    s = _settings(ctx)
    if s.bootstrap_server or not s.zookeeper:
        with _admin(ctx, timeout) as admin:
            yield admin, None
        return
    with _zk(ctx) as zk:
        client = AdminClient(_registered_brokers(ctx, zk), timeout=timeout, security=s.security)
        try:
            yield client, zk
        finally:
            client.close()


@cli.group("transactions")
def transactions():
    """Transactions (kafka-transactions.sh). With --bootstrap-server HOST:PORT the transaction coordinators
    answer (ListTransactions, DescribeTransactions). With --zookeeper, list, describe and find-hanging read the
    coordinators' state from the `__transaction_state` log itself (each partition from its leader found in
    ZooKeeper, up to the high watermark): what the log holds, so a transition still being written may not show
    yet, and the coordinator shown is the partition's leader; the partitions' side (DescribeProducers, abort's
    marker) goes to the brokers registered in ZooKeeper."""


@transactions.command("list")
@click.option("--state", "states", metavar="STATE[,STATE...]",
              help="Only transactional ids in these states (e.g. ongoing,empty).")
@click.option("--producer-id", "producer_ids", type=int, multiple=True, metavar="ID",
              help="Only the transactional id of this producer id; repeatable.")
@_timeout_option
@click.pass_context
def transactions_list(ctx, states, producer_ids, timeout):
    """List the transactional ids (ListTransactions to every broker, DescribeTransactions to each
    coordinator; with --zookeeper, replayed from `__transaction_state`: what its log holds): coordinator, state,
    producer id and epoch, timeout, start of the current transaction.
    JSON: {"transactions": [{"transactional_id", "coordinator", "state", "producer_id", "producer_epoch",
    "timeout_ms", "start_time_ms"}]}."""
    wanted = []
    if states:
        try:
            wanted = txn_ops.parse_states(states)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--state") from None
    with _txn_cluster(ctx, timeout) as (admin, zk):
        if zk is None:
            listed = txn_ops.describe_all(admin, wanted, list(producer_ids))
        else:
            listed = txn_ops.describe_all_from_log(zk, admin, wanted, list(producer_ids))
    # a transaction may change state between the list and the describe: the filter holds for what is shown
    listed = [d for d in listed if not wanted or d.state in wanted]
    _out(ctx).emit(txn_ops.TransactionList(listed))


@transactions.command("describe")
@click.argument("transactional_id")
@_timeout_option
@click.pass_context
def transactions_describe(ctx, transactional_id, timeout):
    """Describe a transactional id as its coordinator knows it (with --zookeeper: as its `__transaction_state`
    partition's log holds it), with the partitions of its current transaction. Exit 1 if the id is unknown.
    JSON: as list's entries, plus "duration_ms" and "partitions": [{"topic", "partition"}]."""
    with _txn_cluster(ctx, timeout) as (admin, zk):
        if zk is None:
            desc = admin.describe_transaction(transactional_id)
        else:
            desc = txn_ops.describe_from_log(zk, admin, transactional_id)
    _out(ctx).emit(txn_ops.TransactionView(desc, int(time.time() * 1000)))


@transactions.command("find-hanging")
@click.option("--topic", "topics", multiple=True, metavar="TOPIC",
              help="Only these topics' partitions (default: every topic); repeatable.")
@click.option("--max-transaction-timeout", type=click.FloatRange(min=0), default=15.0, show_default=True,
              metavar="MINUTES",
              help="A partition's open transaction unknown to the coordinators counts as hanging once its "
                   "producer has been silent this long (the brokers' transaction.max.timeout.ms).")
@_timeout_option
@click.pass_context
def transactions_find_hanging(ctx, topics, max_transaction_timeout, timeout):
    """Find hanging transactions: Ongoing transactions past their timeout (the coordinators', or with --zookeeper
    `__transaction_state`'s), and open transactions on partitions (DescribeProducers) that no coordinator has.
    Exit 1 if a partition could not be examined. JSON: {"hanging": [{"source", "transactional_id", "topic",
    "partition", "producer_id", "producer_epoch", "coordinator_epoch", "start_offset", "start_time_ms",
    "duration_ms"}]}."""
    with _txn_cluster(ctx, timeout) as (admin, zk):
        if topics:
            admin.topics(list(topics))
        described = txn_ops.describe_all(admin, [], []) if zk is None else \
            txn_ops.describe_all_from_log(zk, admin, [], [])
        hanging, errors = txn_ops.find_hanging(admin, described, list(topics) or None,
                                               int(max_transaction_timeout * 60_000), int(time.time() * 1000))
    for tp, code in errors.items():
        _error(f"Cannot describe the producers of {tp}: {error_text(code)}")
    _out(ctx).emit(txn_ops.HangingList(hanging))
    if errors:
        ctx.exit(EXIT_REFUSED)


@transactions.command("abort")
@click.option("--topic", required=True, help="The partition's topic.")
@click.option("--partition", type=click.IntRange(min=0), required=True, help="The partition.")
@click.option("--start-offset", type=click.IntRange(min=0), metavar="OFFSET",
              help="The first offset of the open transaction (its producer is looked up).")
@click.option("--producer-id", type=int, help="The producer of the open transaction (instead of --start-offset).")
@click.option("--producer-epoch", type=int, help="Its producer epoch (with --producer-id).")
@click.option("--coordinator-epoch", type=int, help="The coordinator epoch of the marker (with --producer-id).")
@_timeout_option
@click.pass_context
def transactions_abort(ctx, topic, partition, start_offset, producer_id, producer_epoch, coordinator_epoch,
                       timeout):
    """Abort an open transaction on one partition: its leader writes an ABORT marker (WriteTxnMarkers), which
    unblocks read_committed consumers of a hanging transaction (with --zookeeper, through the brokers registered
    there). Exit 1 if the leader refuses. JSON: {"topic", "partition", "producer_id", "producer_epoch",
    "coordinator_epoch", "aborted"}."""
    explicit = (producer_id, producer_epoch, coordinator_epoch)
    if start_offset is None and None in explicit:
        raise click.UsageError("Give --start-offset, or all of --producer-id, --producer-epoch and "
                               "--coordinator-epoch.")
    if start_offset is not None and explicit != (None, None, None):
        raise click.UsageError("Give --start-offset or --producer-id/--producer-epoch/--coordinator-epoch, "
                               "not both.")
    tp = TopicPartition(topic, partition)
    with _admin(ctx, timeout) as admin:
        if start_offset is not None:
            found = txn_ops.producer_at(admin, tp, start_offset)
            producer_id, producer_epoch = found.producer_id, found.producer_epoch
            coordinator_epoch = max(found.coordinator_epoch, 0)
        code = admin.abort_transaction(tp, producer_id, producer_epoch, coordinator_epoch)
    if code:
        raise KafkaError(code, f"Cannot abort the transaction of producer {producer_id} on {tp}: "
                               f"{error_text(code)}")
    _out(ctx).emit(txn_ops.AbortResult(tp, producer_id, producer_epoch, coordinator_epoch))


# ---- users (SCRAM credentials) ---------------------------------------------------------------------------------

@cli.group("users")
def users():
    """Users' SCRAM credentials (kafka-configs.sh --entity-type users): through ZooKeeper, written as
    kafka-configs.sh --zookeeper writes them, or through the brokers' Describe/AlterUserScramCredentials. The
    brokers take a change at once: an added user can log in, a removed one cannot."""


def _mechanism_option(help_text: str):
    return click.option("--mechanism", "mechanisms", multiple=True,
                        type=click.Choice(user_ops.MECHANISMS, case_sensitive=False), help=help_text)


def _user_name(user: str) -> str:
    if not user:
        raise click.BadParameter("a user name must not be empty.", param_hint="USER")
    return user


@users.command("list")
@click.argument("names", metavar="[USER]...", nargs=-1)
@click.pass_context
def users_list(ctx, names):
    """Show the SCRAM mechanisms and iterations of each USER, or of every user with a credential (never the
    credentials themselves). A USER without credentials is reported on stderr and makes the exit status 1.

    JSON: {"users": [{"user", "credentials": [{"mechanism", "iterations"}]}], "errors": ["...", ...]}.
    """
    for name in names:
        _user_name(name)
    with _cluster(ctx) as src:
        result = src.call(user_ops.list_users_zk, user_ops.list_users_admin, list(names))
    for error in result.errors:
        _error(error)
    _out(ctx).emit(result)
    if result.errors:
        ctx.exit(EXIT_REFUSED)


@users.command("add")
@click.argument("user")
@_mechanism_option("The credential to set (repeatable); both SCRAM-SHA-256 and SCRAM-SHA-512 when omitted.")
@click.option("--iterations", type=click.IntRange(min=4096), default=4096, show_default=True,
              help="PBKDF2 iterations (at least 4096; the brokers take at most 16384 through --bootstrap-server).")
@click.option("--password", metavar="PASSWORD",
              help="The password (it stays in the shell's history: prefer the prompt or --password-stdin).")
@click.option("--password-stdin", is_flag=True, help="Read the password from the first line of standard input.")
@click.pass_context
def users_add(ctx, user, mechanisms, iterations, password, password_stdin):
    """Create or replace USER's SCRAM credentials (kafka-configs.sh --alter --entity-type users --add-config
    'SCRAM-SHA-256=[iterations=N,password=...]'). Without --password or --password-stdin the password is asked
    for twice, hidden.

    JSON: {"user", "set": [{"mechanism", "iterations"}], "removed": []}.
    """
    _user_name(user)
    if password is not None and password_stdin:
        raise click.UsageError("Give only one of --password and --password-stdin.")
    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    elif password is None:
        password = click.prompt(f"Password for {user}", hide_input=True, confirmation_prompt=True, err=True)
    if not password:
        raise click.UsageError("The password must not be empty.")
    chosen = [m.upper() for m in mechanisms] or list(user_ops.MECHANISMS)
    with _cluster(ctx) as src:
        result = src.call(user_ops.add_user_zk, user_ops.add_user_admin, user, password,
                          list(dict.fromkeys(chosen)), iterations)
    _out(ctx).emit(result)


@users.command("remove")
@click.argument("user")
@_mechanism_option("The credential to remove (repeatable); every one USER has when omitted.")
@click.pass_context
def users_remove(ctx, user, mechanisms):
    """Remove USER's SCRAM credentials (kafka-configs.sh --alter --entity-type users --delete-config
    SCRAM-SHA-512): the user can no longer log in with them. Refused when USER has no such credential.

    JSON: {"user", "set": [], "removed": [mechanism, ...]}.
    """
    _user_name(user)
    chosen = list(dict.fromkeys(m.upper() for m in mechanisms)) or None
    with _cluster(ctx) as src:
        result = src.call(user_ops.remove_user_zk, user_ops.remove_user_admin, user, chosen)
    _out(ctx).emit(result)


def _set_output(ctx: click.Context, _param, value) -> None:
    if value is not None:
        ctx.find_object(_Settings).out = Output(value == "json")


def _accept_output_anywhere(command: click.Command) -> None:
    """-o/--output also after the command's name (`kadmin list-topics -o json`), as users type it."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _accept_output_anywhere(sub)
    elif command is not cli:
        command.params.append(click.Option(["-o", "--output"], type=click.Choice(["table", "json"]),
                                           expose_value=False, callback=_set_output,
                                           help="As kadmin's -o/--output, given after the command."))


_accept_output_anywhere(cli)

if __name__ == "__main__":
    cli()
