"""`kadmin cluster describe`: what ZooKeeper says about the cluster (id, controller, registered brokers)."""
from __future__ import annotations

from dataclasses import dataclass

from zk import znodes as z
from zk.client import KafkaZkClient

from .text import table


@dataclass
class ClusterDescription:
    cluster_id: str | None
    controller_id: int | None
    brokers: dict[int, z.BrokerInfo]


def describe_cluster(zk: KafkaZkClient) -> ClusterDescription:
    return ClusterDescription(zk.get_cluster_id(), zk.get_controller_id(), zk.get_all_brokers())


def format_cluster_description(d: ClusterDescription) -> list[str]:
    lines = [f"Cluster id: {d.cluster_id or 'none'}",
             f"Controller: {'none' if d.controller_id is None else d.controller_id}"]
    if not d.brokers:
        return lines + ["Brokers: none"]
    rows = [[str(b.id), ",".join(e.url() for e in b.endpoints) or "none", b.rack or "none"]
            for _, b in sorted(d.brokers.items())]
    return lines + table(["Broker", "Endpoints", "Rack"], rows)
