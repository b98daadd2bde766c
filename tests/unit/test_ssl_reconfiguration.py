"""A key store that may replace a running listener's (Kafka's SslFactory CertificateEntries.ensureCompatible) and
the dynamic password encoding of Kafka's PasswordEncoder."""
from __future__ import annotations

import pytest

from kbroker.common.keystores import KeyMaterial, KeystoreError, ensure_compatible
from kbroker.common.password_encoder import PasswordEncoder, PasswordEncoderError
from kbroker.security.certs import make_ca, make_cert


@pytest.fixture(scope="module")
def ca():
    return make_ca()


def material(ca, cn: str, hosts: list[str]) -> KeyMaterial:
    cert, key = make_cert(*ca, cn, hosts)
    return KeyMaterial(key_pem=key, chain_pem=cert)


def test_a_new_key_with_the_same_subject_and_names_is_compatible(ca):
    old = material(ca, "broker", ["localhost", "127.0.0.1"])
    new = material(ca, "broker", ["localhost", "127.0.0.1"])
    assert new.key_pem != old.key_pem
    ensure_compatible(new, old)
    ensure_compatible(material(ca, "broker", ["localhost", "127.0.0.1", "kafka.example"]), old)   # names added


def test_another_subject_is_refused_with_kafkas_message(ca):
    old = material(ca, "broker", ["localhost"])
    with pytest.raises(KeystoreError, match=r"Keystore DistinguishedName does not match:  existing=\{DN=CN=broker,"
                                            r"O=kbroker\}, new=\{DN=CN=intruder,O=kbroker\}"):
        ensure_compatible(material(ca, "intruder", ["localhost"]), old)


def test_a_missing_subject_alternative_name_is_refused(ca):
    old = material(ca, "broker", ["localhost", "127.0.0.1"])
    with pytest.raises(KeystoreError, match=r"Keystore SubjectAltNames do not match: .*127\.0\.0\.1"):
        ensure_compatible(material(ca, "broker", ["localhost"]), old)
    with pytest.raises(KeystoreError, match="SubjectAltNames"):
        ensure_compatible(material(ca, "broker", []), old)


@pytest.mark.parametrize("cipher", ["AES/CBC/PKCS5Padding", "AES/GCM/NoPadding"])
def test_passwords_round_trip_in_kafkas_form(cipher):
    encoder = PasswordEncoder("secret", None, cipher, 128, 1024)
    encoded = encoder.encode("store-sécret")
    assert "store" not in encoded
    fields = dict(item.split(":", 1) for item in encoded.split(","))
    assert fields["keyFactoryAlgorithm"] == "PBKDF2WithHmacSHA512" and fields["cipherAlgorithm"] == cipher
    assert fields["passwordLength"] == "12" and fields["iterations"] == "1024" and fields["keyLength"] == "128"
    assert encoder.decode(encoded) == "store-sécret"
    assert encoder.encode("store-sécret") != encoded    # a new salt and IV each time


def test_another_secret_or_a_malformed_value_does_not_decode():
    encoded = PasswordEncoder("secret").encode("pw")
    with pytest.raises(PasswordEncoderError, match="Password could not be decoded"):
        PasswordEncoder("other").decode(encoded)
    with pytest.raises(PasswordEncoderError, match="Password could not be decoded"):
        PasswordEncoder("secret").decode("pw")


def test_an_unsupported_cipher_is_refused():
    with pytest.raises(PasswordEncoderError, match="password.encoder.cipher.algorithm DES"):
        PasswordEncoder("secret", cipher="DES").encode("pw")


def tls_config(ca, secret: str | None = "s3cret"):
    from kbroker.config import BrokerConfig
    cert, key = make_cert(*ca, "broker", ["localhost"])
    props = {"zookeeper.connect": "127.0.0.1:2181", "listeners": "PLAINTEXT://:9092,SSL://:9093",
             "inter.broker.listener.name": "SSL", "ssl.keystore.type": "PEM", "ssl.keystore.key": key,
             "ssl.keystore.certificate.chain": cert, "ssl.truststore.type": "PEM",
             "ssl.truststore.certificates": ca[0], **({"password.encoder.secret": secret} if secret else {})}
    return BrokerConfig(props)


def rotated(cfg, ca, cn: str = "broker") -> dict[str, str]:
    """This broker's stored dynamic config giving listener SSL a new PEM key store, its values encoded."""
    cert, key = make_cert(*ca, cn, ["localhost"])
    encoder = PasswordEncoder("s3cret")
    return {"listener.name.ssl.ssl.keystore.key": encoder.encode(key),
            "listener.name.ssl.ssl.keystore.certificate.chain": encoder.encode(cert)}


def test_a_stored_key_store_is_read_and_the_inter_broker_client_presents_it_next(ca):
    cfg = tls_config(ca)
    client = cfg.inter_broker_security
    before = cfg.tls_stores["SSL"]
    assert client.cert_pem == before.keys.chain_pem
    changed, problems = cfg.apply_dynamic({}, rotated(cfg, ca))
    assert problems == [] and changed == {"listener.name.ssl.ssl.keystore.key",
                                          "listener.name.ssl.ssl.keystore.certificate.chain"}
    after = cfg.tls_stores["SSL"]
    assert after.keys.chain_pem != before.keys.chain_pem
    assert cfg.inter_broker_security is client and client.cert_pem == after.keys.chain_pem   # its holders see it


def test_a_stored_key_store_of_another_subject_is_refused_by_the_check(ca):
    cfg = tls_config(ca)
    decoded = {k: PasswordEncoder("s3cret").decode(v) for k, v in rotated(cfg, ca, "intruder").items()}
    assert "DistinguishedName does not match" in cfg.tls_update_error(decoded)
    assert cfg.tls_update_error({k: PasswordEncoder("s3cret").decode(v) for k, v in rotated(cfg, ca).items()}) is None


def test_passwords_stored_without_the_secret_are_left_out(ca):
    cfg = tls_config(ca, secret=None)
    before = cfg.tls_stores["SSL"]
    changed, problems = cfg.apply_dynamic({}, rotated(cfg, ca))
    assert changed == set() and cfg.tls_stores["SSL"] is before
    assert problems and all("Password encoder secret not configured" in p for p in problems)
    changed, problems = cfg.apply_dynamic(rotated(cfg, ca), {})   # the cluster default may not hold a store
    assert changed == set() and all("per-broker config at the cluster level" in p for p in problems)


@pytest.mark.parametrize("key, value", [("password.encoder.cipher.algorithm", "DESede/CBC/PKCS5Padding"),
                                        ("password.encoder.keyfactory.algorithm", "PBKDF2WithHmacMD5")])
def test_a_cipher_or_key_factory_kbroker_cannot_encode_with_is_refused_at_start(key, value):
    from kbroker.config import BrokerConfig, ConfigError
    with pytest.raises(ConfigError, match=f"Invalid value '{value}' for configuration {key}"):
        BrokerConfig({"zookeeper.connect": "127.0.0.1:2181", key: value})
