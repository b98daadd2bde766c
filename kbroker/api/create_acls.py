"""CreateAcls (key 30), v0-v2: add ACL bindings, written to ZooKeeper as Kafka's AclAuthorizer.createAcls
(one conditional write per resource, then its change notification), so every broker's cache follows.

Needs Alter on the cluster (else CLUSTER_AUTHORIZATION_FAILED for each creation); without an authorizer
SECURITY_DISABLED. Per creation INVALID_REQUEST for: UNKNOWN or filter-only (ANY, MATCH) values, a CLUSTER
resource not named kafka-cluster, an empty resource name, a principal not of the form Type:name; the valid ones
answer UNKNOWN_SERVER_ERROR, with the reason, when a write to ZooKeeper fails. v0 has no pattern type (LITERAL
only); v2 is flexible.
"""
from __future__ import annotations

from kafka.protocol.admin import CreateAclsRequest, CreateAclsResponse

from ..protocol.acls import (CLUSTER_NAME, OPERATIONS, PATTERN_TYPES, PERMISSIONS, RESOURCE_TYPES, AclBinding,
                             AclEntry, ResourcePattern, valid_principal)
from ..protocol.errors import Errors, KafkaError
from .context import RequestContext

API_KEY = 30
MIN_VERSION, MAX_VERSION = 0, 2
REQUEST, RESPONSE = CreateAclsRequest, CreateAclsResponse
Result = RESPONSE.AclCreationResult


def binding(c, version: int) -> AclBinding:
    """The binding a creation asks for; ValueError naming what is wrong with it."""
    pattern_code = c.resource_pattern_type if version >= 1 else 3
    if c.resource_type not in RESOURCE_TYPES or pattern_code not in (3, 4) or c.operation not in OPERATIONS \
            or c.permission_type not in PERMISSIONS:
        raise ValueError("ACL binding contains unknown elements")
    rtype = RESOURCE_TYPES[c.resource_type]
    if rtype == "Cluster" and c.resource_name != CLUSTER_NAME:
        raise ValueError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not c.resource_name:
        raise ValueError("Invalid empty resource name")
    if not valid_principal(c.principal):
        raise ValueError(f"expected a string in format principalType:principalName but got {c.principal}")
    return AclBinding(ResourcePattern(rtype, c.resource_name, PATTERN_TYPES[pattern_code]),
                      AclEntry(c.principal, PERMISSIONS[c.permission_type], OPERATIONS[c.operation], c.host))


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    creations = list(request.creations or [])

    def answer(errors):
        return RESPONSE(version=version, results=[
            Result(error_code=e, error_message=m) for e, m in errors])
    if not ctx.authorize("Alter", "Cluster"):
        return answer([(Errors.CLUSTER_AUTHORIZATION_FAILED, None)] * len(creations))
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return answer([(Errors.SECURITY_DISABLED, "No Authorizer is configured on the broker.")] * len(creations))
    results, valid = [], []
    for c in creations:
        try:
            valid.append(binding(c, version))
            results.append((Errors.NONE, None))
        except ValueError as e:
            results.append((Errors.INVALID_REQUEST, str(e)))
    try:
        authorizer.create_acls(valid)
    except KafkaError as e:
        results = [(e.code, str(e)) if error == Errors.NONE else (error, m) for error, m in results]
    return answer(results)
