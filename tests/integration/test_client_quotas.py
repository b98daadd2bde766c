"""Client quotas as an operator sets them and as clients see them: entities written to /config/clients and
/config/users with their /config/changes notification (what `kafka-configs --zookeeper` writes), throttle_time_ms
in the responses, the connection muted until the throttle ends (KIP-219), real clients (confluent-kafka's
throttle_cb, kafka-python's throttle metric), SASL principals and Kafka's precedence, consumer byte rates,
request_percentage, controller_mutation_rate, removal, and malformed entities.

One broker serves the module (PLAINTEXT, and SASL_PLAINTEXT with PLAIN users); each test uses client ids (and so
sensors) of its own. Two entities exist before it starts: one good, one malformed. Throttles here last about 1-4 s:
the module takes about 25 s."""
from __future__ import annotations

import os
import select
import time
import urllib.request
import uuid

import pytest
from kafka.protocol.admin import CreatePartitionsRequest, CreateTopicsRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from prometheus_client.parser import text_string_to_metric_families

from kbroker.cluster import free_port, wait_until
from kbroker.common.sanitizer import sanitize
from kbroker.protocol.client import Connection
from kbroker.protocol.client.requests import fetch_request
from kbroker.protocol.client.security import ClientSecurity
from kbroker.protocol.hotpath import decode_fetch_response
from tests.conftest import fresh_chroot
from tests.integration.conftest import Cluster, fill_port
from tests.integration.test_produce_fetch_bad_input import produce_request, v2_batch

TOPIC = "quota"
THROTTLING_QUOTA_EXCEEDED = 89
USERS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
# A batch of about 13 KB: against a fresh sensor of 1000 B/s (its rate padded to a 10 s window) it is 30 % over,
# a throttle of about 3 s.
BATCH = v2_batch([os.urandom(1000) for _ in range(13)])


def write_quota(zk, entity: str, config: dict[str, str]) -> None:
    """What kafka-configs.sh --zookeeper --alter writes: the entity's znode, then the change notification."""
    kind, _, name = entity.partition("/")
    zk.set_or_create_entity_config(kind, name, config)
    zk.create_config_change_notification(entity)


def set_quotas(broker: "Broker", quotas: dict[str, dict[str, str]]) -> None:
    """Write the entities in order and wait until the broker applied (or refused) the last one."""
    last = f"client quota config of {list(quotas)[-1]}:"
    seen = broker.process.log().count(last)
    for entity, config in quotas.items():
        write_quota(broker.zk, entity, config)
    wait_until(lambda: broker.process.log().count(last) > seen, 15, message=f"{last} applied")


class Broker:
    def __init__(self, cluster: Cluster, sasl_port: int, metrics_port: int):
        self.cluster, self.sasl_port, self.metrics_port = cluster, sasl_port, metrics_port
        self.process = cluster.brokers[1]
        self.zk = cluster.zk

    def connect(self, client_id: str, user: str | None = None) -> Connection:
        if user is None:
            return Connection("127.0.0.1", self.process.port, client_id, 20.0)
        security = ClientSecurity.from_properties({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                                   "sasl.username": user, "sasl.password": USERS[user]})
        return Connection("127.0.0.1", self.sasl_port, client_id, 20.0, security=security)

    def scrape(self, name: str) -> dict:
        """{(user, client_id): value} of one metric family."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            text = r.read().decode()
        return {(s.labels.get("user"), s.labels.get("client_id")): s.value
                for family in text_string_to_metric_families(text) for s in family.samples if s.name == name}


@pytest.fixture(scope="module")
def broker(zookeeper, tmp_path_factory):
    cluster = Cluster(fresh_chroot(zookeeper), str(tmp_path_factory.mktemp("quotas")))
    cluster.zk.create_top_level_paths()
    cluster.zk.set_or_create_entity_config("clients", "preloaded", {"producer_byte_rate": "1000"})
    cluster.zk.create_recursive("/config/clients/broken-at-start", b"{not json")
    sasl_port, metrics_port = free_port(), free_port()
    plain = " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    b = cluster.add(1, start=False, **{
        "listeners": f"PLAINTEXT://127.0.0.1:{{port}},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "PLAIN", "metrics.port": metrics_port,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain};"})
    fill_port(b)
    b.start()
    cluster.wait_ready([1])
    from zk.admin import AdminZkClient
    AdminZkClient(cluster.zk).create_topic(TOPIC, partitions=1, replication_factor=1)
    wait_until(lambda: cluster.zk.get_partition_state(TOPIC, 0), message="a leader for the topic")
    yield Broker(cluster, sasl_port, metrics_port)
    cluster.stop()


def produce(conn: Connection, acks: int = 1, batch=BATCH):
    """Submit one Produce (no answer read)."""
    conn.submit(produce_request(TOPIC, 0, batch, 8, acks=acks))


def produce_throttle(conn: Connection, batch=BATCH) -> int:
    """The throttle_time_ms of one acknowledged Produce (which must succeed)."""
    response = conn.send(produce_request(TOPIC, 0, batch, 8))
    assert response.responses[0].partition_responses[0].error_code == 0
    return response.throttle_time_ms


def silent_for(conn: Connection, seconds: float) -> bool:
    """Nothing more comes on the connection for `seconds`."""
    readable, _, _ = select.select([conn.sock], [], [], seconds)
    return not readable


def test_a_producer_over_its_byte_rate_is_throttled_and_muted_others_are_not(broker):
    set_quotas(broker, {"clients/slow": {"producer_byte_rate": "1000"},
                        "clients/slow0": {"producer_byte_rate": "1000"}})
    slow, silent = broker.connect("slow"), broker.connect("slow0")
    produce(slow)
    slow.submit(ApiVersionsRequest(version=3, client_software_name="t", client_software_version="1"))
    produce(silent, acks=0)     # never answered, but still recorded: its connection is muted too
    silent.submit(ApiVersionsRequest(version=3, client_software_name="t", client_software_version="1"))
    throttle = slow.receive().throttle_time_ms
    assert 2000 <= throttle <= 4000
    # KIP-219: the pipelined request is not read until the throttle ends, for acks=0 as well
    assert silent_for(slow, 1.0) and silent_for(silent, 0.1)
    assert slow.receive().throttle_time_ms == 0
    assert silent.receive().error_code == 0
    assert produce_throttle(broker.connect("fast")) == 0
    assert broker.scrape("kafka_server_produce_throttle_time")[("", "slow")] == throttle
    assert broker.scrape("kafka_server_produce_byte_rate")[("", "fast")] > 0

    set_quotas(broker, {"clients/slow": {}})
    assert produce_throttle(slow) == 0


def test_an_entity_written_before_start_applies_and_a_malformed_one_is_skipped(broker):
    assert produce_throttle(broker.connect("preloaded")) > 0
    assert "ignoring the malformed client quota config of clients/broken-at-start" in broker.process.log()


def test_malformed_entities_are_logged_and_the_good_ones_still_apply(broker):
    broker.zk.create_recursive("/config/clients/garbled", b"{not json")
    broker.zk.create_config_change_notification("clients/garbled")
    set_quotas(broker, {"clients/negative": {"producer_byte_rate": "-5"},
                        "clients/words": {"producer_byte_rate": "fast", "consumer_byte_rate": "100"},
                        "clients/good": {"producer_byte_rate": "1000"}})
    log = broker.process.log()
    for entity in ("garbled", "negative", "words"):
        assert f"ignoring the malformed client quota config of clients/{entity}" in log
    assert produce_throttle(broker.connect("good")) > 0
    assert produce_throttle(broker.connect("negative")) == 0
    assert broker.process.alive()


def test_confluent_kafka_and_kafka_python_see_the_throttle(broker):
    from confluent_kafka import Producer
    from kafka import KafkaProducer
    set_quotas(broker, {f"clients/{client}": {"producer_byte_rate": "2000"} for client in ("rdkafka", "kafka-python")})
    throttles = []
    p = Producer({"bootstrap.servers": broker.process.bootstrap, "client.id": "rdkafka", "linger.ms": 50,
                  "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    for _ in range(30):
        p.produce(TOPIC, value=os.urandom(1000), partition=0)
    deadline = time.monotonic() + 20
    while not throttles and time.monotonic() < deadline:
        p.poll(0.2)
    assert throttles and throttles[0] > 0
    kp = KafkaProducer(bootstrap_servers=broker.process.bootstrap, client_id="kafka-python", linger_ms=50)
    for _ in range(30):
        kp.send(TOPIC, value=os.urandom(1000), partition=0)
    kp.flush(20)
    seen = {name: v for group in kp.metrics().values() for name, v in group.items() if "throttle-time-avg" in name}
    kp.close(0)
    assert seen and max(seen.values()) > 0, seen


def test_sasl_users_take_kafkas_precedence_with_defaults(broker):
    quotas = {"users/alice/clients/vip": {"producer_byte_rate": "1000000000"},   # level 1
              "users/alice": {"producer_byte_rate": "1000"},                     # 3
              "users/bob": {"producer_byte_rate": "1000000000"},                 # 3
              "users/<default>": {"producer_byte_rate": "1000"},                 # 6
              "clients/vip": {"producer_byte_rate": "1000"}}                     # 7
    set_quotas(broker, quotas)
    assert produce_throttle(broker.connect("vip", "alice")) == 0      # users/alice/clients/vip
    assert produce_throttle(broker.connect("other", "alice")) > 0     # users/alice
    assert produce_throttle(broker.connect("vip", "bob")) == 0        # users/bob before clients/vip
    assert produce_throttle(broker.connect("vip", "carol")) > 0       # users/<default> before clients/vip
    assert produce_throttle(broker.connect("vip")) > 0                # users/<default>: ANONYMOUS on PLAINTEXT
    samples = broker.scrape("kafka_server_produce_throttle_time")
    assert {("alice", ""), ("carol", ""), ("ANONYMOUS", "")} <= set(samples)
    set_quotas(broker, {entity: {} for entity in quotas})


def test_a_consumer_over_its_byte_rate_gets_capped_then_empty_throttled_fetches(broker):
    for _ in range(10):
        produce_throttle(broker.connect("filler"))
    set_quotas(broker, {f"clients/{sanitize('reader one')}": {"consumer_byte_rate": "5000"}})
    conn = broker.connect("reader one")
    sizes, throttled = [], []
    for _ in range(20):     # the same data again and again: 5000 B/s allow 50 000 B in the first 10 s window
        body = conn.send(fetch_request(11, TOPIC, 0, 0, 1 << 20, 1 << 20, max_wait_ms=0), decode=False)
        response = decode_fetch_response(body, 11)
        if response.throttle_time_ms:
            throttled.append(response)
            if sizes:
                break
        else:
            sizes.append(len(response.partition(TOPIC, 0).records[0]))
    # max_bytes is capped at 5000 B/s x 10 windows; with its headers a response that fills it is a little over the
    # quota, so the first is throttled for a few ms, as Kafka's
    assert sizes and max(sizes) <= 50_000 and throttled[-1].throttle_time_ms > 1000
    assert all(r.topics == [] and r.error_code == 0 and r.session_id == 0 for r in throttled)
    assert produce_throttle(broker.connect("reader one")) == 0          # its producer side has no quota


def test_request_time_leaves_out_waits(broker):
    """A long-polling consumer's request time is what its fetches took on the broker's loop, not their wait: 1 %
    of a thread would be spent by one 300 ms wait counted."""
    set_quotas(broker, {"clients/poller": {"request_percentage": "1"}})
    conn = broker.connect("poller")
    end = decode_fetch_response(conn.send(fetch_request(11, TOPIC, 0, 0, 1, 1, max_wait_ms=0), decode=False),
                                11).partition(TOPIC, 0).high_watermark
    for _ in range(3):
        body = conn.send(fetch_request(11, TOPIC, 0, end, 1 << 16, 1 << 16, max_wait_ms=300), decode=False)
        response = decode_fetch_response(body, 11)
        assert not any(len(r) for r in response.partition(TOPIC, 0).records) and response.throttle_time_ms == 0


def test_request_percentage_throttles_a_busy_client(broker):
    set_quotas(broker, {"clients/busy": {"request_percentage": "0.01"}})     # 0.1 ms of loop time per second
    conn = broker.connect("busy")
    for _ in range(200):
        throttle = conn.send(MetadataRequest(version=4, topics=None, allow_auto_topic_creation=False)).throttle_time_ms
        if throttle:
            break
    assert 0 < throttle <= 1000     # request throttles are capped at one window
    assert broker.scrape("kafka_server_request_request_time")[("", "busy")] > 0


def test_controller_mutation_rate_strict_and_permissive(broker):
    set_quotas(broker, {"users/<default>/clients/<default>": {"controller_mutation_rate": "0.5"}})   # burst 5.5
    T = CreateTopicsRequest.CreatableTopic
    topic = lambda name, n: T(name=name, num_partitions=n, replication_factor=1, assignments=[], configs=[])  # noqa
    tag = uuid.uuid4().hex[:6]
    strict = broker.connect("creator").send(CreateTopicsRequest(version=6, timeout_ms=20000, validate_only=False,
                                                                topics=[topic(f"a-{tag}", 4), topic(f"b-{tag}", 4),
                                                                        topic(f"c-{tag}", 1)]))
    # 5.5 tokens: a takes 4, b overdraws to -2.5, c is refused; the throttle is 2.5 tokens at 0.5 per second
    assert [t.error_code for t in strict.topics] == [0, 0, THROTTLING_QUOTA_EXCEEDED]
    assert strict.topics[2].error_message == "The throttling quota has been exceeded."
    assert 0 < strict.throttle_time_ms <= 5000
    # before v6 all is created and the response throttled: 10 partitions take the bucket to -4.5 (9 s to refill)
    permissive = broker.connect("creator-old").send(CreateTopicsRequest(version=5, timeout_ms=20000,
                                                                        validate_only=False,
                                                                        topics=[topic(f"d-{tag}", 10)]))
    assert [t.error_code for t in permissive.topics] == [0] and permissive.throttle_time_ms > 0
    grow = broker.connect("creator-old").send(CreatePartitionsRequest(
        version=3, timeout_ms=20000, validate_only=False, topics=[CreatePartitionsRequest.CreatePartitionsTopic(
            name=f"a-{tag}", count=5, assignments=None)]))
    assert [r.error_code for r in grow.results] == [THROTTLING_QUOTA_EXCEEDED]
    assert broker.zk.get_topic_assignment(f"c-{tag}") is None
    set_quotas(broker, {"users/<default>/clients/<default>": {}})
