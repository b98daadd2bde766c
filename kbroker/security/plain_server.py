"""SASL/PLAIN (RFC 4616) as Kafka 2.8's PlainSaslServer checks it.

The client sends one token `[authzid] NUL username NUL password` (kbroker.protocol.sasl.plain makes it); the
server answers an empty token on success.
Users and passwords come from the JAAS options `user_<name>="<password>"` of the listener's PLAIN login module.
Failures raise KafkaError SASL_AUTHENTICATION_FAILED with PlainSaslServer's messages.
"""
from __future__ import annotations

import hmac

from ..protocol.errors import Errors, KafkaError


def _failed(message: str) -> KafkaError:
    return KafkaError(Errors.SASL_AUTHENTICATION_FAILED, message)


def users_from_jaas(options: dict[str, str]) -> dict[str, str]:
    """{user: password} from the `user_<name>` options of a PlainLoginModule JAAS line."""
    return {k[len("user_"):]: v for k, v in options.items() if k.startswith("user_") and len(k) > len("user_")}


def authenticate(token: bytes, users: dict[str, str]) -> str:
    """The authenticated user name of a client's PLAIN token; KafkaError SASL_AUTHENTICATION_FAILED otherwise."""
    try:
        text = bytes(token).decode("utf-8")
    except UnicodeDecodeError:
        raise _failed("Invalid SASL/PLAIN response: not UTF-8") from None
    fields = text.split("\0")
    if len(fields) != 3:
        raise _failed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(fields)}")
    authzid, username, password = fields
    if not username:
        raise _failed("Authentication failed: username not specified")
    if not password:
        raise _failed("Authentication failed: password not specified")
    expected = users.get(username)
    if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
        raise _failed("Authentication failed: Invalid username or password")
    if authzid and authzid != username:
        raise _failed("Authentication failed: Client requested an authorization id that is different from username")
    return username
