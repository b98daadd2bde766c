"""The server's side of a SCRAM-SHA-256/512 exchange (RFC 5802 without channel binding, as Kafka 2.8's
ScramSaslServer), as a pure object: client-first -> server-first, client-final -> server-final.

The messages, the math and the credentials are kbroker.protocol.sasl.scram's. Failures raise KafkaError
SASL_AUTHENTICATION_FAILED; where Kafka's server throws a plain SaslException its authenticator answers a generic
message, and so does ScramServer.
"""
from __future__ import annotations

import binascii
import hmac
from typing import Callable

from ..protocol.errors import KafkaError
from ..protocol.sasl.scram import (MIN_ITERATIONS, ScramCredential, authentication_failed, b64, digest, hmac_digest,
                                   new_nonce, parse_attributes, unb64, unescape_name)


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
        return authentication_failed(f"Authentication failed during authentication due to invalid credentials "
                                     f"with SASL mechanism {self.mechanism}")

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
            attrs = parse_attributes(bare, "client first")
            if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
                raise ValueError("n= and r= expected")
            username = unescape_name(attrs[0][1])
            authzid = unescape_name(authzid_part[2:]) if authzid_part else ""
            if not username:
                raise ValueError("empty user name")
        except ValueError:
            raise self._invalid() from None
        if authzid and authzid != username:
            raise authentication_failed("Authentication failed: Client requested an authorization id that is "
                                        "different from username")
        credential = self.lookup(username)
        if credential is None or credential.iterations < MIN_ITERATIONS:
            raise self._invalid()
        self.username, self._credential = username, credential
        self._gs2_header = f"{flag},{authzid_part},"
        self._client_first_bare = bare
        self._server_nonce = new_nonce()
        self._server_first = (f"r={attrs[1][1]}{self._server_nonce},s={b64(credential.salt)},"
                              f"i={credential.iterations}")
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        try:
            without_proof, sep, proof_text = text.rpartition(",p=")
            if not sep:
                raise ValueError("no proof")
            attrs = dict(parse_attributes(without_proof, "client final"))
            channel, nonce = attrs.get("c"), attrs.get("r")
            proof = unb64(proof_text)
            if channel is None or nonce is None or unb64(channel) != self._gs2_header.encode():
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
        return f"v={b64(hmac_digest(self.mechanism, cred.server_key, auth_message))}".encode()
