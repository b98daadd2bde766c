"""DeleteAcls (key 31), v0-v2: remove the ACL bindings each filter matches, written to ZooKeeper as Kafka's
AclAuthorizer.deleteAcls (each resource rewritten once, conditionally on its znode version; a resource left
without ACLs loses its znode; a change notification follows), answering per filter the bindings it removed.

The resources considered are those the broker's cache holds plus the ones a filter names exactly (so ACLs just
written elsewhere go too). Needs Alter on the cluster (else CLUSTER_AUTHORIZATION_FAILED per filter); without an
authorizer SECURITY_DISABLED. Filters take ANY values and the pattern types ANY, MATCH, LITERAL, PREFIXED (v0:
LITERAL only); UNKNOWN values answer INVALID_REQUEST for that filter; when a write to ZooKeeper fails, every
filter answers UNKNOWN_SERVER_ERROR with the reason. v2 is flexible.
"""
from __future__ import annotations

from kafka.protocol.admin import DeleteAclsRequest, DeleteAclsResponse

from ..protocol.acls import binding_to_wire, filter_from_wire
from ..protocol.errors import Errors, KafkaError
from .context import RequestContext

API_KEY = 31
MIN_VERSION, MAX_VERSION = 0, 2
REQUEST, RESPONSE = DeleteAclsRequest, DeleteAclsResponse
FilterResult = RESPONSE.DeleteAclsFilterResult
Matching = FilterResult.DeleteAclsMatchingAcl


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    wire = list(request.filters or [])

    def answer(results):
        return RESPONSE(version=version, filter_results=results)

    def failed(error, message=None):
        return FilterResult(error_code=error, error_message=message, matching_acls=[])
    if not ctx.authorize("Alter", "Cluster"):
        return answer([failed(Errors.CLUSTER_AUTHORIZATION_FAILED) for _ in wire])
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return answer([failed(Errors.SECURITY_DISABLED, "No Authorizer is configured on the broker.") for _ in wire])
    filters, problems = [], {}
    for i, f in enumerate(wire):
        try:
            filters.append(filter_from_wire(f.resource_type_filter, f.resource_name_filter,
                                            f.pattern_type_filter if version >= 1 else 3, f.principal_filter,
                                            f.host_filter, f.operation, f.permission_type))
        except ValueError as e:
            problems[i] = str(e)
    try:
        deleted = iter(authorizer.delete_acls(filters))
    except KafkaError as e:
        return answer([failed(e.code, str(e)) for _ in wire])
    results = []
    for i in range(len(wire)):
        if i in problems:
            results.append(failed(Errors.INVALID_REQUEST, problems[i]))
            continue
        results.append(FilterResult(error_code=Errors.NONE, error_message=None, matching_acls=[
            Matching(error_code=Errors.NONE, error_message=None, **binding_to_wire(b)) for b in next(deleted)]))
    return answer(results)
