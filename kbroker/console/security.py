"""Security: the cluster's ACLs, its users' SCRAM credentials and its client quotas, each listed and changed as
kadmin's `acls`, `users` and `quotas` do (their functions, through the visitor's client).

ACLs: DescribeAcls with a filter (resource type, name, pattern type, principal); an ACL is added (CreateAcls)
from one form after kafka-acls.sh's checks (a `Type:name` principal, a known operation the resource type
supports) and removed (DeleteAcls of exactly that binding) with a confirmed button. Users: mechanisms and
iterations (never credentials) from DescribeUserScramCredentials; a password set or replaced, or every credential
of a user removed, with AlterUserScramCredentials. Quotas: every entity with a quota (DescribeClientQuotas); one
key set or removed (AlterClientQuotas), checked as kafka-configs.sh checks.

Each section is read on its own: one the principal may not see (an authorization error), or ACLs on a cluster
without an authorizer (SECURITY_DISABLED), says so in its place while the others show. Refused changes and bad
input come back as a message on the page.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from flask import Blueprint, request

from admin_cli import acls as acl_ops
from admin_cli import quotas as quota_ops
from admin_cli import users as user_ops
from kbroker.common.admin_errors import AdminError
from kbroker.common.quota_config import (
    CLIENT_ID,
    CLIENT_QUOTA_CONFIGS,
    ENTITY_TYPES,
    IP,
    IP_QUOTA_CONFIGS,
    USER,
    describe_entity,
    format_quota,
    quota_entity,
)
from kbroker.protocol.acls import (
    AUTHORIZATION_ERRORS,
    CLUSTER_NAME,
    OPERATIONS,
    PERMISSIONS,
    RESOURCE_TYPES,
    AclBindingFilter,
    ResourcePattern,
    operation,
    pattern_type,
    resource_type,
    valid_principal,
)
from kbroker.protocol.client import Errors, KafkaError, TimedOut, Unreachable

from .web import client, done, page

blueprint = Blueprint("security", __name__)
DEFAULT_ITERATIONS = 4096
ENTITY_KINDS = {"user": (USER,), "client-id": (CLIENT_ID,), "user+client-id": (USER, CLIENT_ID), "ip": (IP,)}


@dataclass
class Section:
    """What one section shows: its rows, or why it cannot (refusal) and the broker's words (detail)."""
    rows: list
    refusal: str | None = None
    detail: str | None = None


def _section(read) -> Section:
    """read()'s rows; an authorization failure or a disabled authorizer becomes the section's message, a cluster
    that does not answer the error page."""
    try:
        return Section(read())
    except (Unreachable, TimedOut):
        raise
    except KafkaError as e:
        if e.code in AUTHORIZATION_ERRORS.values():
            return Section([], "Not allowed: the cluster does not let you see these.", str(e))
        if e.code == Errors.SECURITY_DISABLED:
            return Section([], "No authorizer: the brokers have no authorizer.class.name, so they keep no ACLs.",
                           str(e))
        return Section([], "The cluster refused to list these.", str(e))


def _acl_filter(args) -> tuple[AclBindingFilter, dict, str | None]:
    """The ACL filter the query asks for, the values to show back in its form, and a message for a bad one."""
    shown = {k: (args.get(k) or "").strip() for k in ("resource_type", "name", "pattern_type", "principal")}
    try:
        kind = resource_type(shown["resource_type"]) if shown["resource_type"] else None
        pattern = pattern_type(shown["pattern_type"] or "ANY")
    except ValueError as e:
        return AclBindingFilter(), shown, str(e)
    return AclBindingFilter(kind, shown["name"] or None, pattern, shown["principal"] or None), shown, None


@blueprint.get("/security")
def index():
    c = client()
    acl_filter, shown, problem = _acl_filter(request.args)
    acls = _section(lambda: acl_ops.list_acls_admin(c, acl_filter).acls)
    users = _section(lambda: _users(c))
    quotas = _section(lambda: _quotas(c))
    return page("security.html", acls=acls, users=users, quotas=quotas, filter=shown, filter_problem=problem,
                resource_types=list(RESOURCE_TYPES.values()), operations=list(OPERATIONS.values()),
                permissions=list(reversed(PERMISSIONS.values())), mechanisms=user_ops.MECHANISMS,
                entity_kinds=list(ENTITY_KINDS), quota_keys=[*CLIENT_QUOTA_CONFIGS, *IP_QUOTA_CONFIGS],
                default_iterations=DEFAULT_ITERATIONS)


def _users(c) -> list[user_ops.UserCredentials]:
    listed = user_ops.list_users_admin(c, [])
    if listed.errors:
        raise KafkaError(Errors.UNKNOWN_SERVER_ERROR, "; ".join(listed.errors))
    return sorted(listed.users, key=lambda u: u.user)


@dataclass
class QuotaRow:
    entity: tuple
    entity_json: str      # the entity as the remove form sends it back
    described: str
    key: str
    value: str


def _quotas(c) -> list[QuotaRow]:
    listed = quota_ops.list_quotas_admin(c, [], False)
    return [QuotaRow(e, json.dumps(e), describe_entity(e), k, format_quota(k, v))
            for e, values in listed.entries for k, v in sorted(values.items())]


# ---- ACLs ------------------------------------------------------------------------------------------------------

def _acl_from_form() -> list:
    """The bindings the add form asks for; ValueError with kafka-acls.sh's words for bad input."""
    kind = resource_type(request.form.get("resource_type") or "")
    name = CLUSTER_NAME if kind == "Cluster" else (request.form.get("name") or "").strip()
    if not name:
        raise ValueError("Give the resource's name ('*': every one).")
    pattern = pattern_type(request.form.get("pattern_type") or "LITERAL")
    if pattern not in ("LITERAL", "PREFIXED"):
        raise ValueError("Only literal or prefixed patterns can be added.")
    principal = (request.form.get("principal") or "").strip()
    if not valid_principal(principal):
        raise ValueError(f"Expected a principal in format principalType:principalName (e.g. User:alice) but got "
                         f"'{principal}'.")
    op = operation(request.form.get("operation") or "")
    allow = (request.form.get("permission") or "Allow") == "Allow"
    host = (request.form.get("host") or "").strip() or "*"
    principals = ([principal], []) if allow else ([], [principal])
    hosts = ([host], []) if allow else ([], [host])
    wanted = acl_ops.bindings([ResourcePattern(kind, name, pattern)], *principals, *hosts, [op])
    problem = acl_ops.unsupported(wanted)
    if problem:
        raise ValueError(problem + ".")
    return wanted


@blueprint.post("/security/acls/add")
def add_acl():
    try:
        wanted = _acl_from_form()
        acl_ops.add_acls_admin(client(), wanted)
    except (ValueError, KafkaError) as e:
        return done(f"ACL not added: {e}", "security.index", "error")
    b = wanted[0]
    return done(f"Added: {b.entry.permission} {b.entry.principal} {b.entry.operation} from host {b.entry.host} on "
                f"{b.pattern.resource_type} {b.pattern.name} ({b.pattern.pattern_type.lower()}).", "security.index")


@blueprint.post("/security/acls/remove")
def remove_acl():
    f = request.form
    try:
        exact = AclBindingFilter(resource_type(f.get("resource_type") or ""), f.get("name") or "",
                                 pattern_type(f.get("pattern_type") or ""), f.get("principal") or "",
                                 f.get("host") or "", operation(f.get("operation") or ""),
                                 "Deny" if f.get("permission") == "Deny" else "Allow")
        removed = acl_ops.remove_acls_admin(client(), [exact]).acls
    except (ValueError, KafkaError) as e:
        return done(f"ACL not removed: {e}", "security.index", "error")
    if not removed:
        return done("No such ACL (already removed?).", "security.index", "warn")
    return done(f"Removed {len(removed)} ACL(s) of {exact.principal} on {exact.resource_type} {exact.name}.",
                "security.index")


# ---- SCRAM users -----------------------------------------------------------------------------------------------

@blueprint.post("/security/users/set")
def set_user():
    user = (request.form.get("user") or "").strip()
    password = request.form.get("password") or ""
    chosen = request.form.get("mechanism") or "both"
    mechanisms = list(user_ops.MECHANISMS) if chosen == "both" else [chosen]
    try:
        iterations = int(request.form.get("iterations") or DEFAULT_ITERATIONS)
    except ValueError:
        return done("Iterations must be a whole number (4096 to 16384).", "security.index", "error")
    if not user or not password:
        return done("Give a user name and a password.", "security.index", "error")
    if any(m not in user_ops.MECHANISMS for m in mechanisms):
        return done(f"Unknown mechanism '{chosen}' (SCRAM-SHA-256 or SCRAM-SHA-512).", "security.index", "error")
    try:
        change = user_ops.add_user_admin(client(), user, password, mechanisms, iterations)
    except KafkaError as e:
        return done(f"Credentials of {user} not set: {e}", "security.index", "error")
    return done(f"Set {', '.join(change.set)} credentials of {user} ({iterations} iterations).", "security.index")


@blueprint.post("/security/users/remove")
def remove_user():
    user = (request.form.get("user") or "").strip()
    if not user:
        return done("Give a user name.", "security.index", "error")
    try:
        change = user_ops.remove_user_admin(client(), user, None)
    except (KafkaError, AdminError) as e:
        return done(f"Credentials of {user} not removed: {e}", "security.index", "error")
    return done(f"Removed {', '.join(change.removed)} credentials of {user}: it can no longer log in with them.",
                "security.index")


# ---- client quotas ---------------------------------------------------------------------------------------------

def _entity_from_form():
    """The quota entity of the set form: its kind and names (an empty name: the default entity)."""
    kinds = ENTITY_KINDS.get(request.form.get("kind") or "")
    if kinds is None:
        raise AdminError(f"Unknown entity kind (one of {', '.join(ENTITY_KINDS)}).")
    return quota_entity((t, (request.form.get(t) or "").strip() or None) for t in kinds)


def _entity_from_row(text: str):
    try:
        parts = json.loads(text)
        return quota_entity((t, n) for t, n in parts if t in ENTITY_TYPES and (n is None or isinstance(n, str)))
    except (ValueError, TypeError):
        raise AdminError("The quota entity is not valid.") from None


@blueprint.post("/security/quotas/set")
def set_quota():
    key, value = (request.form.get("key") or "").strip(), (request.form.get("value") or "").strip()
    try:
        entity = _entity_from_form()
        if not key or not value:
            raise AdminError("Give a quota and its value.")
        quota_ops.alter_quotas_admin(client(), entity, {key: value}, [])
    except (KafkaError, AdminError) as e:
        return done(f"Quota not set: {e}", "security.index", "error")
    return done(f"Set {key}={value} for {describe_entity(entity)}.", "security.index")


@blueprint.post("/security/quotas/remove")
def remove_quota():
    key = (request.form.get("key") or "").strip()
    try:
        entity = _entity_from_row(request.form.get("entity") or "")
        quota_ops.alter_quotas_admin(client(), entity, {}, [key])
    except (KafkaError, AdminError) as e:
        return done(f"Quota not removed: {e}", "security.index", "error")
    return done(f"Removed {key} of {describe_entity(entity)}.", "security.index")
