"""File descriptors per partition replica (issue 28): a segment's `.log` is opened at its first read or write, so
an idle partition holds no fd, before and after a kill -9 and its recovery, and its data is still served."""
from __future__ import annotations

import os

from tests.integration.test_crash_recovery import restart, wait_gone
from tests.integration.test_produce_fetch_bad_input import (NONE, create_topic, decode_records, fetch, produce,
                                                            v2_batch, wait_leader)

TOPIC = "idle"
PARTITIONS = 40


def open_partition_files(broker) -> dict[str, int]:
    """{partition directory name: segment files (.log, .index, .timeindex) of TOPIC the broker has open}."""
    data = os.path.join(broker.dir, "data")
    out: dict[str, int] = {}
    for fd in os.listdir(f"/proc/{broker.pid}/fd"):
        try:
            target = os.readlink(f"/proc/{broker.pid}/fd/{fd}")
        except FileNotFoundError:
            continue
        parent, name = os.path.split(target)
        if os.path.dirname(parent) == data and os.path.basename(parent).startswith(f"{TOPIC}-"):
            out[os.path.basename(parent)] = out.get(os.path.basename(parent), 0) + 1
    return out


def test_idle_partitions_hold_no_fd_before_and_after_a_kill9(cluster_factory):
    c = cluster_factory(1, **{"zookeeper.session.timeout.ms": 3000})
    b = c.brokers[1]
    create_topic(c, TOPIC, "--partitions", str(PARTITIONS), "--replication-factor", "1")
    wait_leader(b, TOPIC, range(PARTITIONS))
    assert open_partition_files(b) == {}, "an empty partition must not hold a file open"

    assert produce(b, TOPIC, v2_batch([b"kept"]), partition=7).error_code == NONE
    assert set(open_partition_files(b)) == {f"{TOPIC}-7"}, "only the partition written to opens its files"

    b.kill9()
    wait_gone(c, b.id)
    restart(c, b, TOPIC)
    wait_leader(b, TOPIC, (7,))
    assert open_partition_files(b) == {}, "recovery after kill -9 must not leave the partitions' files open"

    error, _, records = fetch(b, TOPIC, 0, partition=7)
    assert error == NONE and decode_records(records) == [(0, b"kept")]
    assert set(open_partition_files(b)) == {f"{TOPIC}-7"}
