"""Key stores and trust stores, read once at start into PEM text for Python's ssl: the one reader of store files
(ssl.keystore.* / ssl.truststore.* of listeners, of the inter-broker client and of every client kbroker builds;
zookeeper.ssl.keyStore.* / trustStore.* of ZooKeeper TLS).

Types, as Kafka 2.8 on JDK 17 reads them:
- JKS (Kafka's default), PKCS12 and JCEKS, with JDK 9+'s keystore.type.compat: the file's first bytes decide
  (FEEDFEED JKS, CECECECE JCEKS, 0x30 PKCS12), so a store declared JKS may be a PKCS12 file and vice versa, and
  JCEKS reads JKS files too; any other mismatch is refused.
- PEM: a key store file holds a private key (PKCS#8, encrypted or not, or OpenSSL's traditional form) and its
  certificate chain, leaf first; a trust store file holds certificates. pem_key_material / pem_certificates read
  the same from text (ssl.keystore.key + ssl.keystore.certificate.chain, ssl.truststore.certificates; a
  properties file's one-line PEM is re-wrapped as Kafka's PemStore reads it).
- None or "": by the file's extension as ZooKeeper does (.jks, .p12/.pfx, .pem); another extension by its bytes.
Passwords, as Kafka's DefaultSslEngineFactory: a JKS/PKCS12/JCEKS key store needs its store password; the key
password defaults to it (for a PKCS12 store it must equal it: keytool writes them so, and one password opens
every bag). A trust store password is optional: without it a JKS store is read without its integrity check,
and a PKCS12 store only opens when nothing in it is encrypted (keytool encrypts its certificates, which Java
then skips: the store would trust nothing; here it is an error that says so).
One private key per key store: Kafka's SunX509 key manager would pick among several by the key type each
client asks for; kbroker serves one key, so a JKS/JCEKS store with several is refused naming their aliases (of
a PKCS12 store the first key is taken, with its certificate: the PKCS12 parser reports no other). A PKCS12
chain is rebuilt from the key's certificate up through the store's other certificates, by issuer.

JKS/JCEKS: purejks, pinned: pyjks 20.0.0's `jks` module (the reader Python projects use), only reformatted, with
its compiled `twofish` dependency replaced by pure Python. pyjks itself needs twofish built from source, which
has no wheel: the image and its offline build install wheels only (twofish serves the BKS/UBER formats, which
Kafka never reads). PKCS12 and PEM: `cryptography`. Errors are KeystoreError, naming the file and the fault.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

TYPES = ("JKS", "PKCS12", "JCEKS", "PEM")
_EXTENSIONS = {".jks": "JKS", ".p12": "PKCS12", ".pfx": "PKCS12", ".pem": "PEM"}
_OPENS = {"JKS": ("JKS", "PKCS12"), "PKCS12": ("PKCS12", "JKS"), "JCEKS": ("JCEKS", "JKS")}   # type -> formats
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


class KeystoreError(ValueError):
    """A store that cannot be used; the message names the file and what is wrong."""


@dataclass(frozen=True)
class KeyMaterial:
    key_pem: str      # the private key, unencrypted PKCS#8 PEM
    chain_pem: str    # the certificate chain, leaf first, PEM


def normalize_pem(text: str | None) -> str | None:
    """PEM text with each block re-wrapped in 64-column lines: a properties file's one-line form (continuation
    lines join without their line breaks) reads as Kafka's PemStore reads it. ValueError without a PEM block."""
    if not text:
        return text
    blocks = []
    for label, body in _PEM_BLOCK.findall(text):
        if "\n" in body.strip():        # already line-wrapped (and may carry headers): as it is
            blocks.append(f"-----BEGIN {label}-----{body}-----END {label}-----\n")
            continue
        b64 = "".join(body.split())
        lines = "\n".join(b64[i:i + 64] for i in range(0, len(b64), 64))
        blocks.append(f"-----BEGIN {label}-----\n{lines}\n-----END {label}-----\n")
    if not blocks:
        raise ValueError("no PEM block found")
    return "".join(blocks)


def load_key_store(location: str, store_type: str | None, password: str | None,
                   key_password: str | None = None) -> KeyMaterial:
    """The private key and certificate chain of a key store file."""
    what = f"key store {location}"
    kind, data = _open(location, store_type, what)
    if key_password is None:
        key_password = password
    if kind == "PEM":
        text = _text(data, what)
        return pem_key_material(text, text, key_password, what)
    if password is None:
        raise KeystoreError(f"{what} ({kind}) needs its store password")
    if kind == "PKCS12":
        store = _pkcs12(data, password, what)
        if store.key is None or store.cert is None:
            raise KeystoreError(f"{what} holds no private key" + (" with its certificate" if store.key else ""))
        if key_password != password:
            raise KeystoreError(f"{what}: wrong password for its private key (a PKCS12 store's key password is its "
                                f"store password)")
        key = store.key
        chain = _chain(store.cert.certificate, [c.certificate for c in store.additional_certs])
    else:
        store = _jks(data, password, what, kind)
        if not store.private_keys:
            raise KeystoreError(f"{what} holds no private key" +
                                (f" (only certificates: {', '.join(store.certs)})" if store.certs else ""))
        if len(store.private_keys) > 1:
            raise KeystoreError(f"{what} holds {len(store.private_keys)} private keys "
                                f"({', '.join(store.private_keys)}): keep the one to serve")
        entry = next(iter(store.private_keys.values()))
        key = serialization.load_der_private_key(_decrypt(entry, key_password, what), None)
        chain = [x509.load_der_x509_certificate(der) for _, der in entry.cert_chain]
    return _material(key, chain, what)


def load_trust_store(location: str, store_type: str | None, password: str | None) -> str:
    """The trusted certificates of a trust store file, PEM."""
    what = f"trust store {location}"
    kind, data = _open(location, store_type, what)
    if kind == "PEM":
        return pem_certificates(_text(data, what), what)
    if kind == "PKCS12":
        store = _pkcs12(data, password, what)
        certs = ([store.cert.certificate] if store.cert else []) + [c.certificate for c in store.additional_certs]
    else:   # as Java's trust managers read a key store: its certificate entries and each key's own certificate
        store = _jks(data, password, what, kind)
        ders = [e.cert for e in store.certs.values()] + [e.cert_chain[0][1] for e in store.private_keys.values()]
        try:
            certs = [x509.load_der_x509_certificate(der) for der in ders]
        except ValueError as e:   # read without a password: no integrity check caught the damage
            raise KeystoreError(f"{what}: a certificate does not parse: {e}") from None
    if not certs:
        raise KeystoreError(f"{what} holds no trusted certificate")
    return _certs_pem(certs)


def pem_key_material(key_text: str, chain_text: str, key_password: str | None, what: str) -> KeyMaterial:
    """A private key and its chain from PEM text (the key decrypted with key_password when it is encrypted);
    `what` names the source in errors."""
    try:
        keys = [b for b in _blocks(key_text) if b[0].endswith("PRIVATE KEY")]
        chain = [b for b in _blocks(chain_text) if b[0] == "CERTIFICATE"]
    except ValueError:
        raise KeystoreError(f"{what} is not PEM (no PEM block)") from None
    if not keys:
        raise KeystoreError(f"{what} holds no private key")
    if len(keys) > 1:
        raise KeystoreError(f"{what} holds {len(keys)} private keys: keep the one to serve")
    if not chain:
        raise KeystoreError(f"{what} holds no certificate for its private key")
    label, block = keys[0]
    encrypted = label.startswith("ENCRYPTED") or "Proc-Type: 4,ENCRYPTED" in block   # PKCS#8, or OpenSSL's
    if encrypted and key_password is None:
        raise KeystoreError(f"{what}: its private key is encrypted and no key password is given")
    try:
        key = serialization.load_pem_private_key(block.encode(), key_password.encode() if encrypted else None)
    except ValueError:
        raise KeystoreError(f"{what}: " + ("wrong password for its private key" if encrypted else
                                           "its private key does not parse")) from None
    return _material(key, _certificates(chain, what), what)


def pem_certificates(text: str, what: str) -> str:
    """The certificates of PEM text, checked and re-encoded; `what` names the source in errors."""
    try:
        blocks = [b for b in _blocks(text) if b[0] == "CERTIFICATE"]
    except ValueError:
        raise KeystoreError(f"{what} is not PEM (no PEM block)") from None
    if not blocks:
        raise KeystoreError(f"{what} holds no certificate")
    return _certs_pem(_certificates(blocks, what))


def _open(location: str, store_type: str | None, what: str) -> tuple[str, bytes]:
    """(the format to read the file as, its bytes), by its type and its first bytes."""
    declared = (store_type or "").strip().upper()
    if declared and declared not in TYPES:
        raise KeystoreError(f"{what}: store type {store_type!r} is not supported (one of {', '.join(TYPES)})")
    try:
        with open(location, "rb") as f:
            data = f.read()
    except OSError as e:
        raise KeystoreError(f"{what}: cannot read it: {e.strerror or e}") from None
    found = _sniff(data)
    if not declared:
        declared = _EXTENSIONS.get(os.path.splitext(location)[1].lower()) or found
        if declared is None:
            raise KeystoreError(f"{what}: cannot tell the store type from its name (.jks, .p12, .pfx, .pem) or its "
                                f"content; give its type")
    if declared == "PEM":
        return "PEM", data
    if found not in _OPENS[declared]:
        raise KeystoreError(f"{what} is not a {declared} store" +
                            (f" (it holds {found})" if found else " (not a key store file)"))
    return found, data


def _sniff(data: bytes) -> str | None:
    if data[:4] == b"\xfe\xed\xfe\xed":
        return "JKS"
    if data[:4] == b"\xce\xce\xce\xce":
        return "JCEKS"
    if data[:1] == b"\x30":
        return "PKCS12"
    if b"-----BEGIN " in data[:4096]:
        return "PEM"
    return None


def _jks(data: bytes, password: str | None, what: str, kind: str):
    """A JKS/JCEKS store, checked against its password when one is given, keys left encrypted."""
    import jks  # here: most processes that import this module (clients, the image's healthcheck) read no JKS
    from pyasn1.error import PyAsn1Error
    try:
        return jks.KeyStore.loads(data, password, try_decrypt_keys=False)
    except jks.KeystoreSignatureException:
        raise KeystoreError(f"{what}: wrong store password (the {kind} integrity check fails)") from None
    except (jks.KeystoreException, PyAsn1Error, ValueError) as e:   # a damaged or truncated file
        raise KeystoreError(f"{what} is not a valid {kind} store: {e}") from None


def _decrypt(entry, key_password: str, what: str) -> bytes:
    """The PKCS#8 DER of a JKS/JCEKS private key entry."""
    import jks
    try:
        entry.decrypt(key_password)
    except jks.DecryptionFailureException:
        raise KeystoreError(f"{what}: wrong password for its private key {entry.alias!r}") from None
    return entry.pkey_pkcs8


def _pkcs12(data: bytes, password: str | None, what: str) -> pkcs12.PKCS12KeyAndCertificates:
    try:
        return pkcs12.load_pkcs12(data, password.encode() if password is not None else None)
    except ValueError:
        if password is None:
            raise KeystoreError(f"{what} (PKCS12) needs its store password: its content is encrypted or "
                                f"integrity-protected") from None
        raise KeystoreError(f"{what}: wrong store password, or not a valid PKCS12 file") from None


def _text(data: bytes, what: str) -> str:
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        raise KeystoreError(f"{what} is not PEM (not text)") from None


def _blocks(text: str) -> list[tuple[str, str]]:
    return [(label, f"-----BEGIN {label}-----{body}-----END {label}-----\n")
            for label, body in _PEM_BLOCK.findall(normalize_pem(text))]


def _certificates(blocks: list[tuple[str, str]], what: str) -> list[x509.Certificate]:
    try:
        return [x509.load_pem_x509_certificate(block.encode()) for _, block in blocks]
    except ValueError as e:
        raise KeystoreError(f"{what}: a certificate does not parse: {e}") from None


def _chain(leaf: x509.Certificate, others: list[x509.Certificate]) -> list[x509.Certificate]:
    """leaf, then its issuer, its issuer's issuer, ... as far as `others` holds them."""
    chain, pool = [leaf], list(others)
    while chain[-1].issuer != chain[-1].subject:
        issuer = next((c for c in pool if c.subject == chain[-1].issuer), None)
        if issuer is None:
            break
        chain.append(issuer)
        pool.remove(issuer)
    return chain


def _material(key, chain: list[x509.Certificate], what: str) -> KeyMaterial:
    """The PEM of a private key and its chain, once the chain's first certificate is checked to be the key's."""
    if _spki(key.public_key()) != _spki(chain[0].public_key()):
        raise KeystoreError(f"{what}: its first certificate ({chain[0].subject.rfc4514_string()}) is not the "
                            f"private key's")
    return KeyMaterial(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()).decode(), _certs_pem(chain))


def _spki(public_key) -> bytes:
    return public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _certs_pem(certs: list[x509.Certificate]) -> str:
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


def _identity(material: KeyMaterial) -> tuple[x509.Name, set]:
    leaf = x509.load_pem_x509_certificate(material.chain_pem.encode())
    try:
        sans = set(leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
    except x509.ExtensionNotFound:
        sans = set()
    return leaf.subject, sans


def ensure_compatible(new: KeyMaterial, old: KeyMaterial) -> None:
    """A key store that may replace another on a running listener, as Kafka's SslFactory CertificateEntries
    .ensureCompatible checks: its certificate has the same subject DN, and every subject alternative name of the
    old one (it may add names); KeystoreError with Kafka's message otherwise."""
    (new_dn, new_sans), (old_dn, old_sans) = _identity(new), _identity(old)
    if new_dn != old_dn:
        raise KeystoreError(f"Keystore DistinguishedName does not match:  existing={{DN={old_dn.rfc4514_string()}}}, "
                            f"new={{DN={new_dn.rfc4514_string()}}}")
    if not old_sans <= new_sans:
        show = lambda sans: sorted(str(getattr(n, "value", n)) for n in sans)   # noqa: E731
        raise KeystoreError(f"Keystore SubjectAltNames do not match:  existing={{SAN={show(old_sans)}}}, "
                            f"new={{SAN={show(new_sans)}}}")
