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
