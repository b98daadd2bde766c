"""`kadmin cluster describe`: the cluster id, the controller and the live brokers, from ZooKeeper (/cluster/id,
/controller, /brokers/ids) or from the brokers (DescribeCluster, or Metadata before Kafka 2.8).

A broker is shown with the host and port clients reach it on: through the brokers, the endpoint of the listener
kadmin connected to; from ZooKeeper, the broker's PLAINTEXT endpoint (its first one when it has none).

Each broker's replication throttles in force (`leader.replication.throttled.rate`,
`follower.replication.throttled.rate`, `replica.alter.log.dirs.io.max.bytes.per.second`): the values of its own
/config/brokers/<id>, never of <default> (which Kafka 2.8 does not apply, KAFKA-10190). Through the brokers
(DescribeConfigs) its server.properties values show too, as they apply in kbroker; ZooKeeper does not know them.

The click group `cluster` (its command `describe`) closes the module.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import click

from zk.client import KafkaZkClient
from kbroker.common.broker_config import DYNAMIC_BROKER_CONFIGS
from kbroker.common.config_def import parse_checked

from .context import output, source
from .kafka_client import BROKER_RESOURCE, AdminClient
from .output import Output, table

THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
             "replica.alter.log.dirs.io.max.bytes.per.second")
_IN_FORCE = ("DYNAMIC_BROKER_CONFIG", "STATIC_BROKER_CONFIG")   # the sources a throttle applies from


@dataclass
class BrokerRow:
    id: int
    host: str | None
    port: int | None
    rack: str | None
    throttles: dict[str, int] = field(default_factory=dict)   # the throttle rates in force, bytes/s


@dataclass
class ClusterDescription:
    """JSON: {"cluster_id", "controller_id", "brokers": [{"id", "host", "port", "rack", "throttles": {config name:
    bytes/s}}]} (null when unknown, brokers sorted by id, throttles as set: {} when none)."""
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
        throttled = [b for b in self.brokers if b.throttles]
        if throttled:
            out.line("Replication throttles in force (bytes/s):")
            out.print(table(["Broker", "Leader", "Follower", "Log dir moves"],
                            [[b.id, *(b.throttles.get(name) for name in THROTTLES)] for b in throttled]))

    def to_json(self) -> dict:
        return {"cluster_id": self.cluster_id, "controller_id": self.controller_id,
                "brokers": [{"id": b.id, "host": b.host, "port": b.port, "rack": b.rack, "throttles": b.throttles}
                            for b in self.brokers]}


def _throttles(values: dict[str, str | None]) -> dict[str, int]:
    """The rates among the values that a broker applies."""
    out = {}
    for name, raw in values.items():
        if raw is not None:
            try:
                out[name] = parse_checked(DYNAMIC_BROKER_CONFIGS[name], raw)
            except ValueError:
                pass   # the broker ignores a value it cannot parse
    return out


def describe_cluster_zk(zk: KafkaZkClient) -> ClusterDescription:
    rows = []
    for bid, info in sorted(zk.get_all_brokers().items()):
        endpoint = next((e for e in info.endpoints if e.security_protocol == "PLAINTEXT"),
                        info.endpoints[0] if info.endpoints else None)
        config = zk.get_entity_config("brokers", str(bid))
        rows.append(BrokerRow(bid, endpoint.host if endpoint else None, endpoint.port if endpoint else None,
                              info.rack, _throttles({name: config.get(name) for name in THROTTLES})))
    return ClusterDescription(zk.get_cluster_id(), zk.get_controller_id(), rows)


def describe_cluster_admin(admin: AdminClient) -> ClusterDescription:
    md = admin.describe_cluster()
    brokers = sorted(md.brokers.items())
    configs = admin.describe_configs([(BROKER_RESOURCE, str(i)) for i, _ in brokers])
    rows = []
    for i, b in brokers:
        throttles = {e.name: next((v for _, v, source in e.synonyms if source in _IN_FORCE), None)
                     for e in configs[(BROKER_RESOURCE, str(i))] if e.name in THROTTLES}
        rows.append(BrokerRow(i, b.host, b.port, b.rack, _throttles(throttles)))
    return ClusterDescription(md.cluster_id, md.controller_id if md.controller_id >= 0 else None, rows)


# ---- commands (click) -----------------------------------------------------------------------------------------

@click.group("cluster")
def cluster():
    """Cluster-wide information."""


@cluster.command("describe")
@click.pass_context
def cluster_describe(ctx):
    """Show the cluster id, the controller, the live brokers and the replication throttles in force on each.
    JSON: {"cluster_id", "controller_id", "brokers": [{"id", "host", "port", "rack", "throttles": {config name:
    bytes/s}}]}."""
    with source(ctx) as src:
        result = src.call(describe_cluster_zk, describe_cluster_admin)
    output(ctx).emit(result)
