"""`kadmin` command line: a click group whose commands connect to ZooKeeper and call admin_cli's functions.

Global options come before the command: `kadmin --zookeeper localhost:2181 create-topic orders ...`.
Every error is one line on stderr: exit status 1 when an operation fails (ZooKeeper unreachable, topic
exists, invalid config, ...), 2 for a usage error. --bootstrap-server (the Admin API path) is refused
until kadmin speaks the Kafka protocol.
"""
from __future__ import annotations

import logging
import re
import sys
from contextlib import contextmanager
from dataclasses import dataclass

import click
from click.exceptions import NoArgsIsHelpError
from kazoo.exceptions import KazooException

from zk import admin as zk_admin
from zk.client import KafkaZkClient, ZkError

from . import cluster as cluster_ops
from . import topics as topic_ops
from zk.admin_errors import AdminError
from zk.assignment import parse_replica_assignment


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
@click.option("--bootstrap-server", metavar="HOST:PORT",
              help="Use the Kafka Admin APIs instead of ZooKeeper (not available yet).")
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
@click.argument("name")
@click.pass_context
def describe_topic(ctx, name):
    """Show topic NAME's partitions, leaders, replicas and ISR (kafka-topics.sh --describe)."""
    with _zk(ctx) as zk:
        description = topic_ops.describe_topic(zk, name)
    click.echo("\n".join(topic_ops.format_topic_description(description)))


@cli.command("delete-topic")
@click.argument("name")
@click.pass_context
def delete_topic(ctx, name):
    """Mark topic NAME for deletion; the controller deletes it (kafka-topics.sh --delete)."""
    with _zk(ctx) as zk:
        topic_ops.delete_topic(zk, name)
    click.echo(f"Topic {name} is marked for deletion.")
    click.echo("Note: This will have no impact if delete.topic.enable is not set to true.")


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


if __name__ == "__main__":
    cli()
