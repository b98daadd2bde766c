"""Concurrent producers to one partition whose batches are written off the hub (kbroker.log.log's
OFF_HUB_WRITE_BYTES): offsets stay contiguous and each connection's batches land in the order acknowledged, at
the offsets acknowledged; a fetch running meanwhile never gets bytes beyond the high watermark or a partial
batch; the follower's copy (also written off the hub) is byte for byte the leader's."""
from __future__ import annotations

import os
import struct
import threading

from kbroker.log.log import OFF_HUB_WRITE_BYTES
from tests.integration.conftest import wait_until
from tests.integration.test_produce_fetch_bad_input import (NONE, client_for, create_topic, decode_records,
                                                            fetch_request, produce_request, v2_batch, v2_crc_ok,
                                                            wait_leader)

TOPIC = "concurrent"
PRODUCERS, BATCHES, RECORDS = 4, 5, 270


def batches_of(data: bytes) -> list[bytes]:
    """The whole v2 batches in fetched bytes, asserting there is no partial one at the end."""
    out, pos = [], 0
    while pos < len(data):
        assert len(data) - pos >= 12, "partial batch header"
        (length,) = struct.unpack_from(">i", data, pos + 8)
        assert pos + 12 + length <= len(data), "partial batch"
        out.append(data[pos:pos + 12 + length])
        pos += 12 + length
    return out


def fetch_all(broker) -> tuple[int, bytes]:
    c = client_for(broker)
    try:
        [t] = c.send(fetch_request(TOPIC, 0, 0)).responses
    finally:
        c.close()
    [p] = t.partitions
    assert p.error_code == NONE
    return p.high_watermark, bytes(p.records or b"")


def test_concurrent_large_appends_land_in_order_and_fetches_never_see_partial_bytes(cluster_factory):
    cluster = cluster_factory(2)
    leader = cluster.brokers[1]
    create_topic(cluster, TOPIC, "--replica-assignment", "1:2")
    wait_leader(leader, TOPIC)
    acked: dict[int, list[int]] = {p: [] for p in range(PRODUCERS)}
    errors: list = []
    done = threading.Event()

    def produce(p: int) -> None:
        c = client_for(leader)
        try:
            for b in range(BATCHES):
                batch = v2_batch([b"%d-%d-%d-" % (p, b, i) + b"v" * 1000 for i in range(RECORDS)])
                assert len(batch) >= OFF_HUB_WRITE_BYTES
                [t] = c.send(produce_request(TOPIC, 0, batch, 8, acks=-1)).responses
                [r] = t.partition_responses
                assert r.error_code == NONE, r
                acked[p].append(r.base_offset)
        except Exception as e:   # reported by the main thread
            errors.append(e)
        finally:
            c.close()

    def watch() -> None:
        try:
            while not done.is_set():
                hw, data = fetch_all(leader)
                batches = batches_of(data)
                assert all(v2_crc_ok(b) for b in batches)
                assert all(offset < hw for offset, _ in decode_records(data))
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(PRODUCERS)]
    watcher = threading.Thread(target=watch)
    watcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    done.set()
    watcher.join(60)
    assert errors == []

    total = PRODUCERS * BATCHES * RECORDS
    hw, data = fetch_all(leader)
    records = decode_records(data)
    assert hw == total and [o for o, _ in records] == list(range(total))
    by_offset = dict(records)
    for p, bases in acked.items():
        assert bases == sorted(bases)
        for b, base in enumerate(bases):
            assert by_offset[base] == b"%d-%d-0-" % (p, b) + b"v" * 1000
    segment = os.path.join(cluster.workdir, "broker-2", "data", f"{TOPIC}-0", "%020d.log" % 0)

    def follower_copy() -> bytes:
        with open(segment, "rb") as f:
            return f.read(len(data) + 1)
    wait_until(lambda: follower_copy() == data, 20, message="the follower's copy")
