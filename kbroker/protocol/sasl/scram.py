"""SCRAM-SHA-256/512 credentials as Kafka 2.8 stores them (ScramFormatter, ScramCredentialUtils).

A credential is what /config/users/<user> holds per mechanism: "salt=<b64>,stored_key=<b64>,server_key=<b64>,
iterations=<n>" (RFC 5802 keys: SaltedPassword = PBKDF2-HMAC(password, salt, i), ClientKey = HMAC(SaltedPassword,
"Client Key"), StoredKey = H(ClientKey), ServerKey = HMAC(SaltedPassword, "Server Key")). Used by the broker's
SCRAM authenticator, the client's SCRAM login, AlterUserScramCredentials and `kadmin users`.

The messages of the exchange (RFC 5802 without channel binding, as Kafka's ScramMessages) and the client's side
of it are here too, as a pure object: ScramClient (client-first, client-final from server-first, then the
server's signature checked). The server's side is kbroker.security.scram_server. Failures raise KafkaError
SASL_AUTHENTICATION_FAILED.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from ..errors import Errors, KafkaError

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


# ---- the exchange's messages (both sides) -------------------------------------------------------------------


def authentication_failed(message: str) -> KafkaError:
    """A refused SCRAM exchange, on either side."""
    return KafkaError(Errors.SASL_AUTHENTICATION_FAILED, message)


def escape_name(name: str) -> str:
    """RFC 5802 saslname: ',' as =2C and '=' as =3D."""
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_name(text: str) -> str:
    """The user name of a saslname; ValueError when a '=' is not =2C or =3D (or a ',' appears)."""
    if "," in text:
        raise ValueError("',' in a saslname")
    out, i = [], 0
    while i < len(text):
        if text[i] == "=":
            code = text[i + 1:i + 3]
            if code not in ("2C", "3D"):
                raise ValueError(f"invalid escape {text[i:i + 3]!r}")
            out.append("," if code == "2C" else "=")
            i += 3
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def parse_attributes(text: str, what: str) -> list[tuple[str, str]]:
    """'a=1,b=2' as [(a, 1), (b, 2)]; ValueError naming the message when an attribute is malformed."""
    out = []
    for item in text.split(","):
        key, eq, value = item.partition("=")
        if not eq or not key.isalpha():
            raise ValueError(f"Invalid SCRAM {what} message format")
        out.append((key, value))
    return out


def b64(data: bytes) -> str:
    """Base64 as the messages and the stored credentials carry bytes."""
    return base64.b64encode(data).decode()


def unb64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


def new_nonce() -> str:
    """A side's part of the exchange's nonce."""
    return secrets.token_urlsafe(24)


# ---- the client's side -------------------------------------------------------------------------------------

class ScramClient:
    """One client side SCRAM exchange: first() then final(server_first) then verify(server_final)."""

    def __init__(self, mechanism: str, username: str, password: str):
        self.mechanism, self.username, self.password = mechanism, username, password
        self._nonce = new_nonce()
        self._client_first_bare = f"n={escape_name(username)},r={self._nonce}"
        self._expected_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = bytes(server_first).decode("utf-8", "replace")
        try:
            attrs = dict(parse_attributes(text, "server first"))
            nonce, salt, iterations = attrs["r"], unb64(attrs["s"]), int(attrs["i"])
        except (KeyError, ValueError, binascii.Error):
            raise authentication_failed(f"Invalid SCRAM server first message: {text!r}") from None
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise authentication_failed("Invalid server nonce: does not start with client nonce")
        if iterations < MIN_ITERATIONS:
            raise authentication_failed(f"Requested iterations {iterations} is less than the minimum "
                                        f"{MIN_ITERATIONS} for {self.mechanism}")
        salted = salted_password(self.mechanism, self.password, salt, iterations)
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        key = client_key(self.mechanism, salted)
        signature = hmac_digest(self.mechanism, digest(self.mechanism, key), auth_message)
        proof = bytes(a ^ b for a, b in zip(key, signature))
        self._expected_signature = hmac_digest(self.mechanism, server_key(self.mechanism, salted), auth_message)
        return f"{without_proof},p={b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        text = bytes(server_final).decode("utf-8", "replace")
        if text.startswith("e="):
            raise authentication_failed(f"Sasl authentication using {self.mechanism} failed with error: {text[2:]}")
        try:
            signature = unb64(text[2:]) if text.startswith("v=") else None
        except binascii.Error:
            signature = None
        if signature is None or not hmac.compare_digest(signature, self._expected_signature):
            raise authentication_failed("Invalid server signature in server final message")
