"""ACL commands (kafka-acls.sh): list, add and remove ACL bindings, through ZooKeeper or the Admin APIs, each
building one result object for both.

ZooKeeper (`*_zk`), as `kafka-acls.sh --authorizer-properties zookeeper.connect=...` (which runs Kafka's
AclAuthorizer in the tool): each resource's ACLs are read, changed and written back conditionally on the znode
version (/kafka-acl/<Type>/<name>, /kafka-acl-extended/prefixed/<Type>/<name>; the znode goes with its last ACL),
then the change notification every broker watches (/kafka-acl-changes or /kafka-acl-extended-changes), the same
bytes Kafka writes (zk.client.KafkaZkClient.update_acls).

Admin APIs (`*_admin`), as `kafka-acls.sh --bootstrap-server`: DescribeAcls, CreateAcls, DeleteAcls, sent to any
broker (a broker without an authorizer refuses with SECURITY_DISABLED).

Bindings come from kafka-acls.sh's options: principals (--allow-principal / --deny-principal) × hosts
(--allow-host / --deny-host, default `*`) × operations (--operation, default All) × resources (--topic, --group,
--cluster, --transactional-id, --delegation-token) with --resource-pattern-type (literal or prefixed to add;
any, match, literal or prefixed to list and remove), or kafka-acls.sh's --producer [--idempotent] and
--consumer shortcuts. Operations a resource type does not support are refused
as kafka-acls.sh does (AclEntry.supportedOperations).

The click group `acls` (list, add, remove) closes the module, turning the options into patterns and bindings.
"""
from __future__ import annotations

from dataclasses import dataclass

import click
from kafka.protocol.admin import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest

from zk.client import KafkaZkClient
from kbroker.protocol.acls import (ANY, CLUSTER_NAME, OPERATIONS, PATTERN_TYPES, PERMISSIONS, RESOURCE_TYPES,
                                   AclBinding, AclBindingFilter, AclEntry, ResourcePattern, binding_to_wire,
                                   code_of, operation, valid_principal)

from .context import output, source
from .kafka_client import AdminClient, refused
from .output import Output, table

# AclEntry.supportedOperations: what kafka-acls.sh lets each resource type have (All is always allowed).
SUPPORTED_OPERATIONS = {
    "Topic": {"Read", "Write", "Create", "Describe", "Delete", "Alter", "DescribeConfigs", "AlterConfigs"},
    "Group": {"Read", "Describe", "Delete"},
    "Cluster": {"Create", "ClusterAction", "DescribeConfigs", "AlterConfigs", "IdempotentWrite", "Alter",
                "Describe"},
    "TransactionalId": {"Describe", "Write"},
    "DelegationToken": {"Describe"},
}


def convenience_operations(patterns: list[ResourcePattern], producer: bool, consumer: bool,
                           idempotent: bool) -> list[tuple[ResourcePattern, list[str]]]:
    """kafka-acls.sh --producer (Write, Describe, Create on topics; Write, Describe on transactional ids;
    IdempotentWrite on the cluster with --idempotent) and --consumer (Read, Describe on topics; Read on groups)."""
    out = []
    for p in patterns:
        ops = []
        if producer:
            ops += {"Topic": ["Write", "Describe", "Create"], "TransactionalId": ["Write", "Describe"]}.get(
                p.resource_type, [])
        if consumer:
            ops += {"Topic": ["Read", "Describe"], "Group": ["Read"]}.get(p.resource_type, [])
        if ops:
            out.append((p, ops))
    if producer and idempotent:
        out.append((ResourcePattern("Cluster", CLUSTER_NAME, "LITERAL"), ["IdempotentWrite"]))
    return out


def unsupported(bindings) -> str | None:
    """kafka-acls.sh's refusal of an operation the resource type does not support, or None."""
    for b in bindings:
        ops = SUPPORTED_OPERATIONS[b.pattern.resource_type]
        if b.entry.operation != "All" and b.entry.operation not in ops:
            return (f"ResourceType {b.pattern.resource_type} only supports operations "
                    f"{','.join(sorted(ops | {'All'}))}")
    return None


def bindings(resources: list[ResourcePattern], allow_principals, deny_principals, allow_hosts, deny_hosts,
             operations) -> list[AclBinding]:
    """Every binding the options ask for (kafka-acls.sh's getAcls: principal x host x operation per resource)."""
    entries = [AclEntry(p, "Allow", op, h) for p in allow_principals for h in allow_hosts or ["*"]
               for op in operations] + \
              [AclEntry(p, "Deny", op, h) for p in deny_principals for h in deny_hosts or ["*"] for op in operations]
    return [AclBinding(r, e) for r in resources for e in dict.fromkeys(entries)]


def _row(b: AclBinding) -> dict:
    return {"resource_type": b.pattern.resource_type, "name": b.pattern.name, "pattern_type": b.pattern.pattern_type,
            "principal": b.entry.principal, "host": b.entry.host, "operation": b.entry.operation,
            "permission": b.entry.permission}


def _table(out: Output, items: list[AclBinding]) -> None:
    out.print(table(["ResourceType", "Name", "PatternType", "Principal", "Host", "Operation", "Permission"],
                    [list(_row(b).values()) for b in items]))


@dataclass
class AclListing:
    """JSON: {"acls": [{"resource_type", "name", "pattern_type", "principal", "host", "operation",
    "permission"}]}, sorted by resource then entry."""
    acls: list[AclBinding]

    def render(self, out: Output) -> None:
        if not self.acls:
            out.line("No ACLs.")
            return
        _table(out, self.acls)

    def to_json(self) -> dict:
        return {"acls": [_row(b) for b in self.acls]}


@dataclass
class AclChange:
    """JSON: {"added": [binding, ...]} or {"removed": [...]}, bindings as AclListing's."""
    action: str                      # "added" or "removed"
    acls: list[AclBinding]

    def render(self, out: Output) -> None:
        if not self.acls:
            out.line(f"No ACLs {self.action}.")
            return
        out.line(f"{self.action.capitalize()} {len(self.acls)} ACL(s):")
        _table(out, self.acls)

    def to_json(self) -> dict:
        return {self.action: [_row(b) for b in self.acls]}


# ---- ZooKeeper ---------------------------------------------------------------------------------------------

def _stored(zk: KafkaZkClient, acl_filter: AclBindingFilter) -> dict[ResourcePattern, set]:
    """The stored resources the filter's pattern matches, with their ACL tuples (exact ones read directly)."""
    patterns = {ResourcePattern(*r) for r in zk.get_acl_resources()} | set(acl_filter.exact_patterns())
    out = {}
    for p in sorted(patterns):
        if acl_filter.matches_pattern(p):
            acls, _ = zk.get_acls(*p)
            if acls:
                out[p] = acls
    return out


def list_acls_zk(zk: KafkaZkClient, acl_filter: AclBindingFilter) -> AclListing:
    found = [AclBinding(p, AclEntry(*a)) for p, acls in _stored(zk, acl_filter).items() for a in sorted(acls)]
    return AclListing([b for b in found if acl_filter.matches(b)])


def add_acls_zk(zk: KafkaZkClient, wanted: list[AclBinding]) -> AclChange:
    zk.create_acl_paths()     # as the AclAuthorizer kafka-acls.sh configures does
    by_pattern: dict[ResourcePattern, set] = {}
    for b in wanted:
        by_pattern.setdefault(b.pattern, set()).add(tuple(b.entry))
    for p, entries in by_pattern.items():
        zk.update_acls(*p, lambda current, e=entries: current | e)
    return AclChange("added", wanted)


def remove_acls_zk(zk: KafkaZkClient, filters: list[AclBindingFilter]) -> AclChange:
    """Each stored resource any filter's pattern matches loses the entries those filters match, in one
    conditional write."""
    zk.create_acl_paths()
    removed: list[AclBinding] = []
    patterns: set[ResourcePattern] = set()
    for f in filters:
        patterns |= set(_stored(zk, f))
    for p in sorted(patterns):
        matching = [f for f in filters if f.matches_pattern(p)]
        gone: list = []

        def drop(current, p=p, matching=matching, gone=gone):
            gone[:] = sorted(a for a in current if any(f.matches_entry(AclEntry(*a)) for f in matching))
            return current - set(gone)
        zk.update_acls(*p, drop)
        removed += [AclBinding(p, AclEntry(*a)) for a in gone]
    return AclChange("removed", removed)


# ---- Admin APIs --------------------------------------------------------------------------------------------

def _filter_fields(f: AclBindingFilter) -> dict:
    return {"resource_type_filter": ANY if f.resource_type is None else code_of(RESOURCE_TYPES, f.resource_type),
            "resource_name_filter": f.name, "pattern_type_filter": code_of(PATTERN_TYPES, f.pattern_type),
            "principal_filter": f.principal, "host_filter": f.host,
            "operation": ANY if f.operation is None else code_of(OPERATIONS, f.operation),
            "permission_type": ANY if f.permission is None else code_of(PERMISSIONS, f.permission)}


def _binding(resource_type: int, name: str, pattern_type: int, principal: str, host: str, operation: int,
             permission: int) -> AclBinding:
    return AclBinding(ResourcePattern(RESOURCE_TYPES[resource_type], name, PATTERN_TYPES[pattern_type]),
                      AclEntry(principal, PERMISSIONS[permission], OPERATIONS[operation], host))


def list_acls_admin(admin: AdminClient, acl_filter: AclBindingFilter) -> AclListing:
    def build(c):
        return DescribeAclsRequest(version=c.version_for(DescribeAclsRequest, 1), **_filter_fields(acl_filter))
    r = admin.send_any(build, admin.deadline())
    if r.error_code:
        raise refused(r.error_message, r.error_code, "Listing the ACLs was refused.")
    return AclListing(sorted(_binding(res.resource_type, res.resource_name, res.pattern_type, a.principal, a.host,
                                      a.operation, a.permission_type) for res in r.resources for a in res.acls))


def add_acls_admin(admin: AdminClient, wanted: list[AclBinding]) -> AclChange:
    Creation = CreateAclsRequest.AclCreation

    def build(c):
        return CreateAclsRequest(version=c.version_for(CreateAclsRequest, 1), creations=[
            Creation(**{("resource_pattern_type" if k == "pattern_type" else k): v
                        for k, v in binding_to_wire(b).items()}) for b in wanted])
    r = admin.send_any(build, admin.deadline())
    failed = next((x for x in r.results if x.error_code), None)
    if failed is not None:
        raise refused(failed.error_message, failed.error_code, "Adding the ACLs was refused.")
    return AclChange("added", wanted)


def remove_acls_admin(admin: AdminClient, filters: list[AclBindingFilter]) -> AclChange:
    Filter = DeleteAclsRequest.DeleteAclsFilter

    def build(c):
        return DeleteAclsRequest(version=c.version_for(DeleteAclsRequest, 1),
                                 filters=[Filter(**_filter_fields(f)) for f in filters])
    r = admin.send_any(build, admin.deadline())
    removed = []
    for result in r.filter_results:
        if result.error_code:
            raise refused(result.error_message, result.error_code, "Removing the ACLs was refused.")
        removed += [_binding(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation,
                             m.permission_type) for m in result.matching_acls]
    return AclChange("removed", sorted(set(removed)))


# ---- commands (click) -----------------------------------------------------------------------------------------

@click.group("acls")
def acls():
    """ACLs (kafka-acls.sh): with --zookeeper, the ACL znodes and change notifications Kafka's AclAuthorizer
    writes; with --bootstrap-server, DescribeAcls, CreateAcls and DeleteAcls (brokers need
    authorizer.class.name=kafka.security.authorizer.AclAuthorizer, else SECURITY_DISABLED)."""


def _acl_resource_options(f):
    for decorator in reversed([
        click.option("--topic", "topics", multiple=True, metavar="NAME", help="A topic (repeatable; '*': all)."),
        click.option("--group", "groups", multiple=True, metavar="NAME", help="A consumer group (repeatable)."),
        click.option("--cluster", "cluster_resource", is_flag=True, help="The cluster resource (kafka-cluster)."),
        click.option("--transactional-id", "transactional_ids", multiple=True, metavar="ID",
                     help="A transactional id (repeatable)."),
        click.option("--delegation-token", "delegation_tokens", multiple=True, metavar="ID",
                     help="A delegation token (repeatable)."),
        click.option("--resource-pattern-type", "pattern_type", default="literal", show_default=True,
                     type=click.Choice(["literal", "prefixed", "any", "match"], case_sensitive=False),
                     help="How resource names match: literal names, prefixes; to list and remove also any "
                          "(both kinds, exact name) or match (every pattern that applies to the name)."),
    ]):
        f = decorator(f)
    return f


def _acl_entry_options(f):
    for decorator in reversed([
        click.option("--allow-principal", "allow_principals", multiple=True, metavar="Type:name",
                     help="Principal to allow, e.g. User:alice, User:* (repeatable)."),
        click.option("--deny-principal", "deny_principals", multiple=True, metavar="Type:name",
                     help="Principal to deny (repeatable)."),
        click.option("--allow-host", "allow_hosts", multiple=True, metavar="IP",
                     help="Host the allowed principals may come from (repeatable; default *)."),
        click.option("--deny-host", "deny_hosts", multiple=True, metavar="IP",
                     help="Host the denied principals are refused from (repeatable; default *)."),
        click.option("--operation", "operations", multiple=True, metavar="OP",
                     help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                          "AlterConfigs, IdempotentWrite or All (repeatable; default All)."),
    ]):
        f = decorator(f)
    return f


def _acl_patterns(topics, groups, cluster_resource, transactional_ids, delegation_tokens, pattern_type,
                  stored: bool) -> list:
    """The resource patterns the options name; stored: only literal or prefixed (to add)."""
    kind = pattern_type.upper()
    if stored and kind not in ("LITERAL", "PREFIXED"):
        raise click.BadParameter("only literal or prefixed patterns can be added", param_hint="--resource-pattern-type")
    named = [("Topic", n) for n in topics] + [("Group", n) for n in groups] + \
        [("TransactionalId", n) for n in transactional_ids] + [("DelegationToken", n) for n in delegation_tokens] + \
        ([("Cluster", CLUSTER_NAME)] if cluster_resource else [])
    if any(not name for _, name in named):
        raise click.BadParameter("resource names cannot be empty")
    return [ResourcePattern(t, n, kind) for t, n in named]


def _acl_bindings(patterns, allow_principals, deny_principals, allow_hosts, deny_hosts, operations) -> list:
    for p in (*allow_principals, *deny_principals):
        if not valid_principal(p):
            raise click.BadParameter(f"expected a principal in format principalType:principalName but got {p}",
                                     param_hint="--allow-principal/--deny-principal")
    try:
        ops = list(dict.fromkeys(operation(o) for o in operations)) or ["All"]
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--operation") from None
    result = bindings(patterns, allow_principals, deny_principals, allow_hosts, deny_hosts, ops)
    problem = unsupported(result)
    if problem:
        raise click.UsageError(problem)
    return result


@acls.command("list")
@_acl_resource_options
@click.option("--principal", "principals", multiple=True, metavar="Type:name",
              help="Only the ACLs of this principal (repeatable).")
@click.pass_context
def acls_list(ctx, topics, groups, cluster_resource, transactional_ids, delegation_tokens, pattern_type, principals):
    """List ACLs (kafka-acls.sh --list): of the resources given (every resource when none), with
    --resource-pattern-type literal (default), prefixed, any or match.

    JSON: {"acls": [{"resource_type", "name", "pattern_type", "principal", "host", "operation", "permission"}]}.
    """
    patterns = _acl_patterns(topics, groups, cluster_resource, transactional_ids, delegation_tokens, pattern_type,
                             stored=False)
    kind = pattern_type.upper() if patterns else "ANY"
    resources = [(p.resource_type, p.name) for p in patterns] or [(None, None)]
    filters = [AclBindingFilter(t, n, kind, principal) for t, n in resources for principal in principals or [None]]
    found = []
    with source(ctx) as src:
        for f in filters:
            found += src.call(list_acls_zk, list_acls_admin, f).acls
    output(ctx).emit(AclListing(sorted(set(found))))


@acls.command("add")
@_acl_resource_options
@_acl_entry_options
@click.option("--producer", is_flag=True, help="The ACLs a producer needs: Write, Describe, Create on the topics; "
                                              "Write, Describe on the transactional ids.")
@click.option("--idempotent", is_flag=True, help="With --producer: IdempotentWrite on the cluster too.")
@click.option("--consumer", is_flag=True, help="The ACLs a consumer needs: Read, Describe on the topics; Read on "
                                              "the groups.")
@click.pass_context
def acls_add(ctx, topics, groups, cluster_resource, transactional_ids, delegation_tokens, pattern_type,
             allow_principals, deny_principals, allow_hosts, deny_hosts, operations, producer, idempotent, consumer):
    """Add ACLs (kafka-acls.sh --add): every principal x host x operation on every resource given, e.g.
    `kadmin acls add --allow-principal User:alice --operation Read --topic orders`, or the ACLs a producer or a
    consumer needs (`--consumer --topic orders --group billing`).

    JSON: {"added": [binding, ...]}, bindings as `acls list` shows them.
    """
    patterns = _acl_patterns(topics, groups, cluster_resource, transactional_ids, delegation_tokens, pattern_type,
                             stored=True)
    if not patterns:
        raise click.UsageError("Give at least one resource: --topic, --group, --cluster, --transactional-id or "
                               "--delegation-token.")
    if not allow_principals and not deny_principals:
        raise click.UsageError("Give --allow-principal or --deny-principal.")
    if producer or consumer:
        if operations:
            raise click.UsageError("--operation cannot be combined with --producer or --consumer.")
        per_pattern = convenience_operations(patterns, producer, consumer, idempotent)
        if not per_pattern:
            raise click.UsageError("--producer needs --topic or --transactional-id; --consumer needs --topic or "
                                   "--group.")
        wanted = [b for p, ops in per_pattern
                  for b in _acl_bindings([p], allow_principals, deny_principals, allow_hosts, deny_hosts, ops)]
    elif idempotent:
        raise click.UsageError("--idempotent only goes with --producer.")
    else:
        wanted = _acl_bindings(patterns, allow_principals, deny_principals, allow_hosts, deny_hosts, operations)
    with source(ctx) as src:
        result = src.call(add_acls_zk, add_acls_admin, wanted)
    output(ctx).emit(result)


@acls.command("remove")
@_acl_resource_options
@_acl_entry_options
@click.pass_context
def acls_remove(ctx, topics, groups, cluster_resource, transactional_ids, delegation_tokens, pattern_type,
                allow_principals, deny_principals, allow_hosts, deny_hosts, operations):
    """Remove ACLs (kafka-acls.sh --remove): without principals every ACL of the resources given, else the
    bindings the options name (operation All unless --operation is given).

    JSON: {"removed": [binding, ...]}.
    """
    patterns = _acl_patterns(topics, groups, cluster_resource, transactional_ids, delegation_tokens, pattern_type,
                             stored=False)
    if not patterns:
        raise click.UsageError("Give at least one resource: --topic, --group, --cluster, --transactional-id or "
                               "--delegation-token.")
    if allow_principals or deny_principals:
        filters = [AclBindingFilter(b.pattern.resource_type, b.pattern.name, b.pattern.pattern_type,
                                    b.entry.principal, b.entry.host, b.entry.operation, b.entry.permission)
                   for b in _acl_bindings(patterns, allow_principals, deny_principals, allow_hosts, deny_hosts,
                                          operations)]
    else:
        filters = [AclBindingFilter(p.resource_type, p.name, p.pattern_type) for p in patterns]
    with source(ctx) as src:
        result = src.call(remove_acls_zk, remove_acls_admin, filters)
    output(ctx).emit(result)
