"""kadmin's everyday tools (produce, consume, get-offsets, delete-records, log-dirs) against a real broker, with
confluent-kafka on the other side: what `kadmin produce` writes a real consumer reads (keys, headers, partitions,
compression), what a real producer writes `kadmin consume` prints in the console consumer's format, the offsets
printed as GetOffsetShell prints them, low watermarks after delete-records, kafka-log-dirs' JSON; and the bad
input: unknown topics and partitions, offsets out of range, a malformed JSON file, undecodable and hostile bytes."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from admin_cli.main import cli
from tests.clients._util import create_topic, unique

BASE_TS = 1_600_000_000_000


def kadmin(cluster, *args, input=None):
    return CliRunner().invoke(cli, ["--bootstrap-server", cluster.bootstrap, "--request-timeout", "15"]
                              + [str(a) for a in args], input=input, catch_exceptions=False)


def ok(result) -> str:
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    return result.stdout


def refused(result, code: int, words: str) -> None:
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    assert words in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def ck_consume(cluster, topic: str, n: int) -> list:
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": unique("g"), "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    out = []
    try:
        for _ in range(60):
            for m in c.consume(n - len(out), timeout=0.5):
                assert m.error() is None, m.error()
                out.append(m)
            if len(out) >= n:
                break
    finally:
        c.close()
    return out


def ck_produce(cluster, topic: str, messages: list[dict]) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5})
    for m in messages:
        p.produce(topic, **m)
    assert p.flush(20) == 0


@pytest.fixture
def broker(cluster_factory):
    return cluster_factory(1, **{"offsets.topic.num.partitions": 1, "offsets.topic.replication.factor": 1,
                                 "group.initial.rebalance.delay.ms": 0,
                                 "transaction.state.log.num.partitions": 1,
                                 "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1})


def test_produce_is_read_by_a_real_consumer(broker):
    topic = create_topic(broker, unique("prod"), partitions=3)
    lines = "k1:v1\nk2:v2\nk1:v3\n"
    r = kadmin(broker, "produce", topic, "--property", "parse.key=true", "--property", "key.separator=:",
               "--compression", "gzip", input=lines)
    ok(r)
    assert r.stderr.strip() == f"Produced 3 records to {topic}"
    got = ck_consume(broker, topic, 3)
    assert sorted((m.key(), m.value()) for m in got) == [(b"k1", b"v1"), (b"k1", b"v3"), (b"k2", b"v2")]
    # murmur2 partitioning, as Kafka's default partitioner: equal keys land together
    assert len({m.partition() for m in got if m.key() == b"k1"}) == 1
    # headers (KIP-798 syntax), a fixed partition, hex values
    ok(kadmin(broker, "produce", topic, "--partition", "2", "--property", "parse.headers=true", "--property",
              "parse.key=true", "--format", "hex", input="h1:a,h2:b\tkey\t00ff3c\n"))
    m = next(m for m in ck_consume(broker, topic, 4) if m.key() == b"key")
    assert (m.partition(), m.value(), m.headers()) == (2, b"\x00\xff<", [("h1", b"a"), ("h2", b"b")])


def test_produce_bad_input(broker):
    topic = create_topic(broker, unique("bad"))
    refused(kadmin(broker, "produce", unique("missing"), input="x\n"), 1, "does not exist")
    refused(kadmin(broker, "produce", topic, "--partition", "5", input="x\n"), 1, "has no partition 5")
    r = kadmin(broker, "produce", topic, "--property", "parse.key=true", input="a\tb\nno-separator\n")
    refused(r, 2, "No key found on line 2: no-separator")
    assert f"Produced 1 records to {topic}" in r.stderr      # the line before the bad one is written
    refused(kadmin(broker, "produce", topic, "--format", "json", input="{not json\n"), 2, "line 1 is not valid json")
    refused(kadmin(broker, "produce", topic, "--format", "hex", input="zz\n"), 2, "line 1 is not valid hex")
    r = CliRunner().invoke(cli, ["--zookeeper", broker.zk_connect, "produce", topic], input="x\n")
    refused(r, 2, "this command needs --bootstrap-server")


def test_consume_prints_as_the_console_consumer(broker):
    topic = create_topic(broker, unique("cons"))
    ck_produce(broker, topic, [
        {"key": b"k0", "value": b"plain", "timestamp": BASE_TS, "headers": [("h", b"x"), ("n", None)]},
        {"key": None, "value": b"<script>alert(1)</script>", "timestamp": BASE_TS + 1},
        {"key": b"\xff\xfe", "value": b"\x1b[31mred\x00", "timestamp": BASE_TS + 2},
        {"key": b"j", "value": b'{"a": [1, 2]}', "timestamp": BASE_TS + 3}])
    r = kadmin(broker, "consume", topic, "--from-beginning", "--max-messages", "4", "--property", "print.key=true",
               "--property", "print.timestamp=true", "--property", "print.offset=true", "--property",
               "print.partition=true", "--property", "print.headers=true")
    assert ok(r).splitlines() == [
        f"CreateTime:{BASE_TS}\tPartition:0\tOffset:0\th:x,n:null\tk0\tplain",
        f"CreateTime:{BASE_TS + 1}\tPartition:0\tOffset:1\tNO_HEADERS\tnull\t<script>alert(1)</script>",
        f"CreateTime:{BASE_TS + 2}\tPartition:0\tOffset:2\tNO_HEADERS\t\\xff\\xfe\t\\x1b[31mred\\x00",
        f"CreateTime:{BASE_TS + 3}\tPartition:0\tOffset:3\tNO_HEADERS\tj\t{{\"a\": [1, 2]}}"]
    assert r.stderr.strip() == "Processed a total of 4 messages"
    # value only by default; hex; a start offset on a partition; a custom separator
    assert ok(kadmin(broker, "consume", topic, "--partition", "0", "--offset", "3", "--max-messages", "1",
                     "--format", "hex", "--property", "print.key=true", "--property", "key.separator=|")
              ).splitlines() == ["6a|" + b'{"a": [1, 2]}'.hex()]
    # --timestamp starts at the first record at or after it; --timeout-ms ends when nothing more comes
    r = kadmin(broker, "consume", topic, "--timestamp", BASE_TS + 1, "--timeout-ms", "1500", "--property",
               "print.key=true", "--property", "null.literal=NULL", "--property", "line.separator=;")
    assert ok(r) == 'NULL\t<script>alert(1)</script>;\\xff\\xfe\t\\x1b[31mred\\x00;j\t{"a": [1, 2]};'
    assert r.stderr.strip() == "Processed a total of 3 messages"


def test_consume_group_commits_and_resumes(broker):
    topic = create_topic(broker, unique("grp"), partitions=2)
    ck_produce(broker, topic, [{"value": f"v{i}".encode(), "partition": i % 2} for i in range(6)])
    group = unique("g")
    first = ok(kadmin(broker, "consume", topic, "--group", group, "--from-beginning", "--max-messages", "4"))
    rest = ok(kadmin(broker, "consume", topic, "--group", group, "--timeout-ms", "1500"))
    assert sorted(first.splitlines() + rest.splitlines()) == [f"v{i}" for i in range(6)]
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        committed = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
    finally:
        c.close()
    assert [tp.offset for tp in committed] == [3, 3]


def test_consume_bad_input(broker):
    topic = create_topic(broker, unique("cbad"))
    ck_produce(broker, topic, [{"value": b"a"}])
    refused(kadmin(broker, "consume", unique("missing"), "--max-messages", "1"), 1, "does not exist")
    refused(kadmin(broker, "consume", topic, "--partition", "0", "--offset", "99", "--max-messages", "1"), 1,
            "Offset 99 is out of range for")
    refused(kadmin(broker, "consume", topic, "--offset", "1"), 2, "--offset needs --partition")
    refused(kadmin(broker, "consume", topic, "--partition", "0", "--offset", "abc"), 2, "is not a number")
    refused(kadmin(broker, "consume", topic, "--partition", "3", "--max-messages", "1"), 1, "has no partition 3")


def test_read_committed_skips_aborted_transactions(broker):
    from confluent_kafka import Producer
    topic = create_topic(broker, unique("txn"))
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": unique("t")})
    p.init_transactions(20)
    for value, commit in ((b"committed-1", True), (b"aborted", False), (b"committed-2", True)):
        p.begin_transaction()
        p.produce(topic, value=value)
        assert p.flush(20) == 0                     # written before the abort (which drops what is unsent)
        p.commit_transaction(20) if commit else p.abort_transaction(20)
    assert ok(kadmin(broker, "consume", topic, "--from-beginning", "--isolation-level", "read_committed",
                     "--timeout-ms", "1500")).splitlines() == ["committed-1", "committed-2"]
    assert ok(kadmin(broker, "consume", topic, "--from-beginning", "--timeout-ms", "1500")
              ).splitlines() == ["committed-1", "aborted", "committed-2"]


def test_get_offsets_and_delete_records(broker, tmp_path):
    topic = create_topic(broker, unique("off"), partitions=2)
    ck_produce(broker, topic, [{"value": b"x", "partition": i % 2, "timestamp": BASE_TS + i} for i in range(10)])
    assert ok(kadmin(broker, "get-offsets", "--topic", topic)).splitlines() == [f"{topic}:0:5", f"{topic}:1:5"]
    assert ok(kadmin(broker, "get-offsets", "--topic", topic, "--time", "-2", "--partitions", "1")
              ).splitlines() == [f"{topic}:1:0"]
    # by time: partition 0 holds BASE_TS+0,2,4,..., partition 1 BASE_TS+1,3,...: the first records at or after
    # BASE_TS+3 are offsets 2 and 1; none after the end
    assert ok(kadmin(broker, "get-offsets", "--topic", topic, "--time", BASE_TS + 3)
              ).splitlines() == [f"{topic}:0:2", f"{topic}:1:1"]
    assert ok(kadmin(broker, "get-offsets", "--topic", topic, "--time", BASE_TS + 100, "--partitions", "0")
              ).splitlines() == [f"{topic}:0:"]

    assert ok(kadmin(broker, "delete-records", "--topic", topic, "--partition", "0", "--offset", "3")
              ).splitlines() == ["Executing records delete operation", "Records delete operation completed:",
                                 f"partition: {topic}-0\tlow_watermark: 3"]
    f = tmp_path / "offsets.json"
    f.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 1, "offset": -1}], "version": 1}))
    assert ok(kadmin(broker, "delete-records", "--offset-json-file", f)).splitlines()[-1] == \
        f"partition: {topic}-1\tlow_watermark: 5"
    assert ok(kadmin(broker, "get-offsets", "--topic", topic, "--time", "-2")
              ).splitlines() == [f"{topic}:0:3", f"{topic}:1:5"]
    assert ok(kadmin(broker, "consume", topic, "--from-beginning", "--property", "print.offset=true",
                     "--timeout-ms", "1500", "--partition", "0")).splitlines()[0] == "Offset:3\tx"

    # bad input
    r = kadmin(broker, "delete-records", "--topic", topic, "--partition", "0", "--offset", "99")
    assert r.exit_code == 1 and r.stdout.splitlines()[-1].startswith(f"partition: {topic}-0\terror: OFFSET_OUT_OF_RANGE")
    r = kadmin(broker, "delete-records", "--topic", unique("missing"), "--partition", "0", "--offset", "1")
    assert r.exit_code == 1 and "error: UNKNOWN_TOPIC_OR_PARTITION" in r.stdout
    f.write_text('{"partitions": [{"topic": "t"}]')
    refused(kadmin(broker, "delete-records", "--offset-json-file", f), 2, "is not a valid offset JSON file")
    f.write_text('{"partitions": [{"topic": "t", "partition": "x", "offset": 1}]}')
    refused(kadmin(broker, "delete-records", "--offset-json-file", f), 2, "is not a valid offset JSON file")
    refused(kadmin(broker, "delete-records", "--offset-json-file", tmp_path / "none.json"), 2, "cannot read")
    refused(kadmin(broker, "get-offsets", "--topic", unique("missing")), 1, "does not exist")
    refused(kadmin(broker, "get-offsets", "--topic", topic, "--partitions", "7"), 1,
            f"Topic {topic} does not have any of the requested partitions 7")
    r = kadmin(broker, "get-offsets", "--topic", topic, "--partitions", "1,7")
    assert (r.exit_code, r.stdout, r.stderr) == (0, f"{topic}:1:5\n", "Error: partition 7 does not exist\n")
    f.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 0, "offset": 1}] * 2, "version": 1}))
    refused(kadmin(broker, "delete-records", "--offset-json-file", f), 1,
            f"Offset json file contains duplicate topic partitions: {topic}-0")
    f.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 0, "offset": 1}], "version": 2}))
    refused(kadmin(broker, "delete-records", "--offset-json-file", f), 2, "Not supported version field value 2")
    refused(kadmin(broker, "get-offsets", "--topic", topic, "--time", "-5"), 2, "is not -1, -2 or a timestamp")


def test_log_dirs_prints_kafkas_json(broker):
    topic = create_topic(broker, unique("dirs"), partitions=2)
    ck_produce(broker, topic, [{"value": b"x" * 100, "partition": 0}])
    r = kadmin(broker, "log-dirs", "--topic-list", topic)
    lines = ok(r).splitlines()
    assert lines[:2] == ["Querying brokers for log directories information",
                         "Received log directory information from brokers 1"]
    doc = json.loads(lines[2])
    assert doc["version"] == 1 and [b["broker"] for b in doc["brokers"]] == [1]
    (log_dir,) = doc["brokers"][0]["logDirs"]
    assert log_dir["error"] is None
    parts = {p["partition"]: p for p in log_dir["partitions"]}
    assert set(parts) == {f"{topic}-0", f"{topic}-1"}
    assert parts[f"{topic}-0"]["size"] > 100 and parts[f"{topic}-1"]["size"] == 0
    assert parts[f"{topic}-0"]["offsetLag"] == 0 and parts[f"{topic}-0"]["isFuture"] is False
    refused(kadmin(broker, "log-dirs", "--broker-list", "1,9"), 1, "The given brokers do not exist from --broker-list: 9")


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_both_ways(broker):
    topic = create_topic(broker, unique("kcat"))
    ok(kadmin(broker, "produce", topic, "--property", "parse.headers=true", "--property", "parse.key=true",
              input="trace:abc,src:web\tcarol\thello\n"))
    out = subprocess.run(["kcat", "-b", broker.bootstrap, "-C", "-t", topic, "-e", "-q", "-f", "%k|%h|%s\\n"],
                         capture_output=True, text=True, timeout=30, check=False)
    assert out.stdout == "carol|trace=abc,src=web|hello\n", out
    out = subprocess.run(["kcat", "-b", broker.bootstrap, "-P", "-t", topic, "-K", ":", "-H", "h=1"],
                         input="dave:bye\n", capture_output=True, text=True, timeout=30, check=False)
    assert out.returncode == 0, out
    assert ok(kadmin(broker, "consume", topic, "--partition", "0", "--offset", "1", "--max-messages", "1",
                     "--property", "print.key=true", "--property", "print.headers=true")
              ).splitlines() == ["h:1\tdave\tbye"]


def test_legacy_message_format_topic(broker):
    """A topic stored as magic 1 (message.format.version=0.10.2): kadmin's v2 batches are converted by the broker,
    consume reads the v1 messages back (gzip-compressed wrappers included)."""
    topic = create_topic(broker, unique("v1"), configs={"message.format.version": "0.10.2"})
    ok(kadmin(broker, "produce", topic, "--compression", "gzip", "--property", "parse.key=true", input="a\t1\nb\t2\n"))
    ok(kadmin(broker, "produce", topic, "--property", "parse.key=true", input="c\t3\n"))
    assert ok(kadmin(broker, "consume", topic, "--from-beginning", "--max-messages", "3", "--property",
                     "print.key=true", "--property", "print.offset=true")
              ).splitlines() == ["Offset:0\ta\t1", "Offset:1\tb\t2", "Offset:2\tc\t3"]
    assert [m.value() for m in ck_consume(broker, topic, 3)] == [b"1", b"2", b"3"]


def test_secured_cluster_through_command_config(cluster_factory, tmp_path):
    cluster = cluster_factory(1, security="sasl_ssl")
    props = tmp_path / "client.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in cluster.client_properties.items()))
    topic = unique("sec")

    def secured(*args, input=None):
        return CliRunner().invoke(cli, ["--bootstrap-server", cluster.bootstrap, "--command-config", str(props)]
                                  + [str(a) for a in args], input=input, catch_exceptions=False)
    ok(secured("create-topic", topic, "--partitions", "1", "--replication-factor", "1", "--wait"))
    ok(secured("produce", topic, input="over tls\n"))
    assert ok(secured("consume", topic, "--from-beginning", "--max-messages", "1")) == "over tls\n"
    assert ok(secured("get-offsets", "--topic", topic)) == f"{topic}:0:1\n"


def test_json_format_both_ways(broker):
    """--format json: produce checks and compacts each line; consume re-prints values that parse with spaces
    after separators, and leaves others as text; a C1 control character (CSI) inside a JSON string is still
    escaped before it reaches the terminal."""
    topic = create_topic(broker, unique("json"))
    ok(kadmin(broker, "produce", topic, "--format", "json", input='{ "a" : 1, "csi": "\\u009b2J" }\n'))
    ck_produce(broker, topic, [{"value": b"not json"}])
    assert [m.value() for m in ck_consume(broker, topic, 2)] == [b'{"a":1,"csi":"\\u009b2J"}', b"not json"]
    assert ok(kadmin(broker, "consume", topic, "--from-beginning", "--max-messages", "2", "--format", "json")
              ).splitlines() == ['{"a": 1, "csi": "\\x9b2J"}', "not json"]
