"""Follower fetching (KIP-392) without processes: RackAwareReplicaSelector's pick (kbroker.replica.selector), the
config checks of replica.selector.class and control.plane.listener.name (KIP-291), and the replica manager's read
path over real logs: a follower serving a v11+ consumer up to its high watermark with Kafka's errors, the leader
answering a rack-aware consumer with preferred_read_replica and no records."""
import gevent
import pytest

from kbroker.clock import MockClock
from kbroker.config import BrokerConfig, ConfigError
from kbroker.metadata_cache import CachedBroker, MetadataCache
from kbroker.protocol.errors import Errors
from kbroker.quota.replication_quotas import ReplicationQuotas
from kbroker.replica.manager import FetchParams, ReplicaManager
from kbroker.replica.partition import READ_COMMITTED, READ_UNCOMMITTED, Partition
from kbroker.replica.selector import RACK_AWARE_REPLICA_SELECTOR, ReplicaView, preferred_read_replica

from .test_log_batches import v2_batch
from .test_log_partition_log import make_log

ZK = "127.0.0.1:2181"
TP = ("orders", 0)
EPOCH = 5
BATCHES = v2_batch(0, 6) + v2_batch(6, 4)


# ---- the selector ------------------------------------------------------------------------------------------

def view(broker_id, rack, leo=100, since_ms=0, has_endpoint=True, log_start=-1):
    return ReplicaView(broker_id, rack, leo, since_ms, has_endpoint, log_start)


@pytest.mark.parametrize("client_rack, leader, followers, expected", [
    ("", view(1, "a"), [view(2, "b")], -1),                                    # no rack: the leader
    ("c", view(1, "a"), [view(2, "b")], -1),                                   # none in the rack
    ("a", view(1, "a"), [view(2, "a")], -1),                                   # the leader is in the rack
    ("b", view(1, "a"), [view(2, "b"), view(3, "c")], 2),                      # the follower in the rack
    ("b", view(1, "a"), [view(2, "b", leo=90), view(3, "b", leo=100)], 3),     # most caught up first
    ("b", view(1, "a"), [view(2, "b", since_ms=50), view(3, "b", since_ms=10)], 3),   # then least lag
    ("b", view(1, "a"), [view(2, "b"), view(3, "b")], 3),                      # then the largest id
    ("b", view(1, "a"), [view(2, "b", leo=40)], -1),                           # does not hold offset 50 yet
    ("b", view(1, "a"), [view(2, "b", log_start=60)], -1),                     # nor any more
    ("b", view(1, "a"), [view(2, "b", log_start=50)], 2),
    ("b", view(1, "a"), [view(2, "b", has_endpoint=False)], -1),               # no endpoint on the listener
    ("b", view(1, None, has_endpoint=False), [view(2, "b")], 2),               # leader without one: still sent on
])
def test_rack_aware_selection(client_rack, leader, followers, expected):
    assert preferred_read_replica(client_rack, leader, followers, fetch_offset=50) == expected


def test_a_follower_at_the_fetch_offset_holds_it():
    assert preferred_read_replica("b", view(1, "a"), [view(2, "b", leo=50)], fetch_offset=50) == 2


# ---- configuration -----------------------------------------------------------------------------------------

def test_replica_selector_class_accepts_kafkas_selector_and_refuses_other_classes():
    assert BrokerConfig({"zookeeper.connect": ZK})["replica.selector.class"] is None
    cfg = BrokerConfig({"zookeeper.connect": ZK, "replica.selector.class": RACK_AWARE_REPLICA_SELECTOR})
    assert cfg["replica.selector.class"] == RACK_AWARE_REPLICA_SELECTOR
    for bad in ("com.example.MySelector", "RackAwareReplicaSelector", ""):
        with pytest.raises(ConfigError, match=r"replica\.selector\.class.*cannot load another Java class"):
            BrokerConfig({"zookeeper.connect": ZK, "replica.selector.class": bad})


TWO_LISTENERS = {"zookeeper.connect": ZK, "listeners": "PLAINTEXT://:9092,CONTROLLER://:9090",
                 "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"}


def test_control_plane_listener_is_where_the_controller_sends():
    assert BrokerConfig(TWO_LISTENERS).controller_listener == ("PLAINTEXT", None)
    cfg = BrokerConfig({**TWO_LISTENERS, "control.plane.listener.name": "controller"})
    assert cfg.control_plane_listener == "CONTROLLER" and cfg.inter_broker_listener == "PLAINTEXT"
    assert cfg.controller_listener == ("CONTROLLER", None)


def test_a_secured_control_plane_listener_gets_its_own_client_side():
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="pw";'
    cfg = BrokerConfig({"zookeeper.connect": ZK, "listeners": "PLAINTEXT://:9092,CONTROL://:9090",
                        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROL:SASL_PLAINTEXT",
                        "inter.broker.listener.name": "PLAINTEXT", "control.plane.listener.name": "CONTROL",
                        "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN",
                        "listener.name.control.plain.sasl.jaas.config": jaas})
    name, security = cfg.controller_listener
    assert name == "CONTROL" and cfg.inter_broker_security is None
    assert (security.protocol, security.sasl_mechanism, security.username, security.password) == (
        "SASL_PLAINTEXT", "PLAIN", "broker", "pw")


@pytest.mark.parametrize("extra, message", [
    ({"control.plane.listener.name": "ADMIN"},
     "Listener with ADMIN defined in control.plane.listener.name not found in listener.security.protocol.map."),
    ({"control.plane.listener.name": "CONTROLLER", "advertised.listeners": "PLAINTEXT://h:9092"},
     ("control.plane.listener.name must be a listener name defined in advertised.listeners. The valid options "
      "based on currently configured listeners are PLAINTEXT")),
    ({"control.plane.listener.name": "PLAINTEXT"},
     ("control.plane.listener.name, when defined, should have a different value from the inter broker listener "
      "name. Currently they both have the value PLAINTEXT")),
])
def test_control_plane_listener_refused_as_kafka_refuses_it(extra, message):
    with pytest.raises(ConfigError) as e:
        BrokerConfig({**TWO_LISTENERS, **extra})
    assert str(e.value) == message


# ---- the replica manager's read path -----------------------------------------------------------------------

def manager(tmp_path, broker_id, leader, selector=True):
    """A replica manager of broker `broker_id` hosting orders-0 (replicas 1, 2, 3 in racks a, b, c; `leader`
    leads it), with two batches (offsets 0-5, 6-9): the leader's high watermark is 6."""
    props = {"zookeeper.connect": ZK, "broker.id": str(broker_id)}
    if selector:
        props["replica.selector.class"] = RACK_AWARE_REPLICA_SELECTOR
    config = BrokerConfig(props)
    clock = MockClock()
    cache = MetadataCache(broker_id)
    cache.brokers = {b: CachedBroker(b, {"PLAINTEXT": ("h", 9090 + b, 0)}, rack) for b, rack in
                     ((1, "a"), (2, "b"), (3, "c"))}
    rm = ReplicaManager(broker_id, config, None, None, clock, cache, ReplicationQuotas(config, clock))
    log = make_log(tmp_path, clock, name=f"orders-0-{broker_id}")
    p = Partition("orders", 0, broker_id, log, clock, lambda partition, isr: True, 30000)
    p.apply_state(leader, EPOCH, [1, 2, 3], [1, 2, 3], zk_version=0, controller_epoch=1, topic_id=None)
    rm.partitions[TP] = p
    if leader == broker_id:
        p.append_as_leader(v2_batch(0, 6), 8, 1)
        p.append_as_leader(v2_batch(0, 4), 8, 1)
        for follower, fetched in ((2, 6), (3, 8)):
            p.update_follower_fetch_state(follower, fetched, 10)
    else:
        p.append_as_follower(BATCHES, 6)
    assert (p.log.high_watermark, p.log.log_end_offset) == (6, 10)
    return rm, p


def consumer(version=11, rack="", isolation=READ_UNCOMMITTED):
    return FetchParams(version, -1, 0, 1, 10 ** 6, isolation, rack if version >= 11 else None, "PLAINTEXT")


def read(rm, params, offset, epoch=-1):
    return rm.read_from_local_log(params, [(TP, offset, 10 ** 6, epoch)])[0][TP]


def records_in(data) -> int:
    """The bytes of records the result carries."""
    return sum(piece.length for piece in data.records) if data.records else 0


def test_follower_serves_a_v11_consumer_up_to_its_high_watermark(tmp_path):
    rm, p = manager(tmp_path, broker_id=2, leader=1)
    data = read(rm, consumer(rack="b"), 0, epoch=EPOCH)
    assert data.error_code == Errors.NONE and data.preferred_read_replica == -1
    assert (data.high_watermark, data.log_start_offset) == (6, 0)
    assert bytes(data.records[0].read()) == v2_batch(0, 6)   # the bytes the leader sent, up to the HW
    assert read(rm, consumer(rack="b"), 6).records == []
    p.append_as_follower(b"", 10)  # the leader's high watermark comes with the next fetch response
    data = read(rm, consumer(rack="b"), 6, epoch=EPOCH)
    assert data.high_watermark == 10 and bytes(data.records[0].read()) == v2_batch(6, 4)


@pytest.mark.parametrize("offset, error", [
    (6, Errors.NONE),                     # in (HW, LEO]: no records yet
    (8, Errors.NONE),
    (10, Errors.NONE),                    # at the log end
    (11, Errors.OFFSET_OUT_OF_RANGE),     # past the log end
])
def test_follower_read_bounds(tmp_path, offset, error):
    rm, _ = manager(tmp_path, broker_id=2, leader=1)
    data = read(rm, consumer(), offset)
    assert data.error_code == error and not data.records


def test_follower_fences_epochs_and_refuses_old_versions(tmp_path):
    rm, _ = manager(tmp_path, broker_id=2, leader=1)
    assert read(rm, consumer(), 0, epoch=EPOCH - 1).error_code == Errors.FENCED_LEADER_EPOCH
    assert read(rm, consumer(), 0, epoch=EPOCH + 1).error_code == Errors.UNKNOWN_LEADER_EPOCH
    assert read(rm, consumer(version=10), 0).error_code == Errors.NOT_LEADER_OR_FOLLOWER
    rm.metadata_cache.partitions = {"other": {}}
    assert rm.read_from_local_log(consumer(), [(("other", 0), 0, 100, -1)])[0][("other", 0)].error_code in (
        Errors.NOT_LEADER_OR_FOLLOWER, Errors.UNKNOWN_TOPIC_OR_PARTITION)


def test_follower_read_committed_stops_at_its_last_stable_offset(tmp_path):
    rm, p = manager(tmp_path, broker_id=2, leader=1)
    p.append_as_follower(b"", 10)
    data = read(rm, consumer(isolation=READ_COMMITTED), 0)
    assert data.error_code == Errors.NONE and data.last_stable_offset == 10 and records_in(data) > 0
    assert data.aborted_transactions == []


def test_leader_sends_a_rack_aware_consumer_to_the_follower_in_its_rack(tmp_path):
    rm, _ = manager(tmp_path, broker_id=1, leader=1)
    data = read(rm, consumer(rack="b"), 0, epoch=EPOCH)
    assert (data.error_code, data.preferred_read_replica, data.records) == (Errors.NONE, 2, [])
    assert (data.high_watermark, data.last_stable_offset, data.log_start_offset) == (6, 6, 0)
    assert read(rm, consumer(rack="b"), 7).preferred_read_replica == -1   # broker 2 has only up to 6: read here
    assert read(rm, consumer(rack="c"), 7).preferred_read_replica == 3
    for params in (consumer(rack="a"), consumer(rack=""), consumer(rack="z"), consumer(version=10)):
        data = read(rm, params, 0)
        assert data.preferred_read_replica == -1 and records_in(data) > 0
    assert read(rm, consumer(rack="b"), 0, epoch=EPOCH - 1).error_code == Errors.FENCED_LEADER_EPOCH


def test_a_consumer_sent_elsewhere_is_answered_without_waiting(tmp_path):
    """A long poll (max_wait 30 s, min_bytes beyond what is there) sent to another replica is answered by the
    read itself: the purgatory, not started here, would never answer it (gevent.Timeout only stops a hang)."""
    rm, _ = manager(tmp_path, broker_id=1, leader=1)
    params = FetchParams(11, -1, 30000, 10 ** 6, 10 ** 6, READ_UNCOMMITTED, "b", "PLAINTEXT")
    with gevent.Timeout(10):
        data = rm.fetch(params, [(TP, 0, 10 ** 6, -1)])[TP]
    assert data.preferred_read_replica == 2 and not data.records


def test_the_leader_rules_out_a_follower_whose_log_starts_after_the_offset(tmp_path):
    rm, _ = manager(tmp_path, broker_id=1, leader=1)
    rm.record_follower_log_starts(2, [(TP, 3), (("unknown", 0), 0)])   # as broker 2's fetch said
    assert read(rm, consumer(rack="b"), 0).preferred_read_replica == -1
    assert read(rm, consumer(rack="b"), 3).preferred_read_replica == 2


def test_leader_without_a_selector_serves_everyone(tmp_path):
    rm, _ = manager(tmp_path, broker_id=1, leader=1, selector=False)
    data = read(rm, consumer(rack="b"), 0)
    assert data.preferred_read_replica == -1 and records_in(data) > 0


def test_only_replicas_with_an_endpoint_on_the_consumers_listener_are_picked(tmp_path):
    rm, _ = manager(tmp_path, broker_id=1, leader=1)
    rm.metadata_cache.brokers[2] = CachedBroker(2, {"INTERNAL": ("h", 9192, 0)}, "b")
    assert read(rm, consumer(rack="b"), 0).preferred_read_replica == -1
