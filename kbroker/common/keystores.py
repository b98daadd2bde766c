"""Key stores and trust stores, read once at start into PEM text for Python's ssl: the one reader of store files.

`store_type` None or "" picks the type by the file's extension as ZooKeeper does (.jks, .p12/.pfx, .pem). PEM
stores hold a private key (PKCS#8 or traditional, encrypted with the key password, else the store password) and
its certificate chain, leaf first; a PEM trust store holds certificates. JKS and PKCS12 stores are not read here
yet. Errors are KeystoreError, naming the file and what is wrong. Keys are re-encoded with `cryptography`.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization

_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----.*?-----END \1-----", re.S)
_EXTENSIONS = {".jks": "JKS", ".p12": "PKCS12", ".pfx": "PKCS12", ".pem": "PEM"}


class KeystoreError(ValueError):
    """A store that cannot be used; the message names the file and what is wrong."""


@dataclass(frozen=True)
class KeyMaterial:
    key_pem: str      # the private key, unencrypted PKCS#8 PEM
    chain_pem: str    # the certificate chain, leaf first, PEM


def _store_type(location: str, store_type: str | None) -> str:
    if store_type:
        return store_type.strip().upper()
    kind = _EXTENSIONS.get(os.path.splitext(location)[1].lower())
    if kind is None:
        raise KeystoreError(f"{location}: cannot tell the store type from the file name (.jks, .p12, .pfx or "
                            f".pem); give its type")
    return kind


def _pem_blocks(location: str, store_type: str | None) -> list[tuple[str, str]]:
    """(label, block text) of each PEM block of a PEM store file."""
    kind = _store_type(location, store_type)
    if kind != "PEM":
        raise KeystoreError(f"{location}: {kind} stores are not supported yet (PEM only)")
    try:
        with open(location, encoding="ascii") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise KeystoreError(f"{location}: cannot read the store: {getattr(e, 'strerror', None) or e}") from None
    blocks = [(m.group(1), m.group(0)) for m in _BLOCK.finditer(text)]
    if not blocks:
        raise KeystoreError(f"{location}: not a PEM store (no PEM block)")
    return blocks


def load_key_store(location: str, store_type: str | None, password: str | None,
                   key_password: str | None = None) -> KeyMaterial:
    """The private key and certificate chain of a key store."""
    blocks = _pem_blocks(location, store_type)
    keys = [text for label, text in blocks if label.endswith("PRIVATE KEY")]
    chain = [text for label, text in blocks if label == "CERTIFICATE"]
    if not keys:
        raise KeystoreError(f"{location}: no private key in the key store")
    if not chain:
        raise KeystoreError(f"{location}: no certificate in the key store")
    secret = key_password if key_password is not None else password
    try:
        key = serialization.load_pem_private_key(keys[0].encode(), secret.encode() if secret else None)
    except TypeError:
        raise KeystoreError(f"{location}: the private key is encrypted and no key password was given") from None
    except ValueError:
        raise KeystoreError(f"{location}: cannot decrypt the private key (wrong password?)") from None
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    return KeyMaterial(key_pem, "\n".join(c.strip() for c in chain) + "\n")


def load_trust_store(location: str, store_type: str | None, password: str | None) -> str:
    """The trusted certificates of a trust store, PEM."""
    certs = [text.strip() for label, text in _pem_blocks(location, store_type) if label == "CERTIFICATE"]
    if not certs:
        raise KeystoreError(f"{location}: no certificate in the trust store")
    return "\n".join(certs) + "\n"
