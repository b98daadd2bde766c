"""`kadmin cluster describe`: the cluster id, the controller and the live brokers, from ZooKeeper (/cluster/id,
/controller, /brokers/ids) or from the brokers (DescribeCluster, or Metadata before Kafka 2.8).

A broker is shown with the host and port clients reach it on: through the brokers, the endpoint of the listener
kadmin connected to; from ZooKeeper, the broker's PLAINTEXT endpoint (its first one when it has none).

The click group `cluster` (its command `describe`) closes the module.
"""
from __future__ import annotations

from dataclasses import dataclass

import click

from zk.client import KafkaZkClient

from .context import output, source
from .kafka_client import AdminClient
from .output import Output, table


@dataclass
class BrokerRow:
    id: int
    host: str | None
    port: int | None
    rack: str | None


@dataclass
class ClusterDescription:
    """JSON: {"cluster_id", "controller_id", "brokers": [{"id", "host", "port", "rack"}]} (null when unknown,
    brokers sorted by id)."""
    cluster_id: str | None
    controller_id: int | None
    brokers: list[BrokerRow]

    def render(self, out: Output) -> None:
        out.line(f"Cluster id: {self.cluster_id or 'none'}")
        out.line(f"Controller: {'none' if self.controller_id is None else self.controller_id}")
        if not self.brokers:
            out.line("Brokers: none")
            return
        out.print(table(["Broker", "Host", "Port", "Rack"], [[b.id, b.host, b.port, b.rack] for b in self.brokers]))

    def to_json(self) -> dict:
        return {"cluster_id": self.cluster_id, "controller_id": self.controller_id,
                "brokers": [{"id": b.id, "host": b.host, "port": b.port, "rack": b.rack} for b in self.brokers]}


def describe_cluster_zk(zk: KafkaZkClient) -> ClusterDescription:
    rows = []
    for bid, info in sorted(zk.get_all_brokers().items()):
        endpoint = next((e for e in info.endpoints if e.security_protocol == "PLAINTEXT"),
                        info.endpoints[0] if info.endpoints else None)
        rows.append(BrokerRow(bid, endpoint.host if endpoint else None, endpoint.port if endpoint else None,
                              info.rack))
    return ClusterDescription(zk.get_cluster_id(), zk.get_controller_id(), rows)


def describe_cluster_admin(admin: AdminClient) -> ClusterDescription:
    md = admin.describe_cluster()
    return ClusterDescription(md.cluster_id, md.controller_id if md.controller_id >= 0 else None,
                              [BrokerRow(b.node_id, b.host, b.port, b.rack) for _, b in sorted(md.brokers.items())])


# ---- commands (click) -----------------------------------------------------------------------------------------

@click.group("cluster")
def cluster():
    """Cluster-wide information."""


@cluster.command("describe")
@click.pass_context
def cluster_describe(ctx):
    """Show the cluster id, the controller and the live brokers. JSON: {"cluster_id", "controller_id",
    "brokers": [{"id", "host", "port", "rack"}]}."""
    with source(ctx) as src:
        result = src.call(describe_cluster_zk, describe_cluster_admin)
    output(ctx).emit(result)
