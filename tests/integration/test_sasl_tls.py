"""TLS and SASL on the wire with real clients (confluent-kafka, kafka-python, aiokafka, kcat) and raw sockets.

One broker serves the module, with a listener per security protocol: PLAINTEXT (readiness, setup), SASL_PLAINTEXT
(PLAIN and SCRAM), SASL_SSL (SCRAM-SHA-256/512 and PLAIN) and SSL with ssl.client.auth=required. SCRAM users are
written to /config/users before it starts; one more is added and removed at runtime with the change notification.
"""
from __future__ import annotations

import os
import socket
import struct
import uuid

import pytest

from kbroker.cluster import free_port
from kbroker.security.certs import make_ca, make_cert
from kbroker.security.scram import make_credential
from tests.conftest import fresh_chroot
from tests.integration.conftest import Cluster
from zk.znodes import sanitize

PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret"}
SCRAM_USERS = {"bob": "bob-secret", "carol,=x": "carol-secret"}   # carol's name needs =2C / =3D escapes


def jaas(options: dict[str, str]) -> str:
    body = " ".join(f'{k}="{v}"' for k, v in options.items())
    return f"org.apache.kafka.common.security.plain.PlainLoginModule required {body};"


def put_scram_user(zk, user: str, password: str, iterations: int = 4096) -> None:
    """What kafka-configs.sh --alter --add-config SCRAM-SHA-256=[...],SCRAM-SHA-512=[...] writes."""
    zk.set_or_create_entity_config("users", sanitize(user), {
        mech: make_credential(mech, password, iterations).to_config() for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512")})
    zk.create_config_change_notification(f"users/{sanitize(user)}")


class Secured:
    def __init__(self, cluster: Cluster, ports: dict[str, int], pki: dict[str, str]):
        self.cluster, self.ports, self.pki = cluster, ports, pki

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


@pytest.fixture(scope="module")
def secured(zookeeper, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("secured")
    ca_cert, ca_key = make_ca()
    broker_cert, broker_key = make_cert(ca_cert, ca_key, "broker1", ["localhost", "127.0.0.1"])
    client_cert, client_key = make_cert(ca_cert, ca_key, "client1", [])
    pki = {"ca": str(workdir / "ca.pem"), "cert": str(workdir / "client.pem"), "key": str(workdir / "client.key")}
    for path, text in ((pki["ca"], ca_cert), (pki["cert"], client_cert), (pki["key"], client_key)):
        with open(path, "w") as f:
            f.write(text)
    cluster = Cluster(fresh_chroot(zookeeper), str(workdir))
    cluster.zk.create_top_level_paths()
    for user, password in SCRAM_USERS.items():
        put_scram_user(cluster.zk, user, password)
    ports = {name: free_port() for name in ("SASL_PLAINTEXT", "SASL_SSL", "SSL")}
    one_line = lambda pem: pem.replace("\n", "")   # noqa: E731  (PEM on one properties line, as Kafka reads it)
    b = cluster.add(1, start=False, **{
        "listeners": "PLAINTEXT://127.0.0.1:{port}," + ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas({"username": "admin", "password": "admin-secret",
                                                                     **{f"user_{u}": p for u, p in PLAIN_USERS.items()}}),
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas({f"user_{u}": p for u, p in PLAIN_USERS.items()}),
        "ssl.keystore.type": "PEM", "ssl.keystore.key": one_line(broker_key),
        "ssl.keystore.certificate.chain": one_line(broker_cert),
        "ssl.truststore.type": "PEM", "ssl.truststore.certificates": one_line(ca_cert),
        "listener.name.ssl.ssl.client.auth": "required",
        "offsets.topic.replication.factor": 1, "transaction.state.log.replication.factor": 1,
        "group.initial.rebalance.delay.ms": 0,
    })
    with open(b.config_path) as f:
        text = f.read().replace("{port}", str(b.port))
    with open(b.config_path, "w") as f:
        f.write(text)
    b.start()
    cluster.wait_ready([1])
    yield Secured(cluster, ports, pki)
    cluster.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ---- confluent-kafka -----------------------------------------------------------------------------------------

def ck_conf(secured: Secured, listener: str, mechanism: str | None = None, user: str | None = None,
            password: str | None = None) -> dict:
    conf = {"bootstrap.servers": secured.bootstrap(listener), "security.protocol": listener}
    if mechanism:
        conf.update({"sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": password})
    if "SSL" in listener:
        conf["ssl.ca.location"] = secured.pki["ca"]
    if listener == "SSL":
        conf.update({"ssl.certificate.location": secured.pki["cert"], "ssl.key.location": secured.pki["key"]})
    return conf


def ck_roundtrip(conf: dict, topic: str, n: int = 5) -> list[bytes]:
    from confluent_kafka import Consumer, Producer
    p = Producer({**conf, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode())
    assert p.flush(20) == 0
    c = Consumer({**conf, "group.id": unique("g"), "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = []
    try:
        for _ in range(100):
            m = c.poll(0.5)
            if m is None:
                if len(got) >= n:
                    break
                continue
            assert m.error() is None, m.error()
            got.append(m.value())
            if len(got) >= n:
                break
    finally:
        c.close()
    return got


CK_CASES = [("SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret"),
            ("SASL_SSL", "SCRAM-SHA-256", "bob", "bob-secret"),
            ("SASL_SSL", "SCRAM-SHA-512", "carol,=x", "carol-secret"),
            ("SSL", None, None, None)]


@pytest.mark.parametrize("listener,mechanism,user,password", CK_CASES)
def test_confluent_kafka_roundtrip(secured, listener, mechanism, user, password):
    topic = unique("ck")
    got = ck_roundtrip(ck_conf(secured, listener, mechanism, user, password), topic)
    assert got == [f"v{i}".encode() for i in range(5)]


@pytest.mark.parametrize("listener,mechanism,user", [("SASL_PLAINTEXT", "PLAIN", "alice"),
                                                    ("SASL_SSL", "SCRAM-SHA-256", "bob"),
                                                    ("SASL_SSL", "SCRAM-SHA-512", "nobody")])
def test_confluent_kafka_wrong_password_fails_authentication(secured, listener, mechanism, user):
    from confluent_kafka import KafkaError as CkError, Producer
    errors = []
    p = Producer({**ck_conf(secured, listener, mechanism, user, "wrong"), "error_cb": errors.append})
    for _ in range(40):
        p.poll(0.25)
        if errors:
            break
    assert errors and errors[0].code() == CkError._AUTHENTICATION, errors
    assert "Authentication failed" in errors[0].str()


# ---- the shared client (kbroker.protocol.client) -------------------------------------------------------------

def client_security(secured: Secured, listener: str, mechanism: str | None = None, user: str | None = None,
                    password: str | None = None, **extra):
    from kbroker.protocol.client.security import ClientSecurity
    props = {"security.protocol": listener, **extra}
    if mechanism:
        props.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
    if "SSL" in listener:
        props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": secured.pki["ca"]})
    if listener == "SSL":
        props.update({"ssl.certificate.location": secured.pki["cert"], "ssl.key.location": secured.pki["key"]})
    return ClientSecurity.from_properties(props)


@pytest.mark.parametrize("listener,mechanism,user,password", CK_CASES)
def test_shared_client_logs_in(secured, listener, mechanism, user, password):
    from kbroker.protocol.client import ClusterClient
    security = client_security(secured, listener, mechanism, user, password)
    with ClusterClient(secured.bootstrap(listener), "sec-test", timeout=10, security=security) as client:
        md = client.metadata([])
        assert [b.port for b in md.brokers.values()] == [secured.ports[listener]]   # this listener's endpoint


@pytest.mark.parametrize("listener,mechanism,user", [("SASL_PLAINTEXT", "PLAIN", "alice"),
                                                    ("SASL_SSL", "SCRAM-SHA-512", "bob"),
                                                    ("SASL_SSL", "SCRAM-SHA-256", "nobody")])
def test_shared_client_wrong_password_is_not_retried(secured, listener, mechanism, user):
    from kbroker.protocol.client import ClusterClient, KafkaError
    from kbroker.protocol.errors import Errors
    security = client_security(secured, listener, mechanism, user, "wrong")
    with ClusterClient(secured.bootstrap(listener), "sec-test", timeout=30, security=security) as client:
        with pytest.raises(KafkaError) as e:
            client.metadata([])
    assert e.value.code == Errors.SASL_AUTHENTICATION_FAILED
    assert "Authentication failed" in str(e.value)


# ---- raw sockets ---------------------------------------------------------------------------------------------

def raw_frame(api_key: int, version: int, body: bytes, correlation_id: int = 1) -> bytes:
    client_id = b"raw"
    head = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(head) + len(body)) + head + body


def read_frame(sock) -> bytes | None:
    def exact(n):
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf
    head = exact(4)
    return None if head is None else exact(struct.unpack(">i", head)[0])


def test_a_request_before_authentication_closes_the_connection(secured):
    with socket.create_connection(("127.0.0.1", secured.ports["SASL_PLAINTEXT"]), timeout=10) as s:
        s.sendall(raw_frame(3, 1, struct.pack(">i", 0)))        # Metadata v1, no topics
        assert s.recv(100) == b""                               # closed, no answer


def test_v0_handshake_then_raw_plain_token(secured):
    with socket.create_connection(("127.0.0.1", secured.ports["SASL_PLAINTEXT"]), timeout=10) as s:
        s.sendall(raw_frame(17, 0, struct.pack(">h", 5) + b"PLAIN"))
        answer = read_frame(s)
        assert answer[4:6] == b"\0\0"                            # after the correlation id: NONE
        token = b"\0alice\0alice-secret"
        s.sendall(struct.pack(">i", len(token)) + token)
        assert read_frame(s) == b""                              # success: an empty token
        s.sendall(raw_frame(3, 1, struct.pack(">i", 0), correlation_id=7))
        assert struct.unpack(">i", read_frame(s)[:4])[0] == 7   # authenticated: Metadata answered


def test_sasl_apis_on_a_plaintext_listener_answer_illegal_sasl_state(secured):
    port = secured.cluster.brokers[1].port
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(raw_frame(17, 1, struct.pack(">h", 5) + b"PLAIN"))
        assert read_frame(s)[4:6] == struct.pack(">h", 34)
