"""`kadmin dump-log` (kafka-dump-log.sh) on segments real brokers wrote: v2 from confluent-kafka (headers,
compression, a transaction with an abort), v0/v1 from kafka-python on topics with an old message.format.version,
offset and time indexes, `.txnindex`, and the `__consumer_offsets` / `__transaction_state` decoders. Bad input
(garbage, a truncated segment, a missing file) gets a line, never a traceback.

One broker serves the module; each test has its own topics.
"""
from __future__ import annotations

import os
import re
import shutil

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, Producer, TopicPartition

from admin_cli.main import cli
from kbroker.cluster import wait_until
from kbroker.common.transaction_log import partition_for as txn_partition
from kbroker.coordinator.schemas import partition_for as group_partition
from tests.clients._util import create_topic, kp_produce, sample_records, segment_path, unique
from tests.clients.conftest import _start_cluster

# one broker holds the internal topics too
BROKER_CONFIG = {"offsets.topic.replication.factor": 1, "transaction.state.log.replication.factor": 1,
                 "transaction.state.log.min.isr": 1, "group.initial.rebalance.delay.ms": 0}


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    c = _start_cluster(zookeeper, tmp_path_factory, 1, **BROKER_CONFIG)
    yield c
    c.stop()


def dump(*args):
    r = CliRunner().invoke(cli, ["dump-log", *args], catch_exceptions=False)
    assert "Traceback" not in r.stderr
    return r


def ok(*args) -> list[str]:
    r = dump(*args)
    assert r.exit_code == 0, (r.stdout, r.stderr)
    return r.stdout.splitlines()


def batch_lines(lines):
    return [line for line in lines if line.startswith(("baseOffset:", "offset:"))]


def record_lines(lines):
    return [line for line in lines if line.startswith("| offset:")]


def field(line: str, name: str) -> str:
    return re.search(rf"(?:^|\s){name}: (\S+)", line).group(1)


def ck_producer(bs: str, **cfg) -> Producer:
    return Producer({"bootstrap.servers": bs, "linger.ms": 100, **cfg})


def test_v2_compressed_batch_with_headers(cluster):
    topic = create_topic(cluster, unique("dump-v2"))
    p = ck_producer(cluster.bootstrap, **{"compression.type": "gzip", "enable.idempotence": True})
    for i in range(3):
        p.produce(topic, key=f"k{i}".encode(), value=f"value-{i}".encode(), partition=0,
                  headers=[("trace", b"t"), ("n", str(i).encode())], timestamp=1_600_000_000_000 + i)
    p.produce(topic, key=None, value=None, partition=0, timestamp=1_600_000_000_009)
    assert p.flush(15) == 0
    path = segment_path(cluster, 1, topic)
    lines = ok("--files", path, "--print-data-log")
    assert lines[:2] == [f"Dumping {path}", "Starting offset: 0"]
    (batch,) = batch_lines(lines)
    assert batch.startswith("baseOffset: 0 lastOffset: 3 count: 4 baseSequence: 0 lastSequence: 3 producerId: ")
    assert " isTransactional: false isControl: false position: 0 CreateTime: 1600000000009 " in batch
    assert field(batch, "magic") == "2" and field(batch, "compresscodec") == "GZIP"
    assert field(batch, "isvalid") == "true" and int(field(batch, "size")) == os.path.getsize(path)
    size = os.path.getsize(path)
    meta = (" baseOffset: 0 lastOffset: 3 baseSequence: 0 lastSequence: 3 producerEpoch: 0 partitionLeaderEpoch: 0 "
            f"batchSize: {size} magic: 2 compressType: GZIP position: 0")
    assert record_lines(lines) == [
        *(f"| offset: {i} isValid: true crc: null keySize: 2 valueSize: 7 CreateTime: 160000000000{i}{meta} "
          f"sequence: {i} headerKeys: [trace,n] key: k{i} payload: value-{i}" for i in range(3)),
        (f"| offset: 3 isValid: true crc: null keySize: -1 valueSize: -1 CreateTime: 1600000000009{meta} "
        "sequence: 3 headerKeys: []"),
    ]
    # without --deep-iteration: batches only; --deep-iteration alone: records without their data
    assert not record_lines(ok("--files", path))
    assert record_lines(ok("--files", path, "--deep-iteration"))[0] == (
        f"| offset: 0 isValid: true crc: null keySize: 2 valueSize: 7 CreateTime: 1600000000000{meta} "
        "sequence: 0 headerKeys: [trace,n]")
    # --skip-record-metadata: the data alone (Kafka's layout: no `|` before a record without a key)
    assert ok("--files", path, "--print-data-log", "--skip-record-metadata")[3:] == [
        "| key: k0 payload: value-0", "| key: k1 payload: value-1", "| key: k2 payload: value-2", ""]


@pytest.mark.parametrize("fmt,magic,ts_type", [("0.9.0", 0, "NoTimestampType"), ("0.10.0", 1, "CreateTime")])
def test_v0_v1_messages_plain_and_compressed(cluster, fmt, magic, ts_type):
    topic = create_topic(cluster, unique(f"dump-v{magic}"), configs={"message.format.version": fmt})
    recs = sample_records(3, headers=False, ts_base=1_600_000_000_000)
    era = (0, 8, 2) if magic == 0 else (0, 10, 0)      # the producer writes the topic's format itself
    kp_produce(cluster.bootstrap, topic, recs[:1], api_version=era, with_ts=magic >= 1)
    kp_produce(cluster.bootstrap, topic, recs[1:2], api_version=era, with_ts=magic >= 1)
    kp_produce(cluster.bootstrap, topic, recs[2:3], api_version=era, with_ts=magic >= 1)
    kp_produce(cluster.bootstrap, topic, recs, api_version=era, compression="gzip", with_ts=magic >= 1)
    lines = ok("--files", segment_path(cluster, 1, topic), "--print-data-log")
    batches = batch_lines(lines)
    assert [(field(b, "offset"), field(b, "magic"), field(b, "compresscodec")) for b in batches] == [
        ("0", str(magic), "NONE"), ("1", str(magic), "NONE"), ("2", str(magic), "NONE"),
        ("5", str(magic), "GZIP")]
    assert all(field(b, "isvalid") == "true" and f" {ts_type}: " in b for b in batches)
    records = record_lines(lines)
    assert [field(r, "offset") for r in records] == ["0", "1", "2", "3", "4", "5"]
    ts = "-1" if magic == 0 else "1600000000000"
    assert re.fullmatch(rf"\| offset: 0 isValid: true crc: (\d+) keySize: 2 valueSize: 2 {ts_type}: {ts} "
                        rf"baseOffset: 0 lastOffset: 0 baseSequence: -1 lastSequence: -1 producerEpoch: -1 "
                        rf"partitionLeaderEpoch: -1 batchSize: \d+ magic: {magic} compressType: NONE position: 0 "
                        rf"crc: \1 isvalid: true key: k0 payload: v0", records[0]), records[0]
    assert records[1].endswith("isvalid: true payload: v1") and " keySize: -1 valueSize: 2 " in records[1]
    assert " baseOffset: 3 lastOffset: 5 " in records[5] and " compressType: GZIP " in records[5]
    assert records[5].endswith("isvalid: true key: k2 payload: ")


def test_offset_and_time_indexes(cluster):
    topic = create_topic(cluster, unique("dump-idx"), configs={"index.interval.bytes": "1"})
    p = ck_producer(cluster.bootstrap)
    for i in range(4):
        p.produce(topic, value=b"x" * 100, partition=0, timestamp=1_600_000_000_000 + i)
        assert p.flush(15) == 0
    log = segment_path(cluster, 1, topic)
    positions = [int(field(b, "position")) for b in batch_lines(ok("--files", log))]
    index, time_index = log[:-4] + ".index", log[:-4] + ".timeindex"
    lines = ok("--files", f"{index},{time_index}")
    # as in Kafka, an entry once index.interval.bytes were appended since the last: none for the first batch
    assert lines == ([f"Dumping {index}"] + [f"offset: {i} position: {positions[i]}" for i in range(1, 4)]
                     + [f"Dumping {time_index}"] + [f"timestamp: {1_600_000_000_000 + i} offset: {i}"
                                                    for i in range(1, 4)])
    r = dump("--files", f"{index},{time_index}", "--verify-index-only")
    assert (r.exit_code, r.stdout.splitlines(), r.stderr) == (0, [f"Dumping {index}", f"Dumping {time_index}"], "")


def test_index_mismatch_and_sanity_check(cluster, tmp_path):
    topic = create_topic(cluster, unique("dump-bad-idx"), configs={"index.interval.bytes": "1"})
    p = ck_producer(cluster.bootstrap)
    for _ in range(2):
        p.produce(topic, value=b"y" * 50, partition=0)
        assert p.flush(15) == 0
    log = segment_path(cluster, 1, topic)
    for suffix in (".log", ".index"):
        shutil.copy(log[:-4] + suffix, tmp_path / ("00000000000000000000" + suffix))
    index = str(tmp_path / "00000000000000000000.index")
    with open(index, "r+b") as f:            # its one entry (offset 1) points at the first batch
        f.truncate(8)                        # trimmed to its entries, as a closed segment's index is
        f.seek(4)
        f.write(b"\0\0\0\0")
    r = dump("--files", index)
    assert r.exit_code == 0
    assert r.stderr.splitlines() == [f"Mismatches in :{index}", "  Index offset: 1, log offset: 0"]
    assert ok("--files", index, "--index-sanity-check")[-1] == f"{index} passed sanity check."


def test_transaction_with_abort_markers_txnindex_and_state(cluster):
    topic = create_topic(cluster, unique("dump-txn"))
    tid = unique("dump-tid")
    p = ck_producer(cluster.bootstrap, **{"transactional.id": tid})
    p.init_transactions(15)
    p.begin_transaction()
    p.produce(topic, key=b"a", value=b"aborted", partition=0)
    assert p.flush(15) == 0                  # written before the abort (which would drop it unsent)
    p.abort_transaction(15)
    p.begin_transaction()
    p.produce(topic, key=b"c", value=b"committed", partition=0)
    assert p.flush(15) == 0
    p.commit_transaction(15)
    log = segment_path(cluster, 1, topic)
    wait_until(lambda: len(batch_lines(ok("--files", log))) == 4, 15, message="the COMMIT marker: " + "\n".join(ok("--files", log)))
    lines = ok("--files", log, "--deep-iteration")
    batches = batch_lines(lines)
    assert [(field(b, "isTransactional"), field(b, "isControl")) for b in batches] == [
        ("true", "false"), ("true", "true"), ("true", "false"), ("true", "true")]
    markers = [r for r in record_lines(lines) if "endTxnMarker" in r]
    assert [field(m, "endTxnMarker") for m in markers] == ["ABORT", "COMMIT"]
    pid = field(batches[0], "producerId")
    assert ok("--files", log[:-4] + ".txnindex")[1:] == [
        f"version: 0 producerId: {pid} firstOffset: 0 lastOffset: 1 lastStableOffset: 2"]   # the LSO once the abort completed
    state_log = segment_path(cluster, 1, "__transaction_state", txn_partition(tid, 50))
    wait_until(lambda: "CompleteCommit" in "".join(ok("--files", state_log, "--transaction-log-decoder")), 15,
               message="the transaction's end in __transaction_state")
    decoded = [r for r in record_lines(ok("--files", state_log, "--transaction-log-decoder"))
               if f"transactionalId={tid} " in r]
    states = [re.search(r"state=(\w+)", r).group(1) for r in decoded]
    assert states == ["Empty", "Ongoing", "PrepareAbort", "CompleteAbort", "Ongoing", "PrepareCommit",
                      "CompleteCommit"]
    assert f"producerId:{pid},producerEpoch:0,state=Ongoing,partitions=[{topic}-0]," in decoded[1]


def test_offsets_decoder_on_a_groups_commits(cluster):
    topic = create_topic(cluster, unique("dump-grp"))
    group = unique("dump-group")
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        wait_until(lambda: c.poll(0.2) is None and c.assignment(), 20, message="the consumer's assignment")
        member = c.memberid()
        c.commit(offsets=[TopicPartition(topic, 0, 42)], asynchronous=False)
    finally:
        c.close()
    log = segment_path(cluster, 1, "__consumer_offsets", group_partition(group, 50))
    records = [r for r in record_lines(ok("--files", log, "--offsets-decoder")) if f"group={group}" in r]
    assert records[0].endswith(f'key: group_metadata::group={group} payload: {{"protocolType":"consumer",'
                               f'"protocol":"range","generationId":1,"assignment":"{{{member}=[{topic}-0]}}"}}')
    assert records[1].endswith(f"key: offset_commit::group={group},partition={topic}-0 payload: offset=42")
    # the member left: the group is empty, in a new generation
    assert records[2].endswith(f'key: group_metadata::group={group} payload: {{"protocolType":"consumer",'
                               '"protocol":null,"generationId":2,"assignment":"{}"}')
    assert len(records) == 3


# ---- bad input -----------------------------------------------------------------------------------------------

def test_garbage_file(tmp_path):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"\x00" * 12 + b"\x00\x00\x00\x20" + b"\x07" + b"garbage" * 10)
    r = dump("--files", str(path))
    assert r.exit_code == 1
    assert r.stdout.splitlines() == [f"Dumping {path}", "Starting offset: 0",
                                     f"Found {path.stat().st_size} invalid bytes at the end of {path.name}"]
    assert "unknown magic 7" in r.stderr


def test_truncated_segment(cluster, tmp_path):
    topic = create_topic(cluster, unique("dump-trunc"))
    p = ck_producer(cluster.bootstrap)
    for i in range(2):
        p.produce(topic, value=f"v{i}".encode(), partition=0)
        assert p.flush(15) == 0
    with open(segment_path(cluster, 1, topic), "rb") as f:
        data = f.read()
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data[:-5])
    r = dump("--files", str(path), "--print-data-log")
    assert r.exit_code == 1
    lines = r.stdout.splitlines()
    assert len(batch_lines(lines)) == 1 and record_lines(lines)[0].endswith("payload: v0")
    first_size = int(field(batch_lines(lines)[0], "size"))
    assert lines[-1] == f"Found {len(data) - 5 - first_size} invalid bytes at the end of {path.name}"


def test_missing_file_and_unknown_suffix(tmp_path):
    missing = tmp_path / "00000000000000000000.log"
    other = tmp_path / "notes.txt"
    other.write_text("x")
    r = dump("--files", f"{missing},{other}")
    assert r.exit_code == 1
    assert r.stdout.splitlines() == [f"Dumping {missing}", f"Dumping {other}"]
    assert r.stderr.splitlines() == [f"Error: cannot read {missing}: No such file or directory",
                                     f"Ignoring unknown file {other}"]


def test_corrupt_index(tmp_path):
    (tmp_path / "00000000000000000000.log").write_bytes(b"")
    index = tmp_path / "00000000000000000000.index"
    index.write_bytes(b"\0\0\0\x05\0\0\0\x40" + b"\0\0\0\x09")     # one entry past the log's end, 4 bytes more
    r = dump("--files", str(index))
    assert (r.exit_code, r.stdout.splitlines()) == (0, [f"Dumping {index}", "offset: 5 position: 64"])
    assert r.stderr.splitlines() == [f"Mismatches in :{index}", "  Index offset: 5, log offset: -1"]
    r = dump("--files", str(index), "--index-sanity-check")
    assert (r.exit_code, r.stdout.splitlines()) == (1, [f"Dumping {index}"])
    assert r.stderr.splitlines() == [f"Error: index file {index} has size 12, not a multiple of the entry size 8"]
