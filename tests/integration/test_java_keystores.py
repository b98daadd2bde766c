"""Java key stores made with the JDK's keytool, as a Kafka 2.8 deployment brings them, on real brokers and clients.

Two brokers, each with four listeners: PLAINTEXT (readiness); SSL with a JKS key store (its own key password)
and a PKCS12 trust store; MTLS (ssl.client.auth=required) whose listener.name.mtls.* key store is the PKCS12
copy declared JKS (JDK 9+ keystore.type.compat opens it); INTERNAL, the inter-broker listener, SSL with client
authentication and a JKS trust store: the controller's requests and the replica fetchers go over it (its stores must trust each other, checked at
start as Kafka does). Clients:
confluent-kafka trusting the CA exported by keytool (and presenting a PKCS12 client key store on MTLS), kadmin
with --command-config naming JKS stores, the shared client. Bad stores stop a broker at start with exit 2, one
line naming the listener and the file, and nothing written to ZooKeeper; kadmin refuses them as usage errors."""
from __future__ import annotations

import json
import re
import uuid

import pytest
from click.testing import CliRunner

from admin_cli.main import cli
from kbroker.cluster import free_port, wait_until
from tests.conftest import fresh_chroot
from tests.integration.conftest import Cluster, fill_port
from tests.integration.test_sasl_tls import ck_roundtrip, unique
from tests.keytool import KEY_PASSWORD, STORE_PASSWORD, make_ca, make_pki, trust_store

PW = STORE_PASSWORD
LISTENERS = ("SSL", "MTLS", "INTERNAL")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    pki = make_pki(tmp_path_factory.mktemp("keytool"), names=("broker1", "broker2", "client"))
    pki.other_truststore = trust_store(pki, make_ca(pki, "other"), "other-truststore.jks", "JKS")   # not our CA
    return pki


def broker_settings(pki, broker_id: int, ports: dict[str, int]) -> dict:
    name = f"broker{broker_id}"
    return {
        "listeners": "PLAINTEXT://127.0.0.1:{port}," + ",".join(f"{l}://127.0.0.1:{p}" for l, p in ports.items()),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,INTERNAL:SSL",
        "inter.broker.listener.name": "INTERNAL",
        "ssl.keystore.type": "JKS", "ssl.keystore.location": pki.keystore_jks[name],
        "ssl.keystore.password": PW, "ssl.key.password": KEY_PASSWORD,
        "ssl.truststore.type": "PKCS12", "ssl.truststore.location": pki.truststore_p12,
        "ssl.truststore.password": PW,
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.keystore.type": "JKS",                         # a PKCS12 file: compat opens it
        "listener.name.mtls.ssl.keystore.location": pki.keystore_p12[name],
        "listener.name.mtls.ssl.key.password": PW,
        "listener.name.internal.ssl.client.auth": "required",
        "listener.name.internal.ssl.truststore.type": "JKS",
        "listener.name.internal.ssl.truststore.location": pki.truststore_jks,
        "offsets.topic.replication.factor": 2, "group.initial.rebalance.delay.ms": 0,
    }


@pytest.fixture(scope="module")
def cluster(zookeeper, pki, tmp_path_factory):
    c = Cluster(fresh_chroot(zookeeper), str(tmp_path_factory.mktemp("jks-cluster")))
    c.ports = {}
    for i in (1, 2):
        c.ports[i] = {name: free_port() for name in LISTENERS}
        b = c.add(i, start=False, **broker_settings(pki, i, c.ports[i]))
        fill_port(b)
        b.start()
    c.wait_ready([1, 2])
    yield c
    c.stop()


def bootstrap(c: Cluster, listener: str) -> str:
    return ",".join(f"127.0.0.1:{c.ports[i][listener]}" for i in (1, 2))


def roundtrip(conf: dict, topic: str, n: int = 20) -> list[bytes]:
    """n records through a topic with replication factor 2 (librdkafka's acks=all: both brokers have them)."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 1, 2)])[topic].result(30)
    return ck_roundtrip(conf, topic, n)


def test_confluent_kafka_round_trips_with_the_ca_keytool_exported(cluster, pki):
    """acks=all with replication factor 2: the follower fetched over INTERNAL (SSL, JKS, client auth)."""
    conf = {"bootstrap.servers": bootstrap(cluster, "SSL"), "security.protocol": "SSL",
            "ssl.ca.location": pki.ca_pem}
    topic = unique("jks")
    assert roundtrip(conf, topic) == [f"v{i}".encode() for i in range(20)]
    from confluent_kafka.admin import AdminClient
    admin = AdminClient(conf)
    partition = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
    assert sorted(partition.isrs) == [1, 2]


def test_client_authentication_with_a_pkcs12_client_key_store(cluster, pki):
    conf = {"bootstrap.servers": bootstrap(cluster, "MTLS"), "security.protocol": "SSL",
            "ssl.ca.location": pki.ca_pem, "ssl.keystore.location": pki.keystore_p12["client"],
            "ssl.keystore.password": PW}
    assert roundtrip(conf, unique("mtls"), n=5) == [f"v{i}".encode() for i in range(5)]


def test_client_authentication_required_refuses_a_client_without_a_certificate(cluster, pki):
    from confluent_kafka import Producer
    errors = []
    p = Producer({"bootstrap.servers": bootstrap(cluster, "MTLS"), "security.protocol": "SSL",
                  "ssl.ca.location": pki.ca_pem, "error_cb": errors.append})
    for _ in range(40):
        p.poll(0.25)
        if errors:
            break
    assert errors, "the broker refused no handshake"
    assert all(cluster.brokers[i].alive() for i in (1, 2))


def kadmin(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def command_config(tmp_path, **props) -> str:
    path = tmp_path / f"{uuid.uuid4().hex[:6]}.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return str(path)


def test_kadmin_command_config_with_jks_stores(cluster, pki, tmp_path):
    topic = unique("kadmin")
    trust = {"security.protocol": "SSL", "ssl.truststore.location": pki.truststore_jks,
             "ssl.truststore.password": PW}
    r = kadmin("--bootstrap-server", bootstrap(cluster, "SSL"), "--command-config", command_config(tmp_path, **trust),
               "create-topic", topic, "--partitions", "2", "--replication-factor", "2")
    assert r.exit_code == 0, r.stderr
    mutual = {**trust, "ssl.keystore.location": pki.keystore_jks["client"], "ssl.keystore.password": PW,
              "ssl.key.password": KEY_PASSWORD}   # no ssl.*store.type: Kafka's default, JKS
    path = command_config(tmp_path, **mutual)

    def listed() -> bool:   # once the broker that answers has the topic in its metadata
        r = kadmin("--bootstrap-server", bootstrap(cluster, "MTLS"), "--command-config", path, "-o", "json",
                   "list-topics")
        assert r.exit_code == 0, r.stderr
        return topic in [t["name"] for t in json.loads(r.stdout)["topics"]]
    wait_until(listed, message="kadmin over MTLS lists the topic")


@pytest.mark.parametrize("props, fragment", [
    ({"ssl.truststore.location": "{truststore_jks}", "ssl.truststore.password": "wrong"},
     r"truststore\.jks: wrong store password"),
    ({"ssl.truststore.location": "{dir}/missing.jks", "ssl.truststore.password": PW},
     r"missing\.jks: cannot read it: No such file"),
    ({"ssl.truststore.location": "{truststore_p12}"}, r"truststore\.p12 \(PKCS12\) needs its store password"),
    ({"ssl.keystore.location": "{client_jks}", "ssl.keystore.password": PW, "ssl.key.password": "wrong"},
     r"client\.jks: wrong password for its private key 'client'"),
    ({"ssl.keystore.location": "{truststore_jks}", "ssl.keystore.password": PW},
     r"truststore\.jks holds no private key"),
])
def test_kadmin_refuses_bad_stores_as_usage_errors(pki, tmp_path, props, fragment):
    values = {"truststore_jks": pki.truststore_jks, "truststore_p12": pki.truststore_p12, "dir": pki.directory,
              "client_jks": pki.keystore_jks["client"]}
    path = command_config(tmp_path, **{"security.protocol": "SSL",
                                       **{k: v.format(**values) for k, v in props.items()}})
    r = kadmin("--bootstrap-server", "127.0.0.1:1", "--command-config", path, "list-topics")
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert r.stderr.startswith("Error: Invalid value for --command-config: ") and re.search(fragment, r.stderr), \
        r.stderr


def test_shared_client_presents_a_jks_key_store(cluster, pki):
    """The shared client's principal on MTLS is the client certificate's subject (the request log says so)."""
    from kbroker.protocol.client import ClusterClient
    from kbroker.protocol.client.security import ClientSecurity
    security = ClientSecurity.from_properties({
        "security.protocol": "SSL", "ssl.truststore.type": "PKCS12", "ssl.truststore.location": pki.truststore_p12,
        "ssl.truststore.password": PW, "ssl.keystore.type": "JKS", "ssl.keystore.location": pki.keystore_jks["client"],
        "ssl.keystore.password": PW, "ssl.key.password": KEY_PASSWORD})
    with ClusterClient(bootstrap(cluster, "MTLS"), "jks-client", timeout=20, security=security) as client:
        md = client.metadata([])
    assert sorted(b.port for b in md.brokers.values()) == sorted(cluster.ports[i]["MTLS"] for i in (1, 2))


def test_a_trust_store_without_the_ca_fails_the_handshake_cleanly(cluster, pki):
    from kbroker.protocol.client import ClusterClient, KafkaError
    from kbroker.protocol.client.security import ClientSecurity
    security = ClientSecurity.from_properties({"security.protocol": "SSL", "ssl.truststore.location":
                                               pki.other_truststore, "ssl.truststore.password": PW})
    with ClusterClient(bootstrap(cluster, "SSL"), "wrong-ca", timeout=20, security=security) as client:
        with pytest.raises(KafkaError) as e:
            client.metadata([])
    assert "certificate verify failed" in str(e.value)
    b = cluster.brokers[1]
    wait_until(lambda: "TLS handshake with 127.0.0.1" in b.log(), message="the broker logs the failed handshake")
    assert b.alive() and "Traceback" not in b.log()


# ---- bad stores at start: exit 2, one line, nothing in ZooKeeper ---------------------------------------------

def garbage(pki) -> str:
    path = pki.path("garbage.jks")
    with open(path, "wb") as f:
        f.write(b"\x00\x17this is not a key store\n" * 20)
    return path


@pytest.mark.parametrize("change, message", [
    ({"ssl.keystore.password": "wrong"}, r"key store \S+broker1\.jks: wrong store password"),
    ({"ssl.key.password": "wrong"}, r"broker1\.jks: wrong password for its private key 'broker1'"),
    ({"ssl.truststore.location": "{dir}/missing.p12"}, r"trust store \S+missing\.p12: cannot read it"),
    ({"ssl.keystore.location": "{garbage}"}, r"garbage\.jks is not a JKS store \(not a key store file\)"),
    ({"ssl.keystore.location": "{truststore_jks}"}, r"truststore\.jks holds no private key"),
    ({"listener.name.internal.ssl.truststore.location": "{other}"},      # Kafka's inter-broker handshake check
     r"Listener INTERNAL \(SSL\), the inter-broker listener: .*cannot complete a TLS handshake"),
    ({"listener.name.mtls.ssl.keystore.password": "wrong"}, r"Listener MTLS \(SSL\): key store \S+broker1\.p12: wrong"),
])
def test_a_bad_store_stops_the_broker_at_start(zookeeper, pki, tmp_path, change, message):
    values = {"dir": pki.directory, "garbage": garbage(pki), "truststore_jks": pki.truststore_jks,
              "other": pki.other_truststore}
    c = Cluster(fresh_chroot(zookeeper), str(tmp_path))
    try:
        settings = {**broker_settings(pki, 1, {name: free_port() for name in LISTENERS}),
                    **{k: v.format(**values) for k, v in change.items()}}
        b = c.add(1, start=False, **settings)
        fill_port(b)
        b.start()
        assert b.proc.wait(60) == 2
        errors = [line for line in b.log().splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and re.search(message, errors[0]), b.log()
        assert c.zk.exists("/brokers") is None and c.zk.exists("/cluster") is None, "it wrote to ZooKeeper"
    finally:
        c.stop()



def test_kadmin_with_a_trust_store_without_the_ca(cluster, pki, tmp_path):
    path = command_config(tmp_path, **{"security.protocol": "SSL", "ssl.truststore.location": pki.other_truststore,
                                       "ssl.truststore.password": PW})
    r = kadmin("--bootstrap-server", bootstrap(cluster, "SSL"), "--command-config", path, "list-topics")
    assert r.exit_code == 1, (r.exit_code, r.stderr)
    assert re.fullmatch(r"Error: SSL handshake with 127\.0\.0\.1:\d+ failed: certificate verify failed: .*\n", r.stderr)
