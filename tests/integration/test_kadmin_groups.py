"""`kadmin groups list|describe|reset-offsets|delete` against real brokers and a real kafka-python consumer group:
what it prints (kafka-consumer-groups.sh's columns and messages), the exact committed offsets, log end offsets
and lag, the refusals while the group is active, offsets committed by reset-offsets that a new member then
starts from, deletion; and its usage errors. Every expected number is computed by the test from what it
produced and committed, and checked against kafka-python's own view (end_offsets, offsets_for_times,
committed), never against kadmin itself."""
from __future__ import annotations

import json
import re
import time

from click.testing import CliRunner

from admin_cli.groups import parse_datetime, parse_duration
from admin_cli.main import cli
from tests.clients._util import create_topic, unique

BROKER_CONFIG = {"offsets.topic.num.partitions": 3, "offsets.topic.replication.factor": 1,
                 "group.initial.rebalance.delay.ms": 0}
BASE_TS = 1_600_000_000_000            # 2020-09-13T12:26:40.000Z; record i of a partition gets BASE_TS + i s
PRODUCED = {0: 10, 1: 12, 2: 8}        # records per partition
PROCESSED = {0: 4, 1: 12}              # records the group processes and commits (partition 2: none)
HEADER = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
          "CLIENT-ID"]


def kadmin(*args, bootstrap=None, zookeeper=None, output="table"):
    opts = (["--bootstrap-server", bootstrap] if bootstrap else []) + (["--zookeeper", zookeeper] if zookeeper else [])
    return CliRunner().invoke(cli, opts + ["--output", output] + [str(a) for a in args], catch_exceptions=False)


def ok(result) -> str:
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    return result.stdout


def one_error(result, message: str, code: int = 1) -> None:
    assert (result.exit_code, result.stdout) == (code, ""), (result.exit_code, result.stdout, result.stderr)
    assert result.stderr.splitlines() == [f"Error: {message}"], result.stderr


def table(stdout: str) -> list[list[str]]:
    """kafka-consumer-groups' layout: a blank line, then the header and rows, columns split on blanks."""
    lines = stdout.splitlines()
    assert lines[0] == "", stdout
    return [line.split() for line in lines[1:]]


def describe_rows(stdout: str) -> dict[int, dict[str, str]]:
    rows = table(stdout)
    assert rows[0] == HEADER, stdout
    out = {}
    for r in rows[1:]:
        assert len(r) == len(HEADER), r
        out[int(r[2])] = dict(zip(HEADER, r))
    return out


def reset_rows(stdout: str, group: str, topic: str) -> dict[int, int]:
    rows = table(stdout)
    assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], stdout
    assert all(r[:2] == [group, topic] for r in rows[1:]), stdout
    return {int(r[2]): int(r[3]) for r in rows[1:]}


def produce(bootstrap: str, topic: str, counts: dict[int, int], first: dict[int, int] | None = None) -> None:
    """counts[p] records to partition p, record i (counted from first[p]) stamped BASE_TS + i seconds."""
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, request_timeout_ms=15000)
    try:
        futures = [p.send(topic, value=f"{part}-{i}".encode(), partition=part, timestamp_ms=BASE_TS + i * 1000)
                   for part, n in counts.items() for i in range((first or {}).get(part, 0),
                                                                 (first or {}).get(part, 0) + n)]
        p.flush(30)
        for f in futures:
            f.get(10)
    finally:
        p.close(5)


def group_consumer(bootstrap: str, topic: str, group: str, client_id: str):
    """A subscribed kafka-python consumer that knows the topic's partitions before it first joins the group.

    Without the metadata, kafka-python 3.0.12 can join before its first Metadata answer (the range assignor
    then hands out nothing) and rejoin once it arrives; if that second JoinGroup/SyncGroup outlasts one
    poll(timeout_ms=200), the client drops the finished rebalance (its need_rejoin() turns False while the
    join is in flight), never takes the assignment, stops heartbeating and is expired (seen under load:
    SyncGroup answered with every partition, the consumer fetched nothing for 20 s)."""
    from kafka import KafkaConsumer
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id=client_id,
                             enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=10000,
                             heartbeat_interval_ms=500, request_timeout_ms=15000, metadata_max_age_ms=2000)
    assert topic in consumer.topics()
    return consumer


def poll_until(consumer, done, timeout: float = 20.0) -> dict[int, list]:
    """Poll, collecting records per partition, until done(records) (and the consumer has its assignment)."""
    seen: dict[int, list] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for tp, rs in consumer.poll(timeout_ms=200).items():
            seen.setdefault(tp.partition, []).extend(rs)
        if consumer.assignment() and done(seen):
            return seen
    raise AssertionError(f"consumer did not get there in {timeout}s: {({p: len(r) for p, r in seen.items()})}")


def plain_consumer(bootstrap: str, group: str | None = None):
    from kafka import KafkaConsumer
    return KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                         request_timeout_ms=15000)


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int | None]:
    """What kafka-python's OffsetFetch says the group has committed (without joining the group)."""
    from kafka import TopicPartition
    c = plain_consumer(bootstrap, group)
    try:
        return {p: c.committed(TopicPartition(topic, p)) for p in PRODUCED}
    finally:
        c.close()


def test_groups_lifecycle_list_describe_reset_delete(cluster_factory):
    cluster = cluster_factory(3, **BROKER_CONFIG)
    bs = cluster.bootstrap
    topic = create_topic(cluster, unique("orders"), partitions=3, replication_factor=2)   # kadmin create-topic
    produce(bs, topic, PRODUCED)
    group, client = unique("billing"), unique("worker")

    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata
    consumer = group_consumer(bs, topic, group, client)
    try:
        # The group processes the first PROCESSED[p] records of partitions 0 and 1 and commits synchronously.
        seen = poll_until(consumer, lambda s: all(len(s.get(p, [])) >= n for p, n in PROCESSED.items()))
        assert {tp.partition for tp in consumer.assignment()} == {0, 1, 2}
        consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(seen[p][n - 1].offset + 1, "", -1)
                         for p, n in PROCESSED.items()})
        assert committed(bs, group, topic) == {0: 4, 1: 12, 2: None}
        produce(bs, topic, {0: 5}, first={0: PRODUCED[0]})          # the log end moves on: lag grows
        ends = {tp.partition: o for tp, o in plain_consumer(bs).end_offsets(
            [TopicPartition(topic, p) for p in PRODUCED]).items()}
        assert ends == {0: 15, 1: 12, 2: 8}

        # list: through the brokers, and through ZooKeeper alone (a broker found in /brokers/ids)
        assert group in ok(kadmin("groups", "list", bootstrap=bs)).splitlines()
        assert group in ok(kadmin("groups", "list", zookeeper=cluster.zk_connect)).splitlines()
        states = ok(kadmin("groups", "list", "--state", bootstrap=bs)).splitlines()
        assert states[0].split() == ["GROUP", "STATE"] and [group, "Stable"] in [s.split() for s in states]

        # describe: committed offsets, high watermarks and lag, and the member owning each partition
        r = kadmin("groups", "describe", group, bootstrap=bs)
        assert r.stderr == ""
        rows = describe_rows(ok(r))
        assert set(rows) == {0, 1, 2}
        expected = {0: ("4", "15", "11"), 1: ("12", "12", "0"), 2: ("-", "8", "-")}
        for p, (current, end, lag) in expected.items():
            row = rows[p]
            assert (row["GROUP"], row["TOPIC"]) == (group, topic)
            assert (row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"]) == (current, end, lag), row
            assert str(ends[p]) == row["LOG-END-OFFSET"]
            assert row["CONSUMER-ID"].startswith(client + "-") and row["CLIENT-ID"] == client
            assert row["HOST"] == "/127.0.0.1"
        assert len({row["CONSUMER-ID"] for row in rows.values()}) == 1
        member_id = rows[0]["CONSUMER-ID"]
        # --zookeeper alone gives the same numbers
        zk_rows = describe_rows(ok(kadmin("groups", "describe", group, zookeeper=cluster.zk_connect)))
        assert {p: (x["CURRENT-OFFSET"], x["LOG-END-OFFSET"], x["LAG"]) for p, x in zk_rows.items()} == expected
        # --output json: the same document either way, numbers as numbers, null for '-'
        described = json.loads(ok(kadmin("groups", "describe", group, bootstrap=bs, output="json")))
        assert described == json.loads(ok(kadmin("groups", "describe", group, zookeeper=cluster.zk_connect,
                                                 output="json")))
        (g,) = described["groups"]
        assert (g["group"], g["state"]) == (group, "Stable")
        assert {o["partition"]: (o["current_offset"], o["log_end_offset"], o["lag"]) for o in g["offsets"]} == \
            {0: (4, 15, 11), 1: (12, 12, 0), 2: (None, 8, None)}
        assert all(set(o) == {"topic", "partition", "current_offset", "log_end_offset", "lag", "consumer_id", "host",
                              "client_id"} and o["client_id"] == client for o in g["offsets"])

        members = table(ok(kadmin("groups", "describe", group, "--members", "--verbose", bootstrap=bs)))
        assert members == [["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
                           [group, member_id, "/127.0.0.1", client, "3", f"{topic}(0,1,2)"]]
        state = table(ok(kadmin("groups", "describe", group, "--state", bootstrap=bs)))
        assert state[0] == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
        assert state[1][0] == group and state[1][-3:] == ["range", "Stable", "1"]

        # An active group can be neither reset nor deleted.
        r = kadmin("groups", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute", bootstrap=bs)
        one_error(r, f"Assignments can only be reset if the group '{group}' is inactive, but the current state "
                     "is Stable.")
        r = kadmin("groups", "delete", group, bootstrap=bs)
        one_error(r, f"Group '{group}' could not be deleted due to: NON_EMPTY_GROUP (The group is not empty.)")
        assert committed(bs, group, topic) == {0: 4, 1: 12, 2: None}
    finally:
        consumer.close()

    # Without members: the same offsets, no owners.
    r = kadmin("groups", "describe", group, bootstrap=bs)
    assert r.stderr == f"Consumer group '{group}' has no active members.\n"
    rows = describe_rows(ok(r))
    assert set(rows) == {0, 1}                      # partition 2 has neither a commit nor an owner now
    assert [(rows[p]["CURRENT-OFFSET"], rows[p]["LOG-END-OFFSET"], rows[p]["LAG"]) for p in (0, 1)] == \
        [("4", "15", "11"), ("12", "12", "0")]
    assert all(rows[p][c] == "-" for p in (0, 1) for c in ("CONSUMER-ID", "HOST", "CLIENT-ID"))
    r = kadmin("groups", "describe", group, "--members", bootstrap=bs)
    assert (r.exit_code, r.stdout, r.stderr) == (0, "", f"Consumer group '{group}' has no active members.\n")

    # reset-offsets: a dry run shows the plan and commits nothing (with Kafka's warning when --dry-run is implicit)
    r = kadmin("groups", "reset-offsets", group, "--topic", topic, "--to-earliest", bootstrap=bs)
    assert reset_rows(ok(r), group, topic) == {0: 0, 1: 0, 2: 0}
    assert r.stderr.startswith("WARN: No action will be performed as the --execute option is missing.")
    r = kadmin("groups", "reset-offsets", group, "--all-topics", "--to-latest", "--dry-run", bootstrap=bs)
    assert (reset_rows(ok(r), group, topic), r.stderr) == ({0: 15, 1: 12}, "")
    assert committed(bs, group, topic) == {0: 4, 1: 12, 2: None}

    # --to-earliest --execute on every partition
    r = kadmin("groups", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute", bootstrap=bs)
    assert reset_rows(ok(r), group, topic) == {0: 0, 1: 0, 2: 0}
    assert committed(bs, group, topic) == {0: 0, 1: 0, 2: 0}
    rows = describe_rows(ok(kadmin("groups", "describe", group, bootstrap=bs)))
    assert {p: (x["CURRENT-OFFSET"], x["LAG"]) for p, x in rows.items()} == {0: ("0", "15"), 1: ("0", "12"),
                                                                             2: ("0", "8")}

    # --to-offset on some partitions; beyond the log end it is clamped to it (with Kafka's warning)
    r = kadmin("groups", "reset-offsets", group, "--topic", f"{topic}:0,2", "--to-offset", 7, "--execute",
               bootstrap=bs)
    assert reset_rows(ok(r), group, topic) == {0: 7, 2: 7}
    r = kadmin("groups", "reset-offsets", group, "--topic", f"{topic}:2", "--to-offset", 100, "--execute",
               bootstrap=bs)
    assert reset_rows(ok(r), group, topic) == {2: 8}
    assert r.stderr == (f"WARN: New offset (100) is higher than latest offset for topic partition {topic}-2. "
                        "Value will be set to 8\n")
    assert committed(bs, group, topic) == {0: 7, 1: 0, 2: 8}

    # --shift-by from the committed offsets
    r = kadmin("groups", "reset-offsets", group, "--all-topics", "--shift-by", -2, "--dry-run", bootstrap=bs)
    assert reset_rows(ok(r), group, topic) == {0: 5, 1: 0, 2: 6}
    r = kadmin("groups", "reset-offsets", group, "--all-topics", "--shift-by", -2, "--dry-run", bootstrap=bs,
               output="json")
    assert json.loads(ok(r)) == {"executed": False, "groups": [{"group": group, "offsets": [
        {"topic": topic, "partition": p, "new_offset": o} for p, o in ((0, 5), (1, 0), (2, 6))]}]}

    # --to-datetime: the first record stamped at or after the time (record i carries BASE_TS + i s); a time after
    # a partition's last record gives its log end. Checked against kafka-python's offsets_for_times.
    when = "2020-09-13T12:26:49.000"                # BASE_TS + 9 s: record 9
    target = BASE_TS + 9000
    lookup = plain_consumer(bs).offsets_for_times({TopicPartition(topic, p): target for p in PRODUCED})
    by_time = {tp.partition: (o.offset if o is not None else None) for tp, o in lookup.items()}
    assert by_time == {0: 9, 1: 9, 2: None}         # partition 2 ends at record 7
    r = kadmin("groups", "reset-offsets", group, "--topic", topic, "--to-datetime", when, "--execute", bootstrap=bs)
    assert reset_rows(ok(r), group, topic) == {0: 9, 1: 9, 2: 8}
    same = kadmin("groups", "reset-offsets", group, "--topic", topic, "--to-datetime", "2020-09-13T14:26:49.000+02:00",
                  "--dry-run", bootstrap=bs)
    assert reset_rows(ok(same), group, topic) == {0: 9, 1: 9, 2: 8}
    assert committed(bs, group, topic) == {0: 9, 1: 9, 2: 8}

    # A new member of the group starts at the reset offsets.
    consumer = group_consumer(bs, topic, group, unique("late"))
    try:
        seen = poll_until(consumer, lambda s: len(s.get(0, [])) >= 6 and len(s.get(1, [])) >= 3, timeout=20)
        assert seen[0][0].offset == 9 and seen[1][0].offset == 9 and 2 not in seen
        assert [r.value for r in seen[0]] == [b"0-%d" % i for i in range(9, 15)]
        assert [r.timestamp for r in seen[1]] == [BASE_TS + i * 1000 for i in range(9, 12)]
    finally:
        consumer.close()

    # reset-offsets on a group that does not exist yet creates its offsets (Kafka allows a Dead group).
    fresh = unique("fresh")
    r = kadmin("groups", "reset-offsets", fresh, "--topic", f"{topic}:1", "--to-latest", "--execute", bootstrap=bs)
    assert reset_rows(ok(r), fresh, topic) == {1: 12}
    assert committed(bs, fresh, topic) == {0: None, 1: 12, 2: None}
    assert [fresh, "Empty"] in [x.split() for x in ok(kadmin("groups", "list", "--state", bootstrap=bs)).splitlines()]
    rows = describe_rows(ok(kadmin("groups", "describe", fresh, bootstrap=bs)))
    assert {p: (x["CURRENT-OFFSET"], x["LOG-END-OFFSET"], x["LAG"]) for p, x in rows.items()} == {1: ("12", "12", "0")}

    # delete: gone from the list, its offsets too; deleting it again fails
    r = kadmin("groups", "delete", group, fresh, bootstrap=bs)
    assert ok(r) == f"Deletion of requested consumer groups ('{group}', '{fresh}') was successful.\n"
    listed = ok(kadmin("groups", "list", bootstrap=bs)).splitlines()
    assert group not in listed and fresh not in listed
    one_error(kadmin("groups", "describe", group, bootstrap=bs), f"Consumer group '{group}' does not exist.")
    assert committed(bs, group, topic) == {0: None, 1: None, 2: None}
    r = kadmin("groups", "delete", group, bootstrap=bs, output="json")
    assert r.exit_code == 1 and json.loads(r.stdout) == {"deleted": [], "failed": [{"group": group,
                                                                                  "error": "GROUP_ID_NOT_FOUND"}]}
    assert r.stderr == (f"Error: Group '{group}' could not be deleted due to: GROUP_ID_NOT_FOUND (The group id does "
                        "not exist.)\n")


def test_groups_errors_and_usage(cluster_factory, zk_connect):
    # ZooKeeper without registered brokers: nothing to bootstrap from
    r = kadmin("groups", "list", zookeeper=zk_connect)
    assert r.exit_code == 3 and r.stdout == ""
    assert re.fullmatch(r"Error: No brokers are registered in ZooKeeper at .*\n", r.stderr), r.stderr
    # nothing listening
    from tests.conftest import free_port
    port = free_port()
    one_error(kadmin("groups", "list", bootstrap=f"127.0.0.1:{port}"),
              f"No broker of 127.0.0.1:{port} could be reached (Cannot connect to 127.0.0.1:{port}: "
              "Connection refused).", code=3)
    # usage errors: exit 2, one line
    for args, fragment in [
        (["groups", "list"], "--bootstrap-server HOST:PORT is required"),
        (["--bootstrap-server", "localhost", "groups", "list"], "'localhost' is not HOST:PORT"),
        (["--bootstrap-server", "h:1", "groups", "describe"], "Give at least one GROUP"),
        (["--bootstrap-server", "h:1", "groups", "describe", "g", "--members", "--state"], "at most one of"),
        (["--bootstrap-server", "h:1", "groups", "reset-offsets", "g", "--to-earliest"], "reset scopes"),
        (["--bootstrap-server", "h:1", "groups", "reset-offsets", "g", "--topic", "t"], "exactly one of"),
        (["--bootstrap-server", "h:1", "groups", "reset-offsets", "g", "--topic", "t", "--to-latest",
          "--to-offset", "3"], "exactly one of"),
        (["--bootstrap-server", "h:1", "groups", "reset-offsets", "g", "--topic", "t", "--to-datetime",
          "2021-01-01T00:00:00"], "is not a datetime in the format YYYY-MM-DDTHH:mm:SS.sss"),
        (["--bootstrap-server", "h:1", "groups", "reset-offsets", "g", "--topic", "t:x", "--to-latest"],
         "is not TOPIC or TOPIC:PARTITION"),
        (["--bootstrap-server", "h:1", "groups", "reset-offsets", "g", "--topic", "t", "--to-latest", "--execute",
          "--dry-run"], "only one of --execute and --dry-run"),
        (["--bootstrap-server", "h:1", "groups", "list", "--state", "bogus"], "Invalid state list 'bogus'"),
    ]:
        r = CliRunner().invoke(cli, args, catch_exceptions=False)
        assert (r.exit_code, r.stdout) == (2, ""), (args, r.exit_code, r.stdout, r.stderr)
        assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("Error: ") and fragment in r.stderr, \
            (args, r.stderr)

    # a one-broker cluster: an unknown group, an unknown topic
    cluster = cluster_factory(1, **BROKER_CONFIG)
    bs = cluster.bootstrap
    one_error(kadmin("groups", "describe", "ghost", bootstrap=bs), "Consumer group 'ghost' does not exist.")
    r = kadmin("groups", "reset-offsets", "ghost", "--topic", "no-such-topic", "--to-earliest", bootstrap=bs)
    assert r.exit_code == 1 and r.stdout == ""
    assert r.stderr.splitlines()[-1] == "Error: Topic 'no-such-topic' does not exist. (UNKNOWN_TOPIC_OR_PARTITION)"
    assert ok(kadmin("groups", "list", bootstrap=bs)) == ""


def test_datetime_and_duration_formats_are_kafkas():
    """Utils.getDateTime (no zone: UTC; Z, +hh, +hhmm, +hh:mm) and java.time.Duration.parse."""
    assert parse_datetime("2020-09-13T12:26:40.000") == BASE_TS
    assert parse_datetime("2020-09-13T12:26:40.123Z") == BASE_TS + 123
    assert parse_datetime("2020-09-13T14:26:40.000+02:00") == BASE_TS
    assert parse_datetime("2020-09-13T14:26:40.000+0200") == BASE_TS
    assert parse_datetime("2020-09-13T10:26:40.000-02") == BASE_TS
    assert parse_datetime("1969-12-31T23:59:59.999Z") == -1
    for bad in ("2020-09-13", "2020-09-13T12:26:40", "2020-09-13 12:26:40.000", "2020-02-30T00:00:00.000",
                "2020-09-13T12:26:40.000+25:00"):
        try:
            parse_datetime(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} was accepted")
    assert parse_duration("PT15M") == 15 * 60_000
    assert parse_duration("P1DT2H") == (24 + 2) * 3_600_000
    assert parse_duration("pt0.5s") == 500
    assert parse_duration("-PT1S") == -1000
    for bad in ("P", "PT", "15M", "P1H", "PT1.5"):
        try:
            parse_duration(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} was accepted")
