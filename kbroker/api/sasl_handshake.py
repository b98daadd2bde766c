"""SaslHandshake (key 17), v0-v1: the client names its SASL mechanism (Kafka 2.8's SaslServerAuthenticator).

Answers NONE and the listener's enabled mechanisms when the mechanism is enabled; UNSUPPORTED_SASL_MECHANISM
(with the enabled list) otherwise, and the connection closes after connection.failed.authentication.delay.ms.
v0 and v1 have the same fields; after v0 the client sends raw SASL tokens, after v1 SaslAuthenticate requests.
On a listener without SASL, or once authenticated, ILLEGAL_SASL_STATE with no mechanisms (KafkaApis); a second
handshake during authentication gets ILLEGAL_SASL_STATE and the connection closes.
"""
from __future__ import annotations

from kafka.protocol.sasl import SaslHandshakeRequest, SaslHandshakeResponse

from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 17
MIN_VERSION, MAX_VERSION = 0, 1
REQUEST, RESPONSE = SaslHandshakeRequest, SaslHandshakeResponse


def handle(request, ctx: RequestContext):
    auth = ctx.session.sasl
    if auth is None or auth.complete:
        return RESPONSE(version=ctx.api_version, error_code=Errors.ILLEGAL_SASL_STATE, mechanisms=[])
    error = auth.handshake(request.mechanism, ctx.api_version)
    mechanisms = list(auth.settings.mechanisms) if error != Errors.ILLEGAL_SASL_STATE else []
    return RESPONSE(version=ctx.api_version, error_code=error, mechanisms=mechanisms)
