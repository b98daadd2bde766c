"""AlterUserScramCredentials (key 51), v0 (flexible): add, replace and remove users' SCRAM credentials
(KIP-554), written to /config/users/<sanitized user> with a /config/changes notification as Kafka 2.8's
ZkAdminManager does, so every broker's credential cache takes the change at once.

Only the active controller answers (every user named gets NOT_CONTROLLER otherwise). Upsertions carry the
client's salt and salted password (the password never travels); the broker derives the stored and server keys.
Per-user errors with Kafka's messages: an empty name UNACCEPTABLE_CREDENTIAL, an unknown mechanism
UNSUPPORTED_SASL_MECHANISM, iterations outside 4096..16384 UNACCEPTABLE_CREDENTIAL, the same user and mechanism
twice DUPLICATE_RESOURCE, deleting a credential that is not there RESOURCE_NOT_FOUND; a user with any error is
left as it was. Kafka authorizes ALTER on the CLUSTER after the controller check (CLUSTER_AUTHORIZATION_FAILED
for every user): `error_response` builds that answer.
"""
from __future__ import annotations

from kafka.protocol.admin import AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse

from ..admin_manager import NOT_CONTROLLER_MESSAGE
from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 51
MIN_VERSION, MAX_VERSION = 0, 0
REQUEST, RESPONSE = AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse
Result = RESPONSE.AlterUserScramCredentialsResult


def error_response(request, ctx: RequestContext, code: int, message: str | None):
    """The whole request refused (AlterUserScramCredentialsRequest.getErrorResponse): every user named, sorted,
    with the error."""
    users = sorted({d.name for d in request.deletions} | {u.name for u in request.upsertions})
    return RESPONSE(version=ctx.api_version,
                    results=[Result(user=u, error_code=code, error_message=message) for u in users])


def handle(request, ctx: RequestContext):
    manager = ctx.broker.admin_manager
    if not manager.is_active_controller():
        return error_response(request, ctx, Errors.NOT_CONTROLLER, NOT_CONTROLLER_MESSAGE)
    if not ctx.authorize("Alter", "Cluster"):
        return error_response(request, ctx, Errors.CLUSTER_AUTHORIZATION_FAILED, None)
    results = manager.alter_user_scram_credentials(
        [(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password)) for u in request.upsertions],
        [(d.name, d.mechanism) for d in request.deletions])
    return RESPONSE(version=ctx.api_version,
                    results=[Result(user=r.user, error_code=r.error, error_message=r.message) for r in results])
