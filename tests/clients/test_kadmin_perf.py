"""`kadmin perf produce|consume` against a real broker: the records it says it sent are in the topic (kcat-free:
confluent-kafka reads them back), and the consumer's figures count what it read, in the perf tools' formats."""
from __future__ import annotations

import re

from click.testing import CliRunner

from admin_cli.main import cli
from tests.clients._util import ck_consume, create_topic, unique

PRODUCE_FINAL = re.compile(r"^(\d+) records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
                           r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.$")
CONSUME_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}, \d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}, "
                          r"([\d.]+), [\d.]+, (\d+), [\d.]+, 0, \d+, [\d.]+, [\d.]+$")


def kadmin(bootstrap, *args):
    r = CliRunner().invoke(cli, ["--bootstrap-server", bootstrap, "perf", *args], catch_exceptions=False)
    assert "Traceback" not in r.stderr
    return r


def test_produce_then_consume_counts(cluster1m):
    topic = create_topic(cluster1m, unique("perf"), partitions=2)
    r = kadmin(cluster1m.bootstrap, "produce", "--topic", topic, "--num-records", "500", "--record-size", "100",
               "--throughput", "-1", "--producer-props", "acks=all", "--producer-props", "batch.size=4000")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    final = r.stdout.splitlines()[-1]
    assert PRODUCE_FINAL.match(final).group(1) == "500", final
    # 40 records a batch, the partitions in turn: 13 batches, 7 to partition 0 (6 of 40, one of 20)
    values = [m.value() for m in ck_consume(cluster1m.bootstrap, topic, 260, partition=0)]
    assert len(values) == 260 and all(len(v) == 100 and v.isupper() for v in values)

    r = kadmin(cluster1m.bootstrap, "consume", "--topic", topic, "--messages", "500")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    header, line = r.stdout.splitlines()
    assert header.startswith("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg")
    mb, count = CONSUME_LINE.match(line).groups()
    assert (count, mb) == ("500", f"{500 * 100 / 1024 / 1024:.4f}")


def test_consume_stops_after_timeout_with_fewer_messages(cluster1m):
    topic = create_topic(cluster1m, unique("perf-short"))
    assert kadmin(cluster1m.bootstrap, "produce", "--topic", topic, "--num-records", "10", "--record-size", "10",
                  "--throughput", "100").exit_code == 0
    r = kadmin(cluster1m.bootstrap, "consume", "--topic", topic, "--messages", "50", "--timeout", "1000")
    assert r.exit_code == 0
    header, warning, line = r.stdout.splitlines()
    assert header.startswith("start.time, end.time,") and CONSUME_LINE.match(line).group(2) == "10"
    assert warning.startswith("WARNING: Exiting before consuming the expected number of messages: timeout (1000 ms)")


def test_bad_producer_props_and_unknown_topic(cluster1m):
    r = kadmin(cluster1m.bootstrap, "produce", "--topic", "x", "--num-records", "1", "--record-size", "1",
               "--throughput", "-1", "--producer-props", "acks=2")
    assert r.exit_code == 2 and "acks=2" in r.stderr
    r = kadmin(cluster1m.bootstrap, "consume", "--topic", unique("missing"), "--messages", "1")
    assert r.exit_code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in r.stderr
