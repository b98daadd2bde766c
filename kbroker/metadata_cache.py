"""The broker's metadata cache: live brokers, partition states and topic ids, as the controller last sent them.

Only UpdateMetadata writes it (as in Kafka's ZooKeeper mode); the request path (Metadata, later Produce and
Fetch routing) only reads it, never ZooKeeper. Each update replaces whole objects, so a greenlet reading the
cache between two updates sees a consistent snapshot without locks.
"""
from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass


def topic_id_to_uuid(topic_id: str | None) -> uuid.UUID | None:
    """ZooKeeper stores Kafka's base64 form; the wire carries the 16 bytes."""
    if not topic_id:
        return None
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4)))


def uuid_to_topic_id(value: uuid.UUID | None) -> str | None:
    if value is None or value.int == 0:
        return None
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


@dataclass(frozen=True)
class CachedBroker:
    id: int
    endpoints: dict  # listener name -> (host, port, security protocol id)
    rack: str | None = None


@dataclass(slots=True)
class PartitionState:
    """One partition as the controller last sent it. Read-only once cached: isr, replicas and offline_replicas are
    tuples, and equal ones are one shared object (`shared_tuple`), so an idle partition costs one slotted object
    (issue 28: ≈ 300 B with a dict and three lists each)."""
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    zk_version: int = 0
    controller_epoch: int = 0


def shared_tuple(values, shared: dict) -> tuple:
    """values as a tuple, the one already in `shared` when an equal one is there (a few replica sets repeat over
    thousands of partitions; a dict per request or per caller, so it never outlives its batch)."""
    t = tuple(values)
    return shared.setdefault(t, t)


LEADER_DURING_DELETE = -2


class MetadataCache:
    def __init__(self, broker_id: int):
        self.broker_id = broker_id
        self.brokers: dict[int, CachedBroker] = {}
        self.partitions: dict[str, dict[int, PartitionState]] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.controller_id: int | None = None

    def update(self, controller_id: int, brokers: list[CachedBroker], states: list[PartitionState],
               topic_ids: dict[str, uuid.UUID]) -> list[tuple[str, int]]:
        """Apply one UpdateMetadata; returns the partitions it deleted (leader -2 means 'being deleted')."""
        self.controller_id = controller_id
        self.brokers = {b.id: b for b in brokers}
        # Only the topics named are copied (O(partitions in the request), not O(all)): the others' dicts are
        # shared with the previous snapshot, which nothing mutates.
        partitions = dict(self.partitions)
        copied: set[str] = set()
        deleted = []
        for s in states:
            if s.topic not in copied:
                copied.add(s.topic)
                partitions[s.topic] = dict(partitions.get(s.topic, ()))
            topic = partitions[s.topic]
            if s.leader == LEADER_DURING_DELETE:
                if topic.pop(s.partition, None) is not None:
                    deleted.append((s.topic, s.partition))
            else:
                topic[s.partition] = s
        ids = dict(self.topic_ids)
        for t in copied:
            if not partitions[t]:
                del partitions[t]
                ids.pop(t, None)
        for t, i in topic_ids.items():
            if t in partitions and i is not None and i.int != 0:
                ids[t] = i
        self.partitions = partitions
        self.topic_ids = ids
        return deleted

    def alive_brokers(self, listener: str) -> list[tuple[int, str, int, str | None]]:
        """(id, host, port, rack) of live brokers that have an endpoint on this listener."""
        out = []
        for b in sorted(self.brokers.values(), key=lambda b: b.id):
            ep = b.endpoints.get(listener)
            if ep is not None:
                out.append((b.id, ep[0], ep[1], b.rack))
        return out

    def alive_broker_racks(self) -> dict[int, str | None]:
        """Live broker id -> its rack (None without one): where new replicas may go."""
        return {b.id: b.rack for b in self.brokers.values()}

    def topics(self) -> list[str]:
        return sorted(self.partitions)

    def topic_partitions(self, topic: str) -> dict[int, PartitionState] | None:
        return self.partitions.get(topic)

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        return self.partitions.get(topic, {}).get(partition)

    def is_alive(self, broker_id: int) -> bool:
        return broker_id in self.brokers
