"""confluent-kafka's AdminClient on topics, for what test_admin_topics.py and test_admin_configs.py leave out:
describe_topics against ZooKeeper's assignment and partition state, create_partitions, APPEND/SUBTRACT on a
list config, and a deleted topic no longer described."""
from __future__ import annotations

from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,
                                   NewTopic, ResourceType)

from tests.integration.conftest import wait_until
from tests.integration.test_cluster import metadata

UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS = 3, 37


def admin_result(futures):
    """(value, None) or (None, KafkaError) of the one future."""
    (fut,) = futures.values()
    try:
        return fut.result(timeout=30), None
    except KafkaException as e:
        return None, e.args[0]


def _layout(description) -> dict:
    """{partition: (leader, replicas, isr)} from a TopicDescription."""
    return {p.id: (p.leader.id, [n.id for n in p.replicas], sorted(n.id for n in p.isr))
            for p in description.partitions}


def test_confluent_admin_describes_grows_alters_and_deletes_topics(cluster3):
    c = cluster3
    # librdkafka sends admin requests to the controller: wait until every broker's metadata names it
    for b in c.brokers.values():
        wait_until(lambda: metadata(b.bootstrap, []).controller_id > 0, message=f"broker {b.id} knows the controller")
    admin = AdminClient({"bootstrap.servers": c.bootstrap})

    def describe(name):
        return admin_result(admin.describe_topics(TopicCollection([name]), request_timeout=10))

    _, err = admin_result(admin.create_topics([NewTopic("grow", 2, 2)], operation_timeout=15, request_timeout=20))
    assert err is None, err

    # describe_topics: the assignment, leaders and ISR ZooKeeper holds.
    desc, err = describe("grow")
    assert err is None, err
    zk_assignment = c.zk.get_topic_assignment("grow")
    expected = {p: (r[0], r, sorted(r)) for p, r in zk_assignment.partitions.items()}
    assert _layout(desc) == expected
    for p, (leader, _, isr) in expected.items():
        state = c.zk.get_partition_state("grow", p)
        assert (state.leader, sorted(state.isr)) == (leader, isr)
    assert desc.name == "grow" and not desc.is_internal
    # librdkafka prints the id in standard base64, Kafka (and the znode) in URL-safe base64
    assert str(desc.topic_id).replace("+", "-").replace("/", "_") == zk_assignment.topic_id
    _, err = describe("never-was")
    assert err.code() == UNKNOWN_TOPIC_OR_PARTITION

    # create_partitions: validate_only writes nothing; 2 -> 4; a decrease is refused.
    _, err = admin_result(admin.create_partitions([NewPartitions("grow", 4)], validate_only=True, request_timeout=20))
    assert err is None and sorted(c.zk.get_topic_assignment("grow").partitions) == [0, 1]
    _, err = admin_result(admin.create_partitions([NewPartitions("grow", 4)], operation_timeout=15, request_timeout=20))
    assert err is None, err
    assignment = c.zk.get_topic_assignment("grow").partitions
    assert sorted(assignment) == [0, 1, 2, 3] and all(len(set(r)) == 2 for r in assignment.values())
    wait_until(lambda: len(describe("grow")[0].partitions) == 4, timeout=10, message="4 partitions described")
    assert {p: r for p, (_, r, _) in _layout(describe("grow")[0]).items()} == assignment
    _, err = admin_result(admin.create_partitions([NewPartitions("grow", 3)], request_timeout=20))
    assert err.code() == INVALID_PARTITIONS

    # Incremental APPEND / SUBTRACT on a list config (cleanup.policy, default "delete").
    def alter(op, value):
        entry = ConfigEntry("cleanup.policy", value, incremental_operation=op)
        return admin_result(admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, "grow",
                                                                       incremental_configs=[entry])],
                                                       request_timeout=20))[1]

    def described_policy():
        entries, err = admin_result(admin.describe_configs([ConfigResource(ResourceType.TOPIC, "grow")],
                                                      request_timeout=20))
        assert err is None, err
        return entries["cleanup.policy"].value

    assert alter(AlterConfigOpType.APPEND, "compact") is None
    assert c.zk.get_entity_config("topics", "grow") == {"cleanup.policy": "delete,compact"}
    assert described_policy() == "delete,compact"
    assert alter(AlterConfigOpType.SUBTRACT, "delete") is None
    assert c.zk.get_entity_config("topics", "grow") == {"cleanup.policy": "compact"}
    assert described_policy() == "compact"

    # Deleted: no longer described.
    _, err = admin_result(admin.delete_topics(["grow"], operation_timeout=15, request_timeout=20))
    assert err is None, err
    wait_until(lambda: describe("grow")[1] is not None, timeout=10, message="grow no longer described")
    assert describe("grow")[1].code() == UNKNOWN_TOPIC_OR_PARTITION
