"""Three brokers whose inter-broker listener is SASL_SSL with SCRAM-SHA-512: the controller channel, the replica
fetchers and the marker sender log in with the broker user of the listener's JAAS line, over TLS. A topic with
replication factor 3 takes acks=all writes (the followers fetch); its leader then stops with a controlled
shutdown (ControlledShutdown to the controller over SASL_SSL) and the next one is killed: each time the controller
moves leadership (LeaderAndIsr over SASL_SSL) and the partition still serves every record."""
from __future__ import annotations

import uuid

import pytest

from kbroker.cluster import free_port, wait_until
from kbroker.security.certs import make_ca, make_cert
from kbroker.protocol.sasl.scram import make_credential
from tests.integration.conftest import Cluster
from kbroker.common.sanitizer import sanitize

MECH = "SCRAM-SHA-512"


@pytest.fixture
def sasl_ssl_cluster(zk_connect, tmp_path):
    ca_cert, ca_key = make_ca()
    ca_path = tmp_path / "ca.pem"
    ca_path.write_text(ca_cert)
    cluster = Cluster(zk_connect, str(tmp_path))
    cluster.zk.create_top_level_paths()
    for user, password in (("broker", "broker-secret"), ("client", "client-secret")):
        cluster.zk.set_or_create_entity_config("users", sanitize(user), {
            MECH: make_credential(MECH, password).to_config()})
    sasl_ports = {}
    for i in (1, 2, 3):
        cert, key = make_cert(ca_cert, ca_key, f"broker{i}", ["localhost", "127.0.0.1"])
        sasl_ports[i] = free_port()
        b = cluster.add(i, start=False, **{
            "listeners": f"PLAINTEXT://127.0.0.1:PORT,SASL_SSL://127.0.0.1:{sasl_ports[i]}",
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.enabled.mechanisms": MECH, "sasl.mechanism.inter.broker.protocol": MECH,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
                'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
                'password="broker-secret";',
            "ssl.keystore.type": "PEM", "ssl.keystore.key": key.replace("\n", ""),
            "ssl.keystore.certificate.chain": cert.replace("\n", ""),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca_path),
            "offsets.topic.replication.factor": 3, "group.initial.rebalance.delay.ms": 0,
            "replica.lag.time.max.ms": 5000,
        })
        with open(b.config_path) as f:
            text = f.read().replace("PORT", str(b.port), 1)
        with open(b.config_path, "w") as f:
            f.write(text)
        b.start()
    cluster.wait_ready([1, 2, 3])
    cluster.sasl_bootstrap = ",".join(f"127.0.0.1:{p}" for p in sasl_ports.values())
    cluster.ca_path = str(ca_path)
    yield cluster
    cluster.stop()


def test_replication_and_leadership_over_sasl_ssl(sasl_ssl_cluster):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    c = sasl_ssl_cluster
    conf = {"bootstrap.servers": c.sasl_bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanisms": MECH,
            "sasl.username": "client", "sasl.password": "client-secret", "ssl.ca.location": c.ca_path}
    topic = f"rf3-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)

    def isr():
        # The broker asked may not have had the new topic's UpdateMetadata yet (as in Kafka): no partitions then.
        md = admin.list_topics(topic, timeout=10).topics[topic].partitions.get(0)
        return (md.leader, sorted(md.isrs)) if md else (-1, [])
    wait_until(lambda: isr()[1] == [1, 2, 3], message="the ISR lists the three brokers")

    def produce(values):
        p = Producer({**conf, "acks": "all", "linger.ms": 5, "message.timeout.ms": 20000})
        for v in values:
            p.produce(topic, value=v)
        assert p.flush(30) == 0
    produce([f"a{i}".encode() for i in range(10)])
    first, _ = isr()
    assert c.brokers[first].terminate() == 0     # a controlled shutdown: ControlledShutdown over SASL_SSL
    assert "controlled shutdown succeeded" in c.brokers[first].log()
    wait_until(lambda: isr()[0] not in (first, -1), message="a new leader after the controlled shutdown")
    produce([f"b{i}".encode() for i in range(5)])
    second, _ = isr()
    c.brokers[second].kill9()
    wait_until(lambda: isr()[0] not in (first, second, -1), message="a new leader after the kill")
    produce([f"b{i}".encode() for i in range(5, 10)])
    consumer = Consumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    try:
        for _ in range(60):
            for m in consumer.consume(20, 0.5):
                assert m.error() is None, m.error()
                got.append(m.value())
            if len(got) >= 20:
                break
    finally:
        consumer.close()
    assert got == [f"a{i}".encode() for i in range(10)] + [f"b{i}".encode() for i in range(10)]
