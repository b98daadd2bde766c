"""kadmin against a real ZooKeeper: the znodes it writes (field for field as Kafka 2.8's AdminZkClient),
what it prints, and how it fails. Each test gets its own chroot (fixture zk_connect)."""
import json
import os
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from admin_cli.main import cli
from kbroker.cluster import free_port
from zk import znodes as z

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def kadmin(zk_connect, *args, env=None):
    result = CliRunner().invoke(cli, ["--zookeeper", zk_connect, *map(str, args)], env=env,
                                catch_exceptions=False)
    return result


def register_brokers(zk_client, *ids, rack=None):
    """What a starting broker does: create Kafka's top-level paths, then its ephemeral /brokers/ids/<id>."""
    zk_client.create_top_level_paths()
    for bid in ids:
        zk_client.register_broker(z.BrokerInfo(bid, [z.EndPoint("PLAINTEXT", "127.0.0.1", 9090 + bid)], rack=rack))


def raw(zk_client, path):
    data, stat = zk_client.zk.get(path)
    return (json.loads(data) if data else data), stat


def one_error_line(result, *fragments):
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    assert "Traceback" not in result.stderr
    for f in fragments:
        assert f in lines[0]
    return lines[0]


def test_create_writes_config_then_topic_znode_exactly_as_kafka(zk_connect, zk_client):
    register_brokers(zk_client, 1, 2, 3)
    r = kadmin(zk_connect, "create-topic", "orders", "--partitions", 6, "--replication-factor", 3,
               "--config", "retention.ms=86400000", "--config", "cleanup.policy=compact,delete")
    assert (r.exit_code, r.stdout, r.stderr) == (0, "Created topic orders.\n", "")

    config, config_stat = raw(zk_client, "/config/topics/orders")
    assert config == {"version": 1, "config": {"retention.ms": "86400000", "cleanup.policy": "compact,delete"}}
    topic, topic_stat = raw(zk_client, "/brokers/topics/orders")
    assert set(topic) == {"version", "partitions", "adding_replicas", "removing_replicas"}  # no topic_id
    assert topic["version"] == 3
    assert topic["adding_replicas"] == {} and topic["removing_replicas"] == {}
    assert sorted(topic["partitions"]) == [str(p) for p in range(6)]
    for replicas in topic["partitions"].values():
        assert all(type(b) is int for b in replicas)
        assert len(replicas) == 3 and set(replicas) == {1, 2, 3}
    leaders = [topic["partitions"][str(p)][0] for p in range(6)]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3]
    # Config first, topic second (the controller reacts to the topic znode).
    assert config_stat.czxid < topic_stat.czxid
    # The client writes no partition state and no config change notification.
    assert zk_client.zk.get_children("/brokers/topics/orders") == []
    assert zk_client.zk.get_children("/config/changes") == []
    # Compact JSON, as Kafka writes it.
    assert b" " not in zk_client.zk.get("/brokers/topics/orders")[0]


def test_create_without_config_still_writes_config_znode(zk_connect, zk_client):
    register_brokers(zk_client, 0)
    assert kadmin(zk_connect, "create-topic", "t", "--partitions", 2, "--replication-factor", 1).exit_code == 0
    assert raw(zk_client, "/config/topics/t")[0] == {"version": 1, "config": {}}
    assert raw(zk_client, "/brokers/topics/t")[0]["partitions"] == {"0": [0], "1": [0]}


def test_round_trip_create_list_describe_delete(zk_connect, zk_client):
    register_brokers(zk_client, 1, 2)
    for name in ("beta", "alpha", "gamma"):
        assert kadmin(zk_connect, "create-topic", name, "--partitions", 2, "--replication-factor", 2).exit_code == 0
    r = kadmin(zk_connect, "list-topics")
    assert (r.exit_code, r.stdout) == (0, "alpha\nbeta\ngamma\n")
    # -o/--output also after the command's name
    for args in (["-o", "json", "list-topics"], ["list-topics", "-o", "json"], ["list-topics", "--output=json"]):
        r = kadmin(zk_connect, *args)
        assert r.exit_code == 0 and [t["name"] for t in json.loads(r.stdout)["topics"]] == ["alpha", "beta", "gamma"]

    # The controller's part, simulated: state for partition 0 only, and the backfilled topic id.
    assignment = zk_client.get_topic_assignment("beta")
    assignment.topic_id = "e5bbD9aKQxS4i7m3a2nN3Q"
    zk_client.zk.set("/brokers/topics/beta", z.TopicZNode.encode(assignment))
    leader = assignment.partitions[0][0]
    zk_client.create_recursive(z.TopicPartitionStateZNode.path("beta", 0),
                               z.TopicPartitionStateZNode.encode(z.LeaderAndIsr(leader, 0, [leader], 1)))
    zk_client.create_recursive(z.TopicPartitionStateZNode.path("beta", 1),
                               z.TopicPartitionStateZNode.encode(z.LeaderAndIsr(-1, 3, [], 1)))
    r = kadmin(zk_connect, "describe-topic", "beta")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == ("Topic: beta\tTopicId: e5bbD9aKQxS4i7m3a2nN3Q\tPartitionCount: 2\tReplicationFactor: 2\t"
                        "Configs:")
    assert lines[1].split() == ["Partition", "Leader", "Replicas", "Isr", "Status"]
    r0 = ",".join(map(str, assignment.partitions[0]))
    r1 = ",".join(map(str, assignment.partitions[1]))
    assert lines[2].split() == ["0", str(leader), r0, str(leader), "under-replicated"]  # ISR 1 of 2
    assert lines[3].split() == ["1", "none", r1, "offline"]  # leader -1, empty ISR
    assert len(lines) == 4
    # Columns are aligned under their headings.
    for heading in ("Leader", "Replicas", "Isr", "Status"):
        assert lines[2][lines[1].index(heading) - 1] == " " and lines[2][lines[1].index(heading)] != " "

    r = kadmin(zk_connect, "delete-topic", "beta")
    assert r.exit_code == 0
    assert r.stdout.splitlines()[0] == "Topic beta is marked for deletion."
    data, stat = zk_client.zk.get("/admin/delete_topics/beta")
    assert not data and stat.ephemeralOwner == 0  # null data, persistent
    # Deleting only marks: the topic stays until the controller removes it.
    assert zk_client.topic_exists("beta")
    r = kadmin(zk_connect, "list-topics")
    assert r.stdout == "alpha\nbeta - marked for deletion\ngamma\n"
    r = kadmin(zk_connect, "describe-topic", "beta")
    assert "MarkedForDeletion: true" in r.stdout.splitlines()[0]


def test_describe_before_the_controller_acts(zk_connect, zk_client):
    register_brokers(zk_client, 5)
    kadmin(zk_connect, "create-topic", "fresh", "--partitions", 3, "--replication-factor", 1,
           "--config", "min.insync.replicas=1", "--config", "cleanup.policy=compact")
    r = kadmin(zk_connect, "describe-topic", "fresh")
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert lines[0] == ("Topic: fresh\tTopicId: none\tPartitionCount: 3\tReplicationFactor: 1\t"
                        "Configs: cleanup.policy=compact,min.insync.replicas=1")
    assert [line.split() for line in lines[2:]] == [["0", "none", "5"], ["1", "none", "5"], ["2", "none", "5"]]


def test_describe_shows_reassignment_columns(zk_connect, zk_client):
    zk_client.create_topic_assignment("moving", z.TopicAssignment({0: [1, 2, 3]}, adding_replicas={0: [3]},
                                                                   removing_replicas={0: [1]}))
    r = kadmin(zk_connect, "describe-topic", "moving")
    lines = r.stdout.splitlines()
    assert "ReplicationFactor: 2" in lines[0]
    assert lines[1].split() == ["Partition", "Leader", "Replicas", "Isr", "Adding", "Removing"]
    assert lines[2].split() == ["0", "none", "1,2,3", "3", "1"]


def test_describe_unknown_topic(zk_connect):
    r = kadmin(zk_connect, "describe-topic", "nope")
    assert r.exit_code == 1
    one_error_line(r, "Topic 'nope' does not exist")


def test_delete_unknown_and_twice(zk_connect, zk_client):
    register_brokers(zk_client, 1)
    r = kadmin(zk_connect, "delete-topic", "nope")
    assert r.exit_code == 1
    one_error_line(r, "nope", "does not exist")
    assert not zk_client.zk.exists("/admin/delete_topics/nope")

    kadmin(zk_connect, "create-topic", "t", "--partitions", 1, "--replication-factor", 1)
    assert kadmin(zk_connect, "delete-topic", "t").exit_code == 0
    r = kadmin(zk_connect, "delete-topic", "t")
    assert r.exit_code == 1
    one_error_line(r, "already marked for deletion")


def test_delete_internal_topic_refused(zk_connect, zk_client):
    zk_client.create_topic_assignment("__consumer_offsets", z.TopicAssignment({0: [1]}))
    r = kadmin(zk_connect, "delete-topic", "__consumer_offsets")
    assert r.exit_code == 1
    one_error_line(r, "internal topic")
    assert not zk_client.zk.exists("/admin/delete_topics/__consumer_offsets")


def test_rf_larger_than_live_brokers(zk_connect, zk_client):
    register_brokers(zk_client, 1)
    r = kadmin(zk_connect, "create-topic", "t", "--partitions", 1, "--replication-factor", 3)
    assert r.exit_code == 1
    assert one_error_line(r) == ("Error: Replication factor: 3 larger than available brokers: 1. "
                                 "(INVALID_REPLICATION_FACTOR)")
    assert not zk_client.zk.exists("/brokers/topics/t")
    assert not zk_client.zk.exists("/config/topics/t")


def test_no_live_brokers(zk_connect, zk_client):
    r = kadmin(zk_connect, "create-topic", "t", "--partitions", 1, "--replication-factor", 1)
    assert r.exit_code == 1
    one_error_line(r, "larger than available brokers: 0")


def test_only_live_brokers_count(zk_connect, zk_client):
    from zk.client import KafkaZkClient
    other = KafkaZkClient(zk_connect, session_timeout_ms=6000).start()
    register_brokers(other, 2)
    register_brokers(zk_client, 1)
    assert kadmin(zk_connect, "create-topic", "a", "--partitions", 1, "--replication-factor", 2).exit_code == 0
    other.close()  # broker 2's ephemeral znode goes with its session
    r = kadmin(zk_connect, "create-topic", "b", "--partitions", 1, "--replication-factor", 2)
    assert r.exit_code == 1
    one_error_line(r, "Replication factor: 2 larger than available brokers: 1.")


def test_duplicate_topic_keeps_the_original(zk_connect, zk_client):
    register_brokers(zk_client, 1)
    kadmin(zk_connect, "create-topic", "t", "--partitions", 2, "--replication-factor", 1, "--config", "retention.ms=1000")
    before = zk_client.zk.get("/brokers/topics/t")[0]
    r = kadmin(zk_connect, "create-topic", "t", "--partitions", 5, "--replication-factor", 1,
               "--config", "retention.ms=5")
    assert r.exit_code == 1
    one_error_line(r, "Topic 't' already exists.")
    assert zk_client.zk.get("/brokers/topics/t")[0] == before
    assert raw(zk_client, "/config/topics/t")[0]["config"] == {"retention.ms": "1000"}


@pytest.mark.parametrize("name", ["..", ".", "x" * 250, "bad name", "bad/name", "émoji"])
def test_invalid_names_write_nothing(zk_connect, zk_client, name):
    register_brokers(zk_client, 1)
    r = kadmin(zk_connect, "create-topic", name, "--partitions", 1, "--replication-factor", 1)
    assert r.exit_code == 1
    assert "Error: " in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""
    assert zk_client.get_all_topics() == []
    assert zk_client.zk.get_children("/config/topics") == []


def test_empty_name(zk_connect, zk_client):
    register_brokers(zk_client, 1)
    r = kadmin(zk_connect, "create-topic", "", "--partitions", 1, "--replication-factor", 1)
    assert r.exit_code == 1
    one_error_line(r, "empty")


def test_colliding_names(zk_connect, zk_client):
    register_brokers(zk_client, 1)
    r = kadmin(zk_connect, "create-topic", "my.topic", "--partitions", 1, "--replication-factor", 1)
    assert r.exit_code == 0
    assert "WARNING" in r.stderr  # as kafka-topics.sh warns about '.' and '_'
    r = kadmin(zk_connect, "create-topic", "my_topic", "--partitions", 1, "--replication-factor", 1)
    assert r.exit_code == 1
    error = [line for line in r.stderr.splitlines() if line.startswith("Error: ")]
    assert len(error) == 1 and "collides" in error[0] and "my.topic" in error[0]
    assert zk_client.get_all_topics() == ["my.topic"]
    assert not zk_client.zk.exists("/config/topics/my_topic")
    # Names that differ otherwise are fine.
    assert kadmin(zk_connect, "create-topic", "my-topic", "--partitions", 1, "--replication-factor", 1).exit_code == 0


@pytest.mark.parametrize("config, fragment", [
    ("retention.mss=1", "Unknown topic config name: retention.mss"),
    ("min.insync.replicas=0", "min.insync.replicas"),
    ("cleanup.policy=compacted", "compacted"),
    ("segment.bytes=10", "at least 14"),
    ("message.timestamp.type=Now", "CreateTime"),
    ("unclean.leader.election.enable=maybe", "true or false"),
    ("retention.ms=forever", "LONG"),
    ("message.format.version=9.9", "not a valid version"),
])
def test_invalid_configs_write_nothing(zk_connect, zk_client, config, fragment):
    register_brokers(zk_client, 1)
    r = kadmin(zk_connect, "create-topic", "t", "--partitions", 1, "--replication-factor", 1, "--config", config)
    assert r.exit_code == 1
    one_error_line(r, fragment)
    assert not zk_client.zk.exists("/brokers/topics/t")
    assert not zk_client.zk.exists("/config/topics/t")


def test_malformed_config_is_a_usage_error(zk_connect, zk_client):
    register_brokers(zk_client, 1)
    r = kadmin(zk_connect, "create-topic", "t", "--partitions", 1, "--replication-factor", 1, "--config", "retention.ms")
    assert r.exit_code == 2
    one_error_line(r, "--config", "key=value")
    assert not zk_client.zk.exists("/brokers/topics/t")


def test_explicit_replica_assignment(zk_connect, zk_client):
    register_brokers(zk_client, 1)  # Kafka does not require the named brokers to be alive
    r = kadmin(zk_connect, "create-topic", "t", "--replica-assignment", "1:2,2:3,3:1")
    assert r.exit_code == 0, r.stderr
    topic = raw(zk_client, "/brokers/topics/t")[0]
    assert topic == {"version": 3, "partitions": {"0": [1, 2], "1": [2, 3], "2": [3, 1]},
                     "adding_replicas": {}, "removing_replicas": {}}


@pytest.mark.parametrize("args, code, fragment", [
    (["--replica-assignment", "1:2,3"], 1, "different replication factor"),
    (["--replica-assignment", "1:1"], 1, "duplicate"),
    (["--replica-assignment", "1:x"], 2, "--replica-assignment"),
    (["--replica-assignment", "1:2", "--partitions", "1"], 2, "cannot be combined"),
    (["--partitions", "1"], 2, "--replication-factor"),
    (["--partitions", "0", "--replication-factor", "1"], 2, "--partitions"),
    (["--partitions", "1", "--replication-factor", "0"], 2, "--replication-factor"),
])
def test_bad_partition_options(zk_connect, zk_client, args, code, fragment):
    register_brokers(zk_client, 1, 2, 3)
    r = kadmin(zk_connect, "create-topic", "t", *args)
    assert r.exit_code == code
    one_error_line(r, fragment)
    assert not zk_client.zk.exists("/brokers/topics/t")


def test_cluster_describe(zk_connect, zk_client):
    r = kadmin(zk_connect, "cluster", "describe")
    assert (r.exit_code, r.stdout) == (0, "Cluster id: none\nController: none\nBrokers: none\n")

    zk_client.create_or_get_cluster_id("q5tE3dXtR0mFJ0hYt1bY9w")
    register_brokers(zk_client, 2, rack="r2")
    zk_client.register_broker(z.BrokerInfo(1, [z.EndPoint("PLAINTEXT", "h1", 9092),
                                              z.EndPoint("SSL", "h1", 9093, "SSL")]))
    zk_client.register_controller_and_increment_epoch(2)
    r = kadmin(zk_connect, "cluster", "describe")
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert lines[:2] == ["Cluster id: q5tE3dXtR0mFJ0hYt1bY9w", "Controller: 2"]
    # The PLAINTEXT endpoint (the one clients bootstrap from, as --bootstrap-server shows it).
    assert [line.split() for line in lines[2:]] == [["Broker", "Host", "Port", "Rack"],
                                                     ["1", "h1", "9092", "none"],
                                                     ["2", "127.0.0.1", "9092", "r2"]]


def test_zookeeper_from_environment(zk_connect, zk_client):
    register_brokers(zk_client, 1)
    runner = CliRunner()
    r = runner.invoke(cli, ["create-topic", "envtopic", "--partitions", "1", "--replication-factor", "1"],
                      env={"KADMIN_ZOOKEEPER": zk_connect})
    assert r.exit_code == 0, r.stderr
    assert zk_client.topic_exists("envtopic")


def test_missing_zookeeper_is_a_usage_error():
    r = CliRunner().invoke(cli, ["list-topics"], env={"KADMIN_ZOOKEEPER": None})
    assert r.exit_code == 2
    one_error_line(r, "--zookeeper")


def test_zookeeper_and_bootstrap_server(zk_connect, zk_client):
    r = CliRunner().invoke(cli, ["--zookeeper", zk_connect, "--bootstrap-server", "localhost:9092", "list-topics"])
    assert r.exit_code == 2
    one_error_line(r, "only one of --zookeeper and --bootstrap-server")
    # --bootstrap-server on the command line wins over KADMIN_ZOOKEEPER (nothing listens there: exit 3).
    r = CliRunner().invoke(cli, ["--bootstrap-server", f"127.0.0.1:{_closed_port()}", "list-topics"],
                           env={"KADMIN_ZOOKEEPER": zk_connect})
    assert r.exit_code == 3
    one_error_line(r, "could be reached")


def test_help_needs_no_zookeeper():
    r = CliRunner().invoke(cli, ["create-topic", "--help"], env={"KADMIN_ZOOKEEPER": None})
    assert r.exit_code == 0 and "--replica-assignment" in r.stdout


def _closed_port():
    return free_port()


def test_unreachable_zookeeper_fails_within_timeout():
    connect = f"127.0.0.1:{_closed_port()}/kafka"
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "admin_cli.main", "--zookeeper", connect, "--zk-timeout", "1.5",
                        "list-topics"], cwd=REPO, capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - t0
    assert p.returncode == 3
    assert p.stdout == ""
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("Error: ") and connect in lines[0]
    assert 1.4 < elapsed < 30, elapsed   # it waited for --zk-timeout, then gave up (no hang)


def test_module_entry_point_round_trip(zk_connect, zk_client):
    register_brokers(zk_client, 1, 2)

    def run(*args):
        return subprocess.run([sys.executable, "-m", "admin_cli.main", "--zookeeper", zk_connect, *args],
                              cwd=REPO, capture_output=True, text=True, timeout=60)
    p = run("create-topic", "sub", "--partitions", "4", "--replication-factor", "2")
    assert (p.returncode, p.stdout, p.stderr) == (0, "Created topic sub.\n", "")
    p = run("list-topics")
    assert (p.returncode, p.stdout) == (0, "sub\n")
    p = run("describe-topic", "sub")
    assert p.returncode == 0 and p.stdout.startswith("Topic: sub\tTopicId: none\tPartitionCount: 4\t")
    p = run("delete-topic", "sub")
    assert p.returncode == 0 and zk_client.zk.exists("/admin/delete_topics/sub")


def test_bare_group_shows_help_and_unknown_command_is_one_line():
    r = CliRunner().invoke(cli, ["cluster"])
    assert r.exit_code == 2 and "describe" in r.stderr and not r.stderr.startswith("Error")
    r = CliRunner().invoke(cli, ["nope"])
    assert r.exit_code == 2
    one_error_line(r, "No such command 'nope'")
