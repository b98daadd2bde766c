"""The SASL state machine of one connection on a SASL listener (Kafka 2.8's SaslServerAuthenticator).

States, as Kafka's: HANDSHAKE_OR_VERSIONS (ApiVersions or SaslHandshake may come; Kafka closes on a second
ApiVersions, here it is answered again), AUTHENTICATE (after a handshake: SaslAuthenticate requests after v1,
raw length-prefixed tokens after v0), COMPLETE (every API is served; the SASL APIs answer ILLEGAL_SASL_STATE)
and FAILED. The socket server asks `allows(api_key)` before dispatching a request: a request the state does not
allow closes the connection without a response. (Kafka answers an API other than SaslAuthenticate during
AUTHENTICATE with that API's error response before closing; here the connection is closed without one.) The
SaslHandshake and SaslAuthenticate API modules drive it through handshake() and authenticate(); the server runs
raw tokens through raw_token(). After a refused handshake or a failed authentication `close_after` is set: the
server waits connection.failed.authentication.delay.ms, sends the answer and closes, as Kafka delays the close
(once the client closed, or a second later: network.server.linger_for_close).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ..protocol.client.security import jaas_options
from ..protocol.errors import Errors, KafkaError
from ..protocol.sasl.scram import MECHANISMS as SCRAM_MECHANISMS
from ..security import plain_server
from ..security.scram_server import ScramServer

log = logging.getLogger("kbroker.network")

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
HANDSHAKE_OR_VERSIONS, AUTHENTICATE, COMPLETE, FAILED = "HANDSHAKE_OR_VERSIONS", "AUTHENTICATE", "COMPLETE", "FAILED"


@dataclass
class SaslSettings:
    """A SASL listener's settings: enabled mechanisms, PLAIN users (JAAS user_<name> options), SCRAM credentials."""
    mechanisms: list[str]
    plain_users: dict[str, str] = field(default_factory=dict)
    credentials: object = None     # security.credentials.CredentialCache

    @classmethod
    def for_listener(cls, config, listener: str, credentials) -> "SaslSettings":
        mechanisms = config.sasl_mechanisms(listener)
        jaas = jaas_options(config.jaas_config(listener, "PLAIN"))
        users = plain_server.users_from_jaas(jaas)
        return cls(mechanisms, users, credentials)


class _Plain:
    """The PLAIN exchange behind the same face as ScramServer: one token, an empty answer."""

    def __init__(self, users: dict[str, str]):
        self.users = users
        self.username: str | None = None
        self.complete = False

    def evaluate(self, token: bytes) -> bytes:
        self.username = plain_server.authenticate(token, self.users)
        self.complete = True
        return b""


class SaslAuthenticator:
    def __init__(self, settings: SaslSettings, peer: str):
        self.settings = settings
        self.peer = peer
        self.state = HANDSHAKE_OR_VERSIONS
        self.raw = False           # a v0 handshake: tokens come as raw frames
        self.close_after = False   # the next answer ends the connection (after the failure delay)
        self.client_reauth = False  # the client sent a SaslAuthenticate above v0: it could re-authenticate
        self.mechanism: str | None = None
        self.principal: str | None = None
        self._exchange = None

    @property
    def complete(self) -> bool:
        return self.state == COMPLETE

    def allows(self, api_key: int) -> bool:
        """May a request with this API key be dispatched now? (Only asked before authentication completes.)"""
        if self.state == HANDSHAKE_OR_VERSIONS:
            return api_key in (API_VERSIONS, SASL_HANDSHAKE)
        if self.state == AUTHENTICATE and not self.raw:
            return api_key in (SASL_AUTHENTICATE, SASL_HANDSHAKE)
        return False

    def handshake(self, mechanism: str, version: int) -> int:
        """SaslHandshake: the error code to answer (the enabled mechanisms go with it)."""
        if self.state != HANDSHAKE_OR_VERSIONS:
            self.close_after = True
            return Errors.ILLEGAL_SASL_STATE
        if mechanism not in self.settings.mechanisms:
            log.info("Failed authentication with %s (Unsupported SASL mechanism %s)", self.peer, mechanism)
            self.state, self.close_after = FAILED, True
            return Errors.UNSUPPORTED_SASL_MECHANISM
        self.mechanism, self.raw, self.state = mechanism, version == 0, AUTHENTICATE
        if mechanism in SCRAM_MECHANISMS:
            self._exchange = ScramServer(mechanism, lambda user: self.settings.credentials.get(mechanism, user))
        else:
            self._exchange = _Plain(self.settings.plain_users)
        return Errors.NONE

    def authenticate(self, token: bytes) -> tuple[int, str | None, bytes]:
        """SaslAuthenticate: (error code, error message, auth bytes)."""
        if self.state != AUTHENTICATE:
            self.close_after = True
            return Errors.ILLEGAL_SASL_STATE, "Unexpected SaslAuthenticate request during SASL authentication", b""
        try:
            answer = self._exchange.evaluate(token)
        except KafkaError as e:
            log.info("Failed authentication with %s (%s)", self.peer, e)
            self.state, self.close_after = FAILED, True
            return Errors.SASL_AUTHENTICATION_FAILED, str(e), b""
        if self._exchange.complete:
            self.state = COMPLETE
            self.principal = f"User:{self._exchange.username}"
        return Errors.NONE, None, answer

    def raw_token(self, token: bytes) -> bytes | None:
        """A raw token after a v0 handshake: the raw answer, or None when authentication failed (close)."""
        error, _, answer = self.authenticate(token)
        return answer if error == Errors.NONE else None
