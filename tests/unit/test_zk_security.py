"""The pure parts of a secured ZooKeeper: KAFKA_OPTS's -D options, JAAS files, ZkData.defaultAcls,
and how Kafka's settings, the system properties and the JAAS file become a ZooKeeper login, with Kafka's start-up
refusals (their messages)."""
from __future__ import annotations

import pytest
from kbroker.common.jaas import JaasError, parse_jaas, read_jaas_file
from kbroker.common.jvm_options import system_properties
from kbroker.security.certs import make_ca, make_cert
from zk.security import NETTY_SOCKET, ZkSecurityError, acl_tuples, client_security, default_acls, tls_settings

JAAS = """// the brokers' login
KafkaServer { org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="x"; };
Client {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="kafka"        /* the SASL user */
    password="pa\\"ss ${secret.suffix}";
};
"""


def test_kafka_opts_system_properties():
    env = {"KAFKA_OPTS": "-Xmx1g -Djava.security.auth.login.config=/etc/kafka/jaas.conf "
                         "-Dzookeeper.sasl.client -D'with space=a b' -Dx=1 -Dx=2 -javaagent:/a.jar=-Dnot=this"}
    assert system_properties(env) == {"java.security.auth.login.config": "/etc/kafka/jaas.conf",
                                      "zookeeper.sasl.client": "", "with space": "a b", "x": "2"}
    assert system_properties({}) == {}
    with pytest.raises(ValueError, match="KAFKA_OPTS"):
        system_properties({"KAFKA_OPTS": "-Da='b"})


def test_jaas_sections_options_comments_and_properties():
    sections = parse_jaas(JAAS, "f", {"secret.suffix": "42"})
    assert list(sections) == ["KafkaServer", "Client"]
    client = sections["Client"][0]
    assert (client.class_name, client.flag) == ("org.apache.zookeeper.server.auth.DigestLoginModule", "required")
    assert client.options == {"username": "kafka", "password": 'pa"ss 42'}


@pytest.mark.parametrize("text, fragment", [
    ("Client { a.B required x=\"1\" }", "line 1: expected ;"),
    ("Client {\n a.B mandatory x=\"1\"; };", "line 2: login module a.B: control flag 'mandatory'"),
    ("Client { a.B required x=\"1; };", "unterminated string"),
    ("Client { a.B required x=\"1\";", "unexpected end of file"),
])
def test_jaas_errors_name_the_file_and_line(text, fragment):
    with pytest.raises(JaasError, match="JAAS file f") as e:
        parse_jaas(text, "f")
    assert fragment in str(e.value)


def test_jaas_file_unreadable(tmp_path):
    with pytest.raises(JaasError, match="cannot be read: No such file"):
        read_jaas_file(str(tmp_path / "nope.conf"))


def test_default_acls_as_zkdata():
    secure = [(1, "world", "anyone"), (31, "auth", "")]
    creator = [(31, "auth", "")]
    for path in ("/", "/kafka", "/brokers/ids/1", "/config/topics/t", "/delegation_token", "/consumers/g/offsets",
                 "/config", "/config/clients/c"):
        assert acl_tuples(default_acls(True, path)) == secure, path
    for path in ("/config/users", "/config/users/alice", "/config/usersX", "/config/brokers/<default>",
                 "/delegation_token/tokens/t1"):
        assert acl_tuples(default_acls(True, path)) == creator, path
    assert acl_tuples(default_acls(True, "/consumers")) == [(31, "world", "anyone")]
    assert acl_tuples(default_acls(False, "/config/users/alice")) == [(31, "world", "anyone")]


def test_tls_settings_key_beats_property_beats_default():
    props = {"zookeeper.client.secure": "true", "zookeeper.ssl.keyStore.location": "/p/ks.pem",
             "zookeeper.ssl.protocol": "TLSv1.3", "zookeeper.ssl.hostnameVerification": "false"}
    tls = tls_settings({"zookeeper.ssl.keystore.location": "/k/ks.p12"}, props)
    assert tls["zookeeper.ssl.client.enable"] == "true"
    assert tls["zookeeper.ssl.keystore.location"] == "/k/ks.p12"
    assert tls["zookeeper.ssl.protocol"] == "TLSv1.3"
    assert tls["zookeeper.ssl.endpoint.identification.algorithm"] == ""
    assert tls["zookeeper.ssl.truststore.location"] is None
    assert tls_settings({}, {})["zookeeper.ssl.client.enable"] == "false"
    assert tls_settings({}, {"zookeeper.ssl.keyStore.location": "/p"}) == {"zookeeper.ssl.client.enable": "false"}
    defaults = tls_settings({"zookeeper.ssl.client.enable": "true"}, {})
    assert (defaults["zookeeper.ssl.protocol"], defaults["zookeeper.ssl.endpoint.identification.algorithm"]) == \
        ("TLSv1.2", "HTTPS")
    assert tls_settings({"zookeeper.ssl.client.enable": "false"}, {"zookeeper.client.secure": "true"}) == \
        {"zookeeper.ssl.client.enable": "false"}


@pytest.fixture
def stores(tmp_path):
    ca_cert, ca_key = make_ca()
    cert, key = make_cert(ca_cert, ca_key, "kafka")
    (tmp_path / "ca.pem").write_text(ca_cert)
    (tmp_path / "ks.pem").write_text(key + cert)
    (tmp_path / "jaas.conf").write_text(JAAS)
    return tmp_path


def tls(stores, **more):
    return {"zookeeper.ssl.client.enable": "true", "zookeeper.clientCnxnSocket": NETTY_SOCKET,
            "zookeeper.ssl.keystore.location": str(stores / "ks.pem"),
            "zookeeper.ssl.truststore.location": str(stores / "ca.pem"), **more}


def test_logins(stores):
    jaas = {"java.security.auth.login.config": str(stores / "jaas.conf"), "secret.suffix": "s"}
    s = client_security({}, jaas, set_acl=True)
    assert (s.sasl_username, s.sasl_password, s.secure_acls, s.tls) == ("kafka", 'pa"ss s', True, None)
    s = client_security(tls(stores), {}, set_acl=True)      # a TLS identity is enough for set.acl
    assert s.tls_client_auth and s.tls is not None and not s.sasl and s.tls.check_hostname
    s = client_security(tls(stores, **{"zookeeper.ssl.endpoint.identification.algorithm": ""}), jaas)
    assert s.secure_acls and s.sasl and not s.tls.check_hostname       # a logged-in tool creates secure znodes
    assert not client_security({}, {}).secure_acls
    other = {**jaas, "zookeeper.sasl.clientconfig": "KafkaServer"}
    assert client_security({}, other).sasl_username == "admin"          # Bitnami's PlainLoginModule
    assert client_security({}, jaas).sasl_service == "zookeeper"
    assert client_security({}, {**jaas, "zookeeper.sasl.client.username": "zk"}).sasl_service == "zk"


def refused(settings, props, set_acl=None):
    with pytest.raises(ZkSecurityError) as e:
        client_security(settings, props, set_acl)
    return str(e.value)


def test_kafkas_start_up_refusals(stores, tmp_path):
    jaas_file = str(stores / "jaas.conf")
    message = refused({}, {}, set_acl=True)
    assert message.startswith("zookeeper.set.acl is true, but ZooKeeper client TLS configuration identifying at "
                              "least zookeeper.ssl.client.enable, zookeeper.clientCnxnSocket, and "
                              "zookeeper.ssl.keystore.location was not present")
    assert message.endswith("[java.security.auth.login.config=null, zookeeper.sasl.client=default:true, "
                            "zookeeper.sasl.clientconfig=default:Client]")
    other = tmp_path / "other.conf"
    other.write_text("KafkaServer { a.B required; };")
    no_client = {"java.security.auth.login.config": str(other)}
    assert refused({}, no_client, set_acl=True).endswith(f"(JAAS file {other} has no section Client)")
    assert client_security({}, no_client, set_acl=False).sasl_username is None   # set.acl false: no login
    named = {"java.security.auth.login.config": jaas_file, "zookeeper.sasl.clientconfig": "Missing"}
    assert "the specified JAAS configuration section 'Missing' could not be found" in refused({}, named)
    assert client_security({}, {**named, "zookeeper.sasl.client": "false"}).sasl_username is None
    assert "Exception while loading Zookeeper JAAS login context" in refused(
        {}, {"java.security.auth.login.config": str(tmp_path / "nope")}, set_acl=False)
    assert "zookeeper.sasl.client is set to false" in refused(
        {}, {"java.security.auth.login.config": jaas_file, "zookeeper.sasl.client": "false"})
    krb = tmp_path / "krb.conf"
    krb.write_text("Client { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true; };")
    assert "Kerberos" in refused({}, {"java.security.auth.login.config": str(krb)})
    nouser = tmp_path / "nouser.conf"
    nouser.write_text("Client { org.apache.zookeeper.server.auth.DigestLoginModule required password=\"p\"; };")
    assert "needs username and password" in refused({}, {"java.security.auth.login.config": str(nouser)})
    assert "needs org.apache.zookeeper.ClientCnxnSocketNetty" in refused(
        tls(stores, **{"zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNIO"}), {})
    assert "zookeeper.ssl.crl.enable=true is not supported" in refused(
        tls(stores, **{"zookeeper.ssl.crl.enable": "true"}), {})
    assert "TLSv9 is not one of" in refused(tls(stores, **{"zookeeper.ssl.enabled.protocols": "TLSv1.2,TLSv9"}), {})
    assert "ZooKeeper TLS: " in refused(tls(stores, **{"zookeeper.ssl.keystore.location": str(stores / "ca.pem")}),
                                        {})
