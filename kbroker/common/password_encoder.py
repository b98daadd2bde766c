"""Kafka 2.8's PasswordEncoder: how a dynamic broker config's password (ssl.keystore.password, ssl.keystore.key,
...) is written to /config/brokers/<id> — encrypted with a key derived from password.encoder.secret, so the value
in ZooKeeper is not the password, in the form Kafka writes and reads (a broker of either kind decodes the other's):

    keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:AES/CBC/PKCS5Padding,keyLength:128,salt:<b64>,
    iterations:4096,encryptedPassword:<b64>,passwordLength:<n>,initializationVector:<b64>

(one line; AES/GCM/NoPadding adds authenticationTagLength). The key is PBKDF2 of the secret over a random
256-byte salt (password.encoder.keyfactory.algorithm, default PBKDF2WithHmacSHA512; password.encoder.key.length
bits, password.encoder.iterations rounds). AES in CBC (PKCS#5 padding) or GCM mode, what Java's default provider
offers for password.encoder.cipher.algorithm; another cipher or key factory is refused at start (kbroker.config)
and when a password is encoded. The
primitives are `cryptography`'s (pinned in pyproject.toml for the stores already).
"""
from __future__ import annotations

import base64
import os

from cryptography.hazmat.primitives import hashes, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

KEY_FACTORIES = {"PBKDF2WithHmacSHA512": hashes.SHA512, "PBKDF2WithHmacSHA256": hashes.SHA256,
                  "PBKDF2WithHmacSHA1": hashes.SHA1}
CIPHERS = ("AES/CBC/PKCS5Padding", "AES/GCM/NoPadding")


class PasswordEncoderError(ValueError):
    """A password that cannot be encoded or decoded (Kafka's ConfigException)."""


class PasswordEncoder:
    def __init__(self, secret: str, key_factory: str | None = None, cipher: str = "AES/CBC/PKCS5Padding",
                 key_length: int = 128, iterations: int = 4096):
        self.secret = secret.encode()
        self.key_factory = key_factory or "PBKDF2WithHmacSHA512"
        self.cipher, self.key_length, self.iterations = cipher, key_length, iterations

    def _key(self, factory: str, salt: bytes, key_length: int, iterations: int) -> bytes:
        if factory not in KEY_FACTORIES:
            raise PasswordEncoderError(f"password.encoder.keyfactory.algorithm {factory} is not supported (one of "
                                       f"{', '.join(KEY_FACTORIES)})")
        return PBKDF2HMAC(KEY_FACTORIES[factory](), key_length // 8, salt, iterations).derive(self.secret)

    def encode(self, password: str) -> str:
        if self.cipher not in CIPHERS:
            raise PasswordEncoderError(f"password.encoder.cipher.algorithm {self.cipher} is not supported (one of "
                                       f"{', '.join(CIPHERS)})")
        salt = os.urandom(256)
        key = self._key(self.key_factory, salt, self.key_length, self.iterations)
        data = password.encode()
        if self.cipher.startswith("AES/GCM/"):
            iv = os.urandom(12)
            encrypted, extra = AESGCM(key).encrypt(iv, data, None), {"authenticationTagLength": "128"}
        else:
            iv = os.urandom(16)
            padder = padding.PKCS7(128).padder()
            encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
            encrypted = encryptor.update(padder.update(data) + padder.finalize()) + encryptor.finalize()
            extra = {}
        fields = {"keyFactoryAlgorithm": self.key_factory, "cipherAlgorithm": self.cipher,
                  "keyLength": str(self.key_length), "salt": _b64(salt), "iterations": str(self.iterations),
                  "encryptedPassword": _b64(encrypted), "passwordLength": str(len(password)),
                  "initializationVector": _b64(iv), **extra}
        return ",".join(f"{k}:{v}" for k, v in fields.items())

    def decode(self, encoded: str) -> str:
        """The password of an encoded value; PasswordEncoderError when this secret does not open it."""
        try:
            params = dict(item.split(":", 1) for item in encoded.split(","))
            cipher = params["cipherAlgorithm"]
            key = self._key(params["keyFactoryAlgorithm"], base64.b64decode(params["salt"]),
                            int(params["keyLength"]), int(params["iterations"]))
            iv, data = base64.b64decode(params["initializationVector"]), base64.b64decode(params["encryptedPassword"])
            if cipher.startswith("AES/GCM/"):
                plain = AESGCM(key).decrypt(iv, data, None)
            elif cipher.startswith("AES/CBC/"):
                decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
                unpadder = padding.PKCS7(128).unpadder()
                plain = unpadder.update(decryptor.update(data) + decryptor.finalize()) + unpadder.finalize()
            else:
                raise ValueError(f"cipher {cipher} is not supported")
            password = plain.decode()
        except PasswordEncoderError:
            raise
        except Exception:   # a malformed value, a wrong secret (bad padding, tag), not UTF-8
            raise PasswordEncoderError("Password could not be decoded") from None
        if len(password) != int(params["passwordLength"]):
            raise PasswordEncoderError("Password could not be decoded, sanity check of length failed")
        return password


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
