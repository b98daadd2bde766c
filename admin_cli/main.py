"""`kadmin` command line: a click group whose commands connect to ZooKeeper and call admin_cli's functions.

Global options come before the command: `kadmin --zookeeper localhost:2181 create-topic orders ...`.
Every error is one line on stderr: exit status 1 when an operation fails (ZooKeeper unreachable, topic
exists, invalid config, ...), 2 for a usage error. Commands that wait for the controller (reassign,
elect-leaders) show progress on stderr and give up after --timeout with exit 1.

`groups ...` speaks the Kafka protocol (consumer groups live in the brokers, not in ZooKeeper): it takes
--bootstrap-server HOST:PORT, or --zookeeper alone, from which it finds the registered brokers (/brokers/ids) to
bootstrap from. For every other command --bootstrap-server (the Admin API path) is refused until those commands
get their Admin API paths.
"""
from __future__ import annotations

import logging
import re
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass

import click
from click.exceptions import NoArgsIsHelpError
from kazoo.exceptions import KazooException

from zk import admin as zk_admin
from zk.client import KafkaZkClient, ZkError

from . import cluster as cluster_ops
from . import configs as config_ops
from . import elect as elect_ops
from . import groups as group_ops
from . import reassign as reassign_ops
from . import topics as topic_ops
from zk.admin_errors import AdminError
from zk.assignment import parse_replica_assignment
from .kafka_client import AdminClient, KafkaAdminError, error_text, parse_bootstrap


# kazoo logs every failed connection attempt; with no logging configured Python would print those on stderr.
# kadmin reports failures itself, in one line.
logging.getLogger("kazoo").addHandler(logging.NullHandler())


class _Kadmin(click.Group):
    """click's group, but a usage error is one line on stderr (click prints the usage and a hint too)."""

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
        if standalone_mode:
            sys.exit(code)
        return code


@dataclass
class _Settings:
    """The global options, for the commands."""
    zookeeper: str | None
    bootstrap_server: str | None
    zk_timeout: float


@contextmanager
def _zk(ctx: click.Context):
    """A started KafkaZkClient for the command; failures become one-line errors (exit 1)."""
    s: _Settings = ctx.find_object(_Settings)
    if s.bootstrap_server:
        raise click.UsageError("--bootstrap-server (the Kafka Admin API path) is not available yet; "
                               "use --zookeeper HOST:PORT[/chroot] instead.")
    if not s.zookeeper:
        raise click.UsageError("--zookeeper HOST:PORT[/chroot] is required (or set KADMIN_ZOOKEEPER).")
    timeout_ms = int(s.zk_timeout * 1000)
    client = KafkaZkClient(s.zookeeper, session_timeout_ms=timeout_ms, connection_timeout_ms=timeout_ms)
    try:
        client.start()
    except ZkError as e:
        raise click.ClickException(str(e)) from None
    try:
        yield client
    except (AdminError, ZkError) as e:
        raise click.ClickException(str(e)) from None
    except KazooException as e:
        raise click.ClickException(f"ZooKeeper request to {s.zookeeper} failed: "
                                   f"{type(e).__name__} {e}".rstrip()) from None
    finally:
        client.close()


@click.group(cls=_Kadmin, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--zookeeper", envvar="KADMIN_ZOOKEEPER", show_envvar=True, metavar="HOST:PORT[/chroot]",
              help="ZooKeeper connect string of the cluster.")
@click.option("--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]",
              help="Use the Kafka Admin APIs instead of ZooKeeper (the groups commands; not available yet for "
                   "the others).")
@click.option("--zk-timeout", type=click.FloatRange(min=0, min_open=True), default=10.0, show_default=True,
              metavar="SECONDS", help="Give up connecting to ZooKeeper after this long.")
@click.pass_context
def cli(ctx, zookeeper, bootstrap_server, zk_timeout):
    """Administer a kbroker (or Kafka 2.8) cluster."""
    ctx.obj = _Settings(zookeeper, bootstrap_server, zk_timeout)


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


@cli.command("create-topic")
@click.argument("name")
@click.option("--partitions", type=click.IntRange(min=1), help="Number of partitions.")
@click.option("--replication-factor", type=click.IntRange(1, 32767), help="Replicas per partition.")
@click.option("--replica-assignment", metavar="B:B,B:B,...",
              help="Explicit replicas: partitions separated by ',', broker ids by ':' (first = preferred "
                   "leader). Replaces --partitions and --replication-factor.")
@_config_option
@click.pass_context
def create_topic(ctx, name, partitions, replication_factor, replica_assignment, configs):
    """Create topic NAME (kafka-topics.sh --create)."""
    try:
        config = parse_config_args(configs)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--config") from None
    if replica_assignment is not None:
        if partitions is not None or replication_factor is not None:
            raise click.UsageError("--replica-assignment cannot be combined with --partitions or "
                                   "--replication-factor.")
        try:
            assignment = parse_replica_assignment(replica_assignment)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--replica-assignment") from None
    elif partitions is None or replication_factor is None:
        raise click.UsageError("--partitions and --replication-factor are required "
                               "(unless --replica-assignment is given).")
    if zk_admin.has_collision_chars(name):
        click.echo("WARNING: topics with a period ('.') or underscore ('_') could collide in metric names. "
                   "To avoid issues it is best to use either, but not both.", err=True)
    with _zk(ctx) as zk:
        if replica_assignment is not None:
            zk_admin.create_topic_with_assignment(zk, name, assignment, config)
        else:
            zk_admin.create_topic(zk, name, partitions, replication_factor, config)
    click.echo(f"Created topic {name}.")


@cli.command("list-topics")
@click.pass_context
def list_topics(ctx):
    """List topics, one per line (kafka-topics.sh --list)."""
    with _zk(ctx) as zk:
        topics = topic_ops.list_topics(zk)
    for name, marked in topics:
        click.echo(f"{name} - marked for deletion" if marked else name)


@cli.command("describe-topic")
@click.argument("name", required=False)
@click.option("--under-replicated-partitions", "under_replicated", is_flag=True,
              help="Only partitions with fewer in-sync replicas than replicas (kafka-topics.sh's option).")
@click.option("--unavailable-partitions", "unavailable", is_flag=True,
              help="Only partitions without a leader or whose leader is not a registered broker.")
@click.pass_context
def describe_topic(ctx, name, under_replicated, unavailable):
    """Show topic NAME's partitions, leaders, replicas and ISR (kafka-topics.sh --describe); every topic when
    NAME is omitted.

    Rows of offline and under-replicated partitions are marked in a Status column, and Adding/Removing
    columns appear while a partition is being reassigned. With --under-replicated-partitions or
    --unavailable-partitions only the matching partitions are printed, one row each with its topic and no
    topic header, and nothing at all when none matches (as kafka-topics.sh).
    """
    if under_replicated and unavailable:
        raise click.UsageError("--under-replicated-partitions and --unavailable-partitions cannot be combined.")
    with _zk(ctx) as zk:
        descriptions = topic_ops.describe_topics(zk, name)
    if under_replicated or unavailable:
        predicate = (lambda p: p.under_replicated) if under_replicated else (lambda p: p.unavailable)
        lines = topic_ops.format_filtered_partitions(descriptions, predicate)
    else:
        lines = []
        for d in descriptions:
            lines += topic_ops.format_topic_description(d)
    if lines:
        click.echo("\n".join(lines))


@cli.command("delete-topic")
@click.argument("name")
@click.pass_context
def delete_topic(ctx, name):
    """Mark topic NAME for deletion; the controller deletes it (kafka-topics.sh --delete)."""
    with _zk(ctx) as zk:
        topic_ops.delete_topic(zk, name)
    click.echo(f"Topic {name} is marked for deletion.")
    click.echo("Note: This will have no impact if delete.topic.enable is not set to true.")


@cli.command("alter-config")
@click.option("--topic", required=True, metavar="TOPIC", help="The topic whose config overrides to change.")
@click.option("--add-config", "add_configs", multiple=True, metavar="K=V[,K2=V2...]",
              help="Overrides to add or replace, comma-separated (repeatable); a list value goes in brackets, "
                   "e.g. cleanup.policy=[compact,delete].")
@click.option("--delete-config", "delete_configs", multiple=True, metavar="K[,K2...]",
              help="Overrides to remove, comma-separated (repeatable); each must be set.")
@click.pass_context
def alter_config(ctx, topic, add_configs, delete_configs):
    """Change topic TOPIC's config overrides (kafka-configs.sh --entity-type topics --alter).

    Merges into the current overrides, validates the result (nothing is written if a value is invalid),
    writes /config/topics/TOPIC and a /config/changes notification so the brokers apply it live.
    """
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
    if "message.format.version" in to_add:
        click.echo(f"WARNING: The configuration message.format.version={to_add['message.format.version']} is "
                   "specified. This configuration will be ignored if the version is newer than the "
                   "inter.broker.protocol.version specified in the broker.", err=True)
    with _zk(ctx) as zk:
        config_ops.alter_topic_config(zk, topic, to_add, to_delete)
    click.echo(f"Completed updating config for topic {topic}.")


@cli.command("describe-config")
@click.option("--topic", metavar="TOPIC", help="Only this topic (default: every topic).")
@click.pass_context
def describe_config(ctx, topic):
    """Show topic config overrides (kafka-configs.sh --entity-type topics --describe): every topic's when
    --topic is omitted."""
    with _zk(ctx) as zk:
        described = config_ops.describe_topic_configs(zk, topic)
    lines = []
    for name, config in described:
        lines += config_ops.format_topic_configs(name, config)
    if lines:
        click.echo("\n".join(lines))


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise click.ClickException(f"Cannot read {path}: {e}") from None


def _wait_for_reassignment(zk, plan, timeout: float, poll_interval: float = 0.2):
    """Poll until every planned partition is done, showing done/total with click.progressbar on stderr (on a
    terminal; elsewhere one line per change). Returns the final statuses, or None on timeout."""
    total = len(plan)
    stream = sys.stderr
    tty = stream.isatty()
    deadline = time.monotonic() + timeout
    shown = 0
    with click.progressbar(length=total, label="Reassigning partitions", file=stream, show_pos=True,
                           show_percent=False, show_eta=False) as bar:
        while True:
            statuses = reassign_ops.reassignment_status(zk, plan)
            done = sum(1 for s in statuses if s.done)
            if done > shown:
                bar.update(done - shown)
                if not tty:
                    click.echo(f"{done}/{total} partitions reassigned", file=stream)
                shown = done
            if done == total and not reassign_ops.reassignment_in_progress(zk):
                return statuses
            if time.monotonic() >= deadline:
                return None
            time.sleep(poll_interval)


@cli.command("reassign")
@click.option("--reassignment-json-file", "plan_file", required=True, metavar="FILE",
              type=click.Path(exists=True, dir_okay=False),
              help='The plan: {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}]}.')
@click.option("--execute", is_flag=True, help="Start the reassignment (what reassign does anyway).")
@click.option("--verify", is_flag=True,
              help="Only report whether each partition of the plan has been reassigned (exit 1 if not all).")
@click.option("--no-wait", is_flag=True, help="Return once the reassignment is started.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=600.0, show_default=True,
              metavar="SECONDS", help="Give up waiting for the reassignment after this long (exit 1).")
@click.pass_context
def reassign(ctx, plan_file, execute, verify, no_wait, timeout):
    """Move partitions to other brokers (kafka-reassign-partitions.sh --zookeeper).

    Validates the plan (existing partitions, non-empty lists of distinct registered brokers, each partition
    once; nothing is written otherwise), prints the current assignment as a plan for rollback, writes
    /admin/reassign_partitions and waits until the controller has moved every partition.
    """
    if execute and verify:
        raise click.UsageError("--execute and --verify cannot be combined.")
    try:
        plan = reassign_ops.parse_plan(_read_text(plan_file))
    except AdminError as e:
        raise click.ClickException(str(e)) from None
    if verify:
        with _zk(ctx) as zk:
            reassign_ops.check_partitions_exist(zk, plan)
            statuses = reassign_ops.reassignment_status(zk, plan)
        click.echo("Status of partition reassignment:")
        for st in statuses:
            click.echo(st.describe())
        ctx.exit(0 if all(st.succeeded for st in statuses) else 1)
    with _zk(ctx) as zk:
        if reassign_ops.reassignment_in_progress(zk):
            raise AdminError(reassign_ops.EXISTING_REASSIGNMENT)
        current = reassign_ops.validate_plan(zk, plan)
        click.echo("Current partition replica assignment\n")
        click.echo(reassign_ops.format_plan(current))
        click.echo("\nSave this to use as the --reassignment-json-file option during rollback")
        reassign_ops.start_reassignment(zk, plan)
        names = ",".join(reassign_ops.tp_name(tp) for tp in sorted(plan))
        click.echo(f"Successfully started partition reassignments for {names}")
        if no_wait:
            return
        statuses = _wait_for_reassignment(zk, plan, timeout)
        if statuses is None:
            statuses = reassign_ops.reassignment_status(zk, plan)
            pending = sum(1 for st in statuses if not st.done)
            click.echo("Status of partition reassignment:")
            for st in statuses:
                click.echo(st.describe())
            raise AdminError(f"Timed out after {timeout:g}s with {pending} of {len(plan)} partition(s) still "
                             "being reassigned; the controller carries on (check with --verify).")
    click.echo("Status of partition reassignment:")
    for st in statuses:
        click.echo(st.describe())
    failed = [st for st in statuses if not st.succeeded]
    if failed:
        raise click.ClickException(f"{len(failed)} of {len(plan)} partition(s) did not reach their target "
                                   "replicas (the controller refused or undid them; see its state-change log).")


@cli.command("elect-leaders")
@click.option("--preferred", is_flag=True, help="Elect each partition's preferred (first assigned) replica.")
@click.option("--unclean", is_flag=True, help="Unclean election (Admin API only; needs --bootstrap-server).")
@click.option("--election-type", type=click.Choice(["preferred", "unclean"], case_sensitive=False),
              help="As kafka-leader-election.sh: the same as --preferred or --unclean.")
@click.option("--topic", metavar="TOPIC", help="The partitions of this topic (all of them, or --partition).")
@click.option("--partition", type=click.IntRange(min=0), metavar="P", help="Only this partition of --topic.")
@click.option("--all-topic-partitions", is_flag=True, help="Every partition of every topic.")
@click.option("--path-to-json-file", "json_file", type=click.Path(exists=True, dir_okay=False), metavar="FILE",
              help='The partitions: {"partitions":[{"topic":"t","partition":0}]}.')
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=60.0, show_default=True,
              metavar="SECONDS", help="Give up waiting for the controller after this long (exit 1).")
@click.pass_context
def elect_leaders(ctx, preferred, unclean, election_type, topic, partition, all_topic_partitions, json_file,
                  timeout):
    """Move leadership back to preferred replicas (kafka-leader-election.sh / kafka-preferred-replica-election.sh).

    Writes /admin/preferred_replica_election, waits until the controller has processed it, then reports per
    partition whether its preferred replica leads now; exit 1 if any could not be elected.
    """
    kinds = {k for k, on in (("preferred", preferred), ("unclean", unclean)) if on}
    if election_type:
        kinds.add(election_type.lower())
    if len(kinds) != 1:
        raise click.UsageError("Give exactly one election type: --preferred or --unclean.")
    if kinds == {"unclean"}:
        raise click.UsageError("Unclean leader election is only possible through the Admin API (ElectLeaders): it "
                               "needs --bootstrap-server, which arrives with the Admin API issue.")
    if sum(bool(x) for x in (topic, all_topic_partitions, json_file)) != 1:
        raise click.UsageError("One and only one of the following options is required: --all-topic-partitions, "
                               "--topic, --path-to-json-file")
    if partition is not None and not topic:
        raise click.UsageError("--partition needs --topic.")
    requested = None
    if json_file:
        try:
            requested = elect_ops.parse_election_file(_read_text(json_file))
        except AdminError as e:
            raise click.ClickException(str(e)) from None
    with _zk(ctx) as zk:
        unknown = []
        if all_topic_partitions:
            partitions = elect_ops.all_partitions(zk)
        elif topic:
            partitions = elect_ops.topic_partitions(zk, topic, partition)
        else:
            existing = set(reassign_ops.current_assignment(zk, requested))
            partitions = [tp for tp in requested if tp in existing]
            unknown = [tp for tp in requested if tp not in existing]
            if not partitions:
                raise AdminError("None of the partitions in the election file exists: "
                                 + ",".join(reassign_ops.tp_name(tp) for tp in unknown))
        if not partitions:
            click.echo("There are no partitions to elect leaders for.")
            return
        result = elect_ops.elect_preferred(zk, partitions, timeout)
    for tp in unknown:
        result.failed[tp] = "This partition does not exist."
    for line in result.lines():
        click.echo(line)
    if result.failed:
        raise click.ClickException(f"{len(result.failed)} replica(s) could not be elected")


@cli.group("cluster")
def cluster():
    """Cluster-wide information."""


@cluster.command("describe")
@click.pass_context
def cluster_describe(ctx):
    """Show the cluster id, the controller and the registered brokers."""
    with _zk(ctx) as zk:
        description = cluster_ops.describe_cluster(zk)
    click.echo("\n".join(cluster_ops.format_cluster_description(description)))


# ---- consumer groups (Kafka protocol) ------------------------------------------------------------------------

def _bootstrap_from_zookeeper(ctx: click.Context) -> list[tuple[str, int]]:
    """The PLAINTEXT endpoints of the brokers registered in /brokers/ids."""
    s: _Settings = ctx.find_object(_Settings)
    with _zk(ctx) as zk:
        brokers = zk.get_all_brokers()
    servers = []
    for _, info in sorted(brokers.items()):
        for e in info.endpoints:
            if e.security_protocol == "PLAINTEXT":
                servers.append((e.host or "localhost", e.port))
                break
    if not servers:
        if brokers:
            raise click.ClickException(f"None of the brokers registered in ZooKeeper at {s.zookeeper} has a "
                                       "PLAINTEXT listener; give --bootstrap-server HOST:PORT.")
        raise click.ClickException(f"No brokers are registered in ZooKeeper at {s.zookeeper} (/brokers/ids is "
                                   "empty): the groups commands need a running broker.")
    return servers


@contextmanager
def _admin(ctx: click.Context, timeout: float):
    """An AdminClient on --bootstrap-server (or on the brokers registered in --zookeeper's /brokers/ids);
    failures become one-line errors (exit 1)."""
    s: _Settings = ctx.find_object(_Settings)
    if s.bootstrap_server:
        try:
            servers = parse_bootstrap(s.bootstrap_server)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--bootstrap-server") from None
    elif s.zookeeper:
        servers = _bootstrap_from_zookeeper(ctx)
    else:
        raise click.UsageError("--bootstrap-server HOST:PORT is required (or --zookeeper HOST:PORT, to find the "
                               "brokers through ZooKeeper).")
    client = AdminClient(servers, timeout=timeout)
    try:
        yield client
    except KafkaAdminError as e:
        raise click.ClickException(str(e)) from None
    finally:
        client.close()


def _timeout_option(f):
    return click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=30.0, show_default=True,
                        metavar="SECONDS",
                        help="Give up on each request to the cluster after this long (retries included: a coordinator "
                             "that is loading or moving, or a partition leader moving, is waited for).")(f)


def _group_selection(groups, all_groups, admin) -> list[str]:
    """The groups named, or every consumer group with --all-groups."""
    if all_groups:
        return [g for g, _ in group_ops.list_consumer_groups(admin)]
    return list(dict.fromkeys(groups))


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
    """List the consumer groups, one per line (ListGroups to every broker)."""
    wanted = None
    if states:
        try:
            wanted = group_ops.parse_states(states)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--state") from None
    with _admin(ctx, timeout) as admin:
        listed = group_ops.list_consumer_groups(admin)
    if states is None:
        for g, _ in listed:
            click.echo(g)
        return
    shown = [(g, s or "Unknown") for g, s in listed if wanted is None or s in wanted]
    click.echo("\n".join(group_ops.format_group_states(shown)))


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
    --describe). Exit 1 if a group does not exist."""
    _require_groups(group_ids, all_groups)
    if sum((offsets_view, members_view, state_view)) > 1:
        raise click.UsageError("Give at most one of --offsets, --members, --state.")
    if verbose and not members_view:
        raise click.UsageError("--verbose goes with --members.")
    failed = 0
    with _admin(ctx, timeout) as admin:
        for group in _group_selection(group_ids, all_groups, admin):
            try:
                desc = group_ops.describe_consumer_group(admin, group)
                rows = group_ops.collect_offsets(admin, desc) if not (members_view or state_view) else None
            except KafkaAdminError as e:
                _error(str(e))
                failed += 1
                continue
            notice = group_ops.state_notice(desc)
            if notice:
                click.echo(notice, err=True)
            if state_view:
                click.echo("\n".join(group_ops.format_state(desc)))
            elif members_view:
                if desc.members:
                    click.echo("\n".join(group_ops.format_members(desc, verbose)))
            elif rows:
                click.echo("\n".join(group_ops.format_offsets(rows)))
    if failed:
        ctx.exit(1)


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
    members is refused (exit 1): stop its consumers first.
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
    plans, failed = {}, 0
    with _admin(ctx, timeout) as admin:
        for group in _group_selection(group_ids, all_groups, admin):
            try:
                desc = admin.describe_group(group)
                if desc.protocol_type not in group_ops.CONSUMER_PROTOCOL_TYPES and desc.state != "Dead":
                    raise KafkaAdminError(f"Group '{group}' is not a consumer group (protocol type "
                                          f"'{desc.protocol_type}').")
                if desc.state not in ("Empty", "Dead"):
                    raise KafkaAdminError(f"Assignments can only be reset if the group '{group}' is inactive, but "
                                          f"the current state is {desc.state}.")
                tps = group_ops.partitions_to_reset(admin, group, list(topics), all_topics)
                plan = group_ops.prepare_reset(admin, group, tps, spec, warn)
                if execute:
                    group_ops.commit_reset(admin, group, plan)
            except KafkaAdminError as e:
                _error(str(e))
                failed += 1
                continue
            plans[group] = plan
    lines = group_ops.format_reset(plans)
    if lines:
        click.echo("\n".join(lines))
    if failed:
        ctx.exit(1)


@groups.command("delete")
@click.argument("group_ids", metavar="[GROUP]...", nargs=-1)
@click.option("--all-groups", is_flag=True, help="Every consumer group.")
@_timeout_option
@click.pass_context
def groups_delete(ctx, group_ids, all_groups, timeout):
    """Delete consumer groups and their committed offsets (DeleteGroups; only groups without active members).
    Exit 1 if any could not be deleted."""
    _require_groups(group_ids, all_groups)
    with _admin(ctx, timeout) as admin:
        selected = _group_selection(group_ids, all_groups, admin)
        results = admin.delete_groups(selected) if selected else {}
    done = [g for g, code in results.items() if code == 0]
    failed = {g: code for g, code in results.items() if code != 0}
    if not failed:
        names = ", ".join(f"'{g}'" for g in done)
        click.echo(f"Deletion of requested consumer groups ({names}) was successful.")
        return
    for g, code in failed.items():
        _error(f"Group '{g}' could not be deleted due to: {error_text(code)}")
    if done:
        click.echo("These consumer groups were deleted successfully: " + ", ".join(f"'{g}'" for g in done))
    ctx.exit(1)


if __name__ == "__main__":
    cli()
