"""The cluster the namespace chaos tests share: brokers 1-3, each in a network namespace of its own
(tests/chaos/netns.py), on ZooKeeper servers a subclass makes (one, or an ensemble); the test's thread and its
clients stay in the clients' namespace. Failure detection is shortened (4 s sessions, 5 s replica lag) so that a
fault and its recovery fit in seconds; unclean elections are off, so a lost record is a bug."""
from __future__ import annotations

import os

from kbroker.cluster import BrokerProcess, wait_ready
from tests.chaos import netns
from zk.client import KafkaZkClient
from zk.launcher import ZooKeeperServer

SESSION_TIMEOUT_MS = 4000
PARTITIONS = 3
BROKERS = (1, 2, 3)
BROKER_PORT = 19092
BROKER_CONFIG = {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS, "replica.lag.time.max.ms": 5000,
                 "unclean.leader.election.enable": "false", "controlled.shutdown.retry.backoff.ms": 200}


class NamespacedCluster:
    """Brokers b1-b3 on `connect`; `servers` are the ZooKeeper processes, started first and stopped last."""

    def __init__(self, net: netns.Network, workdir: str, connect: str, servers: list[ZooKeeperServer]):
        self.net = net
        self.connect = connect
        self.servers = servers
        self.brokers = {i: BrokerProcess.create(i, os.path.join(workdir, f"broker-{i}"), connect, BROKER_CONFIG,
                                                port=BROKER_PORT, host=net.addresses[f"b{i}"],
                                                netns=net.members[f"b{i}"]) for i in BROKERS}
        self.zk: KafkaZkClient | None = None

    def start(self) -> None:
        for server in self.servers:
            server.start(wait=False)
        for server in self.servers:
            server.wait_serving()
        for b in self.brokers.values():
            b.start()
        wait_ready(self.brokers.values(), 60)
        self.observe()

    def observe(self) -> None:
        """The test's own ZooKeeper client."""
        self.zk = KafkaZkClient(self.connect, 6000).start()

    def stop(self) -> None:
        for b in self.brokers.values():
            if b.alive():
                b.kill9()
        if self.zk is not None:
            self.zk.close()
        for server in self.servers:
            server.stop()

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def state(self, topic: str, partition: int):
        return self.zk.get_partition_state(topic, partition)

    def all_in_sync(self, topic: str) -> bool:
        states = [self.state(topic, p) for p in range(PARTITIONS)]
        return all(s is not None and s.leader >= 0 and sorted(s.isr) == list(BROKERS) for s in states)
