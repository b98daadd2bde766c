"""confluent-kafka's send_offsets_to_transaction against a 3-broker cluster: the group's offsets become
visible with the commit, not with an abort."""
from __future__ import annotations

import uuid

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.clients._util import create_topic
from tests.integration.test_group_coordinator import FAST


def committed(bootstrap, group, tp):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return c.committed([tp], timeout=20)[0].offset
    finally:
        c.close()


def test_send_offsets_to_transaction_commits_and_aborts(cluster_factory):
    c = cluster_factory(3, **{"offsets.topic.num.partitions": 3, **FAST})
    create_topic(c, "in", 1, 3)
    create_topic(c, "out", 1, 3)
    bs = c.bootstrap
    group = f"copier-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": bs, "transactional.id": f"tx-{group}"})
    try:
        producer.init_transactions(30)
        consumer.assign([TopicPartition("in", 0, 0)])
        tp = TopicPartition("in", 0)
        for committed_txn, offset in ((True, 5), (False, 9), (True, 12)):
            producer.begin_transaction()
            producer.produce("out", b"x")
            producer.send_offsets_to_transaction([TopicPartition("in", 0, offset)],
                                                 consumer.consumer_group_metadata(), 30)
            if committed_txn:
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
            assert committed(bs, group, tp) == (offset if committed_txn else 5)
    finally:
        consumer.close()


def test_send_offsets_of_a_subscribed_consumer_kip447(cluster_factory):
    """A subscribed consumer's group metadata (member id, generation): TxnOffsetCommit v3 checks them."""
    c = cluster_factory(3, **{"offsets.topic.num.partitions": 3, **FAST})
    create_topic(c, "in", 1, 3)
    create_topic(c, "out", 1, 3)
    bs = c.bootstrap
    group = f"eos-{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": bs})
    for i in range(10):
        p.produce("in", str(i).encode())
    p.flush(20)
    consumer = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": bs, "transactional.id": f"tx-{group}"})
    try:
        producer.init_transactions(30)
        consumer.subscribe(["in"])
        msgs = []
        for _ in range(60):
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                msgs.append(m)
            if len(msgs) >= 10:
                break
        assert len(msgs) == 10
        producer.begin_transaction()
        producer.produce("out", b"copied")
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        assert consumer.committed([TopicPartition("in", 0)], timeout=20)[0].offset == 10
    finally:
        consumer.close()


def test_aiokafka_send_offsets_to_transaction_v0(cluster_factory):
    """aiokafka sends TxnOffsetCommit v0 (no member, no generation): committed with the transaction only."""
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.structs import TopicPartition as TP

    c = cluster_factory(3, **{"offsets.topic.num.partitions": 3, **FAST})
    create_topic(c, "in", 1, 3)
    create_topic(c, "out", 1, 3)
    bs = c.bootstrap
    group = f"aio-{uuid.uuid4().hex[:6]}"

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bs, transactional_id=f"tx-{group}")
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send("out", b"x")
                await producer.send_offsets_to_transaction({TP("in", 0): 7}, group)
            await producer.begin_transaction()
            await producer.send_offsets_to_transaction({TP("in", 0): 8}, group)
            await producer.abort_transaction()
        finally:
            await producer.stop()
    asyncio.run(run())
    assert committed(bs, group, TopicPartition("in", 0)) == 7
