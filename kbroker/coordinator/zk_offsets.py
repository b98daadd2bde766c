"""Offsets of OffsetCommit v0 / OffsetFetch v0, stored in ZooKeeper as Kafka did for version 0 of both APIs:
`/consumers/<group>/offsets/<topic>/<partition>` holding the offset as a decimal string (created with its
parents when missing, overwritten otherwise). Any broker serves them: there is no coordinator for v0.
"""
from __future__ import annotations

from zk.client import ZkNodeExists, ZkNoNode
from zk.znodes import ConsumerOffsetZNode


class ZkOffsetStore:
    def __init__(self, zk):
        self.zk = zk   # zk.client.KafkaZkClient

    def commit(self, group: str, topic: str, partition: int, offset: int) -> None:
        """Kafka's KafkaZkClient.setOrCreateConsumerOffset."""
        path = ConsumerOffsetZNode.path(group, topic, partition)
        data = ConsumerOffsetZNode.encode(offset)
        try:
            self.zk.set_data(path, data)
        except ZkNoNode:
            try:
                self.zk.create_recursive(path, data)
            except ZkNodeExists:   # created meanwhile by another commit
                self.zk.set_data(path, data)

    def fetch(self, group: str, topic: str, partition: int) -> int | None:
        data, _ = self.zk.get(ConsumerOffsetZNode.path(group, topic, partition))
        return None if data is None else ConsumerOffsetZNode.decode(data)
