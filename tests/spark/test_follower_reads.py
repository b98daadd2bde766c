"""Follower fetching from the source's side (KIP-392, `kafka.client.rack`): on the Spark tests' brokers (broker i in
rack ri, the rack-aware replica selector), a read naming a follower's rack is served by that follower (the brokers'
BytesOut metrics say which broker sent the records); once the follower stops the client goes back to the
leader and reads on, every record exactly once; a Spark read in rack r3 gets every record from broker 3."""
from __future__ import annotations

import signal
import time

from kbroker.spark.client import KafkaClient
from kbroker.spark.options import source_options
from kbroker.spark.reader import OffsetRange, read_range, source_client
from tests.clients.test_follower_fetching import bytes_out
from tests.spark.conftest import make_topic, produce, rows_of, unique

T0 = (int(time.time()) - 3600) * 1000


def sent_bytes(kcluster, topic: str, since: dict[int, float], ids) -> dict[int, float]:
    """Bytes of topic each of brokers `ids` sent consumers since `since` (a former sent_bytes of all, from {})."""
    return {i: bytes_out(kcluster.brokers[i], topic) - since.get(i, 0.0) for i in ids}


def test_a_client_in_a_followers_rack_reads_from_it_and_from_the_leader_once_it_stops(kcluster):
    """read_range with small fetches and kafka.client.rack naming a follower's rack: the leader names the follower
    and the follower serves every fetch (the leader and the third broker send nothing); the follower stopped
    mid-read (its connection lost), the rest comes from the leader, every record exactly once."""
    topic = make_topic(kcluster, unique("near"), partitions=1)
    sent = [s for i in range(10)       # ten batches of 30
            for s in produce(kcluster.bootstrap, topic, [(0, None, b"x" * 1000, T0 + i, []) for _ in range(30)])]
    with KafkaClient(kcluster.bootstrap) as client:
        md = client.metadata([topic])
    leader = md.topics[topic].partitions[0].leader
    near = max(md.topics[topic].partitions[0].replicas, key=lambda b: (b != leader, b != md.controller_id))
    options = source_options({"kafka.bootstrap.servers": kcluster.bootstrap, "subscribe": topic,
                              "kafka.client.rack": f"r{near}", "kafka.max.partition.fetch.bytes": "20000"},
                             streaming=False)
    before = sent_bytes(kcluster, topic, {}, (1, 2, 3))
    broker = kcluster.brokers[near]
    with source_client(options) as client:
        batches = read_range(client, OffsetRange(topic, 0, 0, 300), options)
        offsets = next(batches).column("offset").to_pylist() + next(batches).column("offset").to_pylist()
        assert 0 < len(offsets) < 300
        served = sent_bytes(kcluster, topic, before, (1, 2, 3))
        assert served[near] > 0 and sum(served.values()) == served[near], served
        broker.proc.send_signal(signal.SIGTERM)   # its id free at once to start again (kill -9: after 4 s)
        broker.proc.wait(30)
        try:
            for batch in batches:
                offsets += batch.column("offset").to_pylist()
        finally:
            broker.start()
            kcluster.wait_ready([1, 2, 3])
    assert offsets == [s.offset for s in sent] == list(range(300))
    assert sent_bytes(kcluster, topic, before, (leader,))[leader] > 0


def test_a_spark_read_in_a_rack_is_served_by_the_broker_there(spark, kcluster):
    """Three partitions with replicas rotated over brokers 1-3 (leaders 1, 2, 3): in rack r3, broker 3 (a
    follower of two, the leader of the third) sends every record; the rows are those produced."""
    topic = make_topic(kcluster, unique("rack"))
    sent = produce(kcluster.bootstrap, topic, [(i % 3, b"k%d" % i, b"v%d" % i, T0 + i, [("h", b"%d" % i)])
                                               for i in range(60)])
    before = sent_bytes(kcluster, topic, {}, (1, 2, 3))
    df = (spark.read.format("kbroker").option("kafka.bootstrap.servers", kcluster.bootstrap)
          .option("subscribe", topic).option("includeHeaders", "true").option("kafka.client.rack", "r3").load())
    assert rows_of(df) == sent
    served = sent_bytes(kcluster, topic, before, (1, 2, 3))
    assert served[3] > 0 and served[1] == served[2] == 0, served
