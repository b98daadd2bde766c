"""kadmin's replication commands: `reassign`, `elect-leaders` and describe-topic's under-replicated / unavailable
filters, against a real ZooKeeper — with a real 3-broker cluster where the controller must act, and ZooKeeper
alone (brokers registered by hand, no controller) for validation, refusals and time-outs."""
from __future__ import annotations

import json
import os
import time
import uuid

from click.testing import CliRunner
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from admin_cli.main import cli
from tests.integration.conftest import wait_until
from tests.integration.test_cluster import leaders as leaders_of, metadata
from zk import znodes as z

REASSIGN = "/admin/reassign_partitions"
ELECTION = "/admin/preferred_replica_election"


def kadmin(zk_connect, *args):
    return CliRunner().invoke(cli, ["--zookeeper", zk_connect, *map(str, args)], catch_exceptions=False)


def ok(result):
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return result


def one_error_line(result, fragment, code=1):
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and fragment in lines[0], result.stderr
    return lines[0]


def write_json(tmp_path, obj) -> str:
    path = tmp_path / f"plan-{uuid.uuid4().hex[:6]}.json"
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(path)


def plan(*entries):
    return {"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r} for t, p, r in entries]}


def raw(zk, path):
    data, stat = zk.get(path)
    return json.loads(data) if data else None


def states(zk, topic, partitions):
    return {p: zk.get_partition_state(topic, p) for p in range(partitions)}


def register_brokers(zk, *ids):
    zk.create_top_level_paths()
    for bid in ids:
        zk.register_broker(z.BrokerInfo(bid, [z.EndPoint("PLAINTEXT", "127.0.0.1", 9090 + bid)]))


def wait_in_sync(c, topic, assignment: dict[int, list[int]], leaders: dict[int, int] | None = None, timeout=20.0):
    """Every partition has a leader (the given one, if any) and its full replica list in the ISR, in the state
    znodes and in the controller's view. Leaders write ISR changes to the state znodes and notify the
    controller in batches (/isr_change_notification, as Kafka 2.x), so the znodes can be ahead of the
    controller for a moment; the controller's UpdateMetadata reaching every live broker shows it caught up."""
    def in_sync(isr_of, leader_of):
        return all(leader_of(p) >= 0 and sorted(isr_of(p)) == sorted(replicas)
                   and (leaders is None or leader_of(p) == leaders[p]) for p, replicas in assignment.items())

    def ready():
        st = states(c.zk, topic, len(assignment))
        if any(s is None for s in st.values()) or not in_sync(lambda p: st[p].isr, lambda p: st[p].leader):
            return False
        for b in c.brokers.values():
            if b.alive():
                ls = leaders_of(metadata(b.bootstrap, [topic]), topic)
                if len(ls) != len(assignment) or not in_sync(lambda p: ls[p][1], lambda p: ls[p][0]):
                    return False
        return True
    wait_until(ready, timeout, 0.1, f"{topic} in sync on {assignment}")


# ---- reassignment with a real cluster ---------------------------------------------------------------------------

def test_reassign_moves_data_and_leadership(cluster_factory, tmp_path):
    c = cluster_factory(3)
    ok(kadmin(c.zk_connect, "create-topic", "moving", "--replica-assignment", "1:2,2:1"))
    wait_in_sync(c, "moving", {0: [1, 2], 1: [2, 1]}, {0: 1, 1: 2})

    producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 5})
    errors = []
    sent = {0: [], 1: []}
    for i in range(300):
        value = b"record-%04d" % i
        sent[i % 2].append(value)
        producer.produce("moving", value=value, partition=i % 2,
                         on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(30) == 0 and not errors, errors
    del producer
    topic_id = raw(c.zk, "/brokers/topics/moving")["topic_id"]
    data1, data3 = (os.path.join(c.brokers[b].dir, "data") for b in (1, 3))
    assert {"moving-0", "moving-1"} <= set(os.listdir(data1))
    assert not [d for d in os.listdir(data3) if d.startswith("moving-")]

    plan_file = write_json(tmp_path, plan(("moving", 0, [2, 3]), ("moving", 1, [3, 2])))
    started = time.monotonic()
    r = ok(kadmin(c.zk_connect, "reassign", "--reassignment-json-file", plan_file, "--execute", "--timeout", 30))
    lines = r.stdout.splitlines()
    # The rollback plan first (Kafka's wording), then the start, then the final status.
    assert lines[0] == "Current partition replica assignment"
    assert json.loads(lines[2]) == {"version": 1, "partitions": [
        {"topic": "moving", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]},
        {"topic": "moving", "partition": 1, "replicas": [2, 1], "log_dirs": ["any", "any"]}]}
    assert lines[4] == "Save this to use as the --reassignment-json-file option during rollback"
    assert lines[5] == "Successfully started partition reassignments for moving-0,moving-1"
    assert lines[6:] == ["Status of partition reassignment:", "Reassignment of partition moving-0 is complete.",
                         "Reassignment of partition moving-1 is complete."]
    assert r.stderr == "Reassigning 2 partition(s)\n"   # one line: stderr is not a terminal here
    assert time.monotonic() - started < 30

    # kadmin returned only when the controller was done: znodes as Kafka leaves them.
    assert c.zk.exists(REASSIGN) is None
    assert raw(c.zk, "/brokers/topics/moving") == {"version": 3, "partitions": {"0": [2, 3], "1": [3, 2]},
                                                    "adding_replicas": {}, "removing_replicas": {},
                                                    "topic_id": topic_id}
    for p, s in states(c.zk, "moving", 2).items():
        assert s.leader in (2, 3) and sorted(s.isr) == [2, 3], (p, s)
    assert c.zk.get_partition_state("moving", 0).leader == 2  # broker 1 led it: leadership moved

    # Broker 1 stops hosting the partitions (StopReplica delete=true: renamed *-delete, then removed).
    wait_until(lambda: not [d for d in os.listdir(data1) if d.startswith("moving-") and not d.endswith("-delete")],
               15, 0.1, "broker 1's moving-* partition directories deleted")
    assert {"moving-0", "moving-1"} <= set(os.listdir(data3))

    # Every acknowledged record comes back, from the new replicas.
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "unused-" + uuid.uuid4().hex[:6],
                         "enable.auto.commit": False, "enable.auto.offset.store": False})
    try:
        consumer.assign([TopicPartition("moving", p, OFFSET_BEGINNING) for p in (0, 1)])
        got = {0: [], 1: []}
        deadline = time.monotonic() + 20
        while sum(map(len, got.values())) < 300 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                got[m.partition()].append(m.value())
    finally:
        consumer.close()
    assert got == sent

    r = ok(kadmin(c.zk_connect, "reassign", "--reassignment-json-file", plan_file, "--verify"))
    # Done: the throttles go (whether or not any was set), as kafka-reassign-partitions.sh --verify says it.
    assert r.stdout.splitlines() == ["Status of partition reassignment:",
                                     "Reassignment of partition moving-0 is complete.",
                                     "Reassignment of partition moving-1 is complete.",
                                     "Clearing broker-level throttles on brokers 1,2,3",
                                     "Clearing topic-level throttles on topic moving"]
    # The rollback plan is not what the partitions look like now.
    rollback = write_json(tmp_path, json.loads(lines[2]))
    r = kadmin(c.zk_connect, "reassign", "--reassignment-json-file", rollback, "--verify")
    assert r.exit_code == 1
    assert "There is no active reassignment of partition moving-0, but replica set is 2,3 rather than 1,2." \
        in r.stdout

    # Bad plans against the live cluster: one error line, exit 1, nothing written.
    for bad, fragment in [(plan(("moving", 0, [2, 9])), "Unknown broker id 9"),
                          (plan(("moving", 0, [3, 3])), "moving-0 contains multiple entries for 3")]:
        one_error_line(kadmin(c.zk_connect, "reassign", "--reassignment-json-file", write_json(tmp_path, bad)),
                       fragment)
        assert c.zk.exists(REASSIGN) is None
    assert raw(c.zk, "/brokers/topics/moving")["partitions"] == {"0": [2, 3], "1": [3, 2]}


# ---- preferred election and under-replicated partitions with a real cluster ----------------------------------

ASSIGNMENT = {0: [1, 2], 1: [2, 3], 2: [3, 1], 3: [1, 3], 4: [2, 3]}  # broker 1 prefers 0 and 3; 1 and 4 lack it


def test_preferred_election_after_restart_and_under_replicated(cluster_factory):
    c = cluster_factory(3, **{"auto.leader.rebalance.enable": "false"})
    ok(kadmin(c.zk_connect, "create-topic", "pref", "--replica-assignment",
              ",".join(":".join(map(str, r)) for _, r in sorted(ASSIGNMENT.items()))))
    preferred = {p: r[0] for p, r in ASSIGNMENT.items()}
    wait_in_sync(c, "pref", ASSIGNMENT, preferred)
    assert kadmin(c.zk_connect, "describe-topic", "pref", "--under-replicated-partitions").stdout == ""

    c.brokers[1].kill9()
    # The controller notices when broker 1's session expires: new leaders, broker 1 out of every ISR.
    wait_until(lambda: all(s.leader not in (-1, 1) and 1 not in s.isr for s in states(c.zk, "pref", 5).values()),
               20, 0.1, "leaders moved off broker 1 and it left the ISRs")

    r = ok(kadmin(c.zk_connect, "describe-topic", "pref", "--under-replicated-partitions"))
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["Topic", "Partition", "Leader", "Replicas", "Isr"]
    assert [(row.split()[0], int(row.split()[1])) for row in lines[1:]] == [("pref", 0), ("pref", 2), ("pref", 3)]
    for row in lines[1:]:
        _, p, leader, replicas, isr = row.split()
        assert replicas == ",".join(map(str, ASSIGNMENT[int(p)])) and isr == leader and leader != "1"
    # The same without naming the topic (every topic), and no partition is unavailable.
    assert ok(kadmin(c.zk_connect, "describe-topic", "--under-replicated-partitions")).stdout == r.stdout
    assert ok(kadmin(c.zk_connect, "describe-topic", "pref", "--unavailable-partitions")).stdout == ""
    # The plain table marks the affected rows and keeps its columns aligned.
    table = ok(kadmin(c.zk_connect, "describe-topic", "pref")).stdout.splitlines()[1:]
    assert table[0].split() == ["Partition", "Leader", "Replicas", "Isr", "Status"]
    marks = {int(row.split()[0]): row.split()[4:] for row in table[1:]}
    assert marks == {0: ["under-replicated"], 1: [], 2: ["under-replicated"], 3: ["under-replicated"], 4: []}
    assert len({row.index("under-replicated") for row in table[1:] if "under-replicated" in row}) == 1
    assert table[0].index("Status") == table[1].index("under-replicated")

    c.brokers[1].start()
    wait_in_sync(c, "pref", ASSIGNMENT, timeout=30)
    before = states(c.zk, "pref", 5)
    assert before[0].leader != 1 and before[3].leader != 1  # nothing moved leadership back by itself
    assert kadmin(c.zk_connect, "describe-topic", "pref", "--under-replicated-partitions").stdout == ""

    r = ok(kadmin(c.zk_connect, "elect-leaders", "--preferred", "--all-topic-partitions", "--timeout", 20))
    assert r.stdout.splitlines() == ["Successfully completed leader election (PREFERRED) for partitions pref-0, pref-3",
                                     "Valid replica already elected for partitions pref-1, pref-2, pref-4"]
    assert c.zk.exists(ELECTION) is None
    after = states(c.zk, "pref", 5)
    assert {p: s.leader for p, s in after.items()} == preferred
    assert all(sorted(s.isr) == sorted(ASSIGNMENT[p]) for p, s in after.items())
    assert after[0].leader_epoch > before[0].leader_epoch and after[1].leader_epoch == before[1].leader_epoch

    # Nothing left to do: a second run only reports.
    r = ok(kadmin(c.zk_connect, "elect-leaders", "--preferred", "--topic", "pref", "--partition", 3))
    assert r.stdout == "Valid replica already elected for partitions pref-3\n"


# ---- ZooKeeper only: validation, refusals, status and time-outs ------------------------------------------------

def test_reassign_rejects_bad_plans_and_writes_nothing(zk_connect, zk_client, tmp_path):
    register_brokers(zk_client, 1, 2, 3)
    ok(kadmin(zk_connect, "create-topic", "t", "--replica-assignment", "1:2,2:3"))
    cases = [
        (plan(("t", 0, [2, 9])), "Unknown broker id 9"),
        (plan(("t", 0, [2, 9]), ("t", 1, [8, 9])), "Unknown broker ids 8,9"),
        (plan(("t", 0, [2, 2, 3])), "Partition replica lists may not contain duplicate entries: t-0 contains "
                                    "multiple entries for 2"),
        (plan(("t", 0, []),), "Partition replica list cannot be empty: t-0"),
        (plan(("t", 0, [2, 3]), ("t", 0, [3, 1])), "contains duplicate topic partitions: t-0"),
        (plan(("t", 5, [2, 3])), "non-existent partitions: t-5"),
        (plan(("nope", 0, [2, 3])), "non-existent partitions: nope-0"),
        ({"version": 1, "partitions": []}, "Partition reassignment list cannot be empty"),
        ({"version": 2, "partitions": []}, "Not supported version field value 2"),
        ({"partitions": [{"topic": "t", "partition": "0", "replicas": [2, 3]}]}, "needs \"topic\""),
        ({"partitions": [{"topic": "t", "partition": 0, "replicas": [2, "3"]}]}, "needs \"topic\""),
        ({"partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3], "log_dirs": ["any"]}]},
         "Size of replicas list [2, 3] is different from size of log dirs list ['any'] for partition t-0"),
        ("{not json", "not valid JSON"),
    ]
    before = raw(zk_client, "/brokers/topics/t")
    for bad, fragment in cases:
        r = kadmin(zk_connect, "reassign", "--reassignment-json-file", write_json(tmp_path, bad))
        one_error_line(r, fragment)
        assert r.stdout == ""
        assert zk_client.exists(REASSIGN) is None
    assert raw(zk_client, "/brokers/topics/t") == before
    # A missing file is a usage error.
    assert kadmin(zk_connect, "reassign", "--reassignment-json-file", tmp_path / "missing.json").exit_code == 2


def test_reassign_no_wait_existing_verify_and_timeout(zk_connect, zk_client, tmp_path):
    register_brokers(zk_client, 1, 2, 3)
    ok(kadmin(zk_connect, "create-topic", "t", "--replica-assignment", "1:2,2:3"))
    # "log_dirs" of "any" move nothing.
    f = write_json(tmp_path, {"version": 1, "partitions": [
        {"topic": "t", "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "any"]},
        {"topic": "t", "partition": 0, "replicas": [2, 3]}]})
    r = ok(kadmin(zk_connect, "reassign", "--reassignment-json-file", f, "--no-wait"))
    assert r.stdout.splitlines()[-1] == "Successfully started partition reassignments for t-0,t-1"
    # Exactly Kafka's znode (no controller here to act on it).
    assert raw(zk_client, REASSIGN) == {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [2, 3]}, {"topic": "t", "partition": 1, "replicas": [3, 1]}]}

    r = kadmin(zk_connect, "reassign", "--reassignment-json-file", f)
    one_error_line(r, "There is an existing assignment running.")
    r = kadmin(zk_connect, "reassign", "--reassignment-json-file", f, "--verify")
    assert (r.exit_code, r.stdout.splitlines()) == (1, ["Status of partition reassignment:",
                                                        "Reassignment of partition t-0 is still in progress.",
                                                        "Reassignment of partition t-1 is still in progress."])
    # The controller has taken partition 0 further: listed as adding/removing in the topic znode.
    zk_client.zk.set(REASSIGN, z.ReassignPartitionsZNode.encode({("t", 1): [3, 1]}))
    zk_client.set_topic_assignment("t", z.TopicAssignment({0: [2, 3, 1], 1: [2, 3]}, adding_replicas={0: [3]},
                                                          removing_replicas={0: [1]}))
    r = kadmin(zk_connect, "reassign", "--reassignment-json-file", f, "--verify")
    assert r.exit_code == 1 and "Reassignment of partition t-0 is still in progress." in r.stdout
    d = kadmin(zk_connect, "describe-topic", "t").stdout.splitlines()
    assert d[1].split() == ["Partition", "Leader", "Replicas", "Isr", "Adding", "Removing"]
    assert d[2].split() == ["0", "none", "2,3,1", "3", "1"]
    # ...and finished it.
    zk_client.set_topic_assignment("t", z.TopicAssignment({0: [2, 3], 1: [2, 3]}))
    r = kadmin(zk_connect, "reassign", "--reassignment-json-file", f, "--verify")
    assert r.stdout.splitlines()[1:] == ["Reassignment of partition t-0 is complete.",
                                         "Reassignment of partition t-1 is still in progress."]

    # Waiting without a controller times out with exit 3, leaving the znode for the controller.
    zk_client.zk.delete(REASSIGN)
    started = time.monotonic()
    r = kadmin(zk_connect, "reassign", "--reassignment-json-file", f, "--timeout", 0.5)
    assert time.monotonic() - started < 5
    assert r.exit_code == 3
    assert r.stderr.splitlines() == ["Reassigning 2 partition(s)",
                                     "Error: Timed out after 0.5s waiting for the reassignment: 2 of 2 partition(s) "
                                     "still being reassigned; the controller carries on (check with --verify)."]
    assert r.stdout.splitlines()[-2:] == ["Reassignment of partition t-0 is still in progress.",
                                          "Reassignment of partition t-1 is still in progress."]
    assert zk_client.exists(REASSIGN) is not None


def test_elect_leaders_refusals_and_timeout(zk_connect, zk_client, tmp_path):
    register_brokers(zk_client, 1, 2)
    ok(kadmin(zk_connect, "create-topic", "t", "--replica-assignment", "1:2,2:1"))
    # Unclean election needs the Admin API.
    r = kadmin(zk_connect, "elect-leaders", "--unclean", "--all-topic-partitions")
    one_error_line(r, "--bootstrap-server", code=2)
    r = kadmin(zk_connect, "elect-leaders", "--election-type", "UNCLEAN", "--topic", "t")
    one_error_line(r, "--bootstrap-server", code=2)
    for args in [("--all-topic-partitions",), ("--preferred",), ("--preferred", "--topic", "t", "--all-topic-partitions"),
                 ("--preferred", "--partition", "0", "--all-topic-partitions")]:
        assert kadmin(zk_connect, "elect-leaders", *args).exit_code == 2, args
    one_error_line(kadmin(zk_connect, "elect-leaders", "--preferred", "--topic", "nope"), "Topic 'nope' does not exist")
    one_error_line(kadmin(zk_connect, "elect-leaders", "--preferred", "--topic", "t", "--partition", 7),
                   "Partition t-7 does not exist")
    dup = write_json(tmp_path, {"partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 0}]})
    one_error_line(kadmin(zk_connect, "elect-leaders", "--preferred", "--path-to-json-file", dup),
                   "duplicate partitions: t-0")
    assert zk_client.exists(ELECTION) is None

    # No controller: the znode is written as Kafka writes it, then kadmin gives up.
    f = write_json(tmp_path, {"partitions": [{"topic": "t", "partition": 1}, {"topic": "t", "partition": 0}]})
    r = kadmin(zk_connect, "elect-leaders", "--preferred", "--path-to-json-file", f, "--timeout", 0.3)
    assert (r.exit_code, r.stdout) == (3, "")
    waiting, error = r.stderr.splitlines()
    assert waiting == "Waiting for the controller to elect the leaders of 2 partition(s)"
    assert error.startswith("Error: Timed out after 0.3s waiting for the controller")
    assert raw(zk_client, ELECTION) == {"version": 1, "partitions": [{"topic": "t", "partition": 0},
                                                                      {"topic": "t", "partition": 1}]}
    r = kadmin(zk_connect, "elect-leaders", "--preferred", "--all-topic-partitions")
    one_error_line(r, "Preferred replica leader election currently in progress for t-0,t-1. Aborting operation")


def test_describe_filters_without_brokers(zk_connect, zk_client):
    """Kafka's definitions: unavailable = no leader or a leader that is not registered; under-replicated =
    fewer in-sync replicas than replicas, not counting replicas a reassignment removes."""
    register_brokers(zk_client, 1, 2)
    zk_client.create_topic_assignment("a", z.TopicAssignment({0: [1, 2], 1: [2, 1], 2: [3, 1], 3: [1, 2]}))
    zk_client.create_topic_assignment("b", z.TopicAssignment({0: [3, 2, 1]}, adding_replicas={0: [3]},
                                                             removing_replicas={0: [1]}))
    for topic, p, leader, isr in [("a", 0, 1, [1, 2]), ("a", 1, 2, [2]), ("a", 2, 3, [3, 1]), ("a", 3, -1, [1]),
                                  ("b", 0, 2, [2, 1])]:
        zk_client.create_recursive(z.TopicPartitionStateZNode.path(topic, p),
                                   z.TopicPartitionStateZNode.encode(z.LeaderAndIsr(leader, 0, isr, 1)))

    def rows(*args):
        r = ok(kadmin(zk_connect, "describe-topic", *args))
        return [line.split() for line in r.stdout.splitlines()]
    assert rows("--unavailable-partitions") == [["Topic", "Partition", "Leader", "Replicas", "Isr"],
                                                ["a", "2", "3", "3,1", "3,1"], ["a", "3", "none", "1,2", "1"]]
    # b-0's ISR misses the adding replica 3 but has the 2 replicas that stay: not under-replicated.
    assert rows("--under-replicated-partitions") == [["Topic", "Partition", "Leader", "Replicas", "Isr"],
                                                     ["a", "1", "2", "2,1", "2"], ["a", "3", "none", "1,2", "1"]]
    assert rows("b", "--unavailable-partitions") == []
    assert rows("a")[1:] == [["Partition", "Leader", "Replicas", "Isr", "Status"], ["0", "1", "1,2", "1,2"],
                             ["1", "2", "2,1", "2", "under-replicated"], ["2", "3", "3,1", "3,1", "offline"],
                             ["3", "none", "1,2", "1", "offline"]]
    r = kadmin(zk_connect, "describe-topic", "a", "--under-replicated-partitions", "--unavailable-partitions")
    one_error_line(r, "cannot be combined", code=2)
    # Every topic, one block each, when no name is given.
    assert [line.split("\t")[0] for line in kadmin(zk_connect, "describe-topic").stdout.splitlines()
            if line.startswith("Topic:")] == ["Topic: a", "Topic: b"]
