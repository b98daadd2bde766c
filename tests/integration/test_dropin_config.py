"""Deployments' configurations start kbroker unchanged (issue 25 items 1-2): a Confluent cp-kafka environment
(with the image's own KAFKA_JMX_*, KAFKA_HEAP_OPTS, KAFKA_LOG4J_* variables), a Bitnami environment (KAFKA_CFG_*
with its leaked defaults) and Kafka 2.8's shipped config/server.properties, each round-tripped by a real client;
DescribeConfigs through confluent-kafka's AdminClient shows every Kafka 2.8 setting with Kafka's sources,
synonyms and modes; unknown broker keys are stored by AlterConfigs as Kafka's custom configs, unknown topic keys
refused."""
from __future__ import annotations

import os
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic,
                                   ResourceType)

from kbroker.cluster import BrokerProcess, free_port, wait_ready
from tests.integration.test_admin_client_topics import admin_result
from tests.integration.test_dynamic_broker_config import _synonyms
from tests.unit.test_kafka_settings import KAFKA_28, KRAFT_INTERNAL

STATIC, DEFAULT = ConfigSource.STATIC_BROKER_CONFIG.value, ConfigSource.DEFAULT_CONFIG.value
WARNING = "Unknown configurations kept and ignored"

# Kafka 2.8's config/server.properties: the settings it ships uncommented (dropin.md §8)
SHIPPED_SERVER_PROPERTIES = {
    "broker.id": "0", "num.network.threads": "3", "num.io.threads": "8", "socket.send.buffer.bytes": "102400",
    "socket.receive.buffer.bytes": "102400", "socket.request.max.bytes": "104857600", "log.dirs": "/tmp/kafka-logs",
    "num.partitions": "1", "num.recovery.threads.per.data.dir": "1", "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
    "log.retention.hours": "168", "log.segment.bytes": "1073741824", "log.retention.check.interval.ms": "300000",
    "zookeeper.connect": "localhost:2181", "zookeeper.connection.timeout.ms": "18000",
    "group.initial.rebalance.delay.ms": "0"}


@pytest.fixture
def launch(tmp_path):
    """launch(name, env, properties, *args): one broker from an environment (nothing of ours: no KAFKA_*) and a
    properties file (empty, as the image's entrypoint writes it, by default); stopped after the test."""
    started = []

    def start(name: str, env: dict[str, str], port: int, properties: str = "", *args: str) -> BrokerProcess:
        directory = tmp_path / name
        directory.mkdir()
        config = directory / "server.properties"
        config.write_text(properties)
        base = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "KBROKER_", "JMX_PORT"))}
        b = BrokerProcess(-1, str(config), port, str(directory / "broker.log"))
        started.append(b)
        b.start(*args, env={**base, **env})
        wait_ready([b], 60)
        return b
    yield start
    for b in started:
        b.stop()


def round_trip(bootstrap: str, count: int = 10) -> None:
    """Produce to a new (auto-created) topic with acks=all, read it back from the start."""
    topic = f"dropin-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 60000})
    errors = []
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(), on_delivery=lambda err, _m: err and errors.append(err))
    assert producer.flush(60) == 0 and not errors, errors
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values = []
    try:
        for _ in range(120):
            msg = consumer.poll(1.0)
            if msg is not None:
                assert msg.error() is None, msg.error()
                values.append(msg.value())
            if len(values) == count:
                break
    finally:
        consumer.close()
    assert values == [f"v{i}".encode() for i in range(count)]


def warnings_of(b: BrokerProcess) -> list[str]:
    return [line for line in b.log().splitlines() if WARNING in line]


def test_cp_kafka_environment(launch, zk_connect, tmp_path):
    port = free_port()
    b = launch("cp", {
        "KAFKA_BROKER_ID": "7", "KAFKA_ZOOKEEPER_CONNECT": zk_connect,
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",    # listeners unset: bound on 0.0.0.0
        "KAFKA_LOG_DIRS": str(tmp_path / "cp-data"), "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1", "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0", "KAFKA_CONFLUENT_SUPPORT_METRICS_ENABLE": "false",
        "KAFKA_JMX_PORT": "9999", "KAFKA_JMX_HOSTNAME": "localhost", "KAFKA_HEAP_OPTS": "-Xmx1G -Xms1G",
        "KAFKA_JVM_PERFORMANCE_OPTS": "-XX:+UseG1GC", "KAFKA_LOG4J_ROOT_LOGLEVEL": "INFO",
        "KAFKA_LOG4J_OPTS": "-Dlog4j.configuration=file:/etc/kafka/log4j.properties",
        "KAFKA_TOOLS_LOG4J_LOGLEVEL": "ERROR", "KAFKA_VERSION": "6.2.0"}, port)
    round_trip(b.bootstrap)
    # the image's own variables are no settings; the one unknown setting is named once
    assert [w.split(": ")[-1] for w in warnings_of(b)] == ["confluent.support.metrics.enable"]
    from zk.client import KafkaZkClient
    zk = KafkaZkClient(zk_connect, 6000).start()
    try:
        info = zk.get_broker(7)
    finally:
        zk.close()
    assert info.jmx_port == 9999 and [(e.host, e.port) for e in info.endpoints] == [("127.0.0.1", port)]


def test_bitnami_environment(launch, zk_connect, tmp_path):
    port = free_port()
    b = launch("bitnami", {
        "KAFKA_CFG_BROKER_ID": "8", "KAFKA_CFG_ZOOKEEPER_CONNECT": zk_connect,
        "KAFKA_CFG_LISTENERS": f"PLAINTEXT://:{port}",
        "KAFKA_CFG_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
        "KAFKA_CFG_LOG_DIRS": str(tmp_path / "bitnami-data"), "KAFKA_CFG_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_CFG_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1", "KAFKA_CFG_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_CFG_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        # the image's leaked defaults and its own variables
        "KAFKA_CFG_MAX_REQUEST_SIZE": "1048576", "KAFKA_CFG_MAX_PARTITION_FETCH_BYTES": "1048576",
        "KAFKA_CFG_SASL_MECHANISM_INTER_BROKER_PROTOCOL": "", "ALLOW_PLAINTEXT_LISTENER": "yes",
        "KAFKA_TLS_TYPE": "JKS", "KAFKA_TLS_CLIENT_AUTH": "required", "KAFKA_ZOOKEEPER_PROTOCOL": "PLAINTEXT",
        "KAFKA_HEAP_OPTS": "-Xmx1024m -Xms1024m", "KAFKA_ENABLE_KRAFT": "no"}, port)
    round_trip(b.bootstrap)
    assert [w.split(": ")[-1] for w in warnings_of(b)] == ["max.partition.fetch.bytes, max.request.size"]


def test_kafka_28_shipped_server_properties(launch, zk_connect, tmp_path):
    port = free_port()
    shipped = "".join(f"{k}={v}\n" for k, v in SHIPPED_SERVER_PROPERTIES.items())
    b = launch("shipped", {}, port, shipped,
               "--override", f"zookeeper.connect={zk_connect}", "--override", f"log.dirs={tmp_path / 'data'}",
               "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", "broker.id=9",
               # what production configs add: Kafka's own classes and JVM tuning, a custom key, a listener's own
               "--override", "principal.builder.class="
                             "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
               "--override", "ssl.secure.random.implementation=SHA1PRNG",
               "--override", "acme.plugin.setting=42",
               "--override", "listener.name.plaintext.max.connections=1000")
    round_trip(b.bootstrap)
    assert [w.split(": ")[-1] for w in warnings_of(b)] == ["acme.plugin.setting"]

    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    configs, err = admin_result(admin.describe_configs([ConfigResource(ResourceType.BROKER, "9")], request_timeout=20))
    assert err is None, err
    # every documented setting; the internal KRaft ones only when given (as Kafka's nonInternalValues)
    assert set(KAFKA_28) <= set(configs) and not set(KRAFT_INTERNAL) & set(configs)
    hours, ms = configs["log.retention.hours"], configs["log.retention.ms"]
    assert (hours.value, hours.source, hours.is_read_only) == ("168", STATIC, True)
    # (confluent-kafka keys synonyms by name, merging a single name's layers: kafka-python shows them in order)
    assert _synonyms(b.bootstrap, "9", "log.retention.hours") == [("log.retention.hours", "168", STATIC),
                                                                  ("log.retention.hours", "168", DEFAULT)]
    assert (ms.value, ms.source, list(ms.synonyms)) == (None, DEFAULT, [])
    assert (configs["num.io.threads"].source, configs["num.io.threads"].is_read_only) == (STATIC, False)
    assert (configs["background.threads"].source, configs["background.threads"].value) == (DEFAULT, "10")
    assert configs["ssl.keystore.location"].is_read_only is False      # per-broker in Kafka
    assert configs["ssl.keystore.password"].is_sensitive and configs["ssl.keystore.password"].value is None
    assert configs["ssl.secure.random.implementation"].value == "SHA1PRNG"
    override = configs["listener.name.plaintext.max.connections"]
    assert (override.value, override.source, override.is_sensitive) == ("1000", STATIC, False)
    assert _synonyms(b.bootstrap, "9", "listener.name.plaintext.max.connections") == [
        ("listener.name.plaintext.max.connections", "1000", STATIC), ("max.connections", "2147483647", DEFAULT)]
    assert _synonyms(b.bootstrap, "9", "max.connections") == [("max.connections", "2147483647", DEFAULT)]
    custom = configs["acme.plugin.setting"]      # unknown to Kafka: its type too, so shown as sensitive
    assert (custom.value, custom.source, custom.is_sensitive, custom.is_read_only) == (None, STATIC, True, True)

    # AlterConfigs: a custom broker key is stored as Kafka stores it; an unknown topic key is refused
    entry = ConfigEntry("acme.dynamic", "1", incremental_operation=AlterConfigOpType.SET)
    _, err = admin_result(admin.incremental_alter_configs(
        [ConfigResource(ResourceType.BROKER, "9", incremental_configs=[entry])], request_timeout=20))
    assert err is None, err
    from zk.client import KafkaZkClient
    zk = KafkaZkClient(zk_connect, 6000).start()
    try:
        assert zk.get_entity_config("brokers", "9") == {"acme.dynamic": "1"}
    finally:
        zk.close()
    admin.create_topics([NewTopic("t1", 1, 1)], request_timeout=20)["t1"].result(30)
    entry = ConfigEntry("retention.msec", "1", incremental_operation=AlterConfigOpType.SET)
    _, err = admin_result(admin.incremental_alter_configs(
        [ConfigResource(ResourceType.TOPIC, "t1", incremental_configs=[entry])], request_timeout=20))
    assert err is not None and "retention.msec" in str(err)


def test_cp_kafka_ssl_secrets_and_a_jaas_file_in_kafka_opts(launch, zk_connect, tmp_path):
    """cp-kafka's SSL convention (store file names and password files in its secrets directory) and SASL set up
    as its documentation does it: a KafkaServer section in the JAAS file KAFKA_OPTS names. A librdkafka client
    logs in with SASL PLAIN over TLS trusting the CA keytool exported."""
    from tests.keytool import KEY_PASSWORD, STORE_PASSWORD, make_pki
    (tmp_path / "keytool").mkdir()
    pki = make_pki(tmp_path / "keytool", names=("broker",))
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    os.link(pki.keystore_jks["broker"], secrets / "kafka.broker.keystore.jks")
    (secrets / "broker_keystore_creds").write_text(STORE_PASSWORD + "\n")
    (secrets / "broker_sslkey_creds").write_text(KEY_PASSWORD + "\n")
    jaas = tmp_path / "kafka_server_jaas.conf"
    jaas.write_text('KafkaServer {\n  org.apache.kafka.common.security.plain.PlainLoginModule required\n'
                    '  username="admin" password="admin-secret"\n  user_admin="admin-secret"\n'
                    '  user_alice="alice-secret";\n};\n')
    port, secure = free_port(), free_port()
    launch("cp-ssl", {
        "KAFKA_BROKER_ID": "9", "KAFKA_ZOOKEEPER_CONNECT": zk_connect,
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{secure}",
        "KAFKA_SASL_ENABLED_MECHANISMS": "PLAIN", "KAFKA_LOG_DIRS": str(tmp_path / "cp-ssl-data"),
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1", "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "KAFKA_SSL_KEYSTORE_FILENAME": "kafka.broker.keystore.jks",
        "KAFKA_SSL_KEYSTORE_CREDENTIALS": "broker_keystore_creds", "KAFKA_SSL_KEY_CREDENTIALS": "broker_sslkey_creds",
        "KAFKA_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM": "",
        "KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}", "KBROKER_SECRETS_DIR": str(secrets)}, port)
    from tests.integration.test_sasl_tls import ck_roundtrip, unique
    conf = {"bootstrap.servers": f"127.0.0.1:{secure}", "security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN",
            "sasl.username": "alice", "sasl.password": "alice-secret", "ssl.ca.location": pki.ca_pem}
    assert ck_roundtrip(conf, unique("cp-ssl"), 5) == [f"v{i}".encode() for i in range(5)]
    errors = []
    denied = Producer({**conf, "sasl.password": "wrong", "error_cb": errors.append})
    denied.produce(unique("cp-ssl"), b"x")
    denied.flush(5)
    assert any("Authentication failed" in str(e) or "SASL" in str(e) for e in errors), errors


def test_cp_kafka_ssl_secrets_missing_file_refused(zk_connect, tmp_path):
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "KBROKER_"))}
    env.update({"KAFKA_BROKER_ID": "10", "KAFKA_ZOOKEEPER_CONNECT": zk_connect,
                "KAFKA_ADVERTISED_LISTENERS": "SSL://127.0.0.1:1", "KAFKA_SSL_KEYSTORE_FILENAME": "missing.jks",
                "KBROKER_SECRETS_DIR": str(tmp_path)})
    config = tmp_path / "server.properties"
    config.write_text("")
    r = subprocess.run([sys.executable, "-m", "kbroker.cli", "start", str(config)], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2
    assert f"KAFKA_SSL_KEYSTORE_FILENAME: {tmp_path}/missing.jks does not exist" in r.stderr + r.stdout
