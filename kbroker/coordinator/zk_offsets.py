"""Offsets of OffsetCommit v0 / OffsetFetch v0, stored in ZooKeeper as Kafka did for version 0 of both APIs:
`/consumers/<group>/offsets/<topic>/<partition>` holding the offset as a decimal string (created with its
parents when missing, overwritten otherwise). Any broker serves them: there is no coordinator for v0.

One of the doors from requests to ZooKeeper: a failure (ZooKeeper refusing or unreachable, a path it cannot hold,
a znode that does not hold a number) is raised as KafkaError UNKNOWN_SERVER_ERROR, as Kafka's
Errors.forException answers it.
"""
from __future__ import annotations

import logging

from zk.client import ZkError, ZkNodeExists, ZkNoNode
from zk.znodes import ConsumerOffsetZNode

from ..protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.coordinator")


class ZkOffsetStore:
    def __init__(self, zk):
        self.zk = zk   # zk.client.KafkaZkClient

    def commit(self, group: str, topic: str, partition: int, offset: int) -> None:
        """Kafka's KafkaZkClient.setOrCreateConsumerOffset."""
        try:
            self._set_or_create(ConsumerOffsetZNode.path(group, topic, partition), ConsumerOffsetZNode.encode(offset))
        except (ZkError, ValueError) as e:
            raise _failed(f"storing the v0 offset of group {group!r} for {topic}-{partition} in ZooKeeper", e) from e

    def _set_or_create(self, path: str, data: bytes) -> None:
        try:
            self.zk.set_data(path, data)
        except ZkNoNode:
            try:
                self.zk.create_recursive(path, data)
            except ZkNodeExists:   # created meanwhile by another commit
                self.zk.set_data(path, data)

    def fetch(self, group: str, topic: str, partition: int) -> int | None:
        try:
            data, _ = self.zk.get(ConsumerOffsetZNode.path(group, topic, partition))
            return None if data is None else ConsumerOffsetZNode.decode(data)
        except (ZkError, ValueError) as e:
            raise _failed(f"reading the v0 offset of group {group!r} for {topic}-{partition} from ZooKeeper", e) from e


def _failed(what: str, e: Exception) -> KafkaError:
    log.warning("%s failed: %r", what, e)
    return KafkaError(Errors.UNKNOWN_SERVER_ERROR, f"{what} failed: {e}")
