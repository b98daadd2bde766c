"""A secured ZooKeeper (SASL DIGEST-MD5, TLS on its secureClientPort, client certificates; the preset of
`kbroker cluster up --secure-zookeeper`), as a Kafka 2.8 deployment runs one: brokers with KAFKA_OPTS's JAAS file
and zookeeper.set.acl=true, kadmin logging in with KAFKA_OPTS and --zk-tls-config-file, every znode's ACL as
Kafka's ZkData sets it after a busy cluster's life, what an unauthenticated client can and cannot do, the
migration tool both ways, and the start-up refusals (exit 2, nothing written to ZooKeeper)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid

import pytest
from click.testing import CliRunner
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from admin_cli.main import cli
from kbroker.cluster import BrokerProcess, free_port_range
from kbroker.config import read_properties
from kbroker.security.certs import make_ca, make_cert
from zk.client import KafkaZkClient, ZkNoAuth
from zk.security import NETTY_SOCKET, SECURE_ROOT_PATHS, TLS_SETTINGS, client_security

from .conftest import wait_until

OPEN = [(31, "world", "anyone")]
BROKERS = [(31, "sasl", "kafka"), (31, "x509", "CN=kafka,O=kbroker")]   # `auth` as the brokers' session has it
SECURE = sorted(BROKERS + [(1, "world", "anyone")])
SENSITIVE = ("/config/users", "/config/brokers", "/delegation_token/tokens")


def expected_acl(path: str) -> list:
    """ZkData.defaultAcls(isSecure=true) as ZooKeeper stores it for the brokers' identity."""
    if path == "/consumers":
        return OPEN
    return sorted(BROKERS) if path.startswith(SENSITIVE) else SECURE


def walk(zk: KafkaZkClient, path: str = "/") -> list[str]:
    """Every znode at and below path (below the client's chroot)."""
    out, level = [], [path]
    while level:
        out += level
        level = [f"{p.rstrip('/')}/{c}" for p in level for c in zk.children(p)]
    return out


def acls_of(zk: KafkaZkClient) -> dict[str, list]:
    return {p: zk.get_acl(p) for p in walk(zk)}


def kadmin(cluster, *args, zookeeper: bool = True):
    """kadmin as an operator runs it against the secured ZooKeeper: KAFKA_OPTS's JAAS file, the TLS file."""
    preset = cluster.zk_preset
    where = (["--zookeeper", cluster.zk_connect, "--zk-tls-config-file", preset.path("zk-tls.properties")]
             if zookeeper else ["--bootstrap-server", cluster.bootstrap])
    result = CliRunner().invoke(cli, [*where, *map(str, args)], env={"KAFKA_OPTS": preset.kafka_opts},
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output + result.stderr
    return result


def anonymous(cluster, server) -> KafkaZkClient:
    """A client with no login, on the plain client port, in the cluster's chroot."""
    chroot = cluster.zk_connect.partition("/")[2]
    return KafkaZkClient(f"{server.connect}/{chroot}", 6000).start()


def busy_life(c, tmp_path):
    """Topics, configs, quotas, SCRAM users, ACLs, a consumer group, v0 offset commits (in ZooKeeper),
    transactions, a reassignment, an election and a deletion, through kadmin (ZooKeeper and Admin APIs) and real
    clients."""
    kadmin(c, "create-topic", "orders", "--partitions", 3, "--replication-factor", 2, "--config", "retention.ms=600000",
           "--wait")
    kadmin(c, "create-topic", "events", "--partitions", 2, "--replication-factor", 3, zookeeper=False)
    kadmin(c, "alter-config", "--topic", "orders", "--add-config", "segment.ms=60000")
    kadmin(c, "alter-config", "--broker", 1, "--add-config", "log.cleaner.threads=2")
    kadmin(c, "alter-config", "--broker-defaults", "--add-config", "log.retention.ms=86400000")
    kadmin(c, "quotas", "alter", "--user", "alice", "--client-defaults", "--add-config", "producer_byte_rate=1048576")
    kadmin(c, "quotas", "alter", "--client-id", "app", "--add-config", "consumer_byte_rate=2048")
    kadmin(c, "users", "add", "bob", "--mechanism", "SCRAM-SHA-256", "--password", "bob-secret")
    kadmin(c, "acls", "add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders",
           "--group", "readers")
    kadmin(c, "acls", "add", "--allow-principal", "User:bob", "--operation", "Write", "--topic", "ord",
           "--resource-pattern-type", "prefixed")
    producer = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": "tx-1"})
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(30):
        producer.produce("orders", key=str(i).encode(), value=b"v%d" % i)
    producer.commit_transaction()
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "readers", "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    consumer.subscribe(["orders"])
    got = 0
    while got < 30:
        msg = consumer.poll(1.0)
        if msg is not None and not msg.error():
            got += 1
    consumer.commit(asynchronous=False)
    consumer.close()
    old = KafkaConsumer(bootstrap_servers=c.bootstrap, group_id="old", api_version=(0, 8, 1),
                        enable_auto_commit=False, request_timeout_ms=15000)   # OffsetCommit v0: /consumers
    try:
        old.assign([TopicPartition("orders", 0)])
        old.commit({TopicPartition("orders", 0): OffsetAndMetadata(17, "", -1)})
    finally:
        old.close()
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "orders", "partition": 0,
                                                               "replicas": [3, 2]}]}))
    kadmin(c, "reassign", "--reassignment-json-file", plan, "--execute")
    kadmin(c, "elect-leaders", "--preferred", "--all-topic-partitions")
    kadmin(c, "delete-topic", "events", "--wait")


def test_a_secured_cluster_works_and_every_znode_has_kafkas_acl(cluster_factory, secure_zookeeper, tmp_path):
    c = cluster_factory(3, secure_zookeeper=True, **{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                                                     "super.users": "User:ANONYMOUS"})
    busy_life(c, tmp_path)
    # The controller moved the reassignment and the deletion through: it reads and writes as the brokers.
    assert c.zk.get_topic_assignment("orders").partitions[0] == [3, 2]
    wait_until(lambda: not c.zk.topic_exists("events"), 30, message="events deleted")

    found = acls_of(c.zk)
    for path in ("/brokers/ids/1", "/config/topics/orders", "/config/users/alice", "/config/users/bob",
                 "/config/brokers/1", "/config/brokers/<default>", "/config/clients/app", "/kafka-acl/Topic/orders",
                 "/kafka-acl-extended/prefixed/Topic/ord", "/latest_producer_id_block", "/controller",
                 "/brokers/topics/__transaction_state", "/brokers/topics/__consumer_offsets", "/consumers",
                 "/consumers/old/offsets/orders/0", "/admin/delete_topics", "/config/changes"):
        assert path in found, path
    wrong = {p: acl for p, acl in found.items() if acl != expected_acl(p)}
    assert wrong == {}

    anon = anonymous(c, secure_zookeeper)
    try:
        assert anon.get_broker_ids() == [1, 2, 3]
        assert anon.get_topic_assignment("orders") is not None
        for write in (lambda: anon.create_recursive("/brokers/ids/9", b"{}"),
                      lambda: anon.set_data("/brokers/topics/orders", b"{}"),
                      lambda: anon.delete("/controller")):
            with pytest.raises(ZkNoAuth):
                write()
        for path in ("/config/users/alice", "/config/users/bob", "/config/brokers/1", "/config/brokers/<default>"):
            with pytest.raises(ZkNoAuth):
                anon.get(path)
        assert anon.get_entity_config("topics", "orders")["segment.ms"] == "60000"   # not sensitive
    finally:
        anon.close()


def test_migration_secures_an_open_cluster_and_opens_it_again(cluster_factory, secure_zookeeper):
    # Kafka's procedure: brokers that log in but still create open znodes (set.acl=false), then the tool.
    c = cluster_factory(2, secure_zookeeper=True, **{"zookeeper.set.acl": "false"})
    # Through the brokers (a logged-in kadmin --zookeeper would create secure znodes itself, as Kafka's tools).
    kadmin(c, "create-topic", "orders", "--partitions", 2, "--replication-factor", 2, "--wait", zookeeper=False)
    kadmin(c, "quotas", "alter", "--user", "alice", "--add-config", "producer_byte_rate=1024", zookeeper=False)
    kadmin(c, "alter-config", "--broker", 1, "--add-config", "log.cleaner.threads=2", zookeeper=False)
    before = acls_of(c.zk)
    del before["/"]   # the chroot, made by this test's own client (with the brokers' login and secure ACLs)
    assert {p: a for p, a in before.items() if a != OPEN} == {}

    def migrate(acl):
        kadmin(c, "zookeeper-security-migration", "--zookeeper.acl", acl, "--zookeeper.connect", c.zk_connect)
        return acls_of(c.zk)

    def secured(path):
        return path == "/" or any(path == r or path.startswith(r + "/") for r in SECURE_ROOT_PATHS)

    after = migrate("secure")
    assert set(after) >= set(before)
    assert {p: a for p, a in after.items() if a != (expected_acl(p) if secured(p) else OPEN)} == {}
    assert after["/config/users/alice"] == sorted(BROKERS) and after["/brokers/ids/1"] == SECURE
    assert after["/consumers"] == OPEN

    anon = anonymous(c, secure_zookeeper)
    try:
        with pytest.raises(ZkNoAuth):
            anon.get("/config/users/alice")
    finally:
        anon.close()
    kadmin(c, "create-topic", "more", "--partitions", 1, "--replication-factor", 2, "--wait")   # still works

    again = migrate("unsecure")
    assert {p: a for p, a in again.items() if a != OPEN} == {}


def _start_refused(tmp_path, zk_connect, settings, environ):
    """A broker that must refuse to start: (its exit code, its error lines)."""
    b = BrokerProcess.create(1, str(tmp_path / f"broker-{uuid.uuid4().hex[:6]}"), zk_connect,
                             {"zookeeper.connection.timeout.ms": 20000, **settings}, environ=environ).start()
    code = b.proc.wait(60)
    return code, [line for line in b.log().splitlines() if line.startswith("error: ")]


def _resolves_to_loopback(host: str) -> bool:
    try:
        return socket.gethostbyname(host).startswith("127.")
    except OSError:
        return False


def test_bad_zookeeper_security_is_refused_at_start_and_writes_nothing(secure_zookeeper, tmp_path):
    preset = secure_zookeeper.preset
    tls = preset.tls_settings
    chroot = f"/t-{uuid.uuid4().hex[:10]}"
    connect = secure_zookeeper.secure_connect + chroot
    no_client = tmp_path / "no-client.conf"
    no_client.write_text('KafkaServer { org.apache.kafka.common.security.plain.PlainLoginModule required '
                         'username="a" password="b"; };\n')
    wrong_password = tmp_path / "wrong.conf"
    wrong_password.write_text('Client { org.apache.zookeeper.server.auth.DigestLoginModule required '
                              'username="kafka" password="not-it"; };\n')
    other_ca_cert, other_ca_key = make_ca("another CA")
    other_ca = tmp_path / "other-ca.pem"
    other_ca.write_text(other_ca_cert)
    stranger = tmp_path / "stranger.pem"    # a client certificate ZooKeeper's CA did not sign
    stranger.write_text("".join(reversed(make_cert(other_ca_cert, other_ca_key, "kafka"))))
    encrypted = tmp_path / "encrypted.pem"   # the brokers' key, encrypted with the store password "right"
    with open(preset.path("kafka.pem")) as f:
        pem = f.read()
    key = serialization.load_pem_private_key(pem.encode(), None)
    encrypted.write_text(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.BestAvailableEncryption(b"right")).decode()
                         + pem[pem.index("-----BEGIN CERTIFICATE-----"):])
    jaas = preset.kafka_opts
    cases = [
        # (with a TLS client certificate, Kafka would start: that is an identity too)
        ({"zookeeper.set.acl": "true"}, f"-Djava.security.auth.login.config={no_client}",
         "zookeeper.set.acl is true, but ZooKeeper client TLS configuration"),
        ({"zookeeper.set.acl": "true"}, "", "zookeeper.set.acl is true"),
        ({"zookeeper.set.acl": "true", **tls}, f"-Djava.security.auth.login.config={wrong_password}",
         "refused the SASL (DIGEST-MD5) login of user 'kafka' from the JAAS section Client (AUTH_FAILED)"),
        ({"zookeeper.set.acl": "true", **tls, "zookeeper.ssl.truststore.location": str(other_ca)}, jaas,
         "TLS handshake with ZooKeeper at"),
        ({"zookeeper.set.acl": "true", **tls, "zookeeper.ssl.keystore.location": str(stranger),
          "zookeeper.connection.timeout.ms": 3000}, jaas, "TLS handshake with ZooKeeper at 127.0.0.1:"),
        ({**tls}, f"-Djava.security.auth.login.config={tmp_path / 'missing.conf'}",
         "Exception while loading Zookeeper JAAS login context"),
        ({"zookeeper.set.acl": "true", **tls, "zookeeper.ssl.keystore.password": "x",
          "zookeeper.ssl.keystore.location": str(tmp_path / "missing.pem")}, jaas, "missing.pem"),
        ({"zookeeper.set.acl": "true", **tls, "zookeeper.ssl.keystore.password": "wrong",
          "zookeeper.ssl.keystore.location": str(encrypted)}, jaas, "encrypted.pem"),
    ]
    for settings, kafka_opts, fragment in cases:
        code, errors = _start_refused(tmp_path, connect if "zookeeper.ssl.client.enable" in settings
                                      else secure_zookeeper.connect + chroot, settings, {"KAFKA_OPTS": kafka_opts})
        assert code == 2 and len(errors) == 1 and fragment in errors[0], (settings, kafka_opts, code, errors)
    host = socket.gethostname()   # a name of this machine its certificate does not give (127.0.0.1, localhost)
    if host != "localhost" and _resolves_to_loopback(host):
        code, errors = _start_refused(tmp_path, f"{host}:{secure_zookeeper.security.secure_port}{chroot}",
                                      {"zookeeper.set.acl": "true", **tls}, {"KAFKA_OPTS": jaas})
        assert code == 2 and len(errors) == 1 and f"TLS handshake with ZooKeeper at {host}:" in errors[0] \
            and "Hostname mismatch" in errors[0], errors
    zk = KafkaZkClient(secure_zookeeper.secure_connect, 6000, security=preset.client_security()).start()
    try:
        assert zk.exists(chroot) is None   # not even the chroot was created
    finally:
        zk.close()


def test_kadmin_without_a_login_is_refused_by_the_acls(cluster_factory, secure_zookeeper):
    c = cluster_factory(1, secure_zookeeper=True)
    chroot = c.zk_connect.partition("/")[2]
    result = CliRunner().invoke(cli, ["--zookeeper", f"{secure_zookeeper.connect}/{chroot}", "create-topic",
                                      "orders", "--partitions", "1", "--replication-factor", "1"],
                                env={"KAFKA_OPTS": ""}, catch_exceptions=False)
    assert result.exit_code == 1 and "not allowed by the znode's ACL" in result.stderr, result.stderr
    assert not c.zk.topic_exists("orders")
    assert os.path.exists(c.zk_preset.path("zk-tls.properties"))


def test_cluster_up_secure_zookeeper(tmp_path):
    """`kbroker cluster up --secure-zookeeper`: ZooKeeper with SASL and TLS, brokers logging in there with
    zookeeper.set.acl=true, `status`, a killed broker started again (with its KAFKA_OPTS), kadmin with the printed
    files, and no write for a client without a login."""
    data = str(tmp_path / "cluster")
    zk_port, base = free_port_range(2), free_port_range(2)
    kbroker = [sys.executable, "-m", "kbroker.cli"]

    def run(*args):
        return subprocess.run([*kbroker, *args], capture_output=True, text=True, timeout=120)
    up = run("cluster", "up", "--brokers", "2", "--data-dir", data, "--zk-port", str(zk_port), "--base-port",
             str(base), "--secure-zookeeper", "--no-console")
    try:
        assert up.returncode == 0, up.stderr
        files = os.path.join(data, "zookeeper-security")
        assert f"zookeeper TLS      127.0.0.1:{zk_port + 1} (SASL user kafka" in up.stdout
        props = read_properties(os.path.join(data, "broker-1", "server.properties"))
        assert props["zookeeper.connect"] == f"127.0.0.1:{zk_port + 1}" and props["zookeeper.set.acl"] == "true"
        assert run("cluster", "kill", "2", "--data-dir", data).returncode == 0
        start = run("cluster", "start", "2", "--data-dir", data)
        assert start.returncode == 0, start.stderr
        status = run("cluster", "status", "--data-dir", data).stdout
        assert status.count("running, registered") == 2 and "zookeeper  secured: TLS on" in status, status
        result = CliRunner().invoke(cli, ["--zookeeper", f"127.0.0.1:{zk_port + 1}", "--zk-tls-config-file",
                                          os.path.join(files, "zk-tls.properties"), "create-topic", "orders",
                                          "--partitions", "2", "--replication-factor", "2", "--wait"],
                                    env={"KAFKA_OPTS": f"-Djava.security.auth.login.config={files}/kafka-jaas.conf"},
                                    catch_exceptions=False)
        assert result.exit_code == 0, result.stderr
        anon = KafkaZkClient(f"127.0.0.1:{zk_port}", 6000).start()
        try:
            assert anon.get_broker_ids() == [1, 2]
            assert anon.get_acl("/brokers/topics/orders") == SECURE
            with pytest.raises(ZkNoAuth):
                anon.create_recursive("/brokers/topics/other", b"{}")
        finally:
            anon.close()
    finally:
        run("cluster", "down", "--data-dir", data)


def test_kadmin_login_failures_and_migration_refusals(secure_zookeeper, tmp_path):
    """One line each: a wrong SASL password (exit 1), a TLS file that cannot be read (exit 2); the migration tool
    without a login, or with --enable.path.check on a chroot without Kafka's znodes (exit 1, nothing changed)."""
    preset = secure_zookeeper.preset
    chroot = f"/t-{uuid.uuid4().hex[:10]}"
    tls_file = preset.path("zk-tls.properties")
    wrong = tmp_path / "wrong.conf"
    wrong.write_text('Client { org.apache.zookeeper.server.auth.DigestLoginModule required username="kafka" '
                     'password="nope"; };\n')

    def run(*args, kafka_opts=preset.kafka_opts):
        return CliRunner().invoke(cli, list(map(str, args)), env={"KAFKA_OPTS": kafka_opts}, catch_exceptions=False)

    r = run("--zookeeper", secure_zookeeper.secure_connect + chroot, "--zk-tls-config-file", tls_file, "list-topics",
            kafka_opts=f"-Djava.security.auth.login.config={wrong}")
    assert r.exit_code == 1 and r.stderr.count("\n") == 1 and "refused the SASL" in r.stderr, r.stderr
    r = run("--zookeeper", secure_zookeeper.secure_connect + chroot, "--zk-tls-config-file", tmp_path / "no.properties",
            "list-topics")
    assert r.exit_code == 2 and "--zk-tls-config-file" in r.stderr and "cannot read" in r.stderr, r.stderr

    migrate = ("zookeeper-security-migration", "--zookeeper.acl", "secure", "--zookeeper.connect",
               secure_zookeeper.connect + chroot)
    r = run(*migrate, kafka_opts="")
    assert r.exit_code == 1 and "No JAAS configuration file has been specified and no TLS client certificate" \
        in r.stderr, r.stderr
    server_only = tmp_path / "server-only.conf"
    server_only.write_text('KafkaServer { org.apache.kafka.common.security.plain.PlainLoginModule required; };\n')
    r = run(*migrate, kafka_opts=f"-Djava.security.auth.login.config={server_only}")
    assert r.exit_code == 1 and "Security isn't enabled, most likely the file isn't set properly" in r.stderr
    r = run(*migrate, "--enable.path.check")
    assert r.exit_code == 1 and "do not exist in ZooKeeper: /admin,/brokers" in r.stderr, r.stderr
    zk = KafkaZkClient(secure_zookeeper.secure_connect, 6000, security=preset.client_security()).start()
    try:
        assert zk.exists(chroot) is None   # nothing created
    finally:
        zk.close()


def _keytool_stores(preset, directory) -> dict[str, str]:
    """The brokers' ZooKeeper client certificate as a keytool PKCS12 keystore, the CA as a keytool JKS truststore
    (the key goes through a PKCS12 file `cryptography` writes first: keytool imports no PEM key)."""
    p12, jks, source = (os.path.join(directory, name) for name in ("zk-client.p12", "zk-trust.jks", "source.p12"))
    with open(preset.path("kafka.pem"), "rb") as f:
        pem = f.read()
    with open(source, "wb") as f:
        f.write(pkcs12.serialize_key_and_certificates(
            b"kafka", serialization.load_pem_private_key(pem, None), x509.load_pem_x509_certificate(pem), None,
            serialization.BestAvailableEncryption(b"store-pw")))
    subprocess.run(["keytool", "-importkeystore", "-srckeystore", source,
                    "-srcstoretype", "PKCS12", "-srcstorepass", "store-pw", "-destkeystore", p12, "-deststoretype",
                    "PKCS12", "-deststorepass", "store-pw", "-noprompt"], check=True, capture_output=True)
    subprocess.run(["keytool", "-importcert", "-alias", "ca", "-file", preset.path("ca.pem"), "-keystore", jks,
                    "-storetype", "JKS", "-storepass", "trust-pw", "-noprompt"], check=True, capture_output=True)
    return {"zookeeper.ssl.keystore.location": p12, "zookeeper.ssl.keystore.password": "store-pw",
            "zookeeper.ssl.truststore.location": jks, "zookeeper.ssl.truststore.password": "trust-pw"}


def test_zookeeper_tls_with_keytool_stores(secure_zookeeper, tmp_path):
    """TLS to ZooKeeper with a PKCS12 keystore and a JKS truststore made by keytool (types by file extension, as
    ZooKeeper's), given as -D system properties: the session logs in with the certificate (its x509 identity in
    the ACL of what it creates)."""
    from kbroker.common.keystores import KeystoreError, load_trust_store
    stores = _keytool_stores(secure_zookeeper.preset, str(tmp_path))
    try:
        load_trust_store(stores["zookeeper.ssl.truststore.location"], None, "trust-pw")
    except KeystoreError as e:
        pytest.skip(f"this checkout's store reader reads no JKS: {e}")
    props = {"zookeeper.client.secure": "true", "zookeeper.clientCnxnSocket": NETTY_SOCKET,
             **{TLS_SETTINGS[k][0]: v for k, v in stores.items()}}
    zk = KafkaZkClient(f"{secure_zookeeper.secure_connect}/t-{uuid.uuid4().hex[:10]}", 6000,
                       security=client_security({}, props, set_acl=True)).start()
    try:
        zk.create_top_level_paths()
        assert zk.get_acl("/brokers/ids") == [(1, "world", "anyone"), (31, "x509", "CN=kafka,O=kbroker")]
    finally:
        zk.close()
