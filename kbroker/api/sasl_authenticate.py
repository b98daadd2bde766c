"""SaslAuthenticate (key 36), v0-v2 (v2 flexible): one SASL token each way after a v1 SaslHandshake.

The token goes to the connection's exchange (PLAIN or SCRAM, network.sasl); the answer carries the server's
token. A failure answers SASL_AUTHENTICATION_FAILED with Kafka's message and the connection closes after
connection.failed.authentication.delay.ms. SessionLifetimeMs (v1+) is 0: re-authentication (KIP-368) is off, as
with Kafka's default connections.max.reauth.ms=0. On a listener without SASL, or once authenticated:
ILLEGAL_SASL_STATE "SaslAuthenticate request received after successful authentication" (KafkaApis).
"""
from __future__ import annotations

from kafka.protocol.sasl import SaslAuthenticateRequest, SaslAuthenticateResponse

from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 36
MIN_VERSION, MAX_VERSION = 0, 2
REQUEST, RESPONSE = SaslAuthenticateRequest, SaslAuthenticateResponse


def handle(request, ctx: RequestContext):
    auth = ctx.session.sasl
    if auth is None or auth.complete:
        error, message, answer = (Errors.ILLEGAL_SASL_STATE,
                                  "SaslAuthenticate request received after successful authentication", b"")
    else:
        error, message, answer = auth.authenticate(bytes(request.auth_bytes))
    return RESPONSE(version=ctx.api_version, error_code=error, error_message=message, auth_bytes=answer,
                    session_lifetime_ms=0)
