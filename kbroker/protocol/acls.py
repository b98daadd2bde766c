"""ACLs as Kafka's clients model them (org.apache.kafka.common.acl / .resource): resource patterns, access
control entries, bindings and binding filters, with the wire codes and the names Kafka stores in ZooKeeper.

Shared by the broker's authorizer and the ACL APIs, and by `kadmin acls` (ZooKeeper and Admin API modes), so the
names, codes and filter semantics exist once. Names are Kafka's SecurityUtils ones (Pascal case: "Topic",
"TransactionalId", "Read", "IdempotentWrite", "Allow"); parsing accepts them in any case, as Kafka does.
"""
from __future__ import annotations

from typing import NamedTuple

CLUSTER_NAME = "kafka-cluster"     # the one CLUSTER resource
WILDCARD = "*"                     # literal resource name, host or principal name matching all
WILDCARD_PRINCIPAL = "User:*"

# ResourceType codes; UNKNOWN 0 and ANY 1 are filter-only values.
RESOURCE_TYPES = {2: "Topic", 3: "Group", 4: "Cluster", 5: "TransactionalId", 6: "DelegationToken"}
# AclOperation codes; UNKNOWN 0, ANY 1 (filters only).
OPERATIONS = {2: "All", 3: "Read", 4: "Write", 5: "Create", 6: "Delete", 7: "Alter", 8: "Describe",
              9: "ClusterAction", 10: "DescribeConfigs", 11: "AlterConfigs", 12: "IdempotentWrite"}
PERMISSIONS = {2: "Deny", 3: "Allow"}
# PatternType codes: ANY and MATCH are filter-only; only LITERAL and PREFIXED are stored.
PATTERN_TYPES = {1: "ANY", 2: "MATCH", 3: "LITERAL", 4: "PREFIXED"}
ANY = 1
LITERAL, PREFIXED = "LITERAL", "PREFIXED"

# Operations an ALLOW for another operation also grants (AclAuthorizer.authorizeAction).
IMPLIED_BY = {"Describe": ("Describe", "Read", "Write", "Delete", "Alter"),
              "DescribeConfigs": ("DescribeConfigs", "AlterConfigs")}

# The error a denied operation on each resource type answers (AclEntry.authorizationError).
AUTHORIZATION_ERRORS = {"Topic": 29, "Group": 30, "Cluster": 31, "TransactionalId": 53, "DelegationToken": 65}


def _by_name(table: dict) -> dict:
    out = {}
    for code, name in table.items():
        out[name.upper()] = code
        out[name.replace("_", "").upper()] = code
    return out


_TYPE_CODES, _OP_CODES, _PERM_CODES, _PATTERN_CODES = (_by_name(t) for t in
                                                        (RESOURCE_TYPES, OPERATIONS, PERMISSIONS, PATTERN_TYPES))


def _parse(table: dict, codes: dict, value: str, what: str) -> str:
    code = codes.get(value.replace("_", "").replace("-", "").upper())
    if code is None or code not in table:
        raise ValueError(f"unknown {what} {value!r} (one of {', '.join(table.values())})")
    return table[code]


def resource_type(value: str) -> str:
    """'topic', 'TOPIC', 'Topic', 'transactional_id' -> Kafka's name ('Topic', 'TransactionalId')."""
    return _parse(RESOURCE_TYPES, _TYPE_CODES, value, "resource type")


def operation(value: str) -> str:
    return _parse(OPERATIONS, _OP_CODES, value, "operation")


def permission(value: str) -> str:
    return _parse(PERMISSIONS, _PERM_CODES, value, "permission type")


def pattern_type(value: str) -> str:
    return _parse(PATTERN_TYPES, _PATTERN_CODES, value, "pattern type")


def code_of(table: dict, name: str) -> int:
    return next(code for code, n in table.items() if n == name)


class ResourcePattern(NamedTuple):
    resource_type: str     # "Topic", "Group", "Cluster", "TransactionalId", "DelegationToken"
    name: str
    pattern_type: str      # LITERAL or PREFIXED


class AclEntry(NamedTuple):
    """One access control entry, field for field as the ACL znode stores it."""
    principal: str         # "User:alice", "User:*"
    permission: str        # "Allow" or "Deny"
    operation: str         # "Read", ..., "All"
    host: str              # an IP address or "*"


class AclBinding(NamedTuple):
    pattern: ResourcePattern
    entry: AclEntry


def valid_principal(principal: str) -> bool:
    """Kafka parses "<type>:<name>" (SecurityUtils.parseKafkaPrincipal); anything else is refused."""
    return isinstance(principal, str) and ":" in principal and principal.index(":") > 0


class AclBindingFilter(NamedTuple):
    """Kafka's AclBindingFilter: None (or ANY) fields match everything. resource_type is a name or None;
    pattern_type one of ANY, MATCH, LITERAL, PREFIXED."""
    resource_type: str | None = None
    name: str | None = None
    pattern_type: str = "ANY"
    principal: str | None = None
    host: str | None = None
    operation: str | None = None
    permission: str | None = None

    def matches_pattern(self, p: ResourcePattern) -> bool:
        """ResourcePatternFilter.matches: MATCH finds the literal name, the literal `*` and every prefix of it."""
        if self.resource_type is not None and self.resource_type != p.resource_type:
            return False
        if self.pattern_type not in ("ANY", "MATCH") and self.pattern_type != p.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type == "ANY" or self.pattern_type == p.pattern_type:
            return self.name == p.name
        if p.pattern_type == LITERAL:
            return self.name == p.name or p.name == WILDCARD
        return self.name.startswith(p.name)

    def matches_entry(self, e: AclEntry) -> bool:
        return ((self.principal is None or self.principal == e.principal)
                and (self.host is None or self.host == e.host)
                and (self.operation is None or self.operation == e.operation)
                and (self.permission is None or self.permission == e.permission))

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)

    def exact_patterns(self) -> list[ResourcePattern]:
        """The patterns a filter names exactly (ResourcePatternFilter.matchesAtMostOne, ANY as both stored
        kinds), which a delete must reach even when no broker cache holds them yet."""
        if self.resource_type is None or self.name is None or self.pattern_type == "MATCH":
            return []
        kinds = (LITERAL, PREFIXED) if self.pattern_type == "ANY" else (self.pattern_type,)
        return [ResourcePattern(self.resource_type, self.name, k) for k in kinds]


def filter_from_wire(resource_type_code: int, name, pattern_type_code: int, principal, host, operation_code: int,
                     permission_code: int) -> AclBindingFilter:
    """A filter from DescribeAcls/DeleteAcls fields; ValueError for UNKNOWN or unrecognised codes."""
    def pick(table, code, what):
        if code == ANY:
            return None
        if code not in table:
            raise ValueError(f"unknown {what} code {code}")
        return table[code]
    if pattern_type_code not in PATTERN_TYPES:
        raise ValueError(f"unknown pattern type code {pattern_type_code}")
    return AclBindingFilter(pick(RESOURCE_TYPES, resource_type_code, "resource type"), name,
                            PATTERN_TYPES[pattern_type_code], principal, host,
                            pick(OPERATIONS, operation_code, "operation"),
                            pick(PERMISSIONS, permission_code, "permission type"))


def binding_to_wire(b: AclBinding) -> dict:
    """The wire fields of a binding, as DescribeAcls/DeleteAcls answer and CreateAcls asks."""
    return {"resource_type": code_of(RESOURCE_TYPES, b.pattern.resource_type), "resource_name": b.pattern.name,
            "pattern_type": code_of(PATTERN_TYPES, b.pattern.pattern_type), "principal": b.entry.principal,
            "host": b.entry.host, "operation": code_of(OPERATIONS, b.entry.operation),
            "permission_type": code_of(PERMISSIONS, b.entry.permission)}
