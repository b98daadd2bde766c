"""Crash recovery of the log, with real broker processes and real files.

(a) kill -9 during a steady acks=1 produce: after the restart every acknowledged record is readable at its
    offset with its value, every segment ends on a whole entry, the indexes agree with the segments, and the
    broker log says it recovered (there was no clean shutdown marker).
(b) a clean stop (SIGTERM writes `.kafka_cleanshutdown`), the marker deleted to force recovery, then the active
    segment corrupted: garbage appended, the file cut in the middle of the last batch, one byte flipped in the
    middle batch. Recovery must truncate to the last valid entry (earlier data readable, later offsets gone,
    the next produce continuing at the truncated end), rebuild the indexes, and log what it truncated.
(c) the idempotent producer state survives a restart, clean or not: a retry of the last batch is still
    recognised as a duplicate and sequences continue.

Each test has its own 1-broker cluster (cluster_factory) with small index intervals so indexes have entries.
"""
from __future__ import annotations

import os
import random
import re
import struct
import threading
import time

import pytest
from kafka import KafkaProducer
from kafka.errors import KafkaTimeoutError

from kbroker.records.entries import iter_entries
from tests.integration.conftest import wait_until
from tests.integration.test_produce_fetch_bad_input import (NONE, OFFSET_OUT_OF_RANGE,
                                                            OUT_OF_ORDER_SEQUENCE_NUMBER, create_topic,
                                                            decode_records, fetch, init_producer_id, latest_offset,
                                                            list_offsets, produce, v2_batch, wait_leader)

CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
FIRST_SEGMENT = "00000000000000000000"
SHORT_SESSION_MS = 3000          # a killed broker's znode goes quickly, so it can be restarted sooner
BROKER_PROPS = {"log.index.interval.bytes": 512, "zookeeper.session.timeout.ms": SHORT_SESSION_MS}


# ---- helpers -----------------------------------------------------------------------------------------------------

def partition_dir(broker, topic: str, partition: int = 0) -> str:
    return os.path.join(broker.dir, "data", f"{topic}-{partition}")


def segment_bases(pdir: str) -> list[int]:
    return sorted(int(n[:20]) for n in os.listdir(pdir) if re.fullmatch(r"\d{20}\.log", n))


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def entries_of(path: str):
    data = read(path)
    return data, list(iter_entries(data, check_crc=True))


def check_segments(pdir: str) -> list[tuple[int, int]]:
    """Every segment is whole entries with good CRCs, offsets run on without gaps across segments, and the
    offset and time indexes point at what is really there. Returns [(base offset, index entries)]."""
    expected_next = None
    out = []
    for base in segment_bases(pdir):
        data, entries = entries_of(os.path.join(pdir, f"{base:020d}.log"))
        assert sum(e.size for e in entries) == len(data), \
            f"segment {base} does not end on a whole entry ({len(data)} bytes, whole entries up to " \
            f"{sum(e.size for e in entries)})"
        if expected_next is not None:
            assert base == expected_next, f"segment {base} should start at {expected_next}"
        offset = base
        for e in entries:
            assert e.base_offset == offset, f"offset gap in segment {base}: {e.base_offset} != {offset}"
            offset = e.last_offset + 1
        expected_next = offset
        by_position = {e.position: e for e in entries}
        index = read(os.path.join(pdir, f"{base:020d}.index"))
        count, last = 0, (-1, -1)
        for i in range(0, len(index) - len(index) % 8, 8):
            rel, pos = struct.unpack_from(">ii", index, i)
            if pos == 0 and rel == 0:
                break                                     # the preallocated, unused rest of the active index
            assert pos in by_position, f"index entry ({rel}, {pos}) of segment {base} is not at an entry start"
            assert by_position[pos].last_offset == base + rel, \
                f"index entry ({rel}, {pos}) of segment {base}: the entry there ends at {by_position[pos].last_offset}"
            assert (rel, pos) > last, f"index of segment {base} is not increasing at entry {i // 8}"
            last = (rel, pos)
            count += 1
        timeindex = read(os.path.join(pdir, f"{base:020d}.timeindex"))
        last_ts, last_rel = -1, -1
        for i in range(0, len(timeindex) - len(timeindex) % 12, 12):
            ts, rel = struct.unpack_from(">qi", timeindex, i)
            if ts == 0 and rel == 0:
                break
            assert ts >= last_ts and rel >= last_rel, f"time index of segment {base} goes backwards"
            assert base <= base + rel < offset, f"time index entry ({ts}, {rel}) of segment {base} points past its end"
            last_ts, last_rel = ts, rel
        out.append((base, count))
    return out


def fetch_all(broker, topic: str) -> list[tuple[int, bytes]]:
    end = latest_offset(broker, topic)
    out: list[tuple[int, bytes]] = []
    offset = 0
    while offset < end:
        error, _, data = fetch(broker, topic, offset)
        assert error == NONE, f"fetch at {offset}: error {error}"
        records = [(o, v) for o, v in decode_records(data) if o >= offset]
        assert records, f"no progress fetching at {offset} (end {end})"
        out.extend(records)
        offset = records[-1][0] + 1
    return out


def log_since(broker, mark: int) -> str:
    return broker.log()[mark:]


def wait_gone(cluster, broker_id: int) -> None:
    wait_until(lambda: broker_id not in cluster.zk.get_broker_ids(), SHORT_SESSION_MS / 1000 + 8,
               message=f"broker {broker_id}'s znode to go after kill -9")


def restart(cluster, broker, topic: str) -> int:
    """Start the broker again (same config and log dirs); returns where its log file was at the restart."""
    mark = len(broker.log())
    broker.start()
    cluster.wait_ready([broker.id])
    wait_leader(broker, topic)
    return mark


def stop_cleanly_and_force_recovery(broker) -> None:
    assert broker.terminate() == 0
    marker = os.path.join(broker.dir, "data", CLEAN_SHUTDOWN)
    assert os.path.exists(marker), "a clean shutdown must leave the .kafka_cleanshutdown marker"
    os.unlink(marker)


def assert_truncation_logged(text: str, topic: str, truncated: int, at: int) -> None:
    lines = [l for l in text.splitlines() if f"{topic}-0" in l and FIRST_SEGMENT in l and "truncat" in l.lower()]
    assert any(re.search(rf"\b{truncated}\b", l) and re.search(rf"\b{at}\b", l) for l in lines), \
        f"no log line says {truncated} bytes were truncated at byte {at} in {topic}-0; recovery lines:\n" + \
        "\n".join(lines or [l for l in text.splitlines() if "recover" in l.lower()])


# ---- (a) kill -9 during a steady produce ---------------------------------------------------------------------------

def test_kill9_during_steady_acks1_produce_loses_no_acknowledged_record(cluster_factory):
    c = cluster_factory(1, **BROKER_PROPS, **{"log.segment.bytes": 64 * 1024})
    b = c.brokers[1]
    topic = "steady"
    create_topic(c, topic)
    wait_leader(b, topic)

    acked: dict[int, bytes] = {}
    failed: list[Exception] = []
    sent: set[bytes] = set()
    stop = threading.Event()
    lock = threading.Lock()

    def run():
        producer = KafkaProducer(bootstrap_servers=b.bootstrap, acks=1, enable_idempotence=False, retries=0,
                                 linger_ms=1, max_block_ms=1000, request_timeout_ms=1500,
                                 delivery_timeout_ms=2000, reconnect_backoff_ms=50)
        try:
            i = 0
            while not stop.is_set():
                value = b"steady-%07d-" % i + b"x" * (i % 50)
                i += 1
                sent.add(value)

                def ok(md, value=value):
                    with lock:
                        acked[md.offset] = value

                try:
                    producer.send(topic, value=value, partition=0).add_callback(ok).add_errback(failed.append)
                except Exception as e:      # the buffer filled up after the broker died
                    failed.append(e)
                    time.sleep(0.01)
                if i % 200 == 0:
                    time.sleep(0.005)       # steady, not a flood
        finally:
            try:
                producer.close(timeout=4)     # the pending batches expire after delivery_timeout_ms
            except KafkaTimeoutError:
                pass

    t = threading.Thread(target=run, daemon=True)
    t.start()
    wait_until(lambda: len(acked) >= 2000, 20, message="2000 acknowledged records")
    time.sleep(0.3)
    b.kill9()
    with lock:
        acked_at_kill = dict(acked)
    # The producer goes on sending until it sees the broker gone: stopping it at once could leave it nothing in
    # flight to fail (seen once in CI when every batch had been acknowledged just before the kill).
    wait_until(lambda: failed, 10, message="the producer to see the broker die")
    stop.set()
    t.join(15)
    assert not t.is_alive()
    with lock:
        # acks that arrived between our snapshot and the kill are just as binding
        acked_at_kill.update(acked)
    assert failed, "the producer should have seen the broker die"
    assert len(set(segment_bases(partition_dir(b, topic)))) > 1, "the test wants several segments to recover"

    wait_gone(c, 1)
    mark = restart(c, b, topic)
    records = fetch_all(b, topic)
    offsets = [o for o, _ in records]
    assert offsets == list(range(len(records))), "offsets after recovery are not contiguous from 0"
    got = dict(records)
    missing = {o: v for o, v in acked_at_kill.items() if got.get(o) != v}
    assert not missing, f"{len(missing)} acknowledged records lost or changed, e.g. {sorted(missing.items())[:3]}"
    assert all(v in sent for _, v in records), "the log holds records nobody sent"
    assert len(set(got.values())) == len(records), "a record was stored twice"

    check_segments(partition_dir(b, topic))
    text = log_since(b, mark)
    assert re.search(r"no clean shutdown", text, re.I), "the broker log must say there was no clean shutdown"
    assert any(f"{topic}-0" in l and "recover" in l.lower() for l in text.splitlines()), \
        "the broker log must say it recovered the partition's segments"

    # the broker appends at the recovered end
    end = len(records)
    p = produce(b, topic, v2_batch([b"after-restart"]))
    assert (p.error_code, p.base_offset) == (NONE, end)


# ---- (b) corrupted active segment --------------------------------------------------------------------------------

BATCHES = 20
PER_BATCH = 5


def fill(cluster, topic: str):
    """20 batches of 5 records, batch i stamped ts0 + i seconds; returns (broker, timestamps, entries, log path)."""
    b = cluster.brokers[1]
    create_topic(cluster, topic)
    wait_leader(b, topic)
    ts0 = int(time.time() * 1000) - 3_600_000
    stamps = []
    for i in range(BATCHES):
        stamps.append(ts0 + i * 1000)
        values = [b"%s-%03d-%d-" % (topic.encode(), i, j) + b"p" * 40 for j in range(PER_BATCH)]
        p = produce(b, topic, v2_batch(values, timestamp=stamps[-1]))
        assert (p.error_code, p.base_offset) == (NONE, i * PER_BATCH)
    path = os.path.join(partition_dir(b, topic), f"{FIRST_SEGMENT}.log")
    return b, stamps, path


def check_recovered_to(broker, topic: str, end: int, stamps, path: str, file_size: int) -> None:
    """After recovery: the file is cut at file_size, offsets [0, end) are readable (from every batch start,
    through the rebuilt index), the ones after are gone, time lookups see only what is left."""
    assert os.path.getsize(path) == file_size
    assert latest_offset(broker, topic) == end
    records = fetch_all(broker, topic)
    assert [o for o, _ in records] == list(range(end))
    for base in range(0, end, PER_BATCH):
        error, _, data = fetch(broker, topic, base + 2)
        assert error == NONE and decode_records(data)[0][0] == base, f"fetch at {base + 2} through the index"
    assert fetch(broker, topic, end)[:2] == (NONE, end)               # the end: nothing to read
    assert fetch(broker, topic, end + 1)[0] == OFFSET_OUT_OF_RANGE    # the truncated offsets are gone
    kept = end // PER_BATCH
    for i in range(BATCHES):
        [(_, p)] = list_offsets(broker, [(topic, 0, stamps[i], -1)])
        expected = i * PER_BATCH if i < kept else -1
        assert (p.error_code, p.offset) == (NONE, expected), f"ListOffsets for the timestamp of batch {i}: {p}"
    bases = check_segments(partition_dir(broker, topic))
    assert bases[0][1] >= 3, f"the rebuilt offset index should have entries (index interval 512 bytes): {bases}"
    p = produce(broker, topic, v2_batch([b"next"]))
    assert (p.error_code, p.base_offset) == (NONE, end), "the next produce must continue at the truncated end"


@pytest.mark.parametrize("garbage", ["random", "zeros"])
def test_garbage_appended_to_the_active_segment_is_truncated(cluster_factory, garbage):
    c = cluster_factory(1, **BROKER_PROPS)
    topic = f"garbage-{garbage}"
    b, stamps, path = fill(c, topic)
    stop_cleanly_and_force_recovery(b)
    size = os.path.getsize(path)
    extra = random.Random(42).randbytes(200) if garbage == "random" else bytes(4096)
    with open(path, "ab") as f:
        f.write(extra)
    mark = restart(c, b, topic)
    check_recovered_to(b, topic, BATCHES * PER_BATCH, stamps, path, size)
    assert_truncation_logged(log_since(b, mark), topic, len(extra), size)


def test_segment_cut_in_the_middle_of_the_last_batch(cluster_factory):
    """Also deletes the offset and time indexes: recovery must build them again."""
    c = cluster_factory(1, **BROKER_PROPS)
    topic = "torn"
    b, stamps, path = fill(c, topic)
    stop_cleanly_and_force_recovery(b)
    _, entries = entries_of(path)
    last = entries[-1]
    cut = last.position + last.size // 2
    os.truncate(path, cut)
    for suffix in (".index", ".timeindex"):
        os.unlink(path[:-4] + suffix)
    mark = restart(c, b, topic)
    check_recovered_to(b, topic, (BATCHES - 1) * PER_BATCH, stamps, path, last.position)
    assert_truncation_logged(log_since(b, mark), topic, cut - last.position, last.position)


def test_flipped_byte_in_the_middle_batch(cluster_factory):
    """A CRC mismatch in batch 10 of 20: everything from batch 10 on goes (the indexes still hold entries for
    the lost batches, which must not survive)."""
    c = cluster_factory(1, **BROKER_PROPS)
    topic = "flipped"
    b, stamps, path = fill(c, topic)
    stop_cleanly_and_force_recovery(b)
    size = os.path.getsize(path)
    _, entries = entries_of(path)
    middle = entries[BATCHES // 2]
    with open(path, "r+b") as f:
        f.seek(middle.position + middle.size // 2)
        byte = f.read(1)
        f.seek(middle.position + middle.size // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    mark = restart(c, b, topic)
    check_recovered_to(b, topic, BATCHES // 2 * PER_BATCH, stamps, path, middle.position)
    assert_truncation_logged(log_since(b, mark), topic, size - middle.position, middle.position)


@pytest.mark.parametrize("damage", ["missing-index", "torn-index", "torn-timeindex"])
def test_damaged_index_after_a_clean_shutdown_is_rebuilt(cluster_factory, damage):
    """With the marker (no recovery), an index that is missing or not a whole number of entries (Kafka's
    sanity check) is rebuilt, and nothing is truncated."""
    c = cluster_factory(1, **BROKER_PROPS)
    topic = f"index-{damage}"
    b, stamps, path = fill(c, topic)
    assert b.terminate() == 0
    size = os.path.getsize(path)
    if damage == "missing-index":
        os.unlink(path[:-4] + ".index")
    else:
        with open(path[:-4] + (".index" if damage == "torn-index" else ".timeindex"), "ab") as f:
            f.write(b"\x07\x07\x07")
    mark = restart(c, b, topic)
    check_recovered_to(b, topic, BATCHES * PER_BATCH, stamps, path, size)
    assert "no clean shutdown" not in log_since(b, mark)


# ---- (c) idempotent producer state across restarts ---------------------------------------------------------------

def idempotent_sender(c, b, topic: str):
    """send(seq, values) -> Produce response: one idempotent batch to partition 0 of a new topic led by b,
    under a producer id b hands out."""
    create_topic(c, topic)
    wait_leader(b, topic)
    pid, epoch = init_producer_id(b)

    def send(seq, values):
        return produce(b, topic, v2_batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq))
    return send


@pytest.mark.parametrize("how", ["sigterm", "kill9"])
def test_producer_state_survives_restart(cluster_factory, how):
    c = cluster_factory(1, **BROKER_PROPS)
    b, topic = c.brokers[1], f"idem-{how}"
    send = idempotent_sender(c, b, topic)
    assert (send(0, [b"a0", b"a1", b"a2"]).base_offset, send(3, [b"b3", b"b4"]).base_offset) == (0, 3)
    if how == "sigterm":
        assert b.terminate() == 0
        snapshots = [n for n in os.listdir(partition_dir(b, topic)) if n.endswith(".snapshot")]
        assert snapshots == ["00000000000000000005.snapshot"], snapshots
    else:
        b.kill9()
        wait_gone(c, 1)
    restart(c, b, topic)

    dup = send(3, [b"b3", b"b4"])                          # the producer's retry of its last batch
    assert (dup.error_code, dup.base_offset) == (NONE, 3), f"duplicate not recognised after restart: {dup}"
    assert latest_offset(b, topic) == 5
    gap = send(6, [b"gap"])
    assert (gap.error_code, gap.base_offset) == (OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
    nxt = send(5, [b"c5"])
    assert (nxt.error_code, nxt.base_offset) == (NONE, 5)
    assert [v for _, v in fetch_all(b, topic)] == [b"a0", b"a1", b"a2", b"b3", b"b4", b"c5"]


def test_producer_state_forgets_batches_lost_to_truncation(cluster_factory):
    """The clean stop snapshots the producer state at offset 5, then recovery cuts the log back to 3: the
    snapshot is from the future and must not be used. The producer's retry of the lost batch is appended
    again (it is not a duplicate of anything in the log)."""
    c = cluster_factory(1, **BROKER_PROPS)
    b, topic = c.brokers[1], "idem-torn"
    send = idempotent_sender(c, b, topic)
    assert (send(0, [b"a0", b"a1", b"a2"]).base_offset, send(3, [b"b3", b"b4"]).base_offset) == (0, 3)
    stop_cleanly_and_force_recovery(b)
    path = os.path.join(partition_dir(b, topic), f"{FIRST_SEGMENT}.log")
    _, entries = entries_of(path)
    os.truncate(path, entries[-1].position + 20)
    restart(c, b, topic)
    assert latest_offset(b, topic) == 3
    retry = send(3, [b"b3", b"b4"])
    assert (retry.error_code, retry.base_offset) == (NONE, 3)
    assert [v for _, v in fetch_all(b, topic)] == [b"a0", b"a1", b"a2", b"b3", b"b4"], \
        "the retry of a batch lost in recovery was answered as a duplicate but not written"
    assert send(5, [b"c5"]).base_offset == 5


def test_corruption_in_an_older_segment_drops_the_segments_after_it(cluster_factory):
    """Without a recovery-point checkpoint every segment is recovered; a CRC mismatch in the second segment
    truncates it there and deletes every later segment (Kafka's Log.recoverLog)."""
    c = cluster_factory(1, **BROKER_PROPS, **{"log.segment.bytes": 2048})
    topic = "segments"
    b, stamps, _ = fill(c, topic)
    pdir = partition_dir(b, topic)
    bases = segment_bases(pdir)
    assert len(bases) >= 4, bases
    stop_cleanly_and_force_recovery(b)
    os.unlink(os.path.join(b.dir, "data", "recovery-point-offset-checkpoint"))
    victim = os.path.join(pdir, f"{bases[1]:020d}.log")
    _, entries = entries_of(victim)
    bad = entries[1]
    with open(victim, "r+b") as f:
        f.seek(bad.position + bad.size - 3)
        byte = f.read(1)
        f.seek(bad.position + bad.size - 3)
        f.write(bytes([byte[0] ^ 0x01]))
    mark = restart(c, b, topic)
    end = bad.base_offset
    assert segment_bases(pdir) == bases[:2], "the segments after the corrupt one must be deleted"
    assert os.path.getsize(victim) == bad.position
    assert latest_offset(b, topic) == end
    assert [o for o, _ in fetch_all(b, topic)] == list(range(end))
    assert fetch(b, topic, end + 1)[0] == OFFSET_OUT_OF_RANGE
    check_segments(pdir)
    text = log_since(b, mark)
    assert any(f"{topic}-0" in l and "delet" in l.lower() and str(bases[2]) in l for l in text.splitlines()), \
        "the broker log must say which segments recovery deleted"
    p = produce(b, topic, v2_batch([b"next"]))
    assert (p.error_code, p.base_offset) == (NONE, end)
