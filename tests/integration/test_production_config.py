"""A production-style Kafka 2.8 server.properties, started unchanged (issue 25's fourth deployment).

Two brokers with the settings a Strimzi-era deployment writes: three TLS listeners and no PLAINTEXT one
(CONTROLPLANE, the KIP-291 control-plane listener, and REPLICATION, the inter-broker one, both requiring client
certificates; CLIENT for applications), keytool-made stores (a JKS key store with its own key password, a PKCS12
trust store), `ssl.secure.random.implementation=SHA1PRNG`, `ssl.endpoint.identification.algorithm=HTTPS`, an
empty `sasl.enabled.mechanisms`, racks with Kafka's RackAwareReplicaSelector, and the JVM tuning keys of Kafka's
shipped file. A librdkafka client trusting the CA keytool exported round-trips acks=all through a replicated
topic; a consumer naming the follower's rack reads the same records from it."""
from __future__ import annotations

import os

import pytest

from kbroker.cluster import BrokerProcess, free_port, wait_ready
from kbroker.protocol.client.security import ClientSecurity
from tests.conftest import fresh_chroot
from tests.integration.test_sasl_tls import ck_roundtrip, unique
from tests.keytool import KEY_PASSWORD, STORE_PASSWORD, make_pki

LISTENERS = ("CONTROLPLANE", "REPLICATION", "CLIENT")


def server_properties(pki, broker_id: int, ports: dict[str, int], zk_connect: str, data: str) -> str:
    name = f"broker{broker_id}"
    listeners = ",".join(f"{l}://127.0.0.1:{ports[l]}" for l in LISTENERS)
    return f"""\
broker.id={broker_id}
broker.rack=r{broker_id}
listeners={listeners}
advertised.listeners={listeners}
listener.security.protocol.map=CONTROLPLANE:SSL,REPLICATION:SSL,CLIENT:SSL
control.plane.listener.name=CONTROLPLANE
inter.broker.listener.name=REPLICATION
listener.name.controlplane.ssl.client.auth=required
listener.name.replication.ssl.client.auth=required
sasl.enabled.mechanisms=
ssl.keystore.type=JKS
ssl.keystore.location={pki.keystore_jks[name]}
ssl.keystore.password={STORE_PASSWORD}
ssl.key.password={KEY_PASSWORD}
ssl.truststore.type=PKCS12
ssl.truststore.location={pki.truststore_p12}
ssl.truststore.password={STORE_PASSWORD}
ssl.secure.random.implementation=SHA1PRNG
ssl.endpoint.identification.algorithm=HTTPS
replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
num.recovery.threads.per.data.dir=1
log.dirs={data}
num.partitions=1
offsets.topic.replication.factor=2
transaction.state.log.replication.factor=2
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
zookeeper.connect={zk_connect}
zookeeper.connection.timeout.ms=18000
group.initial.rebalance.delay.ms=0
"""


@pytest.fixture(scope="module")
def deployment(zookeeper, tmp_path_factory):
    pki = make_pki(tmp_path_factory.mktemp("keytool"), names=("broker1", "broker2"))
    with open(pki.ca_pem) as f:
        ca = f.read()
    zk_connect = fresh_chroot(zookeeper)
    brokers, ports = [], {}
    try:
        for i in (1, 2):
            directory = str(tmp_path_factory.mktemp(f"broker{i}"))
            ports[i] = {l: free_port() for l in LISTENERS}
            path = os.path.join(directory, "server.properties")
            with open(path, "w") as f:
                f.write(server_properties(pki, i, ports[i], zk_connect, os.path.join(directory, "data")))
            b = BrokerProcess(i, path, ports[i]["CLIENT"], os.path.join(directory, "broker.log"),
                              security=ClientSecurity("SSL", ca_pem=ca))
            b.start()
            brokers.append(b)
        wait_ready(brokers)
        yield pki, ports, brokers
    finally:
        for b in brokers:
            b.stop()


def test_a_production_server_properties_starts_unchanged_and_serves_over_tls(deployment):
    pki, ports, brokers = deployment
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    conf = {"bootstrap.servers": ",".join(f"127.0.0.1:{ports[i]['CLIENT']}" for i in (1, 2)),
            "security.protocol": "SSL", "ssl.ca.location": pki.ca_pem}
    topic = unique("prod")
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2]])])[topic].result(30)
    values = [f"v{i}".encode() for i in range(20)]
    assert ck_roundtrip(conf, topic, 20) == values          # acks=all: broker 2 replicated over REPLICATION

    # A consumer in rack r2 reads from broker 2, the follower (the selector sends it there).
    consumer = Consumer({**conf, "group.id": unique("g"), "client.rack": "r2", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    try:
        while len(got) < len(values):
            m = consumer.poll(10)
            assert m is not None, f"no record after {len(got)}"
            assert m.error() is None, m.error()
            got.append(m.value())
    finally:
        consumer.close()
    assert got == values
    for b in brokers:
        with open(b.log_path) as f:
            log = f.read()
        assert "Traceback" not in log
        unknown = [line for line in log.splitlines() if "unknown" in line.lower()]
        assert not any("ssl.secure.random.implementation" in line or "num.io.threads" in line
                       for line in unknown), unknown     # Kafka's keys, known (and without effect here)
