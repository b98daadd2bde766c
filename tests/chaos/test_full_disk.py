"""A full log dir (Kafka's log dir failure handling): broker 1 has two log dirs, the first a 4 MiB tmpfs, in a
3-broker cluster; an acks=all producer writes to two partitions led by broker 1, one in each dir, until the small
one is full. The ENOSPC answers KAFKA_STORAGE_ERROR (retriable: the producer goes on, nothing fails), the dir goes
offline (DescribeLogDirs; AlterReplicaLogDirs into it is refused), /log_dir_event_notification is written and consumed by the controller, which moves the
leadership of the partition in it to another in-sync replica and drops broker 1 from its ISR (offline replica in
Metadata); broker 1 stays up and keeps leading the partition in its other dir. Restarted with the dir read-only,
broker 1 starts without it (its replica there stays offline). With space again, broker 1 is restarted: it recovers
the half-written log and rejoins the ISR. Every acknowledged record is intact."""
from __future__ import annotations

import os
import time

from kafka.protocol.admin import AlterReplicaLogDirsRequest, DescribeLogDirsRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kbroker.protocol.client import Connection
from kbroker.protocol.client.requests import fetch_request, produce_request
from kbroker.protocol.errors import Errors
from tests.chaos.harness import AckedProducer, ChaosRun, HistoryReader, read_all, verify
from tests.integration.conftest import wait_until
from tests.tmpfs import remount, small_filesystem
from zk import znodes as z
from zk.admin import AdminZkClient

TOPIC = "fill"


def state(c, partition: int):
    return c.zk.get_partition_state(TOPIC, partition)


def one_batch() -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=10 ** 6)
    builder.append(0, timestamp=int(time.time() * 1000), key=None, value=b"probe", headers=[])
    return bytes(builder.build())


def check_offline_dir(conn, small: str, other: int) -> None:
    """DescribeLogDirs shows the small dir offline and the other one with its partition; Metadata v9 lists
    broker 1 as an offline replica of the partition in the small dir."""
    dirs = {r.log_dir: r for r in conn.send(DescribeLogDirsRequest(version=1, topics=None)).results}
    assert dirs[small].error_code == Errors.KAFKA_STORAGE_ERROR and dirs[small].topics == []
    big = next(r for d, r in dirs.items() if d != small)
    assert big.error_code == Errors.NONE
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in big.topics] == [(TOPIC, [other])]
    wanted = MetadataRequest(version=9, topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                             allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                             include_topic_authorized_operations=False)
    wait_until(lambda: [p.offline_replicas for p in conn.send(wanted).topics[0].partitions
                        if p.partition_index != other] == [[1]], message="offline replica in Metadata")


def test_full_log_dir_goes_offline_and_leadership_moves(cluster_factory, tmp_path):
    small = str(tmp_path / "small")
    with small_filesystem(small, "4m"):
        c = cluster_factory(0)
        b1 = c.add(1, **{"log.dirs": f"{small},{tmp_path / 'broker-1' / 'data'}"})
        c.add(2)
        c.add(3)
        c.wait_ready([1, 2, 3])
        AdminZkClient(c.zk).create_topic(TOPIC, {"min.insync.replicas": "2"},
                                         assignment={0: [1, 2, 3], 1: [1, 3, 2]})
        wait_until(lambda: all(state(c, p) and len(state(c, p).isr) == 3 for p in (0, 1)), message="topic online")
        in_small = lambda: [p for p in (0, 1) if os.path.isdir(os.path.join(small, f"{TOPIC}-{p}"))]  # noqa: E731
        wait_until(lambda: in_small(), message="a partition's log in the small dir")
        [full] = in_small()
        other = 1 - full
        notifications = c.zk.exists(z.LogDirEventNotificationZNode.path)

        run = ChaosRun("full log dir")
        reader = HistoryReader(c.bootstrap, TOPIC, 2).start()
        producer = AckedProducer(c.bootstrap, TOPIC, 2, padding=8000).start()
        run.fault("log dir fills up")
        wait_until(lambda: state(c, full).leader not in (1, -1), timeout=60, message="leadership moved")
        moved_at = time.monotonic()
        wait_until(lambda: 1 not in state(c, full).isr, timeout=20, message="broker 1 left the ISR")

        conn = Connection("127.0.0.1", b1.port, "full-disk-test", 10.0)
        try:
            # Broker 1 answers KAFKA_STORAGE_ERROR for the partition in the failed dir, until it restarts.
            produced = conn.send(produce_request(8, TOPIC, full, one_batch(), acks=1, timeout_ms=5000))
            assert produced.responses[0].partition_responses[0].error_code == Errors.KAFKA_STORAGE_ERROR
            fetched = conn.send(fetch_request(11, TOPIC, full, 0, 1000))
            assert fetched.responses[0].partitions[0].error_code == Errors.KAFKA_STORAGE_ERROR
            check_offline_dir(conn, small, other)
            # Moving a replica into the failed dir is refused (AlterReplicaLogDirs: KAFKA_STORAGE_ERROR).
            R = AlterReplicaLogDirsRequest
            moved = conn.send(R(version=1, dirs=[R.AlterReplicaLogDir(path=small, topics=[
                R.AlterReplicaLogDir.AlterReplicaLogDirTopic(name=TOPIC, partitions=[other])])]))
            assert [(t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions])
                    for t in moved.results] == [(TOPIC, [(other, Errors.KAFKA_STORAGE_ERROR)])]
        finally:
            conn.close()
        # The notification was written (the children's version moved) and consumed (none is left).
        after = c.zk.exists(z.LogDirEventNotificationZNode.path)
        assert after.cversion >= notifications.cversion + 2
        assert c.zk.children(z.LogDirEventNotificationZNode.path) == []
        # Broker 1 stays up and keeps leading (and acknowledging) the partition in its other dir.
        acked_other = producer.acked_count(other)
        wait_until(lambda: producer.acked_count(other) > acked_other + 50, message="acks from the other dir")
        assert b1.alive() and state(c, other).leader == 1 and sorted(state(c, other).isr) == [1, 2, 3]
        acked_full = producer.acked_count(full)
        wait_until(lambda: producer.acked_count(full) > acked_full + 50, message="acks from the new leader")
        assert producer.failed == 0, "KAFKA_STORAGE_ERROR must be retried, not fail the records"

        # Restarted with the dir unusable (read-only), broker 1 starts without it: its replica there is offline
        # (KAFKA_STORAGE_ERROR to the controller's LeaderAndIsr), the other dir serves.
        run.fault("restart with the dir unusable")
        assert b1.terminate() == 0
        remount(small, "ro")
        b1.start()
        c.wait_ready([1])
        wait_until(lambda: sorted(state(c, other).isr) == [1, 2, 3], message="broker 1 back in the other ISR")
        conn = Connection("127.0.0.1", b1.port, "full-disk-test", 10.0)
        try:
            check_offline_dir(conn, small, other)
        finally:
            conn.close()
        assert 1 not in state(c, full).isr

        # The disk is fixed: broker 1 restarts, recovers the half-written log and rejoins the ISR.
        run.fault("restart with the disk fixed")
        assert b1.terminate() == 0
        remount(small, "rw,size=64m")
        b1.start()
        c.wait_ready([1])
        wait_until(lambda: sorted(state(c, full).isr) == [1, 2, 3], timeout=30, message="broker 1 back in the ISR")
        time.sleep(1)

        producer.stop()
        reader.stop()
        final = read_all(c.bootstrap, TOPIC, 2)
        lost = verify(producer, final, [reader])
        rows = run.finish(producer, lost)
        print(f"\nfull log dir: {len(producer.acked)} acknowledged, {lost} lost, leadership moved "
              f"{moved_at - run.faults[0][1]:.1f} s after the producer started filling; {rows}")
