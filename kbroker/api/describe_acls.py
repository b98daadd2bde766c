"""DescribeAcls (key 29), v0-v2: the ACL bindings a filter matches, from the authorizer's cache (Kafka 2.8's
KafkaApis.handleDescribeAcls over AclAuthorizer.acls).

Needs Describe on the cluster (else CLUSTER_AUTHORIZATION_FAILED); without an authorizer SECURITY_DISABLED.
The filter's resource type, operation and permission may be ANY; the pattern type ANY, MATCH (the literal
name, the literal `*` and every prefix of the name), LITERAL or PREFIXED. v0 has no pattern type (LITERAL);
v1 adds it; v2 is flexible. A filter with UNKNOWN values answers INVALID_REQUEST.
"""
from __future__ import annotations

from kafka.protocol.admin import DescribeAclsRequest, DescribeAclsResponse

from ..protocol.acls import binding_to_wire, filter_from_wire
from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 29
MIN_VERSION, MAX_VERSION = 0, 2
REQUEST, RESPONSE = DescribeAclsRequest, DescribeAclsResponse
Resource = RESPONSE.DescribeAclsResource
Description = Resource.AclDescription


def _error(version: int, error: Errors, message: str):
    return RESPONSE(version=version, error_code=error, error_message=message, resources=[])


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    if not ctx.authorize("Describe", "Cluster"):
        return _error(version, Errors.CLUSTER_AUTHORIZATION_FAILED, None)
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return _error(version, Errors.SECURITY_DISABLED, "No Authorizer is configured on the broker")
    try:
        acl_filter = filter_from_wire(request.resource_type_filter, request.resource_name_filter,
                                      request.pattern_type_filter if version >= 1 else 3, request.principal_filter,
                                      request.host_filter, request.operation, request.permission_type)
    except ValueError as e:
        return _error(version, Errors.INVALID_REQUEST, str(e))
    by_pattern: dict = {}
    for binding in authorizer.acls(acl_filter):
        by_pattern.setdefault(binding.pattern, []).append(binding_to_wire(binding))
    resources = []
    for pattern, wires in by_pattern.items():
        first = wires[0]
        resources.append(Resource(
            resource_type=first["resource_type"], resource_name=first["resource_name"],
            pattern_type=first["pattern_type"],
            acls=[Description(principal=w["principal"], host=w["host"], operation=w["operation"],
                              permission_type=w["permission_type"]) for w in wires]))
    return RESPONSE(version=version, error_code=Errors.NONE, error_message=None,
                    resources=resources)
