"""DescribeUserScramCredentials (key 50), v0 (flexible): which SCRAM mechanisms each user has credentials for,
with their iterations (KIP-554), read from /config/users as Kafka 2.8's ZkAdminManager does (any broker answers).

Null or empty users: every user with a credential, sorted by name (the user's name: 2.8 answers the znode's
sanitized name here, e.g. alice%40example.com, a bug later Kafka fixed, KAFKA-15243). Named users: one result per distinct name in
request order; an empty name or a user without credentials RESOURCE_NOT_FOUND, a name given twice
DUPLICATE_RESOURCE. Mechanisms are KIP-554 ids (1 SCRAM-SHA-256, 2 SCRAM-SHA-512). Kafka authorizes DESCRIBE on
the CLUSTER first (CLUSTER_AUTHORIZATION_FAILED as the top-level error): `error_response` builds that answer.
"""
from __future__ import annotations

from kafka.protocol.admin import DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse

from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 50
MIN_VERSION, MAX_VERSION = 0, 0
REQUEST, RESPONSE = DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse
Result = RESPONSE.DescribeUserScramCredentialsResult
CredentialInfo = Result.CredentialInfo


def error_response(ctx: RequestContext, code: int, message: str | None):
    """The whole request refused (DescribeUserScramCredentialsRequest.getErrorResponse): a top-level error."""
    return RESPONSE(version=ctx.api_version, error_code=code, error_message=message, results=[])


def handle(request, ctx: RequestContext):
    if not ctx.authorize("Describe", "Cluster"):
        return error_response(ctx, Errors.CLUSTER_AUTHORIZATION_FAILED, None)
    users = None if request.users is None else [u.name for u in request.users]
    error, message, results = ctx.broker.admin_manager.describe_user_scram_credentials(users)
    return RESPONSE(version=ctx.api_version, error_code=error, error_message=message,
                    results=[Result(user=r.user, error_code=r.error, error_message=r.message,
                                    credential_infos=[CredentialInfo(mechanism=m, iterations=i)
                                                      for m, i in r.credentials])
                             for r in results])
