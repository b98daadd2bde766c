"""`kadmin` command line: the root click group and its global options. The commands reach the cluster through
ZooKeeper (--zookeeper) or the Kafka Admin APIs (--bootstrap-server), build one result object either way and print
it (admin_cli.output).

Global options come before the command: `kadmin --zookeeper localhost:2181 create-topic orders ...`,
`kadmin --bootstrap-server localhost:9092 --output json describe-topic orders`. Each command group's module holds
its click commands, its result classes and its two sources (`*_zk`, `*_admin`): topics (create-topic,
list-topics, describe-topic, delete-topic), configs (alter-config, describe-config), reassign, elect
(elect-leaders), cluster, acls, groups, transactions, users and quotas. What they share (the settings, the way to the
cluster, waits with progress on stderr) is admin_cli.context. This module parses the global options and turns
failures into one line on stderr with the exit statuses of admin_cli.errors (0 ok, 1 refused, 2 usage, 3
unreachable or timed out).

`--command-config FILE` (Kafka client properties: security.protocol, sasl.*, ssl.*) is how every connection
kadmin opens to the brokers reaches a secured listener; with --zookeeper, the brokers registered there are
reached on their endpoints of that security protocol. A file that cannot be read or holds bad properties is a
usage error.

With --zookeeper, kadmin logs in to a secured ZooKeeper as Kafka's tools do (admin_cli.context.zk_security):
KAFKA_OPTS's JAAS file for SASL, `--zk-tls-config-file FILE` (zookeeper.ssl.* keys) for TLS.
"""
from __future__ import annotations

import logging
import sys

import click
from click.core import ParameterSource
from click.exceptions import NoArgsIsHelpError

from zk import LIBRARY_LOGGER as ZK_LOGGER

from . import (acls, cluster, configs, console_tools, dump_log, elect, groups, perf, quotas, reassign, topics,
               transactions, users, zk_security)
from .context import Settings, command_config_security, settings, zk_tls_config
from .errors import describe_failure
from .output import Output

# The ZooKeeper library logs every failed connection attempt; with no logging configured Python would print those
# on stderr.
# kadmin reports failures itself, in one line.
logging.getLogger(ZK_LOGGER).addHandler(logging.NullHandler())


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
@click.option("--zk-tls-config-file", envvar="KADMIN_ZK_TLS_CONFIG_FILE", show_envvar=True, metavar="FILE",
              help="TLS to ZooKeeper: a properties file with Kafka's zookeeper.ssl.* and zookeeper.clientCnxnSocket "
                   "keys (others are ignored). SASL to ZooKeeper comes from the JAAS file named in KAFKA_OPTS "
                   "(-Djava.security.auth.login.config=FILE).")
@click.pass_context
def cli(ctx, zookeeper, bootstrap_server, output, zk_timeout, request_timeout, command_config, zk_tls_config_file):
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
    security = command_config_security(command_config) if command_config else None
    zk_tls = zk_tls_config(zk_tls_config_file, "--zk-tls-config-file") if zk_tls_config_file else {}
    ctx.obj = Settings(zookeeper, bootstrap_server, zk_timeout, request_timeout, Output(output == "json"), security,
                       zk_tls)


for command in (topics.create_topic, topics.list_topics, topics.describe_topic, topics.delete_topic,
                configs.alter_config, configs.describe_config, reassign.reassign, elect.elect_leaders,
                cluster.cluster, acls.acls, groups.groups, transactions.transactions, users.users, quotas.quotas,
                zk_security.migration):
    cli.add_command(command)
for command in console_tools.COMMANDS:
    cli.add_command(command)
cli.add_command(dump_log.dump_log)
cli.add_command(perf.perf)


def _set_output(ctx: click.Context, _param, value) -> None:
    if value is not None:
        settings(ctx).out = Output(value == "json")


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
