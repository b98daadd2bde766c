"""A 3-broker cluster on a real ZooKeeper: what brokers and the controller write there, what Metadata shows,
and what happens when the controller is killed, a broker stops cleanly, or a session expires."""
from __future__ import annotations

import json
import os
import signal
import time

from click.testing import CliRunner
from kafka.protocol.metadata import MetadataRequest

from admin_cli.main import cli as kadmin
from kbroker.cluster import BrokerProcess, free_port
from kbroker.metadata_cache import uuid_to_topic_id
from kbroker.protocol.client import Connection
from kbroker.protocol.interbroker import UpdateMetadataRequest
from tests.integration.conftest import SESSION_TIMEOUT_MS, wait_until
from zk.launcher import zkcli_get


def create_topic(cluster, name, partitions, rf):
    result = CliRunner().invoke(kadmin, ["--zookeeper", cluster.zk_connect, "create-topic", name,
                                         "--partitions", str(partitions), "--replication-factor", str(rf)])
    assert result.exit_code == 0, result.output


def metadata(bootstrap: str, topics=None, version: int = 9):
    host, port = bootstrap.split(":")
    client = Connection(host, int(port), "test")
    try:
        req = MetadataRequest(version=version, topics=None if topics is None else
                              [MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                              allow_auto_topic_creation=False)
        return client.send(req)
    finally:
        client.close()


def leaders(response, topic):
    t = next(t for t in response.topics if t.name == topic)
    return {p.partition_index: (p.leader_id, list(p.isr_nodes), p.error_code) for p in t.partitions}


def wait_topic(cluster, broker, topic, partitions):
    def ready():
        m = metadata(broker.bootstrap, [topic])
        ls = leaders(m, topic)
        return m if len(ls) == partitions and all(e == 0 for _, _, e in ls.values()) else None
    return wait_until(ready, message=f"{topic} in Metadata from broker {broker.id}")


def test_three_brokers_topic_and_kafka_znodes(cluster3):
    c = cluster3
    create_topic(c, "orders", 6, 3)
    m = wait_topic(c, c.brokers[2], "orders", 6)
    assert sorted((b.node_id, b.port) for b in m.brokers) == sorted((i, b.port) for i, b in c.brokers.items())
    assert m.controller_id in c.brokers and m.cluster_id
    ls = leaders(m, "orders")
    # Kafka's rack-unaware assignment spreads leadership evenly: each broker leads 2 of 6.
    counts = {b: sum(1 for l, _, _ in ls.values() if l == b) for b in c.brokers}
    assert counts == {1: 2, 2: 2, 3: 2}
    assert all(sorted(isr) == [1, 2, 3] for _, isr, _ in ls.values())

    # The znodes, as zkCli.sh shows them, have Kafka 2.8's fields and types.
    broker = json.loads(zkcli_get(c.zk_connect, "/brokers/ids/1"))
    assert set(broker) == {"version", "host", "port", "endpoints", "jmx_port", "timestamp",
                           "listener_security_protocol_map", "features"}
    assert broker["version"] == 5 and broker["port"] == c.brokers[1].port and broker["host"] == "127.0.0.1"
    assert broker["endpoints"] == [f"PLAINTEXT://127.0.0.1:{c.brokers[1].port}"]
    assert broker["jmx_port"] == -1 and broker["timestamp"].isdigit() and broker["features"] == {}
    assert broker["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}

    topic = json.loads(zkcli_get(c.zk_connect, "/brokers/topics/orders"))
    assert set(topic) == {"version", "partitions", "adding_replicas", "removing_replicas", "topic_id"}
    assert topic["version"] == 3 and sorted(topic["partitions"]) == [str(p) for p in range(6)]
    assert topic["adding_replicas"] == {} and topic["removing_replicas"] == {}
    assert isinstance(topic["topic_id"], str) and len(topic["topic_id"]) == 22  # base64 of 16 bytes
    m11 = metadata(c.brokers[1].bootstrap, ["orders"], version=11)
    assert uuid_to_topic_id(m11.topics[0].topic_id) == topic["topic_id"]

    state = json.loads(zkcli_get(c.zk_connect, "/brokers/topics/orders/partitions/0/state"))
    assert set(state) == {"controller_epoch", "leader", "version", "leader_epoch", "isr"}
    assert state["version"] == 1 and state["leader_epoch"] == 0 and state["leader"] == topic["partitions"]["0"][0]
    assert state["isr"] == topic["partitions"]["0"]

    controller = json.loads(zkcli_get(c.zk_connect, "/controller"))
    assert set(controller) == {"version", "brokerid", "timestamp"}
    assert controller["version"] == 1 and controller["brokerid"] == m.controller_id
    assert isinstance(controller["timestamp"], str)
    epoch = zkcli_get(c.zk_connect, "/controller_epoch")
    assert epoch == "1" and state["controller_epoch"] == 1
    cluster_id = json.loads(zkcli_get(c.zk_connect, "/cluster/id"))
    assert cluster_id == {"version": "1", "id": m.cluster_id}
    assert json.loads(zkcli_get(c.zk_connect, "/config/topics/orders")) == {"version": 1, "config": {}}
    # meta.properties in each log dir records the cluster and the broker.
    meta = open(os.path.join(c.brokers[3].dir, "data", "meta.properties")).read()
    assert f"cluster.id={m.cluster_id}" in meta and "broker.id=3" in meta and "version=0" in meta


def test_kill_controller_moves_control_and_leadership(cluster3):
    c = cluster3
    create_topic(c, "orders", 6, 3)
    wait_topic(c, c.brokers[1], "orders", 6)
    old_epoch, _ = c.zk.get_controller_epoch()
    victim = c.zk.get_controller_id()
    led_before = {p: s.leader for p, s in ((p, c.zk.get_partition_state("orders", p)) for p in range(6))}
    assert list(led_before.values()).count(victim) == 2

    killed_at = time.monotonic()
    c.brokers[victim].kill9()
    wait_until(lambda: victim not in c.zk.get_broker_ids(), timeout=SESSION_TIMEOUT_MS / 1000 + 5,
               message="the dead broker's znode to disappear")
    gone_after = time.monotonic() - killed_at
    assert gone_after < SESSION_TIMEOUT_MS / 1000 + 3

    new_controller = wait_until(lambda: (c.zk.get_controller_id() not in (None, victim)) and c.zk.get_controller_id(),
                                message="a new controller")
    assert new_controller != victim
    assert c.zk.get_controller_epoch()[0] > old_epoch

    survivors = [b for b in c.brokers.values() if b.id != victim]

    def moved():
        for b in survivors:
            ls = leaders(metadata(b.bootstrap, ["orders"]), "orders")
            if any(l == victim or e != 0 or victim in isr for l, isr, e in ls.values()):
                return None
        return ls
    ls = wait_until(moved, message="new leaders from the ISR in Metadata from every live broker")
    for p, (leader, isr, _) in ls.items():
        state = c.zk.get_partition_state("orders", p)
        assert state.leader == leader and leader in state.isr and victim not in state.isr
        if led_before[p] == victim:
            assert state.leader_epoch == 1  # re-elected once
    m = metadata(survivors[0].bootstrap)
    assert m.controller_id == new_controller
    assert sorted(b.node_id for b in m.brokers) == sorted(b.id for b in survivors)


def test_restarted_broker_gets_its_partitions_back_into_metadata(cluster3):
    c = cluster3
    create_topic(c, "t", 3, 3)
    wait_topic(c, c.brokers[1], "t", 3)
    b3 = c.brokers[3]
    assert b3.terminate() == 0
    # A clean shutdown closes the session: the znode goes at once, not after the session timeout.
    wait_until(lambda: 3 not in c.zk.get_broker_ids(), timeout=2, message="broker 3's znode removed on SIGTERM")
    assert "shut down completed" in b3.log()
    b3.start()
    c.wait_ready([1, 2, 3])
    m = wait_until(lambda: (lambda m: m if len(m.brokers) == 3 else None)(metadata(b3.bootstrap, ["t"])),
                   message="the restarted broker to get full metadata")
    assert sorted(len(p.replica_nodes) for p in m.topics[0].partitions) == [3, 3, 3]


def test_controlled_shutdown_ignores_single_replica_partitions(cluster3):
    # Three partitions of one replica each: every broker leads one that cannot move. As in Kafka, the controller
    # leaves them out of the partitions the broker "still leads", so the first controlled shutdown succeeds.
    c = cluster3
    create_topic(c, "solo", 3, 1)
    b3 = c.brokers[3]
    # (asked of broker 3 itself: another broker's answer does not say broker 3 has its UpdateMetadata yet)
    assert 3 in [leader for leader, _, _ in leaders(wait_topic(c, b3, "solo", 3), "solo").values()]
    assert b3.terminate() == 0
    assert "controlled shutdown succeeded" in b3.log()
    assert "controlled shutdown attempt" not in b3.log()


def test_duplicate_broker_id_refused(cluster_factory):
    c = cluster_factory(1)
    first = c.brokers[1]
    dup = c.add(1, start=False)
    dup.dir = dup.dir + "-second"  # its own log dir: the id clash is what must stop it
    os.makedirs(dup.dir, exist_ok=True)
    props = open(first.config_path).read().replace(first.dir, dup.dir)
    dup.config_path = os.path.join(dup.dir, "server.properties")
    dup.log_path = os.path.join(dup.dir, "broker.log")
    open(dup.config_path, "w").write(props)
    dup.start()
    assert dup.proc.wait(30) == 1
    assert "broker id 1 is already registered" in dup.log()
    assert first.alive() and c.zk.get_broker_ids() == [1]


def test_shared_log_dir_refused(cluster_factory):
    """Two brokers never share a log dir: Kafka's .lock file."""
    c = cluster_factory(1)
    first = c.brokers[1]
    other = c.add(2, start=False)
    props = open(other.config_path).read().replace(other.dir + "/data", first.dir + "/data")
    open(other.config_path, "w").write(props)
    other.start()
    assert other.proc.wait(30) == 1
    assert "Failed to acquire lock on file .lock" in other.log()
    assert first.alive() and c.zk.get_broker_ids() == [1]


def test_cluster_id_mismatch_refused(cluster_factory):
    c = cluster_factory(0)
    b = c.add(1, start=False)
    os.makedirs(os.path.join(b.dir, "data"))
    with open(os.path.join(b.dir, "data", "meta.properties"), "w") as f:
        f.write("version=0\nbroker.id=1\ncluster.id=SomeOtherClusterId0000\n")
    b.start()
    assert b.proc.wait(30) == 1
    assert "doesn't match stored clusterId SomeOtherClusterId0000" in b.log()
    assert c.zk.get_broker_ids() == []


def test_generated_broker_id_from_seqid(cluster_factory):
    c = cluster_factory(0)
    b = c.add(-1)
    wait_until(lambda: c.zk.get_broker_ids() == [1001], message="broker 1001 registered")
    meta = open(os.path.join(b.dir, "data", "meta.properties")).read()
    assert "broker.id=1001" in meta
    # Restarting keeps the id stored in meta.properties.
    assert b.terminate() == 0
    b.start()
    wait_until(lambda: c.zk.get_broker_ids() == [1001], message="broker 1001 registered again")


def test_unreachable_zookeeper_fails_startup_with_one_line(tmp_path):
    """The broker's ZooKeeper client (gevent handler) reports an unreachable ZooKeeper as a startup error."""
    port = free_port()   # nothing listens there
    b = BrokerProcess.create(1, str(tmp_path / "broker-1"), f"127.0.0.1:{port}",
                             {"zookeeper.connection.timeout.ms": 1000}).start()
    assert b.proc.wait(30) == 1
    assert f"error: could not connect to ZooKeeper at 127.0.0.1:{port} within 1s" in b.log()


def test_sigterm_right_after_registration_is_a_clean_stop(cluster_factory):
    """The signal handlers are installed before startup: a broker told to stop the moment it registers (before
    its startup ends) still stops cleanly, once started."""
    c = cluster_factory(0)
    b = c.add(1)
    wait_until(lambda: c.zk.get_broker_ids() == [1], interval=0.005, message="broker 1 registered")
    assert b.terminate(30) == 0
    assert c.zk.get_broker_ids() == []


def test_sigterm_while_loading_stops_without_starting(tmp_path):
    """A stop sent the moment the process exists, long before the broker's handlers are installed (Python is still
    loading it): the broker notes it, exits 0 and never starts."""
    b = BrokerProcess.create(1, str(tmp_path / "broker-1"), f"127.0.0.1:{free_port()}").start()
    assert b.terminate(30) == 0
    assert "SIGTERM received while loading: stopped before starting" in b.log()
    assert "could not connect to ZooKeeper" not in b.log()


def test_stale_controller_epoch_refused(cluster1):
    c = cluster1
    b = c.brokers[1]
    wait_until(lambda: metadata(b.bootstrap).controller_id == 1, message="metadata from the controller")
    host, port = b.bootstrap.split(":")
    client = Connection(host, int(port), "old-controller")
    try:
        req = UpdateMetadataRequest(version=7, controller_id=9, controller_epoch=0, broker_epoch=-1,
                                    topic_states=[], live_brokers=[])
        resp = client.send(req)
    finally:
        client.close()
    assert resp.error_code == 11  # STALE_CONTROLLER_EPOCH
    assert [x.node_id for x in metadata(b.bootstrap).brokers] == [1]  # the cache was not emptied


def test_session_expiry_reregisters_with_new_epoch(cluster1):
    c = cluster1
    b = c.brokers[1]
    epoch_before = c.zk.get_broker(1).epoch
    b.proc.send_signal(signal.SIGSTOP)  # a long pause, as a GC pause or a frozen VM
    try:
        wait_until(lambda: 1 not in c.zk.get_broker_ids(), timeout=SESSION_TIMEOUT_MS / 1000 + 5,
                   message="session expiry")
    finally:
        b.proc.send_signal(signal.SIGCONT)
    info = wait_until(lambda: c.zk.get_broker(1), timeout=20, message="re-registration")
    assert info.epoch > epoch_before
    wait_until(lambda: c.zk.get_controller_id() == 1, message="re-election")
    wait_until(lambda: [x.node_id for x in metadata(b.bootstrap).brokers] == [1], message="metadata after expiry")
    assert "ZooKeeper session expired" in b.log()
    # The re-elected controller is really active: a new topic gets a leader.
    create_topic(c, "after-expiry", 1, 1)
    wait_topic(c, b, "after-expiry", 1)


def test_delete_topic_removes_it(cluster3):
    c = cluster3
    create_topic(c, "doomed", 2, 2)
    wait_topic(c, c.brokers[1], "doomed", 2)
    result = CliRunner().invoke(kadmin, ["--zookeeper", c.zk_connect, "delete-topic", "doomed"])
    assert result.exit_code == 0, result.output
    wait_until(lambda: not c.zk.topic_exists("doomed") and not c.zk.get_topic_deletions(),
               message="topic znodes and deletion marker removed")
    assert c.zk.get_entity_config("topics", "doomed") == {}
    for b in c.brokers.values():
        wait_until(lambda: metadata(b.bootstrap, ["doomed"]).topics[0].error_code == 3,  # UNKNOWN_TOPIC_OR_PARTITION
                   message=f"topic gone from broker {b.id}'s cache")
