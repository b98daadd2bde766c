"""TLS and SASL on the wire with real clients (confluent-kafka, kafka-python, aiokafka, kcat) and raw sockets.

One broker serves the module, with a listener per security protocol: PLAINTEXT (readiness, setup), SASL_PLAINTEXT
(PLAIN and SCRAM), SASL_SSL (SCRAM-SHA-256/512 and PLAIN) and SSL with ssl.client.auth=required. SCRAM users are
written to /config/users before it starts; one more is added and removed at runtime with the change notification.
"""
from __future__ import annotations

import os
import socket
import struct
import urllib.request
import uuid

import pytest

from kbroker.cluster import free_port, wait_until
from kbroker.security.certs import make_ca, make_cert
from kbroker.protocol.sasl.scram import make_credential
from tests.conftest import fresh_chroot
from tests.integration.conftest import Cluster, fill_port
from kbroker.common.sanitizer import sanitize

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
    def __init__(self, cluster: Cluster, ports: dict[str, int], pki: dict[str, str], metrics_port: int):
        self.cluster, self.ports, self.pki, self.metrics_port = cluster, ports, pki, metrics_port

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
    metrics_port = free_port()
    one_line = lambda pem: pem.replace("\n", "")   # noqa: E731  (PEM on one properties line, as Kafka reads it)
    b = cluster.add(1, start=False, **{
        "listeners": "PLAINTEXT://127.0.0.1:{port}," + ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "metrics.port": metrics_port,
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
    fill_port(b)
    b.start("--logger", "kafka.request.logger=DEBUG")   # its lines name each request's principal
    cluster.wait_ready([1])
    yield Secured(cluster, ports, pki, metrics_port)
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


def test_authentications_are_counted_per_listener(secured):
    """Kafka's socket-server-metrics successful/failed-authentication-total per listener: a SASL login, a wrong
    password, a TLS client certificate, a client speaking plaintext to the TLS listener."""
    from prometheus_client.parser import text_string_to_metric_families
    from kbroker.protocol.client import ClusterClient, KafkaError

    def counts() -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{secured.metrics_port}/metrics", timeout=5) as r:
            text = r.read().decode()
        return {(s.name.removeprefix("kafka_server_socketservermetrics_"), s.labels["listener"]): s.value
                for f in text_string_to_metric_families(text) for s in f.samples
                if s.name.endswith("authentication_total") or s.name.endswith("authentication_no_reauth_total")}

    def grew(name: str, listener: str) -> float:
        return counts()[(name, listener)] - before[(name, listener)]

    before = counts()
    with ClusterClient(secured.bootstrap("SASL_PLAINTEXT"), "sec-metrics", timeout=30,
                       security=client_security(secured, "SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret")) as c:
        c.metadata([])
    with ClusterClient(secured.bootstrap("SASL_PLAINTEXT"), "sec-metrics", timeout=30,
                       security=client_security(secured, "SASL_PLAINTEXT", "PLAIN", "alice", "wrong")) as c:
        with pytest.raises(KafkaError):
            c.metadata([])
    with ClusterClient(secured.bootstrap("SSL"), "sec-metrics", timeout=30,
                       security=client_security(secured, "SSL")) as c:
        c.metadata([])
    with socket.create_connection(("127.0.0.1", secured.ports["SSL"]), timeout=10) as s:
        s.sendall(raw_frame(18, 0, b""))   # ApiVersions in plaintext: the TLS handshake fails
    wait_until(lambda: grew("failed_authentication_total", "SASL_PLAINTEXT") == 1
               and grew("failed_authentication_total", "SSL") == 1, timeout=10, message="failures counted")
    assert grew("successful_authentication_total", "SASL_PLAINTEXT") == 1
    assert grew("successful_authentication_total", "SSL") == 1
    assert grew("successful_authentication_no_reauth_total", "SSL") == 1   # TLS cannot re-authenticate
    assert grew("successful_authentication_total", "SASL_SSL") == 0
    assert counts()[("successful_authentication_total", "PLAINTEXT")] == 0


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


# ---- kafka-python, aiokafka, kcat ----------------------------------------------------------------------------

def kp_conf(secured: Secured, listener: str, mechanism: str | None, user: str | None, password: str | None,
            **extra) -> dict:
    conf = {"bootstrap_servers": secured.bootstrap(listener), "security_protocol": listener, **extra}
    if mechanism:
        conf.update({"sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password})
    if "SSL" in listener:
        conf["ssl_cafile"] = secured.pki["ca"]
    if listener == "SSL":
        conf.update({"ssl_certfile": secured.pki["cert"], "ssl_keyfile": secured.pki["key"]})
    return conf


# kafka-python does not escape ',' and '=' in a SCRAM user name (it sends n=carol,=x): bob instead
KP_CASES = [case if case[2] != "carol,=x" else (*case[:2], "bob", "bob-secret") for case in CK_CASES]


@pytest.mark.parametrize("listener,mechanism,user,password", KP_CASES)
def test_kafka_python_roundtrip(secured, listener, mechanism, user, password):
    from kafka import KafkaConsumer, KafkaProducer
    topic = unique("kp")
    conf = kp_conf(secured, listener, mechanism, user, password)
    p = KafkaProducer(**conf)
    for i in range(5):
        p.send(topic, f"v{i}".encode()).get(timeout=20)
    p.close()
    c = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10000, **conf)
    got = []
    for m in c:
        got.append(m.value)
        if len(got) == 5:
            break
    c.close()
    assert got == [f"v{i}".encode() for i in range(5)]


def test_kafka_python_v0_handshake_raw_tokens(secured):
    """api_version (0, 10, 0): kafka-python sends SaslHandshake v0 and the PLAIN token as a raw frame."""
    from kafka import KafkaConsumer, KafkaProducer
    topic = unique("kp-v0")
    client_id = unique("kp-v0")
    conf = kp_conf(secured, "SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret", api_version=(0, 10, 0),
                   client_id=client_id)
    p = KafkaProducer(**conf)
    p.send(topic, b"raw").get(timeout=20)
    p.close()
    c = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10000, **conf)
    assert next(iter(c)).value == b"raw"
    c.close()
    with open(os.path.join(secured.cluster.brokers[1].dir, "logs", "kafka-request.log")) as f:
        handshakes = [line for line in f if "SaslHandshake" in line and f"client_id={client_id} " in line]
    assert handshakes and all("SaslHandshake v0 " in line for line in handshakes)


@pytest.mark.parametrize("listener,mechanism,user", [("SASL_PLAINTEXT", "PLAIN", "alice"),
                                                    ("SASL_SSL", "SCRAM-SHA-256", "bob")])
def test_kafka_python_wrong_password(secured, listener, mechanism, user, caplog):
    """kafka-python retries a failed login until bootstrap_timeout_ms; each attempt gets the broker's answer."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KpError
    with pytest.raises(KpError):
        KafkaProducer(**kp_conf(secured, listener, mechanism, user, "wrong"), bootstrap_timeout_ms=3000)
    assert "SaslAuthenticationFailed" in caplog.text and "Authentication failed" in caplog.text


def aiokafka_conf(secured: Secured, listener: str, mechanism: str | None, user: str | None,
                  password: str | None) -> dict:
    from aiokafka.helpers import create_ssl_context
    conf = {"bootstrap_servers": secured.bootstrap(listener), "security_protocol": listener}
    if mechanism:
        conf.update({"sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password})
    if "SSL" in listener:
        conf["ssl_context"] = create_ssl_context(
            cafile=secured.pki["ca"], **({"certfile": secured.pki["cert"], "keyfile": secured.pki["key"]}
                                         if listener == "SSL" else {}))
    return conf


@pytest.mark.parametrize("listener,mechanism,user,password", CK_CASES)
def test_aiokafka_roundtrip(secured, listener, mechanism, user, password):
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    topic = unique("aio")

    async def run():
        conf = aiokafka_conf(secured, listener, mechanism, user, password)
        p = AIOKafkaProducer(**conf)
        await p.start()
        try:
            for i in range(5):
                await p.send_and_wait(topic, f"v{i}".encode())
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **conf)
        await c.start()
        got = []
        try:
            while len(got) < 5:
                batch = await asyncio.wait_for(c.getmany(timeout_ms=1000), 20)
                got += [m.value for msgs in batch.values() for m in msgs]
        finally:
            await c.stop()
        return got
    assert asyncio.run(run()) == [f"v{i}".encode() for i in range(5)]


def test_aiokafka_wrong_password(secured, caplog):
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError as AioError

    async def run():
        p = AIOKafkaProducer(**aiokafka_conf(secured, "SASL_SSL", "SCRAM-SHA-512", "bob", "wrong"))
        try:
            await asyncio.wait_for(p.start(), 30)
        finally:
            await p.stop()
    with pytest.raises(AioError):
        asyncio.run(run())
    assert "SaslAuthenticationFailed: Authentication failed" in caplog.text


def kcat_args(secured: Secured, listener: str, mechanism: str | None, user: str | None,
              password: str | None) -> list[str]:
    args = ["-b", secured.bootstrap(listener), "-X", f"security.protocol={listener}"]
    if mechanism:
        args += ["-X", f"sasl.mechanisms={mechanism}", "-X", f"sasl.username={user}", "-X", f"sasl.password={password}"]
    if "SSL" in listener:
        args += ["-X", f"ssl.ca.location={secured.pki['ca']}"]
    if listener == "SSL":
        args += ["-X", f"ssl.certificate.location={secured.pki['cert']}", "-X", f"ssl.key.location={secured.pki['key']}"]
    return args


@pytest.mark.parametrize("listener,mechanism,user,password", CK_CASES)
def test_kcat_roundtrip(secured, listener, mechanism, user, password):
    import subprocess
    topic = unique("kcat")
    args = kcat_args(secured, listener, mechanism, user, password)
    subprocess.run(["kcat", *args, "-P", "-t", topic], input=b"one\ntwo\n", check=True, timeout=30)
    out = subprocess.run(["kcat", *args, "-C", "-t", topic, "-o", "beginning", "-c", "2", "-e", "-f", "%s\n"],
                         capture_output=True, check=True, timeout=30)
    assert out.stdout.split() == [b"one", b"two"]


def test_kcat_wrong_password(secured):
    import subprocess
    out = subprocess.run(["kcat", *kcat_args(secured, "SASL_SSL", "SCRAM-SHA-256", "bob", "wrong"), "-L",
                          "-m", "2"], capture_output=True, timeout=30)
    assert out.returncode != 0
    assert b"Authentication failed" in out.stderr


# ---- SCRAM users at runtime ----------------------------------------------------------------------------------

def test_scram_user_added_and_removed_at_runtime(secured):
    """/config/users/<user> + the users/<user> change notification (what kafka-configs.sh --zookeeper writes):
    the next login uses it; removing the credentials (and notifying) locks the user out at once."""
    from kbroker.protocol.client import ClusterClient, KafkaError
    from kbroker.protocol.errors import Errors
    zk = secured.cluster.zk
    user = unique("erin")
    security = client_security(secured, "SASL_SSL", "SCRAM-SHA-256", user, "erin-secret")

    def login():
        with ClusterClient(secured.bootstrap("SASL_SSL"), "sec-test", timeout=10, security=security) as client:
            client.metadata([])

    put_scram_user(zk, user, "erin-secret")
    wait_until(lambda: _logs_in(login), message="the new user logs in")
    zk.set_or_create_entity_config("users", sanitize(user), {})
    zk.create_config_change_notification(f"users/{sanitize(user)}")
    wait_until(lambda: not _logs_in(login), message="the removed user is refused")
    with pytest.raises(KafkaError) as e:
        login()
    assert e.value.code == Errors.SASL_AUTHENTICATION_FAILED
    put_scram_user(zk, user, "erin-secret", iterations=4095)      # fewer than 4096 iterations: refused
    wait_until(lambda: secured.cluster.brokers[1].log().count(f"SCRAM credentials of user {user}:") == 3,
               message="the broker reread the user a third time")
    assert not _logs_in(login)


def _logs_in(login) -> bool:
    from kbroker.protocol.client import KafkaError
    from kbroker.protocol.errors import Errors
    try:
        login()
        return True
    except KafkaError as e:
        assert e.code == Errors.SASL_AUTHENTICATION_FAILED, e
        return False


# ---- principals, TLS failures, sensitive configs -------------------------------------------------------------

def request_log_principals(secured: Secured, client_id: str) -> set[str]:
    path = os.path.join(secured.cluster.brokers[1].dir, "logs", "kafka-request.log")
    with open(path) as f:
        return {line.rsplit("principal=", 1)[1].strip() for line in f
                if f"client_id={client_id} " in line and "Completed request: Metadata" in line}


@pytest.mark.parametrize("listener,mechanism,user,password,principal", [
    ("SSL", None, None, None, "User:CN=client1,O=kbroker"),          # the client certificate's subject DN
    ("SASL_SSL", "SCRAM-SHA-256", "bob", "bob-secret", "User:bob"),   # SASL wins over TLS
    ("SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret", "User:alice"),
])
def test_requests_carry_the_authenticated_principal(secured, listener, mechanism, user, password, principal):
    from kbroker.protocol.client import ClusterClient
    client_id = unique("who")
    with ClusterClient(secured.bootstrap(listener), client_id, timeout=10,
                       security=client_security(secured, listener, mechanism, user, password)) as client:
        client.metadata([])
    wait_until(lambda: request_log_principals(secured, client_id), message="the request log lines")
    assert request_log_principals(secured, client_id) == {principal}


def test_ssl_client_auth_required_refuses_a_client_without_certificate(secured):
    from kbroker.protocol.client import Connection, KafkaError
    from kafka.protocol.metadata import MetadataRequest
    security = client_security(secured, "SSL").__class__.from_properties(
        {"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": secured.pki["ca"]})
    conn = Connection("127.0.0.1", secured.ports["SSL"], "no-cert", 10, security)
    with pytest.raises(KafkaError):
        conn.send(MetadataRequest(version=1, topics=[]))
    assert secured.cluster.brokers[1].alive()


def test_untrusted_broker_certificate_fails_fast(secured, tmp_path):
    from kbroker.protocol.client import ClusterClient, KafkaError
    from kbroker.protocol.client.security import ClientSecurity
    from kbroker.protocol.errors import Errors
    other_ca = tmp_path / "other-ca.pem"
    other_ca.write_text(make_ca("someone else")[0])
    security = ClientSecurity.from_properties({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                                               "sasl.username": "alice", "sasl.password": "alice-secret",
                                               "ssl.truststore.type": "PEM", "ssl.truststore.location": str(other_ca)})
    with ClusterClient(secured.bootstrap("SASL_SSL"), "sec-test", timeout=30, security=security) as client:
        with pytest.raises(KafkaError) as e:
            client.metadata([])
    assert e.value.code == Errors.SASL_AUTHENTICATION_FAILED and "certificate verify failed" in str(e.value)


def closed_by_peer(sock) -> bool:
    """Read until the peer closes (a TLS alert may come first); a timeout fails the test."""
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:
        pass
    return True


@pytest.mark.parametrize("listener", ["SSL", "SASL_SSL"])
def test_garbage_before_and_after_the_tls_handshake_closes_cleanly(secured, listener):
    import ssl
    with socket.create_connection(("127.0.0.1", secured.ports[listener]), timeout=10) as s:
        s.sendall(b"\x00\x00\x00\x10GET / HTTP/1.0\r\n\r\n" * 4)       # not a TLS ClientHello
        assert closed_by_peer(s)
    ctx = ssl.create_default_context(cafile=secured.pki["ca"])
    ctx.load_cert_chain(secured.pki["cert"], secured.pki["key"])
    with ctx.wrap_socket(socket.create_connection(("127.0.0.1", secured.ports[listener]), timeout=10),
                         server_hostname="127.0.0.1") as t:
        t.sendall(struct.pack(">i", 9) + b"\xff" * 9)                       # a frame no header parses
        assert closed_by_peer(t)
    with socket.create_connection(("127.0.0.1", secured.cluster.brokers[1].port), timeout=10):
        pass
    assert secured.cluster.brokers[1].alive()
    assert "Traceback" not in secured.cluster.brokers[1].log()


def test_password_settings_are_sensitive_in_describe_configs(secured):
    from confluent_kafka.admin import AdminClient, ConfigResource
    admin = AdminClient({"bootstrap.servers": secured.cluster.brokers[1].bootstrap})
    configs = admin.describe_configs([ConfigResource("BROKER", "1")])
    entries = next(iter(configs.values())).result(20)
    for name in ("ssl.keystore.key", "ssl.truststore.certificates", "sasl.jaas.config"):
        assert entries[name].is_sensitive and entries[name].value is None, name
    assert not entries["ssl.client.auth"].is_sensitive and entries["ssl.client.auth"].value == "none"


def sasl_response(sock, request, correlation_id: int):
    from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse
    body = request.encode(version=request.API_VERSION)
    sock.sendall(raw_frame(request.API_KEY, request.API_VERSION, bytes(body), correlation_id))
    frame = read_frame(sock)
    if frame is None:
        return None
    assert struct.unpack(">i", frame[:4])[0] == correlation_id
    cls = SaslHandshakeResponse if request.API_KEY == 17 else SaslAuthenticateResponse
    return cls.decode(frame[4:], version=request.API_VERSION)


def test_v1_handshake_states_and_errors(secured):
    """SaslHandshake v1 + SaslAuthenticate v1: success, then ILLEGAL_SASL_STATE for more SASL requests (the
    connection stays); an unknown mechanism gets UNSUPPORTED_SASL_MECHANISM and a wrong password
    SASL_AUTHENTICATION_FAILED, each followed by the close."""
    from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
    address = ("127.0.0.1", secured.ports["SASL_PLAINTEXT"])
    with socket.create_connection(address, timeout=10) as s:
        r = sasl_response(s, SaslHandshakeRequest(version=1, mechanism="PLAIN"), 1)
        assert r.error_code == 0 and set(r.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
        a = sasl_response(s, SaslAuthenticateRequest(version=1, auth_bytes=b"\0alice\0alice-secret"), 2)
        assert (a.error_code, a.error_message, a.auth_bytes, a.session_lifetime_ms) == (0, None, b"", 0)
        again = sasl_response(s, SaslAuthenticateRequest(version=1, auth_bytes=b"x"), 3)
        assert again.error_code == 34
        assert again.error_message == "SaslAuthenticate request received after successful authentication"
        assert sasl_response(s, SaslHandshakeRequest(version=1, mechanism="PLAIN"), 4).error_code == 34
    with socket.create_connection(address, timeout=10) as s:
        r = sasl_response(s, SaslHandshakeRequest(version=1, mechanism="GSSAPI"), 1)
        assert r.error_code == 33 and "PLAIN" in r.mechanisms
        assert closed_by_peer(s)
    with socket.create_connection(address, timeout=10) as s:
        sasl_response(s, SaslHandshakeRequest(version=1, mechanism="PLAIN"), 1)
        a = sasl_response(s, SaslAuthenticateRequest(version=1, auth_bytes=b"\0alice\0nope"), 2)
        assert a.error_code == 58 and a.error_message == "Authentication failed: Invalid username or password"
        assert closed_by_peer(s)


def test_large_fetch_over_tls_is_copied_whole(secured):
    """Fetch responses larger than one read chunk (file slices are read and sent, not sendfile'd, on TLS)."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    conf = ck_conf(secured, "SASL_SSL", "SCRAM-SHA-512", "carol,=x", "carol-secret")
    topic = unique("big")
    values = [os.urandom(100_000) for _ in range(12)]          # ~1.2 MB: several 256 KiB chunks
    p = Producer({**conf, "linger.ms": 50, "compression.type": "none"})
    for v in values:
        p.produce(topic, value=v, partition=0)
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": unique("g"), "fetch.max.bytes": 4_000_000,
                  "max.partition.fetch.bytes": 4_000_000})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    try:
        for _ in range(60):
            got += [m.value() for m in c.consume(20, 0.5) if m.error() is None]
            if len(got) >= len(values):
                break
    finally:
        c.close()
    assert got == values


def test_broker_znode_lists_every_listener_with_its_protocol(secured):
    import json
    data, _ = secured.cluster.zk.get("/brokers/ids/1")
    znode = json.loads(data)
    plain_port = secured.cluster.brokers[1].port
    assert znode["version"] == 5 and (znode["host"], znode["port"]) == ("127.0.0.1", plain_port)
    assert znode["endpoints"] == [f"PLAINTEXT://127.0.0.1:{plain_port}"] + [
        f"{name}://127.0.0.1:{port}" for name, port in secured.ports.items()]
    assert znode["listener_security_protocol_map"] == {
        "PLAINTEXT": "PLAINTEXT", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL", "SSL": "SSL"}
