"""`kbroker`: run one broker in the foreground, or a local development cluster in the background.

  kbroker start CONFIG [--override k=v ...]        like kafka-server-start.sh
  kbroker cluster up [--brokers 3] [--data-dir DIR] a local ZooKeeper plus N brokers
  kbroker cluster status | down [--data-dir DIR]

Exit codes of `start`: 2 for an invalid configuration (nothing written), 1 when the broker refuses to start.
"""
from __future__ import annotations

import logging
import os
import sys

import click

from .config import ConfigError, load

DEFAULT_DIR = os.environ.get("KBROKER_HOME", ".kbroker")


def _configure_logging(level: str = "INFO") -> None:
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), stream=sys.stderr,
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kazoo").setLevel(logging.WARNING)


@click.group()
def main():
    """kbroker: a Kafka 2.8-compatible broker on ZooKeeper."""


@main.command()
@click.argument("config_file", type=click.Path(dir_okay=False))
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a property of CONFIG_FILE (repeatable).")
@click.option("--log-level", default="INFO", show_default=True)
def start(config_file, overrides, log_level):
    """Start one broker in the foreground (SIGTERM or Ctrl-C stops it cleanly)."""
    # gevent must patch the standard library before anything opens sockets.
    from gevent import monkey
    monkey.patch_all()
    import gevent
    import signal
    from .server import KafkaServer, StartupError

    try:
        config = load(config_file, overrides)
    except FileNotFoundError:
        click.echo(f"error: config file {config_file} not found", err=True)
        sys.exit(2)
    except ConfigError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    _configure_logging(log_level)
    server = KafkaServer(config)
    try:
        server.startup()
    except StartupError as e:
        logging.getLogger("kbroker.server").error("startup failed: %s", e)
        click.echo(f"error: {e}", err=True)
        server.shutdown()
        sys.exit(1)
    for sig in (signal.SIGTERM, signal.SIGINT):
        gevent.signal_handler(sig, lambda: gevent.spawn(server.shutdown))
    server.await_shutdown()


@main.group()
def cluster():
    """A local development cluster: ZooKeeper plus brokers, in the background."""


_data_dir = click.option("--data-dir", default=DEFAULT_DIR, show_default=True,
                         help="Where the cluster keeps its data, logs and pids.")


@cluster.command("up")
@click.option("--brokers", default=3, show_default=True, type=click.IntRange(1, 9))
@_data_dir
@click.option("--zk-port", default=2181, show_default=True)
@click.option("--base-port", default=9092, show_default=True, help="Broker N listens on base-port + N - 1.")
def cluster_up(brokers, data_dir, zk_port, base_port):
    """Start ZooKeeper and the brokers; print the bootstrap servers."""
    from . import cluster as dev_cluster
    try:
        state = dev_cluster.up(data_dir, brokers, zk_port, base_port)
    except dev_cluster.ClusterError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    click.echo(f"zookeeper.connect  {state['zookeeper']['connect']}")
    click.echo("bootstrap.servers  " + ",".join(f"127.0.0.1:{b['port']}" for b in state["brokers"]))
    click.echo(f"logs               {data_dir}/logs")


@cluster.command("down")
@_data_dir
def cluster_down(data_dir):
    """Stop the brokers, then ZooKeeper."""
    from . import cluster as dev_cluster
    stopped = dev_cluster.down(data_dir)
    click.echo("stopped " + (", ".join(stopped) if stopped else "nothing (no cluster running)"))


@cluster.command("status")
@_data_dir
def cluster_status(data_dir):
    """Processes, ports and the current controller."""
    from . import cluster as dev_cluster
    rows = dev_cluster.status(data_dir)
    if rows is None:
        click.echo("no cluster in " + data_dir)
        sys.exit(1)
    for row in rows:
        click.echo(row)


if __name__ == "__main__":
    main()
