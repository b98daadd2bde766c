"""A listener's certificate rotated the Kafka 2.8 way on a real broker: confluent-kafka's AdminClient alters
listener.name.external.ssl.keystore.location (and its passwords) on broker 1's own config, the broker checks the
new keytool JKS key store (same DN and SANs, a new key), stores it in /config/brokers/1 with the passwords
encoded by password.encoder.secret, and serves it to new TLS connections while an open one keeps going; a store
of another DN or with a wrong password is refused with Kafka's error and nothing stored (through kadmin too);
validate_only stores nothing; the names without the listener prefix, the cluster default and a password on a
broker without password.encoder.secret are refused as Kafka refuses them; a store file replaced in place is read
again when altered with the same values; a restart serves the rotated store."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import ssl

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   ResourceType)
from kafka.protocol.metadata import MetadataRequest

from admin_cli.main import cli
from kbroker.cluster import free_port
from kbroker.protocol.client import Connection
from kbroker.protocol.client.security import ClientSecurity
from tests.conftest import fresh_chroot
from tests.integration.conftest import Cluster, fill_port, wait_until
from tests.integration.test_admin_client_topics import admin_result
from tests.integration.test_dynamic_broker_config import _alter_defaults
from tests.integration.test_sasl_tls import ck_roundtrip, unique
from tests.keytool import KEY_PASSWORD, STORE_PASSWORD, Pki, make_pki, signed_key_store

SECRET = "encoder-secret"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    pki = make_pki(tmp_path_factory.mktemp("keytool"), names=("broker",))
    # the same CA signs a second key store of the same name (DN and SANs), and one of another name
    rotated = Pki(str(tmp_path_factory.mktemp("keytool-rotated")))
    for f in ("ca.p12", "ca.pem"):
        shutil.copy(pki.path(f), rotated.path(f))
    signed_key_store(rotated, "broker")
    signed_key_store(rotated, "intruder")
    pki.rotated, pki.intruder = rotated.keystore_jks["broker"], rotated.keystore_jks["intruder"]
    again = Pki(str(tmp_path_factory.mktemp("keytool-again")))   # a third key of the same name, for in place
    for f in ("ca.p12", "ca.pem"):
        shutil.copy(pki.path(f), again.path(f))
    signed_key_store(again, "broker")
    pki.again = again.keystore_jks["broker"]
    return pki


@pytest.fixture(scope="module")
def cluster(zookeeper, pki, tmp_path_factory):
    c = Cluster(fresh_chroot(zookeeper), str(tmp_path_factory.mktemp("sslreload")))
    c.tls_port = free_port()
    b = c.add(1, start=False, **{
        "listeners": "PLAINTEXT://127.0.0.1:{port},EXTERNAL://127.0.0.1:" + str(c.tls_port),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:SSL",
        "inter.broker.listener.name": "PLAINTEXT", "password.encoder.secret": SECRET,
        "listener.name.external.ssl.keystore.location": pki.keystore_jks["broker"],
        "listener.name.external.ssl.keystore.password": STORE_PASSWORD,
        "listener.name.external.ssl.key.password": KEY_PASSWORD,
        "offsets.topic.replication.factor": 1, "group.initial.rebalance.delay.ms": 0})
    fill_port(b)
    b.start()
    c.wait_ready([1])
    yield c
    c.stop()


def served_fingerprint(port: int) -> str:
    """The SHA-256 of the certificate a new OpenSSL connection is served."""
    pem = ssl.get_server_certificate(("127.0.0.1", port))
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem)).hexdigest()


def store_fingerprint(jks: str) -> str:
    from kbroker.common.keystores import load_key_store
    chain = load_key_store(jks, "JKS", STORE_PASSWORD, KEY_PASSWORD).chain_pem
    leaf = chain[:chain.index("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----")]
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(leaf)).hexdigest()


def alter(c: Cluster, configs: dict, validate_only=False, broker: int = 1):
    """IncrementalAlterConfigs SET on the broker's own config, as kafka-configs sends it: its error or None."""
    admin = AdminClient({"bootstrap.servers": c.brokers[broker].bootstrap})
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
    return admin_result(admin.incremental_alter_configs(
        [ConfigResource(ResourceType.BROKER, str(broker), incremental_configs=entries)], request_timeout=20,
        validate_only=validate_only))[1]


def stored(c: Cluster) -> dict:
    data, _ = c.zk.get("/config/brokers/1") if c.zk.exists("/config/brokers/1") else (None, None)
    return json.loads(data)["config"] if data else {}


def new_store(jks: str, password: str = STORE_PASSWORD) -> dict:
    return {"listener.name.external.ssl.keystore.location": jks,
            "listener.name.external.ssl.keystore.password": password,
            "listener.name.external.ssl.key.password": KEY_PASSWORD}


def test_a_key_store_of_another_subject_is_refused_and_nothing_stored(cluster, pki):
    err = alter(cluster, new_store(pki.intruder))
    assert err is not None and err.name() == "INVALID_REQUEST"
    assert "Invalid dynamic configuration" in err.str() and "DistinguishedName does not match" in err.str()
    assert stored(cluster) == {}
    assert served_fingerprint(cluster.tls_port) == store_fingerprint(pki.keystore_jks["broker"])


def test_a_wrong_key_store_password_is_refused(cluster, pki):
    err = alter(cluster, new_store(pki.rotated, password="wrong"))
    assert err is not None and err.name() == "INVALID_REQUEST" and "Invalid dynamic configuration" in err.str()
    assert stored(cluster) == {}


def test_validate_only_stores_nothing(cluster, pki):
    assert alter(cluster, new_store(pki.rotated), validate_only=True) is None
    assert stored(cluster) == {}
    assert served_fingerprint(cluster.tls_port) == store_fingerprint(pki.keystore_jks["broker"])


def test_kadmin_alter_config_is_refused_with_kafkas_reason(cluster, pki):
    L = "listener.name.external.ssl"
    r = CliRunner().invoke(cli, ["--bootstrap-server", cluster.brokers[1].bootstrap, "alter-config", "--broker", "1",
                                 "--add-config", f"{L}.keystore.location={pki.intruder},{L}.keystore.password="
                                 f"{STORE_PASSWORD},{L}.key.password={KEY_PASSWORD}"], catch_exceptions=False)
    assert r.exit_code == 1 and "DistinguishedName does not match" in r.output, r.output
    assert stored(cluster) == {}


def test_the_default_entity_and_an_unprefixed_store_are_refused(cluster, pki):
    err = alter(cluster, {"ssl.keystore.location": pki.rotated})
    assert err.name() == "INVALID_REQUEST"
    assert "can be dynamically updated only per-listener using the listener prefix" in err.str()
    code, message = _alter_defaults(cluster.brokers[1].bootstrap, new_store(pki.rotated))
    assert code == 42 and "Cannot update these configs at default cluster level, broker id must be specified" in message
    assert not cluster.zk.exists("/config/brokers/<default>")


def test_rotated_key_store_served_to_new_connections_old_one_keeps_going_and_survives_restart(cluster, pki):
    with open(pki.ca_pem) as f:
        tls = ClientSecurity.from_properties({"security.protocol": "SSL", "ssl.truststore.certificates": f.read(),
                                              "ssl.endpoint.identification.algorithm": ""})
    old = Connection("127.0.0.1", cluster.tls_port, "old-connection", 20.0, tls)
    old.connect()
    before = store_fingerprint(pki.keystore_jks["broker"])
    assert served_fingerprint(cluster.tls_port) == before
    assert alter(cluster, new_store(pki.rotated)) is None
    config = stored(cluster)
    assert config["listener.name.external.ssl.keystore.location"] == pki.rotated
    password = config["listener.name.external.ssl.keystore.password"]
    assert STORE_PASSWORD not in password and "encryptedPassword:" in password   # Kafka's PasswordEncoder form
    after = store_fingerprint(pki.rotated)
    assert after != before
    wait_until(lambda: served_fingerprint(cluster.tls_port) == after, 20, "the rotated certificate served")
    assert old.send(MetadataRequest[1](topics=None)).brokers   # the connection opened before still answers
    old.close()
    conf = {"bootstrap.servers": f"127.0.0.1:{cluster.tls_port}", "security.protocol": "SSL",
            "ssl.ca.location": pki.ca_pem}
    assert ck_roundtrip(conf, unique("rotated")) == [f"v{i}".encode() for i in range(5)]
    admin = AdminClient(conf)
    (configs,) = [f.result(20) for f in admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")]).values()]
    entry = configs["listener.name.external.ssl.keystore.location"]
    assert entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value and entry.value == pki.rotated
    assert configs["listener.name.external.ssl.keystore.password"].is_sensitive
    b = cluster.brokers[1]
    b.stop()
    b.start()
    cluster.wait_ready([1])
    assert served_fingerprint(cluster.tls_port) == after
    assert os.path.exists(pki.rotated)


def test_a_store_file_replaced_in_place_is_read_again_when_altered_with_the_same_values(cluster, pki):
    """As Kafka 2.8's SslFactory: an AlterConfigs naming the current files reloads those modified since."""
    assert alter(cluster, new_store(pki.rotated)) is None      # (already so after the rotation above)
    wait_until(lambda: served_fingerprint(cluster.tls_port) == store_fingerprint(pki.rotated), 20, "rotated")
    shutil.copy(pki.intruder, pki.rotated + ".new")
    os.replace(pki.rotated + ".new", pki.rotated)      # another subject in place: refused, still served the old
    err = alter(cluster, new_store(pki.rotated))
    assert err.name() == "INVALID_REQUEST" and "DistinguishedName does not match" in err.str()
    served = served_fingerprint(cluster.tls_port)
    shutil.copy(pki.again, pki.rotated + ".new")
    os.replace(pki.rotated + ".new", pki.rotated)
    assert served == served_fingerprint(cluster.tls_port)    # not read until altered
    assert alter(cluster, new_store(pki.rotated)) is None
    after = store_fingerprint(pki.again)
    wait_until(lambda: served_fingerprint(cluster.tls_port) == after, 20, "the replaced file served")


def test_a_password_without_password_encoder_secret_is_refused(cluster, pki):
    """Kafka refuses to store a dynamic password it cannot encode (DynamicBrokerConfig.toPersistentProps)."""
    b = cluster.add(2, start=False, listeners="PLAINTEXT://127.0.0.1:{port}")
    fill_port(b)
    b.start()
    cluster.wait_ready([1, 2])
    err = alter(cluster, new_store(pki.rotated), broker=2)
    assert err.name() == "INVALID_REQUEST" and "Password encoder secret not configured" in err.str()
    assert not cluster.zk.exists("/config/brokers/2")


def test_kadmin_zookeeper_mode_encodes_passwords_with_the_secret_given(cluster, pki):
    """As kafka-configs --zookeeper: password.encoder.secret must come with the passwords, and is not stored."""
    from kbroker.common.password_encoder import PasswordEncoder
    L = "listener.name.external.ssl"
    args = ["--zookeeper", cluster.zk_connect, "alter-config", "--broker", "3", "--add-config",
            f"{L}.keystore.location={pki.rotated},{L}.keystore.password={STORE_PASSWORD}"]
    r = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert r.exit_code != 0 and "password.encoder.secret must be specified to update" in r.output, r.output
    assert not cluster.zk.exists("/config/brokers/3")
    r = CliRunner().invoke(cli, args[:-1] + [args[-1] + f",password.encoder.secret={SECRET}"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    data, _ = cluster.zk.get("/config/brokers/3")
    config = json.loads(data)["config"]
    assert sorted(config) == [f"{L}.keystore.location", f"{L}.keystore.password"]
    assert PasswordEncoder(SECRET).decode(config[f"{L}.keystore.password"]) == STORE_PASSWORD
