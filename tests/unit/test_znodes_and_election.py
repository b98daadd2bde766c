"""Pure functions: znode JSON codecs (Kafka 2.8 formats) and the controller's leader election rules."""
import json

from kbroker.controller import election
from kbroker.metadata_cache import topic_id_to_uuid, uuid_to_topic_id
from zk import znodes as z


def test_broker_znode_v5_round_trip_and_fields():
    info = z.BrokerInfo(7, [z.EndPoint("PLAINTEXT", "10.0.0.7", 9092), z.EndPoint("INTERNAL", "b7", 19092)],
                        rack="dc1", timestamp="1700000000000")
    obj = json.loads(z.BrokerIdZNode.encode(info))
    assert obj == {"version": 5, "host": "10.0.0.7", "port": 9092,
                   "endpoints": ["PLAINTEXT://10.0.0.7:9092", "INTERNAL://b7:19092"], "jmx_port": -1,
                   "timestamp": "1700000000000", "rack": "dc1", "features": {},
                   "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "PLAINTEXT"}}
    back = z.BrokerIdZNode.decode(7, z.BrokerIdZNode.encode(info), czxid=42)
    assert back.endpoints == info.endpoints and back.rack == "dc1" and back.epoch == 42


def test_broker_znode_without_plaintext_listener_has_null_host():
    info = z.BrokerInfo(1, [z.EndPoint("SSL", "h", 9093, "SSL")])
    obj = json.loads(z.BrokerIdZNode.encode(info))
    assert obj["host"] is None and obj["port"] == -1 and "rack" not in obj


def test_topic_znode_v3():
    a = z.TopicAssignment({1: [2, 1], 0: [1, 2]}, topic_id="e5bbD9aKQxS4i7m3a2nN3Q")
    raw = z.TopicZNode.encode(a)
    assert json.loads(raw) == {"version": 3, "partitions": {"0": [1, 2], "1": [2, 1]}, "adding_replicas": {},
                               "removing_replicas": {}, "topic_id": "e5bbD9aKQxS4i7m3a2nN3Q"}
    assert b" " not in raw  # compact, as Kafka's Json.encodeAsBytes
    assert z.TopicZNode.decode(raw) == a
    # Without a topic id (what 2.8's --zookeeper tools write) the field is absent, not null.
    assert "topic_id" not in json.loads(z.TopicZNode.encode(z.TopicAssignment({0: [1]})))
    # A v1 znode (older Kafka) still reads.
    assert z.TopicZNode.decode(b'{"version":1,"partitions":{"0":[3]}}').partitions == {0: [3]}


def test_partition_state_controller_and_cluster_id():
    s = z.LeaderAndIsr(1, 4, [1, 2], 3)
    assert json.loads(z.TopicPartitionStateZNode.encode(s)) == {
        "controller_epoch": 3, "leader": 1, "version": 1, "leader_epoch": 4, "isr": [1, 2]}
    assert z.TopicPartitionStateZNode.decode(z.TopicPartitionStateZNode.encode(s), zk_version=9).zk_version == 9
    # Formatted by hand for speed: byte for byte what the JSON encoder writes (empty ISR, no leader included).
    for state in (s, z.LeaderAndIsr(-1, 0, [], 1), z.LeaderAndIsr(3, 2 ** 31 - 1, [3, 1, 2], 2 ** 31 - 1)):
        assert z.TopicPartitionStateZNode.encode(state) == json.dumps(
            {"controller_epoch": state.controller_epoch, "leader": state.leader, "version": 1,
             "leader_epoch": state.leader_epoch, "isr": state.isr}, separators=(",", ":")).encode()
    c = json.loads(z.ControllerZNode.encode(2, "123"))
    assert c == {"version": 1, "brokerid": 2, "timestamp": "123"}
    assert json.loads(z.ClusterIdZNode.encode("abc")) == {"version": "1", "id": "abc"}
    assert z.ControllerEpochZNode.encode(12) == b"12"


def test_other_znodes():
    assert json.loads(z.ProducerIdBlockZNode.encode(1, 0, 999)) == {
        "version": 1, "broker": 1, "block_start": "0", "block_end": "999"}
    assert z.ConfigChangeNotificationZNode.decode(b'{"version":1,"entity_type":"topics","entity_name":"t"}') == \
        "topics/t"
    assert json.loads(z.ReassignPartitionsZNode.encode({("t", 0): [2, 3]})) == {
        "version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3]}]}
    assert z.IsrChangeNotificationZNode.decode(z.IsrChangeNotificationZNode.encode({("t", 1)})) == {("t", 1)}
    assert z.LogDirEventNotificationZNode.encode(3) == b'{"version":1,"broker":3,"event":1}'   # Kafka's, as written
    assert z.LogDirEventNotificationZNode.decode(b'{"version":1,"broker":3,"event":1}') == 3
    assert json.loads(z.FeatureZNode.encode()) == {"version": 1, "status": 1, "features": {}}
    assert z.PreferredReplicaElectionZNode.decode(z.PreferredReplicaElectionZNode.encode({("t", 2)})) == {("t", 2)}
    assert z.ConsumerOffsetZNode.path("g", "t", 3) == "/consumers/g/offsets/t/3"
    assert z.ConsumerOffsetZNode.decode(z.ConsumerOffsetZNode.encode(42)) == 42


def test_topic_id_base64_uuid_round_trip():
    tid = z.new_base64_uuid()
    assert len(tid) == 22 and "=" not in tid
    assert uuid_to_topic_id(topic_id_to_uuid(tid)) == tid
    assert uuid_to_topic_id(None) is None and topic_id_to_uuid(None) is None


def test_new_partition_leader_is_first_live_replica():
    assert election.new_partition_leader([3, 1, 2], {1, 2, 3}) == (3, [3, 1, 2])
    assert election.new_partition_leader([3, 1, 2], {1, 2}) == (1, [1, 2])
    assert election.new_partition_leader([3], {1, 2}) is None


def test_offline_partition_leader_prefers_assignment_order_within_live_isr():
    # Replica 2 is first in the assignment among the live ISR members.
    assert election.offline_partition_leader([1, 2, 3], [1, 3, 2], {2, 3}, unclean=False) == (2, [3, 2], False)
    # Live but out of sync: no clean leader.
    assert election.offline_partition_leader([1, 2, 3], [1], {2, 3}, unclean=False) is None
    assert election.offline_partition_leader([1, 2, 3], [1], {2, 3}, unclean=True) == (2, [2], True)
    assert election.offline_partition_leader([1, 2], [1, 2], set(), unclean=True) is None


def test_replica_leaving_isr_keeps_the_last_member():
    assert election.remove_replica_from_isr(1, [1, 2, 3], 2) == (1, [1, 3])
    assert election.remove_replica_from_isr(1, [1, 2], 1) == (election.NO_LEADER, [2])
    assert election.remove_replica_from_isr(1, [1], 1) == (election.NO_LEADER, [1])


def test_reassignment_leader_keeps_a_good_leader_else_takes_the_first_in_sync_target():
    # Moving [1, 2] -> [2, 3]: 1 leaves the ISR; leader 1 is not a target, so 2 (first in-sync target) leads.
    assert election.reassignment_leader([2, 3], [1], 1, [1, 2, 3], {1, 2, 3}) == (2, [2, 3])
    assert election.reassignment_leader([3, 2], [1], 2, [1, 2, 3], {1, 2, 3}) == (2, [2, 3])
    assert election.reassignment_leader([2, 3], [1], 1, [1], {1, 2, 3}) is None        # no target in sync


def test_preferred_and_controlled_shutdown_leaders():
    assert election.preferred_replica_leader([1, 2], 2, [2, 1], {1, 2}) == (1, [2, 1])
    assert election.preferred_replica_leader([1, 2], 1, [1, 2], {1, 2}) is None        # already leads
    assert election.preferred_replica_leader([1, 2], 2, [2], {1, 2}) is None           # not in sync
    assert election.preferred_replica_leader([1, 2], 2, [2, 1], {2}) is None           # not eligible
    assert election.controlled_shutdown_leader([1, 2, 3], 1, [1, 3, 2], 1, {2, 3}) == (2, [3, 2])
    assert election.controlled_shutdown_leader([1, 2], 1, [1], 1, {2}) is None         # nobody in sync
    assert election.controlled_shutdown_leader([1, 2], 2, [1, 2], 1, {2}) is None      # 1 does not lead
