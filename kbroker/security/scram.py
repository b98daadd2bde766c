"""SCRAM-SHA-256/512 credentials as Kafka 2.8 stores them (ScramFormatter, ScramCredentialUtils).

A credential is what /config/users/<user> holds per mechanism: "salt=<b64>,stored_key=<b64>,server_key=<b64>,
iterations=<n>" (RFC 5802 keys: SaltedPassword = PBKDF2-HMAC(password, salt, i), ClientKey = HMAC(SaltedPassword,
"Client Key"), StoredKey = H(ClientKey), ServerKey = HMAC(SaltedPassword, "Server Key")). Used by the broker's
SCRAM authenticator, the client's SCRAM login, AlterUserScramCredentials and `kadmin users`.

The exchange (RFC 5802 without channel binding, as Kafka's ScramSaslServer/ScramSaslClient) is here too, as pure
objects: ScramServer (client-first -> server-first, client-final -> server-final) and ScramClient (the other
side, checking the server's signature). Failures raise KafkaError SASL_AUTHENTICATION_FAILED; where Kafka's
server throws a plain SaslException its authenticator answers a generic message, and so does ScramServer.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from typing import Callable

from ..protocol.errors import Errors, KafkaError

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


def make_credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    """The credential for a password (a random salt unless given), as kafka-configs.sh --add-config makes it."""
    salt = os.urandom(32) if salt is None else salt
    salted = salted_password(mechanism, password, salt, iterations)
    return ScramCredential(salt, digest(mechanism, client_key(mechanism, salted)), server_key(mechanism, salted),
                           iterations)


def credential_from_salted(mechanism: str, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    """The credential for an already salted password (AlterUserScramCredentials sends salt + SaltedPassword)."""
    return ScramCredential(salt, digest(mechanism, client_key(mechanism, salted)), server_key(mechanism, salted),
                           iterations)


# ---- the exchange ------------------------------------------------------------------------------------------


def _failed(message: str) -> KafkaError:
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


def _attributes(text: str, what: str) -> list[tuple[str, str]]:
    """'a=1,b=2' as [(a, 1), (b, 2)]; ValueError naming the message when an attribute is malformed."""
    out = []
    for item in text.split(","):
        key, eq, value = item.partition("=")
        if not eq or not key.isalpha():
            raise ValueError(f"Invalid SCRAM {what} message format")
        out.append((key, value))
    return out


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


def _nonce() -> str:
    return secrets.token_urlsafe(24)


class ScramServer:
    """One server side SCRAM exchange. lookup(user) -> ScramCredential or None (unknown user)."""

    def __init__(self, mechanism: str, lookup: Callable[[str], "ScramCredential | None"]):
        self.mechanism = mechanism
        self.lookup = lookup
        self.username: str | None = None
        self._gs2_header = self._client_first_bare = self._server_first = self._server_nonce = ""
        self._credential: ScramCredential | None = None
        self.complete = False

    def _invalid(self) -> KafkaError:
        # Kafka's authenticator answers a SaslException with this (it does not reveal which check failed).
        return _failed(f"Authentication failed during authentication due to invalid credentials with SASL "
                       f"mechanism {self.mechanism}")

    def evaluate(self, token: bytes) -> bytes:
        """The answer to the client's next message: server-first after client-first, server-final after
        client-final (then complete is True and username is set)."""
        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise self._invalid() from None
        if self._credential is None:
            return self._first(text)
        if not self.complete:
            return self._final(text)
        raise self._invalid()

    def _first(self, text: str) -> bytes:
        flag, _, rest = text.partition(",")
        authzid_part, _, bare = rest.partition(",")
        try:
            if flag not in ("n", "y") or (authzid_part and not authzid_part.startswith("a=")):
                raise ValueError("gs2 header")
            attrs = _attributes(bare, "client first")
            if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
                raise ValueError("n= and r= expected")
            username = unescape_name(attrs[0][1])
            authzid = unescape_name(authzid_part[2:]) if authzid_part else ""
            if not username:
                raise ValueError("empty user name")
        except ValueError:
            raise self._invalid() from None
        if authzid and authzid != username:
            raise _failed("Authentication failed: Client requested an authorization id that is different from "
                          "username")
        credential = self.lookup(username)
        if credential is None or credential.iterations < MIN_ITERATIONS:
            raise self._invalid()
        self.username, self._credential = username, credential
        self._gs2_header = f"{flag},{authzid_part},"
        self._client_first_bare = bare
        self._server_nonce = _nonce()
        self._server_first = (f"r={attrs[1][1]}{self._server_nonce},s={_b64(credential.salt)},"
                              f"i={credential.iterations}")
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        try:
            without_proof, sep, proof_text = text.rpartition(",p=")
            if not sep:
                raise ValueError("no proof")
            attrs = dict(_attributes(without_proof, "client final"))
            channel, nonce = attrs.get("c"), attrs.get("r")
            proof = _unb64(proof_text)
            if channel is None or nonce is None or _unb64(channel) != self._gs2_header.encode():
                raise ValueError("channel binding")
        except (ValueError, binascii.Error):
            raise self._invalid() from None
        # Kafka 2.8 does not check r=; librdkafka before 2.6.1 does not send client + server nonce there, so
        # only its end (our nonce) is checked.
        if not nonce.endswith(self._server_nonce):
            raise self._invalid()
        cred = self._credential
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac_digest(self.mechanism, cred.stored_key, auth_message)
        if len(proof) != len(signature):
            raise self._invalid()
        client_key_ = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(digest(self.mechanism, client_key_), cred.stored_key):
            raise self._invalid()
        self.complete = True
        return f"v={_b64(hmac_digest(self.mechanism, cred.server_key, auth_message))}".encode()


class ScramClient:
    """One client side SCRAM exchange: first() then final(server_first) then verify(server_final)."""

    def __init__(self, mechanism: str, username: str, password: str):
        self.mechanism, self.username, self.password = mechanism, username, password
        self._nonce = _nonce()
        self._client_first_bare = f"n={escape_name(username)},r={self._nonce}"
        self._expected_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = bytes(server_first).decode("utf-8", "replace")
        try:
            attrs = dict(_attributes(text, "server first"))
            nonce, salt, iterations = attrs["r"], _unb64(attrs["s"]), int(attrs["i"])
        except (KeyError, ValueError, binascii.Error):
            raise _failed(f"Invalid SCRAM server first message: {text!r}") from None
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise _failed("Invalid server nonce: does not start with client nonce")
        if iterations < MIN_ITERATIONS:
            raise _failed(f"Requested iterations {iterations} is less than the minimum {MIN_ITERATIONS} for "
                          f"{self.mechanism}")
        salted = salted_password(self.mechanism, self.password, salt, iterations)
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        key = client_key(self.mechanism, salted)
        signature = hmac_digest(self.mechanism, digest(self.mechanism, key), auth_message)
        proof = bytes(a ^ b for a, b in zip(key, signature))
        self._expected_signature = hmac_digest(self.mechanism, server_key(self.mechanism, salted), auth_message)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        text = bytes(server_final).decode("utf-8", "replace")
        if text.startswith("e="):
            raise _failed(f"Sasl authentication using {self.mechanism} failed with error: {text[2:]}")
        try:
            signature = _unb64(text[2:]) if text.startswith("v=") else None
        except binascii.Error:
            signature = None
        if signature is None or not hmac.compare_digest(signature, self._expected_signature):
            raise _failed("Invalid server signature in server final message")
