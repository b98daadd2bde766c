"""kadmin through ZooKeeper (--zookeeper) and through the Admin APIs (--bootstrap-server) against one real
3-broker cluster: each command, run both ways on the same state, prints the same JSON (and the same tables);
changes made one way are seen the other way; the JSON shapes are the documented ones; failures are one line with
the same message and exit status either way (1 refused, 2 usage, 3 unreachable).

One cluster serves the whole module (starting one costs seconds); every test uses its own topics, and the test
that stops brokers starts them again."""
from __future__ import annotations

import json
import uuid

import pytest
from click.testing import CliRunner

from admin_cli.main import cli
from tests.conftest import free_port
from tests.integration.conftest import Cluster, wait_until

BROKERS = (1, 2, 3)


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    c = Cluster(f"{zookeeper.connect}/t-{uuid.uuid4().hex[:10]}", str(tmp_path_factory.mktemp("kadmin-modes")))
    for i in BROKERS:
        c.add(i, **{"auto.leader.rebalance.enable": "false"})
    c.wait_ready(BROKERS)
    yield c
    c.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def kadmin(c: Cluster, mode: str, *args, output: str = "json"):
    """kadmin in one mode ("zk" or "bs") against the cluster."""
    target = ["--zookeeper", c.zk_connect] if mode == "zk" else ["--bootstrap-server", c.bootstrap]
    return CliRunner().invoke(cli, [*target, "--output", output, *map(str, args)], catch_exceptions=False)


def ok(result) -> str:
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return result.stdout


def doc(c, mode, *args):
    return json.loads(ok(kadmin(c, mode, *args)))


def same(c, *args, output="json"):
    """Both modes succeed with the same output; returns it (parsed for JSON)."""
    zk, bs = (ok(kadmin(c, m, *args, output=output)) for m in ("zk", "bs"))
    assert zk == bs, (zk, bs)
    return json.loads(zk) if output == "json" else zk


def settled(c, *args):
    """Both modes agree on describe-topic, and every partition has a leader and its full ISR (the brokers learn
    the controller's state a moment after ZooKeeper has it)."""
    def agree():
        zk, bs = (doc(c, m, "describe-topic", *args) for m in ("zk", "bs"))
        full = all(p["leader"] is not None and sorted(p["isr"]) == sorted(p["replicas"]) and not p["adding"]
                   for t in zk["topics"] for p in t["partitions"])
        return zk if zk == bs and full else None
    return wait_until(agree, 20, 0.2, f"describe-topic {args} to agree in both modes")


def one_error(result, code: int) -> str:
    assert (result.exit_code, result.stdout) == (code, ""), (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


def same_error(c, code: int, *args) -> str:
    """Both modes refuse with the same line and exit status."""
    zk, bs = (one_error(kadmin(c, m, *args), code) for m in ("zk", "bs"))
    assert zk == bs
    return zk


# ---- topics -----------------------------------------------------------------------------------------------------

def test_topics_same_both_ways(cluster):
    c = cluster
    a, b = unique("modes-a"), unique("modes-b")
    # Created one way each; --wait returns once every partition has a leader.
    created = doc(c, "zk", "create-topic", a, "--partitions", 3, "--replication-factor", 2,
                  "--config", "retention.ms=86400000", "--config", "cleanup.policy=compact")
    assert created == {"topic": a, "partitions": 3, "replication_factor": 2,
                       "config": {"cleanup.policy": "compact", "retention.ms": "86400000"}}
    r = kadmin(c, "bs", "create-topic", b, "--replica-assignment", "1:2,2:3,3:1,1:3", "--config",
               "min.insync.replicas=2", "--wait", "--timeout", 20)
    assert json.loads(ok(r)) == {"topic": b, "partitions": 4, "replication_factor": 2,
                                 "config": {"min.insync.replicas": "2"}}
    assert len(r.stderr.splitlines()) == 1 and "leaders" in r.stderr     # one progress line, not a terminal
    state = doc(c, "bs", "describe-topic", b)["topics"][0]
    assert all(p["leader"] is not None for p in state["partitions"])
    # Through the brokers --partitions/--replication-factor default to num.partitions/default.replication.factor
    # (as kafka-topics.sh --bootstrap-server); with --zookeeper they are required (as kafka-topics.sh --zookeeper).
    d = unique("modes-defaults")
    assert doc(c, "bs", "create-topic", d)["partitions"] == 1
    assert kadmin(c, "zk", "create-topic", unique("modes-nodefaults")).exit_code == 2

    described = settled(c, a)
    (t,) = described["topics"]
    assert set(t) == {"name", "topic_id", "partition_count", "replication_factor", "config", "marked_for_deletion",
                      "partitions"}
    assert (t["name"], t["partition_count"], t["replication_factor"], t["marked_for_deletion"]) == (a, 3, 2, False)
    assert t["config"] == {"cleanup.policy": "compact", "retention.ms": "86400000"}
    assert len(t["topic_id"]) == 22                         # Kafka's base64 form, backfilled by the controller
    for p in t["partitions"]:
        assert set(p) == {"partition", "leader", "replicas", "isr", "adding", "removing", "status", "replica_racks"}
        assert p["leader"] == p["replicas"][0] and p["status"] is None
        assert p["replica_racks"] == [None, None]             # brokers without broker.rack
    b_state = settled(c, b)["topics"][0]
    assert [p["replicas"] for p in b_state["partitions"]] == [[1, 2], [2, 3], [3, 1], [1, 3]]

    # Every topic, the filters, the list, and the tables people read: the same both ways.
    listed = same(c, "list-topics")
    assert {"name": a, "marked_for_deletion": False} in listed["topics"]
    assert [x["name"] for x in listed["topics"]] == sorted(x["name"] for x in listed["topics"])
    assert a in same(c, "list-topics", output="table").splitlines()
    everything = same(c, "describe-topic")
    assert {a, b} <= {x["name"] for x in everything["topics"]}
    assert same(c, "describe-topic", "--under-replicated-partitions") == {"topics": []}
    assert same(c, "describe-topic", a, "--unavailable-partitions") == {"topics": []}
    table = same(c, "describe-topic", a, output="table").splitlines()
    assert table[0] == (f"Topic: {a}\tTopicId: {t['topic_id']}\tPartitionCount: 3\tReplicationFactor: 2\t"
                        "Configs: cleanup.policy=compact,retention.ms=86400000")
    assert table[1].split() == ["Partition", "Leader", "Replicas", "Isr"]    # no Racks column without racks
    assert [row.split()[0] for row in table[2:]] == ["0", "1", "2"]

    # Refusals: the same line and exit status both ways, and nothing created.
    line = same_error(c, 1, "create-topic", a, "--partitions", 1, "--replication-factor", 1)
    assert line == f"Error: Topic '{a}' already exists. (TOPIC_ALREADY_EXISTS)"
    line = same_error(c, 1, "create-topic", unique("bad"), "--partitions", 1, "--replication-factor", 1,
                      "--config", "retention.ms=soon")
    assert "retention.ms" in line and line.endswith("(INVALID_CONFIG)")
    line = same_error(c, 1, "create-topic", unique("big"), "--partitions", 1, "--replication-factor", 4)
    assert line == "Error: Replication factor: 4 larger than available brokers: 3. (INVALID_REPLICATION_FACTOR)"
    line = same_error(c, 1, "describe-topic", "no-such-topic")
    assert line == "Error: Topic 'no-such-topic' does not exist. (UNKNOWN_TOPIC_OR_PARTITION)"
    same_error(c, 1, "delete-topic", "no-such-topic")
    assert "internal topic" in same_error(c, 1, "delete-topic", "__consumer_offsets")
    assert not any(x["name"].startswith(("bad-", "big-")) for x in same(c, "list-topics")["topics"])


def test_delete_topic_wait_both_ways(cluster):
    c = cluster
    names = {m: unique(f"gone-{m}") for m in ("zk", "bs")}
    for name in names.values():
        ok(kadmin(c, "zk", "create-topic", name, "--partitions", 2, "--replication-factor", 2, "--wait"))
    for mode, name in names.items():
        r = kadmin(c, mode, "delete-topic", name, "--wait", "--timeout", 30)
        assert json.loads(ok(r)) == {"topic": name, "marked_for_deletion": True, "deleted": True}
        listed = {x["name"] for x in same(c, "list-topics")["topics"]}
        assert name not in listed
    r = kadmin(c, "bs", "delete-topic", names["bs"], output="table")
    assert one_error(r, 1) == f"Error: Topic '{names['bs']}' does not exist. (UNKNOWN_TOPIC_OR_PARTITION)"


# ---- configs ----------------------------------------------------------------------------------------------------

def test_topic_configs_same_both_ways(cluster):
    c = cluster
    t = unique("conf")
    ok(kadmin(c, "zk", "create-topic", t, "--partitions", 1, "--replication-factor", 1,
              "--config", "retention.ms=1000"))
    altered = doc(c, "bs", "alter-config", "--topic", t,
                  "--add-config", "cleanup.policy=[compact,delete],segment.ms=60000")
    assert altered == {"entity_type": "topic", "entity_name": t,
                       "set": {"cleanup.policy": "compact,delete", "segment.ms": "60000"}, "deleted": []}
    expected = {"entities": [{"entity_type": "topic", "entity_name": t, "configs": [
        {"name": "cleanup.policy", "value": "compact,delete", "source": "DYNAMIC_TOPIC_CONFIG", "sensitive": False},
        {"name": "retention.ms", "value": "1000", "source": "DYNAMIC_TOPIC_CONFIG", "sensitive": False},
        {"name": "segment.ms", "value": "60000", "source": "DYNAMIC_TOPIC_CONFIG", "sensitive": False}]}]}
    assert same(c, "describe-config", "--topic", t) == expected
    assert same(c, "describe-config", "--topic", t, output="table") == (
        f"Dynamic configs for topic {t} are:\n"
        "  Name            Value\n"
        "  cleanup.policy  compact,delete\n"
        "  retention.ms    1000\n"
        "  segment.ms      60000\n")
    # Every topic's, with no entity.
    assert expected["entities"][0] in same(c, "describe-config")["entities"]

    ok(kadmin(c, "zk", "alter-config", "--topic", t, "--delete-config", "segment.ms,retention.ms"))
    assert [x["name"] for x in same(c, "describe-config", "--topic", t)["entities"][0]["configs"]] == \
        ["cleanup.policy"]

    # --all (the brokers only): every topic config with value, source and synonyms.
    everything = doc(c, "bs", "describe-config", "--topic", t, "--all")["entities"][0]["configs"]
    by_name = {x["name"]: x for x in everything}
    assert by_name["cleanup.policy"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert by_name["cleanup.policy"]["synonyms"][0] == {"name": "cleanup.policy", "value": "compact,delete",
                                                        "source": "DYNAMIC_TOPIC_CONFIG"}
    assert (by_name["retention.ms"]["value"], by_name["retention.ms"]["source"]) == ("604800000", "DEFAULT_CONFIG")
    assert set(by_name["segment.bytes"]) == {"name", "value", "source", "sensitive", "read_only", "synonyms"}
    text = ok(kadmin(c, "bs", "describe-config", "--topic", t, "--all", output="table")).splitlines()
    assert text[0] == f"All configs for topic {t} are:"
    assert text[1].split() == ["Name", "Value", "Source", "Read-only"]

    # Refusals name the key and change nothing. A bad value is INVALID_CONFIG through ZooKeeper and Kafka's
    # INVALID_REQUEST "Invalid config value for resource ..." through IncrementalAlterConfigs.
    for mode in ("zk", "bs"):
        line = one_error(kadmin(c, mode, "alter-config", "--topic", t, "--add-config", "min.insync.replicas=0"), 1)
        assert "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1" in line
    line = same_error(c, 1, "alter-config", "--topic", t, "--delete-config", "flush.ms")
    assert line == "Error: Invalid config(s): flush.ms (INVALID_CONFIG)"
    line = same_error(c, 1, "alter-config", "--topic", "no-such-topic", "--add-config", "retention.ms=1")
    assert line == "Error: Topic 'no-such-topic' does not exist. (UNKNOWN_TOPIC_OR_PARTITION)"
    same_error(c, 1, "describe-config", "--topic", "no-such-topic")
    assert [x["name"] for x in same(c, "describe-config", "--topic", t)["entities"][0]["configs"]] == \
        ["cleanup.policy"]


def test_broker_configs_same_both_ways(cluster):
    c = cluster
    altered = doc(c, "zk", "alter-config", "--broker", 2, "--add-config", "log.cleaner.backoff.ms=20000")
    assert altered == {"entity_type": "broker", "entity_name": "2", "set": {"log.cleaner.backoff.ms": "20000"},
                       "deleted": []}
    ok(kadmin(c, "bs", "alter-config", "--broker-defaults", "--add-config", "log.retention.ms=7200000"))

    def agreed(*entity):
        """Both ways agree (a broker applies a change notification a moment after ZooKeeper has it)."""
        zk, bs = (doc(c, m, "describe-config", *entity) for m in ("zk", "bs"))
        return zk if zk == bs else None
    try:
        assert wait_until(lambda: agreed("--broker", 2), 10, 0.2, "broker 2's configs") == {"entities": [
            {"entity_type": "broker", "entity_name": "2", "configs": [
                {"name": "log.cleaner.backoff.ms", "value": "20000", "source": "DYNAMIC_BROKER_CONFIG",
                 "sensitive": False}]}]}
        assert wait_until(lambda: agreed("--broker-defaults"), 10, 0.2, "the broker defaults") == {"entities": [
            {"entity_type": "broker", "entity_name": "<default>", "configs": [
                {"name": "log.retention.ms", "value": "7200000", "source": "DYNAMIC_DEFAULT_BROKER_CONFIG",
                 "sensitive": False}]}]}
        assert same(c, "describe-config", "--broker-defaults", output="table").splitlines()[0] == \
            "Default configs for brokers in the cluster are:"
        # Broker 1 has no override of its own; through the brokers --all shows where its value comes from.
        assert same(c, "describe-config", "--broker", 1)["entities"][0]["configs"] == []
        everything = doc(c, "bs", "describe-config", "--broker", 1, "--all")["entities"][0]["configs"]
        retention = next(x for x in everything if x["name"] == "log.retention.ms")
        assert (retention["value"], retention["source"]) == ("7200000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
        # A static (non-dynamic) broker config is refused both ways, naming it.
        for mode in ("zk", "bs"):
            assert "broker.id" in one_error(kadmin(c, mode, "alter-config", "--broker", 1, "--add-config",
                                                   "broker.id=7"), 1)
        same_error(c, 1, "alter-config", "--broker", 1, "--delete-config", "log.retention.ms")
    finally:
        ok(kadmin(c, "bs", "alter-config", "--broker", 2, "--delete-config", "log.cleaner.backoff.ms"))
        ok(kadmin(c, "zk", "alter-config", "--broker-defaults", "--delete-config", "log.retention.ms"))
    assert wait_until(lambda: agreed("--broker-defaults"), 10, 0.2, "the broker defaults removed")[
        "entities"][0]["configs"] == []


# ---- cluster, reassignment, elections --------------------------------------------------------------------------

def test_cluster_describe_same_both_ways(cluster):
    c = cluster
    d = same(c, "cluster", "describe")
    assert set(d) == {"cluster_id", "controller_id", "brokers"}
    assert d["controller_id"] in BROKERS and len(d["cluster_id"]) == 22
    assert [(b["id"], b["host"], b["port"], b["rack"]) for b in d["brokers"]] == \
        [(i, "127.0.0.1", c.brokers[i].port, None) for i in BROKERS]
    lines = same(c, "cluster", "describe", output="table").splitlines()
    assert lines[0] == f"Cluster id: {d['cluster_id']}" and lines[2].split() == ["Broker", "Host", "Port", "Rack"]


def test_reassign_and_elect_both_ways(cluster, tmp_path):
    c = cluster
    t = unique("move")
    ok(kadmin(c, "zk", "create-topic", t, "--replica-assignment", "1:2,2:3", "--wait"))
    settled(c, t)

    def plan_file(*replicas):
        path = tmp_path / f"{uuid.uuid4().hex[:6]}.json"
        path.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": t, "partition": p, "replicas": r} for p, r in enumerate(replicas)]}))
        return path

    # Through the brokers: the preferred replicas swap, the leaders stay where they are (still in the set).
    swap = plan_file([2, 1], [3, 2])
    r = kadmin(c, "bs", "reassign", "--reassignment-json-file", swap, "--timeout", 30)
    result = json.loads(ok(r))
    assert result["rollback"]["partitions"] == [
        {"topic": t, "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]},
        {"topic": t, "partition": 1, "replicas": [2, 3], "log_dirs": ["any", "any"]}]
    assert result["started"] == [f"{t}-0", f"{t}-1"]
    assert result["status"] == [
        {"topic": t, "partition": 0, "target": [2, 1], "current": [2, 1], "state": "complete"},
        {"topic": t, "partition": 1, "target": [3, 2], "current": [3, 2], "state": "complete"}]
    assert result["throttles"] is None and result["throttles_cleared"] is None   # none set, none cleared
    assert same(c, "reassign", "--reassignment-json-file", swap, "--verify") == {
        "status": result["status"], "log_dirs": [], "throttles_cleared": {"brokers": [1, 2, 3], "topics": [t]}}
    before = settled(c, t)["topics"][0]["partitions"]
    assert [p["leader"] for p in before] == [1, 2]

    # Preferred election through ZooKeeper, then the same request through the brokers: nothing left to do.
    elected = doc(c, "zk", "elect-leaders", "--preferred", "--topic", t, "--timeout", 20)
    assert elected == {"election_type": "preferred", "not_needed": [], "failed": [],
                       "elected": [{"topic": t, "partition": 0}, {"topic": t, "partition": 1}]}
    again = {"election_type": "preferred", "elected": [], "failed": [],
             "not_needed": [{"topic": t, "partition": 0}, {"topic": t, "partition": 1}]}
    assert wait_until(lambda: doc(c, "bs", "elect-leaders", "--preferred", "--topic", t) == again, 10, 0.2,
                      "the brokers to see the new leaders")
    assert same(c, "elect-leaders", "--preferred", "--topic", t, "--partition", 1, output="table") == \
        f"Valid replica already elected for partitions {t}-1\n"

    # Back through ZooKeeper, then elect through the brokers.
    back = plan_file([1, 2], [2, 3])
    assert doc(c, "zk", "reassign", "--reassignment-json-file", back, "--timeout", 30)["status"] == [
        {"topic": t, "partition": 0, "target": [1, 2], "current": [1, 2], "state": "complete"},
        {"topic": t, "partition": 1, "target": [2, 3], "current": [2, 3], "state": "complete"}]
    settled(c, t)
    r = kadmin(c, "bs", "elect-leaders", "--election-type", "preferred", "--topic", t, output="table")
    assert ok(r) == f"Successfully completed leader election (PREFERRED) for partitions {t}-0, {t}-1\n"
    assert [p["leader"] for p in settled(c, t)["topics"][0]["partitions"]] == [1, 2]

    # Refusals, the same both ways.
    same_error(c, 1, "reassign", "--reassignment-json-file", plan_file([1, 9], [2, 3]))
    assert "non-existent partitions" in same_error(
        c, 1, "reassign", "--reassignment-json-file", plan_file([1, 2], [2, 3], [3, 1]))
    assert same_error(c, 1, "elect-leaders", "--preferred", "--topic", "no-such-topic") == \
        "Error: Topic 'no-such-topic' does not exist. (UNKNOWN_TOPIC_OR_PARTITION)"


def test_unclean_election_through_the_brokers(cluster):
    """Partition replicas [2, 3]: broker 3 leaves the ISR, then the leader 2 stops; with only 3 back, the
    partition has no leader until an unclean election (refused through ZooKeeper, which cannot ask for one)."""
    c = cluster
    t = unique("unclean")
    ok(kadmin(c, "zk", "create-topic", t, "--replica-assignment", "2:3", "--wait"))
    settled(c, t)
    try:
        c.brokers[3].terminate()
        wait_until(lambda: c.zk.get_partition_state(t, 0).isr == [2], 20, 0.1, "broker 3 out of the ISR")
        c.brokers[2].terminate()
        c.brokers[3].start()
        c.wait_ready([1, 3])
        wait_until(lambda: doc(c, "bs", "describe-topic", t, "--unavailable-partitions")["topics"], 20, 0.2,
                   f"{t}-0 offline")
        r = kadmin(c, "zk", "elect-leaders", "--unclean", "--topic", t)
        assert one_error(r, 2).startswith("Error: Unclean leader election is only possible through the Admin")
        r = kadmin(c, "bs", "elect-leaders", "--preferred", "--topic", t)
        assert r.exit_code == 1 and r.stderr.splitlines()[-1] == "Error: 1 replica(s) could not be elected"
        assert [f["error"] for f in json.loads(r.stdout)["failed"]] == ["PREFERRED_LEADER_NOT_AVAILABLE"]
        r = kadmin(c, "bs", "elect-leaders", "--unclean", "--topic", t, "--timeout", 20)
        assert json.loads(ok(r)) == {"election_type": "unclean", "elected": [{"topic": t, "partition": 0}],
                                     "not_needed": [], "failed": []}
        assert c.zk.get_partition_state(t, 0).leader == 3
    finally:
        for b in BROKERS:
            if not c.brokers[b].alive():
                c.brokers[b].start()
        c.wait_ready(BROKERS)
    settled(c, t)


# ---- usage and reachability --------------------------------------------------------------------------------------

def test_exit_statuses(cluster):
    port = free_port()
    for args in (["list-topics"], ["describe-config", "--topic", "t"], ["cluster", "describe"]):
        r = CliRunner().invoke(cli, ["--bootstrap-server", f"127.0.0.1:{port}", *args])
        assert one_error(r, 3) == (f"Error: No broker of 127.0.0.1:{port} could be reached (Cannot connect to "
                                   f"127.0.0.1:{port}: Connection refused).")
    for args, fragment in [
        (["--bootstrap-server", "nohostport", "list-topics"], "'nohostport' is not HOST:PORT"),
        (["--bootstrap-server", cluster.bootstrap, "alter-config", "--add-config", "a=1"], "Give the entity"),
        (["--bootstrap-server", cluster.bootstrap, "describe-config", "--topic", "t", "--broker", "1"],
         "only one of --topic, --broker and --broker-defaults"),
        (["--bootstrap-server", cluster.bootstrap, "--output", "yaml", "list-topics"], "'yaml' is not one of"),
    ]:
        r = CliRunner().invoke(cli, args)
        assert fragment in one_error(r, 2), args
    help_text = CliRunner().invoke(cli, ["--help"]).stdout
    assert "Exit status:" in help_text and "3  cluster unreachable" in help_text
