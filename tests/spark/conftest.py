"""Spark tests: one SparkSession for the whole test session on a real Spark standalone cluster (a master and two
workers of one core each, kbroker.spark.standalone), so reads, writes and streaming queries run in executors,
each in its own JVM with its own Python workers (PYSPARK_PYTHON: this venv), as on a production cluster; and one
real 3-broker cluster shared by the Spark tests (each test uses its own topics; broker i in rack ri with the
rack-aware replica selector and a metrics port, which change nothing for reads that name no rack). JVMs are tuned
for start-up
(UI off, SerialGC, C1 only, 512 MB). Records are produced with confluent-kafka (librdkafka), with explicit
timestamps and headers."""
from __future__ import annotations

import os
import sys
import uuid
from dataclasses import dataclass

import pytest

from kbroker.replica.selector import RACK_AWARE_REPLICA_SELECTOR
from tests.clients._util import leaders_known
from tests.conftest import free_port, fresh_chroot
from tests.integration.conftest import Cluster, wait_until
from zk.admin import AdminZkClient

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)          # Spark's Python workers: this venv
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    """A Spark standalone master and two workers (one core, 1 GB for executors each), launched: the `spark`
    fixture waits for them after the brokers have started meanwhile."""
    from kbroker.spark.standalone import StandaloneCluster
    c = StandaloneCluster(2, str(tmp_path_factory.mktemp("spark-standalone")))
    try:
        c.launch()
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="session")
def spark(spark_cluster, kcluster):
    from pyspark.sql import SparkSession

    from kbroker.spark import register
    spark_cluster.wait_workers(2)
    session = (SparkSession.builder.master(spark_cluster.url).appName("kbroker-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", "512m")
               .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
               .config("spark.executor.memory", "512m")
               .config("spark.executor.cores", "1")
               .config("spark.executor.extraJavaOptions", JVM_OPTIONS)
               .config("spark.locality.wait", "0")            # a task never waits for its preferred executor
               .config("spark.task.maxFailures", "1")         # an error fails its job at once, as in local[2]:
                                                               # the tests expect errors, not 4 attempts of each
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    jsc = session.sparkContext._jsc.sc()
    wait_until(lambda: jsc.getExecutorMemoryStatus().size() == 3, 60,         # the driver's entry and two more
               message="an executor in each Spark worker")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def kcluster(zookeeper, tmp_path_factory):
    """Three brokers shared by the Spark tests, broker i in rack ri (follower fetching: test_follower_reads)."""
    c = Cluster(fresh_chroot(zookeeper), str(tmp_path_factory.mktemp("spark")))
    try:
        for i in (1, 2, 3):
            port = free_port()
            c.add(i, **{"broker.rack": f"r{i}", "replica.selector.class": RACK_AWARE_REPLICA_SELECTOR,
                        "metrics.port": port}).metrics_port = port
        c.wait_ready([1, 2, 3])
        yield c
    finally:
        c.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def make_topic(cluster: Cluster, name: str, partitions: int = 3, replicas: tuple[int, ...] = (1, 2, 3),
               config: dict | None = None) -> str:
    """A topic whose partition p has `replicas` rotated by p (leaders spread over the brokers)."""
    k = len(replicas)
    assignment = {p: [replicas[(p + i) % k] for i in range(k)] for p in range(partitions)}
    AdminZkClient(cluster.zk).create_topic(name, config, assignment=assignment)
    wait_until(lambda: leaders_known(cluster, name, partitions), 20, message=f"leaders of {name}")
    return name


@dataclass(frozen=True)
class Sent:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...]


def produce(bootstrap: str, topic: str, records, acks: str = "all") -> list[Sent]:
    """records: (partition, key, value, timestamp ms, [(header key, header value)]); what the cluster acknowledged,
    in offset order."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "enable.idempotence": False})
    sent, errors = [], []

    def reporter(headers):                    # delivery reports carry no headers: keep the ones sent
        def report(err, msg):
            if err is not None:
                errors.append(err)
            else:
                sent.append(Sent(msg.partition(), msg.offset(), msg.key(), msg.value(), msg.timestamp()[1], headers))
        return report
    for partition, key, value, ts, headers in records:
        p.produce(topic, key=key, value=value, partition=partition, timestamp=ts, headers=headers or None,
                  on_delivery=reporter(tuple(headers or ())))
        p.poll(0)
    assert p.flush(20) == 0 and not errors, errors
    return sorted(sent, key=lambda s: (s.partition, s.offset))


def rows_of(df) -> list[Sent]:
    """A DataFrame of the source's schema as Sent tuples (timestamps in ms), in (partition, offset) order."""
    cols = ["partition", "offset", "key", "value", "unix_millis(timestamp) AS ts"]
    with_headers = "headers" in df.columns
    if with_headers:
        cols.append("headers")
    out = []
    for r in df.selectExpr(*cols).collect():
        headers = tuple((h.key, None if h.value is None else bytes(h.value)) for h in r.headers) if with_headers else ()
        out.append(Sent(r.partition, r.offset, None if r.key is None else bytes(r.key),
                        None if r.value is None else bytes(r.value), r.ts, headers))
    return sorted(out, key=lambda s: (s.partition, s.offset))
