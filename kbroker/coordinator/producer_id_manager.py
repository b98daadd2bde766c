"""Producer ids for idempotent producers, handed out from blocks claimed in ZooKeeper (Kafka 2.8).

Each broker claims a block of 1000 ids at a time by a conditional write of /latest_producer_id_block, so ids
are unique across the cluster and survive restarts. Claiming is a ZooKeeper round trip; it happens once per
1000 InitProducerId requests. A claim that fails (ZooKeeper refusing or unreachable, the ids exhausted) is raised as
KafkaError COORDINATOR_NOT_AVAILABLE, which a producer retries: this is one of the doors from requests to ZooKeeper.
"""
from __future__ import annotations

import logging

from zk.client import ZkError
from zk.znodes import ProducerIdBlockZNode

from ..protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.coordinator")


class ProducerIdManager:
    def __init__(self, broker_id: int, zk):
        self.broker_id = broker_id
        self.zk = zk
        self.next_id = 0
        self.block_end = -1

    def generate(self) -> int:
        if self.next_id > self.block_end:
            try:
                self.next_id, self.block_end = self.zk.allocate_producer_id_block(self.broker_id,
                                                                                 ProducerIdBlockZNode.block_size)
            except ZkError as e:
                raise KafkaError(Errors.COORDINATOR_NOT_AVAILABLE, f"claiming a producer id block failed: {e}") from e
            log.info("broker %d claimed producer ids %d-%d", self.broker_id, self.next_id, self.block_end)
        pid = self.next_id
        self.next_id += 1
        return pid
