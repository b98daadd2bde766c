"""SCRAM-SHA-256/512 credentials as Kafka 2.8 stores them (ScramFormatter, ScramCredentialUtils).

A credential is what /config/users/<user> holds per mechanism: "salt=<b64>,stored_key=<b64>,server_key=<b64>,
iterations=<n>" (RFC 5802 keys: SaltedPassword = PBKDF2-HMAC(password, salt, i), ClientKey = HMAC(SaltedPassword,
"Client Key"), StoredKey = H(ClientKey), ServerKey = HMAC(SaltedPassword, "Server Key")). Used by the broker's
SCRAM authenticator, the client's SCRAM login, AlterUserScramCredentials and `kadmin users`.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

# mechanism name -> (hashlib name, the KIP-554 mechanism id used by Describe/AlterUserScramCredentials)
MECHANISMS = {"SCRAM-SHA-256": ("sha256", 1), "SCRAM-SHA-512": ("sha512", 2)}
MECHANISM_BY_ID = {mech_id: name for name, (_, mech_id) in MECHANISMS.items()}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384


def hash_name(mechanism: str) -> str:
    return MECHANISMS[mechanism][0]


def hmac_digest(mechanism: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hash_name(mechanism)).digest()


def digest(mechanism: str, data: bytes) -> bytes:
    return hashlib.new(hash_name(mechanism), data).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(hash_name(mechanism), password.encode(), salt, iterations)


def client_key(mechanism: str, salted: bytes) -> bytes:
    return hmac_digest(mechanism, salted, b"Client Key")


def server_key(mechanism: str, salted: bytes) -> bytes:
    return hmac_digest(mechanism, salted, b"Server Key")


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_config(self) -> str:
        """Kafka's ScramCredentialUtils.credentialToString."""
        b64 = lambda b: base64.b64encode(b).decode()
        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},server_key={b64(self.server_key)},"
                f"iterations={self.iterations}")

    @classmethod
    def from_config(cls, text: str) -> "ScramCredential":
        """Parse credentialToString's form; ValueError when a field is missing or malformed."""
        fields = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        try:
            return cls(base64.b64decode(fields["salt"], validate=True),
                       base64.b64decode(fields["stored_key"], validate=True),
                       base64.b64decode(fields["server_key"], validate=True), int(fields["iterations"]))
        except (KeyError, ValueError) as e:
            raise ValueError(f"not a SCRAM credential: {text!r} ({e})") from None


def random_salt() -> bytes:
    """A salt as Kafka's ScramFormatter.secureRandomBytes makes one (kafka-configs.sh, the Java admin client): a
    random 130-bit number in base 36, as ASCII bytes."""
    n, digits = secrets.randbits(130), []
    while n:
        n, d = divmod(n, 36)
        digits.append("0123456789abcdefghijklmnopqrstuvwxyz"[d])
    return "".join(reversed(digits or ["0"])).encode()


def make_credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    """The credential for a password (a random salt unless given), as kafka-configs.sh --add-config makes it."""
    salt = random_salt() if salt is None else salt
    salted = salted_password(mechanism, password, salt, iterations)
    return ScramCredential(salt, digest(mechanism, client_key(mechanism, salted)), server_key(mechanism, salted),
                           iterations)


def credential_from_salted(mechanism: str, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    """The credential for an already salted password (AlterUserScramCredentials sends salt + SaltedPassword)."""
    return ScramCredential(salt, digest(mechanism, client_key(mechanism, salted)), server_key(mechanism, salted),
                           iterations)
