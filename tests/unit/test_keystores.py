"""kbroker.common.keystores on stores made by the JDK's keytool: JKS, PKCS12 and JCEKS key and trust stores,
Kafka's password rules, JDK 9+'s keystore.type.compat, PEM files and text; each bad store a KeystoreError
naming the file and what is wrong."""
from __future__ import annotations

import shutil

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from kbroker.common.keystores import (KeystoreError, load_key_store, load_trust_store, pem_certificates,
                                     pem_key_material)
from kbroker.security.certs import make_ca, make_cert
from tests.keytool import KEY_PASSWORD, STORE_PASSWORD, keytool, make_pki

PW = STORE_PASSWORD


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("keytool"), names=("broker",))


def subjects(pem: str) -> list[str]:
    return [c.subject.rfc4514_string() for c in x509.load_pem_x509_certificates(pem.encode())]


def same_key(pem: str, other: str) -> bool:
    return serialization.load_pem_private_key(pem.encode(), None).private_numbers() == \
        serialization.load_pem_private_key(other.encode(), None).private_numbers()


def test_jks_key_store_gives_the_key_and_its_chain_leaf_first(pki):
    m = load_key_store(pki.keystore_jks["broker"], "JKS", PW, KEY_PASSWORD)
    assert subjects(m.chain_pem) == ["CN=broker,O=kbroker", "CN=keytool ca,O=kbroker"]
    key = serialization.load_pem_private_key(m.key_pem.encode(), None)   # unencrypted PKCS#8
    assert m.key_pem.startswith("-----BEGIN PRIVATE KEY-----")
    leaf = x509.load_pem_x509_certificates(m.chain_pem.encode())[0]
    assert key.public_key() == leaf.public_key()


def test_pkcs12_key_store_is_the_same_key_and_chain(pki):
    jks_material = load_key_store(pki.keystore_jks["broker"], "JKS", PW, KEY_PASSWORD)
    assert load_key_store(pki.keystore_p12["broker"], "PKCS12", PW) == jks_material
    assert load_key_store(pki.keystore_p12["broker"], "PKCS12", PW, PW) == jks_material


@pytest.mark.parametrize("declared", ["JKS", "PKCS12", "jks", None, ""])
def test_declared_type_follows_keystore_type_compat(pki, declared):
    """JDK 9+ keystore.type.compat: a store declared JKS opens a PKCS12 file and vice versa; no type: by name."""
    expected = load_key_store(pki.keystore_jks["broker"], "JKS", PW, KEY_PASSWORD)
    assert load_key_store(pki.keystore_p12["broker"], declared, PW) == expected
    assert load_key_store(pki.keystore_jks["broker"], declared, PW, KEY_PASSWORD) == expected


def test_jceks_key_store(pki, tmp_path):
    jceks = str(tmp_path / "broker.jceks")
    keytool("-importkeystore", "-srckeystore", pki.keystore_jks["broker"], "-srcstorepass", PW, "-srckeypass",
            KEY_PASSWORD, "-srcalias", "broker", "-destkeystore", jceks, "-deststoretype", "JCEKS",
            "-deststorepass", PW, "-destkeypass", KEY_PASSWORD)
    assert load_key_store(jceks, "JCEKS", PW, KEY_PASSWORD) == \
        load_key_store(pki.keystore_jks["broker"], "JKS", PW, KEY_PASSWORD)
    with pytest.raises(KeystoreError, match=r"broker\.jceks is not a JKS store \(it holds JCEKS\)"):
        load_key_store(jceks, "JKS", PW, KEY_PASSWORD)


def test_key_password_defaults_to_the_store_password(pki, tmp_path):
    same = str(tmp_path / "same.jks")
    keytool("-importkeystore", "-srckeystore", pki.keystore_jks["broker"], "-srcstorepass", PW, "-srckeypass",
            KEY_PASSWORD, "-srcalias", "broker", "-destkeystore", same, "-deststoretype", "JKS",
            "-deststorepass", PW, "-destkeypass", PW)
    assert load_key_store(same, "JKS", PW) == load_key_store(pki.keystore_jks["broker"], "JKS", PW, KEY_PASSWORD)
    with pytest.raises(KeystoreError, match="wrong password for its private key 'broker'"):
        load_key_store(pki.keystore_jks["broker"], "JKS", PW)   # its key password differs from the store's


@pytest.mark.parametrize("store, declared", [("truststore_jks", "JKS"), ("truststore_p12", "PKCS12"),
                                             ("truststore_p12", "JKS"), ("truststore_jks", None)])
def test_trust_stores_give_the_ca(pki, store, declared):
    pem = load_trust_store(getattr(pki, store), declared, PW)
    assert subjects(pem) == ["CN=keytool ca,O=kbroker"]
    with open(pki.ca_pem) as f:
        assert x509.load_pem_x509_certificate(f.read().encode()) == x509.load_pem_x509_certificate(pem.encode())


def test_a_key_store_as_trust_store_trusts_its_certificates_and_its_keys_own(pki):
    """As Java's trust managers read a store: certificate entries, and the first certificate of each key entry."""
    assert sorted(subjects(load_trust_store(pki.keystore_jks["broker"], "JKS", PW))) == \
        ["CN=broker,O=kbroker", "CN=keytool ca,O=kbroker"]


def test_trust_store_password_is_optional_for_jks_only(pki):
    """Without its password a JKS trust store is read without its integrity check; keytool's PKCS12 encrypts
    its certificates (Java would then trust nothing): refused, saying why."""
    assert subjects(load_trust_store(pki.truststore_jks, "JKS", None)) == ["CN=keytool ca,O=kbroker"]
    with pytest.raises(KeystoreError, match=r"truststore\.p12 \(PKCS12\) needs its store password"):
        load_trust_store(pki.truststore_p12, "PKCS12", None)


def test_pem_files_by_type_and_by_name(pki, tmp_path):
    assert subjects(load_trust_store(pki.ca_pem, "PEM", None)) == subjects(load_trust_store(pki.ca_pem, None, None))
    cert, key = make_cert(*make_ca(), "pem-broker")
    both = tmp_path / "broker.pem"
    both.write_text(key + cert)
    m = load_key_store(str(both), None, None)
    assert subjects(m.chain_pem) == ["CN=pem-broker,O=kbroker"] and "PRIVATE KEY" in m.key_pem
    assert load_key_store(str(both), "PEM", None) == m


def test_pem_encrypted_key_needs_the_key_password(tmp_path):
    cert, key = make_cert(*make_ca(), "enc")
    encrypted = serialization.load_pem_private_key(key.encode(), None).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"kpw")).decode()
    path = tmp_path / "enc.pem"
    path.write_text(encrypted + cert)
    assert same_key(load_key_store(str(path), "PEM", None, "kpw").key_pem, key)
    with pytest.raises(KeystoreError, match=r"enc\.pem: its private key is encrypted and no key password"):
        load_key_store(str(path), "PEM", None)
    with pytest.raises(KeystoreError, match=r"enc\.pem: wrong password for its private key"):
        load_key_store(str(path), "PEM", None, "wrong")


def test_pem_text_in_a_properties_files_one_line_form():
    cert, key = make_cert(*make_ca(), "inline")
    m = pem_key_material(key.replace("\n", ""), cert.replace("\n", ""), None, "ssl.keystore.key")
    assert same_key(m.key_pem, key) and subjects(m.chain_pem) == ["CN=inline,O=kbroker"]
    assert pem_certificates(cert.replace("\n", ""), "ssl.truststore.certificates") == cert


@pytest.mark.parametrize("args, message", [
    (("broker.jks", "JKS", "wrong", KEY_PASSWORD), r"key store .*broker\.jks: wrong store password \(the JKS"),
    (("broker.p12", "PKCS12", "wrong"), r"key store .*broker\.p12: wrong store password, or not a valid PKCS12"),
    (("broker.jks", "JKS", PW, "wrong"), r"broker\.jks: wrong password for its private key 'broker'"),
    (("broker.p12", "PKCS12", PW, "wrong"), r"broker\.p12: wrong password for its private key"),
    (("broker.jks", "JKS", None), r"broker\.jks \(JKS\) needs its store password"),
    (("missing.jks", "JKS", PW), r"key store .*missing\.jks: cannot read it: No such file or directory"),
    (("truststore.jks", "JKS", PW), r"truststore\.jks holds no private key \(only certificates: caroot\)"),
    (("truststore.p12", "PKCS12", PW), r"truststore\.p12 holds no private key"),
    (("ca.pem", "JKS", PW), r"ca\.pem is not a JKS store \(it holds PEM\)"),
    (("ca.pem", "PEM", None), r"ca\.pem holds no private key"),
    (("broker.jks", "PEM", None), r"broker\.jks is not PEM \(not text\)"),
    (("broker.jks", "BKS", PW), r"store type 'BKS' is not supported \(one of JKS, PKCS12, JCEKS, PEM\)"),
])
def test_bad_key_stores_name_the_file_and_the_fault(pki, args, message):
    with pytest.raises(KeystoreError, match=message):
        load_key_store(pki.path(args[0]), *args[1:])


def test_garbage_and_damaged_stores(pki, tmp_path):
    garbage = tmp_path / "garbage.jks"
    garbage.write_bytes(b"\x00\x01 not a key store at all" * 10)
    with pytest.raises(KeystoreError, match=r"garbage\.jks is not a JKS store \(not a key store file\)"):
        load_key_store(str(garbage), "JKS", PW)
    with pytest.raises(KeystoreError, match="cannot tell the store type from its name"):
        load_trust_store(str(shutil.copy(garbage, tmp_path / "garbage.bin")), None, None)
    with open(pki.keystore_jks["broker"], "rb") as f:
        data = f.read()
    truncated = tmp_path / "truncated.jks"
    truncated.write_bytes(data[:len(data) // 2])
    with pytest.raises(KeystoreError, match=r"truncated\.jks is not a valid JKS store"):
        load_key_store(str(truncated), "JKS", PW)
    flipped = tmp_path / "flipped.jks"
    flipped.write_bytes(data[:100] + bytes([data[100] ^ 1]) + data[101:])
    with pytest.raises(KeystoreError, match=r"flipped\.jks: wrong store password \(the JKS integrity check fails"):
        load_key_store(str(flipped), "JKS", PW, KEY_PASSWORD)


def test_a_key_store_with_two_private_keys_is_refused_naming_them(pki, tmp_path):
    two = str(shutil.copy(pki.keystore_jks["broker"], tmp_path / "two.jks"))
    keytool("-genkeypair", "-alias", "second", "-keyalg", "EC", "-dname", "CN=second", "-keystore", two,
            "-storepass", PW, "-keypass", KEY_PASSWORD)
    with pytest.raises(KeystoreError, match=r"two\.jks holds 2 private keys \((broker, second|second, broker)\)"):
        load_key_store(two, "JKS", PW, KEY_PASSWORD)


def test_a_chain_that_is_not_the_keys_is_refused(tmp_path):
    ca = make_ca()
    cert, _ = make_cert(*ca, "one")
    _, other_key = make_cert(*ca, "two")
    with pytest.raises(KeystoreError, match=r"mixed: its first certificate \(CN=one,O=kbroker\) is not the private "
                                            r"key's"):
        pem_key_material(other_key, cert, None, "mixed")
