"""kadmin alter-config / describe-config against a real ZooKeeper: the /config/topics/<T> znode and the
/config/changes notification exactly as Kafka 2.8's `kafka-configs.sh --zookeeper` writes them, what it prints,
and how it refuses (one error line, exit 1, nothing written). No broker processes: a fake broker registration
is enough to create topics."""
import pytest

from admin_cli.configs import parse_add_config
from tests.integration.test_kadmin import kadmin, one_error_line, raw, register_brokers


@pytest.fixture
def topic(zk_connect, zk_client):
    register_brokers(zk_client, 0)
    r = kadmin(zk_connect, "create-topic", "orders", "--partitions", 1, "--replication-factor", 1,
               "--config", "retention.ms=1000")
    assert r.exit_code == 0, r.stderr
    return "orders"


def changes(zk_client):
    return sorted(zk_client.zk.get_children("/config/changes"))


def test_add_replace_and_delete_write_config_then_notification(zk_connect, zk_client, topic):
    r = kadmin(zk_connect, "alter-config", "--topic", topic,
               "--add-config", "retention.ms=86400000,max.message.bytes=2048", "--add-config", "segment.ms=60000")
    assert (r.exit_code, r.stdout, r.stderr) == (0, "Completed updating config for topic orders.\n", "")
    config, config_stat = raw(zk_client, "/config/topics/orders")
    assert config == {"version": 1, "config": {"retention.ms": "86400000", "max.message.bytes": "2048",
                                               "segment.ms": "60000"}}
    assert changes(zk_client) == ["config_change_0000000000"]
    data, note_stat = zk_client.zk.get("/config/changes/config_change_0000000000")
    assert data == b'{"version":2,"entity_path":"topics/orders"}'
    assert config_stat.mzxid < note_stat.czxid  # config first, then the notification

    r = kadmin(zk_connect, "alter-config", "--topic", topic, "--delete-config", "max.message.bytes,segment.ms",
               "--add-config", "min.insync.replicas=2")
    assert r.exit_code == 0, r.stderr
    assert raw(zk_client, "/config/topics/orders")[0] == {
        "version": 1, "config": {"retention.ms": "86400000", "min.insync.replicas": "2"}}
    assert changes(zk_client) == ["config_change_0000000000", "config_change_0000000001"]
    assert raw(zk_client, "/config/changes/config_change_0000000001")[0] == {
        "version": 2, "entity_path": "topics/orders"}


def test_list_values_in_brackets(zk_connect, zk_client, topic):
    r = kadmin(zk_connect, "alter-config", "--topic", topic,
               "--add-config", "cleanup.policy=[compact,delete],retention.ms = 5")
    assert r.exit_code == 0, r.stderr
    assert raw(zk_client, "/config/topics/orders")[0]["config"] == {"cleanup.policy": "compact,delete",
                                                                    "retention.ms": "5"}
    assert parse_add_config(["a=[x,y],b=1", "c="]) == {"a": "x,y", "b": "1", "c": ""}


@pytest.mark.parametrize("args, key", [
    (["--add-config", "retention.ms=soon"], "retention.ms"),
    (["--add-config", "segment.ms=1000,min.insync.replicas=0"], "min.insync.replicas"),
    (["--add-config", "cleanup.policy=[compact,forever]"], "cleanup.policy"),
    (["--add-config", "no.such.config=1"], "no.such.config"),
])
def test_invalid_value_names_the_key_and_writes_nothing(zk_connect, zk_client, topic, args, key):
    before, stat = raw(zk_client, "/config/topics/orders")
    r = kadmin(zk_connect, "alter-config", "--topic", topic, *args)
    assert r.exit_code == 1
    one_error_line(r, key)
    after, stat_after = raw(zk_client, "/config/topics/orders")
    assert after == before and stat_after.version == stat.version
    assert changes(zk_client) == []


def test_unknown_topic(zk_connect, zk_client, topic):
    r = kadmin(zk_connect, "alter-config", "--topic", "nope", "--add-config", "retention.ms=1")
    assert r.exit_code == 1
    one_error_line(r, "Topic 'nope' does not exist.")
    assert not zk_client.zk.exists("/config/topics/nope")
    assert changes(zk_client) == []
    r = kadmin(zk_connect, "describe-config", "--topic", "nope")
    assert r.exit_code == 1
    one_error_line(r, "Topic 'nope' does not exist.")


def test_delete_of_a_key_not_set_is_refused(zk_connect, zk_client, topic):
    r = kadmin(zk_connect, "alter-config", "--topic", topic, "--delete-config", "retention.ms,segment.ms",
               "--delete-config", "flush.ms")
    assert r.exit_code == 1
    one_error_line(r, "Invalid config(s): segment.ms,flush.ms")
    assert raw(zk_client, "/config/topics/orders")[0]["config"] == {"retention.ms": "1000"}
    assert changes(zk_client) == []


def test_usage_errors_exit_2(zk_connect, zk_client, topic):
    r = kadmin(zk_connect, "alter-config", "--topic", topic)
    assert r.exit_code == 2 and "--add-config or --delete-config" in r.stderr
    r = kadmin(zk_connect, "alter-config", "--topic", topic, "--add-config", "retention.ms")
    assert r.exit_code == 2 and "key=val" in r.stderr
    assert changes(zk_client) == []


def test_describe_config(zk_connect, zk_client, topic):
    assert kadmin(zk_connect, "create-topic", "bare", "--partitions", 1, "--replication-factor", 1).exit_code == 0
    assert kadmin(zk_connect, "alter-config", "--topic", topic,
                  "--add-config", "cleanup.policy=[compact,delete]").exit_code == 0
    r = kadmin(zk_connect, "describe-config", "--topic", topic)
    assert (r.exit_code, r.stderr) == (0, "")
    assert r.stdout == ("Dynamic configs for topic orders are:\n"
                        "  Name            Value\n"
                        "  cleanup.policy  compact,delete\n"
                        "  retention.ms    1000\n")
    r = kadmin(zk_connect, "describe-config")
    assert r.exit_code == 0
    assert r.stdout.startswith("Dynamic configs for topic bare are:\nDynamic configs for topic orders are:\n")
    assert r.stdout.count("Name") == 1
    # --all needs the brokers.
    r = kadmin(zk_connect, "describe-config", "--topic", topic, "--all")
    assert r.exit_code == 2
    one_error_line(r, "--all needs --bootstrap-server")
