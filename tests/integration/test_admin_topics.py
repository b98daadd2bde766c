"""CreateTopics and DeleteTopics against a real 3-broker cluster on a real ZooKeeper: confluent-kafka's
AdminClient (librdkafka) and kafka-python's KafkaAdminClient; the znodes Kafka would write and Metadata."""
from __future__ import annotations

import json

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.conftest import wait_until
from tests.integration.test_cluster import leaders, metadata, wait_topic


def _create(admin, topics, **kw):
    """{topic: None or KafkaError} for each NewTopic."""
    return _outcomes(admin.create_topics(topics, operation_timeout=15, request_timeout=20, **kw))


def _delete(admin, names):
    return _outcomes(admin.delete_topics(names, operation_timeout=15, request_timeout=20))


def _outcomes(futures) -> dict:
    """{topic: None or KafkaError} of confluent-kafka admin futures."""
    out = {}
    for name, fut in futures.items():
        try:
            fut.result(timeout=30)
            out[name] = None
        except KafkaException as e:
            out[name] = e.args[0]
    return out


def _znode(zk, path):
    data, _ = zk.get(path)
    return None if data is None else json.loads(data)


def test_create_and_delete_topics_with_admin_clients(cluster3):
    c = cluster3
    admin = AdminClient({"bootstrap.servers": c.bootstrap})

    # Created with configs; another with an explicit assignment.
    res = _create(admin, [NewTopic("with-configs", 3, 2, config={"retention.ms": "3600000",
                                                                 "cleanup.policy": "compact"}),
                          NewTopic("assigned", 4, replica_assignment=[[1, 2], [2, 3], [3, 1], [1, 3]])])
    assert res == {"with-configs": None, "assigned": None}
    node = _znode(c.zk, "/brokers/topics/with-configs")
    assert node["version"] == 3 and len(node["partitions"]) == 3
    assert all(len(set(r)) == 2 for r in node["partitions"].values())
    assert _znode(c.zk, "/config/topics/with-configs")["config"] == {"retention.ms": "3600000",
                                                                      "cleanup.policy": "compact"}
    node = _znode(c.zk, "/brokers/topics/assigned")
    assert node["partitions"] == {"0": [1, 2], "1": [2, 3], "2": [3, 1], "3": [1, 3]}
    assert _znode(c.zk, "/config/topics/assigned")["config"] == {}
    # The answer came once leaders were in the answering broker's (the controller's) metadata: it shows them at
    # once; the other brokers get them with the controller's UpdateMetadata, a moment later (as in Kafka).
    controller = c.brokers[_znode(c.zk, "/controller")["brokerid"]]
    for topic, n in (("with-configs", 3), ("assigned", 4)):
        ls = leaders(metadata(controller.bootstrap, [topic]), topic)
        assert len(ls) == n and all(leader >= 0 and err == 0 for leader, _, err in ls.values()), ls
        for b in c.brokers.values():
            wait_topic(c, b, topic, n)
    assert {p: v[0] for p, v in leaders(metadata(c.brokers[2].bootstrap, ["assigned"]), "assigned").items()} \
        == {0: 1, 1: 2, 2: 3, 3: 1}

    # validate_only writes nothing; errors come per topic with Kafka's codes.
    res = _create(admin, [NewTopic("only-checked", 2, 3)], validate_only=True)
    assert res == {"only-checked": None}
    assert not c.zk.topic_exists("only-checked") and c.zk.get("/config/topics/only-checked") == (None, None)
    res = _create(admin, [NewTopic("with-configs", 1, 1),                  # exists
                          NewTopic("rf-too-big", 1, 4),                    # 3 brokers
                          NewTopic("bad-config", 1, 1, config={"retention.ms": "soon"}),
                          NewTopic("unknown-config", 1, 1, config={"no.such.config": "1"}),
                          NewTopic("zero-partitions", 0, 1),
                          NewTopic("bad/name", 1, 1),
                          NewTopic("uneven", 2, replica_assignment=[[1, 2], [3]])])
    codes = {t: e.code() for t, e in res.items()}
    assert codes == {"with-configs": 36, "rf-too-big": 38, "bad-config": 40, "unknown-config": 40,
                     "zero-partitions": 37, "bad/name": 17, "uneven": 39}, codes
    assert "retention.ms" in res["bad-config"].str() and "no.such.config" in res["unknown-config"].str()
    for t in codes:
        if t != "with-configs":
            assert not c.zk.topic_exists(t)

    # Delete: znodes gone and every broker's metadata says unknown; an unknown topic is refused.
    res = _delete(admin, ["with-configs", "assigned", "never-was"])
    assert res["with-configs"] is None and res["assigned"] is None
    assert res["never-was"].code() == 3
    wait_until(lambda: not c.zk.topic_exists("with-configs") and not c.zk.topic_exists("assigned")
               and not c.zk.get_topic_deletions(), message="topic znodes and markers removed")
    assert c.zk.get("/config/topics/with-configs") == (None, None)
    for b in c.brokers.values():
        wait_until(lambda: metadata(b.bootstrap, ["with-configs"]).topics[0].error_code == 3,
                   message=f"topic gone from broker {b.id}'s cache")


def test_raw_requests_and_kafka_python_admin(cluster3):
    from kafka.admin import KafkaAdminClient, NewTopic as KNewTopic
    from kafka.protocol.admin import CreateTopicsRequest, DeleteTopicsRequest
    from kbroker.protocol.client import Connection

    c = cluster3
    controller = c.zk.get_controller_id()
    other = next(b for i, b in c.brokers.items() if i != controller)
    ctl = c.brokers[controller]

    def send(broker, req):
        host, port = broker.bootstrap.split(":")
        client = Connection(host, int(port), "test")
        try:
            return client.send(req)
        finally:
            client.close()

    T = CreateTopicsRequest.CreatableTopic
    # A duplicate name is refused for both entries; -1/-1 takes the broker defaults; v5 returns metadata.
    req = CreateTopicsRequest(version=5, topics=[T(name="dup", num_partitions=1, replication_factor=1,
                                                   assignments=[], configs=[]),
                                                 T(name="dup", num_partitions=1, replication_factor=1,
                                                   assignments=[], configs=[]),
                                                 T(name="defaults", num_partitions=-1, replication_factor=-1,
                                                   assignments=[], configs=[T.CreatableTopicConfig(
                                                       name="retention.ms", value="1000")]),
                                                 T(name="both", num_partitions=2, replication_factor=-1,
                                                   assignments=[T.CreatableReplicaAssignment(
                                                       partition_index=0, broker_ids=[1])], configs=[])],
                              timeout_ms=15000, validate_only=False)
    r = send(ctl, req)
    by = {}
    for t in r.topics:
        by.setdefault(t.name, []).append(t)
    assert [t.error_code for t in by["dup"]] == [42, 42]        # INVALID_REQUEST
    assert by["both"][0].error_code == 42
    d = by["defaults"][0]
    assert (d.error_code, d.num_partitions, d.replication_factor) == (0, 1, 1)
    assert [(x.name, x.value, x.config_source) for x in d.configs] == [("retention.ms", "1000", 1)]
    assert not c.zk.topic_exists("dup")
    # An empty name is an illegal name (it once looked up /brokers/topics itself and answered "already exists").
    empty = CreateTopicsRequest(version=5, topics=[T(name="", num_partitions=1, replication_factor=1, assignments=[],
                                                     configs=[])], timeout_ms=15000, validate_only=False)
    (t,) = send(ctl, empty).topics
    assert (t.error_code, t.error_message) == (17, "Topic name is illegal, it can't be empty.")
    # Not the controller: NOT_CONTROLLER (41) for each topic.
    r = send(other, req)
    assert {t.error_code for t in r.topics} == {41}
    r = send(other, DeleteTopicsRequest(version=4, topic_names=["defaults"], timeout_ms=1000))
    assert [(t.name, t.error_code) for t in r.responses] == [("defaults", 41)]

    # kafka-python's admin client, creating then deleting.
    admin = KafkaAdminClient(bootstrap_servers=c.bootstrap, request_timeout_ms=20000)
    try:
        admin.create_topics([KNewTopic("kp-topic", 2, 3, topic_configs={"max.message.bytes": "200000"})],
                            timeout_ms=15000)
        assert len(_znode(c.zk, "/brokers/topics/kp-topic")["partitions"]) == 2
        assert c.zk.get_entity_config("topics", "kp-topic") == {"max.message.bytes": "200000"}
        admin.delete_topics(["kp-topic", "defaults"], timeout_ms=15000)
    finally:
        admin.close()
    # Marker read first: the controller removes /brokers/topics/T before the marker, so a topic still there has
    # a marker read before it (the other order races the deletion's completion).
    marked = "kp-topic" in c.zk.get_topic_deletions()
    assert marked or not c.zk.topic_exists("kp-topic")
    for b in c.brokers.values():
        wait_until(lambda: metadata(b.bootstrap, ["kp-topic"]).topics[0].error_code == 3,
                   message=f"kp-topic gone from broker {b.id}'s cache")

    # A topic whose deletion waits (a replica on broker 9, which does not exist): elections refuse it with
    # INVALID_TOPIC_EXCEPTION "The topic is being deleted", through the API and through kadmin in both modes.
    from click.testing import CliRunner
    from kafka.protocol.admin import ElectLeadersRequest
    from admin_cli.main import cli as kadmin
    from zk import admin as zk_admin
    zk_admin.AdminZkClient(c.zk).create_topic("doomed", {}, assignment={0: [1, 9]})
    wait_until(lambda: c.zk.get_partition_state("doomed", 0), message="doomed has a leader")
    c.zk.create_delete_topic_marker("doomed")
    wait_until(lambda: "doomed" in c.zk.get_topic_deletions(), message="doomed marked")
    req = ElectLeadersRequest(version=1, election_type=0, timeout_ms=10000, topic_partitions=[
        ElectLeadersRequest.TopicPartitions(topic="doomed", partitions=[0])])

    def election_result():
        (topic,) = send(ctl, req).replica_election_results
        (p,) = topic.partition_result
        return p if p.error_code != 84 else None   # PREFERRED_LEADER_NOT_AVAILABLE until the controller saw the marker
    p = wait_until(election_result, message="the controller knows doomed is being deleted")
    assert (p.error_code, p.error_message) == (17, "The topic is being deleted")
    for mode in (["--zookeeper", c.zk_connect], ["--bootstrap-server", c.bootstrap]):
        result = CliRunner().invoke(kadmin, [*mode, "--output", "json", "elect-leaders", "--preferred",
                                             "--topic", "doomed"])
        assert result.exit_code == 1, result.output
        assert '"error": "INVALID_TOPIC"' in result.output and "The topic is being deleted" in result.output
