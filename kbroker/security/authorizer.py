"""The ACL authorizer: Kafka 2.8's kafka.security.authorizer.AclAuthorizer over the same ZooKeeper store.

`authorizer.class.name=kafka.security.authorizer.AclAuthorizer` (or the older SimpleAclAuthorizer name) turns it
on; the config table refuses any other class name at startup (kbroker.config). ACLs live in
/kafka-acl/<Type>/<name> (literal) and /kafka-acl-extended/prefixed/<Type>/<name> (prefixed), read into a cache
at startup; whoever changes a resource's
ACLs (this broker's CreateAcls/DeleteAcls, another broker, `kadmin acls --zookeeper`, kafka-acls.sh) writes a
sequential node under /kafka-acl-changes or /kafka-acl-extended-changes naming it, and every broker re-reads
that resource (ZkNodeChangeNotificationListener; notifications older than 15 minutes are purged).

The decision (authorize, a pure function over the cache) is AclAuthorizer.authorizeAction: super.users pass;
the candidate ACLs are the literal name's, the literal `*`'s and those of every prefix of the name; none at all
-> allow.everyone.if.no.acl.found; otherwise a matching DENY (principal or User:*, host or *, operation or All)
refuses, else a matching ALLOW for the operation or one implying it allows (Read/Write/Delete/Alter imply
Describe, AlterConfigs implies DescribeConfigs). authorize_by_resource_type is authorizeByResourceType (KIP-679:
may this principal do `operation` on SOME resource of the type?).

CreateAcls and DeleteAcls write through it, one of the doors from requests to ZooKeeper: a write ZooKeeper refuses
or cannot take (a resource name such as ".." makes no znode path) is raised as KafkaError UNKNOWN_SERVER_ERROR with
the reason (AclAuthorizer answers a failed write with Errors.forException).
"""
from __future__ import annotations

import functools
import ipaddress
import logging
import time

import gevent
import gevent.queue

from zk import znodes as z
from zk.client import ZkError, ZkState
from ..protocol.acls import (IMPLIED_BY, LITERAL, PREFIXED, WILDCARD, WILDCARD_PRINCIPAL, AclBinding, AclEntry,
                             ResourcePattern)
from ..protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.authorizer")
audit = logging.getLogger("kafka.authorizer.logger")

CHANGE_EXPIRATION_MS = 15 * 60 * 1000


@functools.lru_cache(maxsize=4096)
def kafka_host(address: str) -> str:
    """A client address as Kafka compares it with ACL hosts (Java's InetAddress.getHostAddress): IPv4 as is, also
    when mapped into IPv6; IPv6 as eight hex groups without zero compression ("0:0:0:0:0:0:0:1")."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if ip.version == 4:
        return str(ip)
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return ":".join(f"{int(group, 16):x}" for group in ip.exploded.split(":"))


def parse_super_users(value: str | None) -> frozenset[str]:
    """super.users "User:a;User:b" (spaces around entries ignored)."""
    return frozenset(s.strip() for s in (value or "").split(";") if s.strip())


def _matching(acls, permission: str, principal: str, host: str, operations) -> bool:
    return any(a.permission == permission and a.principal in (principal, WILDCARD_PRINCIPAL)
               and a.host in (host, WILDCARD) and (a.operation in operations or a.operation == "All")
               for a in acls)


def candidate_acls(cache, resource_type: str, name: str, prefix_lengths=None) -> list:
    """The ACLs that apply to a literal resource: its own, the literal `*`'s and every prefix's (prefix_lengths:
    the lengths of the prefixes stored for the type, when known, so a long name costs no more lookups)."""
    out = []
    for key in (ResourcePattern(resource_type, name, LITERAL), ResourcePattern(resource_type, WILDCARD, LITERAL)):
        out += cache.get(key, ())
    for i in (range(1, len(name) + 1) if prefix_lengths is None else prefix_lengths):
        if i <= len(name):
            out += cache.get(ResourcePattern(resource_type, name[:i], PREFIXED), ())
    return out


def authorize(cache, principal: str, host: str, operation: str, resource_type: str, name: str, *,
              super_users=frozenset(), allow_if_no_acls: bool = False, prefix_lengths=None) -> bool:
    """AclAuthorizer.authorizeAction over cache {ResourcePattern: set of AclEntry}."""
    if principal in super_users:
        return True
    acls = candidate_acls(cache, resource_type, name, prefix_lengths)
    if not acls:
        return allow_if_no_acls
    if _matching(acls, "Deny", principal, host, (operation,)):
        return False
    return _matching(acls, "Allow", principal, host, IMPLIED_BY.get(operation, (operation,)))


def authorize_by_resource_type(cache, principal: str, host: str, operation: str, resource_type: str, *,
                               super_users=frozenset(), allow_if_no_acls: bool = False) -> bool:
    """AclAuthorizer.authorizeByResourceType: allowed if some literal or prefixed ALLOW for the operation (or All)
    is not cancelled by a DENY (a literal deny of the same name, or a deny prefix of it); a literal DENY on `*`
    refuses everything."""
    if principal in super_users:
        return True
    names = {(LITERAL, "Deny"): set(), (PREFIXED, "Deny"): set(), (LITERAL, "Allow"): set(),
             (PREFIXED, "Allow"): set()}
    for pattern, acls in cache.items():
        if pattern.resource_type != resource_type:
            continue
        for permission in ("Deny", "Allow"):
            if _matching(acls, permission, principal, host, (operation,)):
                names[(pattern.pattern_type, permission)].add(pattern.name)
    deny_literals, deny_prefixes = names[(LITERAL, "Deny")], names[(PREFIXED, "Deny")]
    if WILDCARD in deny_literals:
        return False
    if allow_if_no_acls:
        return True

    def dominated(name: str) -> bool:
        return any(name[:i] in deny_prefixes for i in range(1, len(name) + 1))
    return (any(not dominated(p) for p in names[(PREFIXED, "Allow")])
            or any(n == WILDCARD or (n not in deny_literals and not dominated(n)) for n in names[(LITERAL, "Allow")]))


class AclAuthorizer:
    """The ACL cache of one broker, kept current from ZooKeeper, and the decisions over it."""

    def __init__(self, zk, super_users: frozenset[str], allow_if_no_acls: bool):
        self.zk = zk
        self.super_users = super_users
        self.allow_if_no_acls = allow_if_no_acls
        self.cache: dict[ResourcePattern, frozenset[AclEntry]] = {}
        self._prefix_lengths: dict[str, tuple[int, ...]] = {}   # resource type -> lengths of its stored prefixes
        self._last_executed = {store: -1 for store in z.ACL_CHANGE_ZNODES}
        self._changes: gevent.queue.Queue = gevent.queue.Queue()
        # One watch function per store, so ZooKeeper's client keeps one watch however often it is set again; a
        # watch only hands the work to the worker greenlet (callbacks stay short).
        self._watches = {store: (lambda _event, store=store: self._changes.put(store))
                         for store in z.ACL_CHANGE_ZNODES}
        self._worker = None

    @classmethod
    def from_config(cls, cfg, zk) -> "AclAuthorizer | None":
        """The authorizer authorizer.class.name asks for, or None when it is empty (the config table refuses
        any class name but Kafka's ACL authorizer's)."""
        if not cfg["authorizer.class.name"]:
            return None
        return cls(zk, parse_super_users(cfg["super.users"]), cfg["allow.everyone.if.no.acl.found"])

    # ---- startup: paths, watches, cache --------------------------------------------------------------------
    def startup(self) -> None:
        """Create the ACL paths, note the notifications that exist (the load below covers them) while setting
        the watches, then load every resource's ACLs; later notifications re-read their resource."""
        self.zk.create_acl_paths()
        for store in z.ACL_CHANGE_ZNODES:
            names = self.zk.get_acl_change_notifications(store, watch=self._watches[store])
            if names:
                self._last_executed[store] = max(_sequence(n) for n in names)
        for rtype, name, pattern_type in self.zk.get_acl_resources():
            self._reload(ResourcePattern(rtype, name, pattern_type))
        self._worker = gevent.spawn(self._process_changes)
        self.zk.add_state_listener(self._on_state)
        log.info("ACL authorizer started: %d resources with ACLs, super users %s, allow.everyone.if.no.acl.found=%s",
                 len(self.cache), sorted(self.super_users), self.allow_if_no_acls)

    def shutdown(self) -> None:
        if self._worker is not None:
            self._worker.kill(block=False)

    def _on_state(self, state) -> None:
        # A new session lost the watches (and may have missed notifications): look again.
        if state == ZkState.CONNECTED:
            for store in z.ACL_CHANGE_ZNODES:
                self._changes.put(store)

    def _process_changes(self) -> None:
        while True:
            store = self._changes.get()
            try:
                self._process_store(store)
            except Exception:
                log.exception("processing ACL change notifications under %s failed", store.path)

    def _process_store(self, store) -> None:
        names = self.zk.get_acl_change_notifications(store, watch=self._watches[store])
        now_ms = int(time.time() * 1000)
        for node in names:
            seq = _sequence(node)
            resource, ctime = self.zk.read_acl_change_notification(store, node)
            if seq > self._last_executed[store]:
                if resource is not None:
                    self._reload(ResourcePattern(*resource))
                else:
                    log.warning("ignoring unreadable ACL change notification %s/%s", store.path, node)
                self._last_executed[store] = seq
            if ctime is not None and now_ms - ctime > CHANGE_EXPIRATION_MS:
                self.zk.delete_acl_change_notification(store, node)

    def _reload(self, pattern: ResourcePattern) -> None:
        acls, _ = self.zk.get_acls(*pattern)
        self._set(pattern, acls)

    def _set(self, pattern: ResourcePattern, acls) -> None:
        if acls:
            self.cache[pattern] = frozenset(AclEntry(*a) for a in acls)
        else:
            self.cache.pop(pattern, None)
        if pattern.pattern_type == PREFIXED:
            self._prefix_lengths[pattern.resource_type] = tuple(sorted(
                {len(p.name) for p in self.cache if p.pattern_type == PREFIXED
                 and p.resource_type == pattern.resource_type}))
        log.info("ACLs of %s:%s:%s now %s", pattern.resource_type, pattern.pattern_type, pattern.name,
                 sorted(self.cache.get(pattern, ())))

    # ---- decisions -------------------------------------------------------------------------------------------
    def authorize(self, principal: str, address: str, operation: str, resource_type: str, name: str,
                  log_if_denied: bool = True) -> bool:
        """The decision for a principal connected from `address` (its IP; compared as Kafka, kafka_host)."""
        host = kafka_host(address)
        allowed = authorize(self.cache, principal, host, operation, resource_type, name,
                            super_users=self.super_users, allow_if_no_acls=self.allow_if_no_acls,
                            prefix_lengths=self._prefix_lengths.get(resource_type, ()))
        if not allowed and log_if_denied:
            audit.info("Principal = %s is Denied Operation = %s from host = %s on resource = %s:LITERAL:%s",
                       principal, operation, host, resource_type, name)
        return allowed

    def authorize_by_resource_type(self, principal: str, address: str, operation: str, resource_type: str) -> bool:
        return authorize_by_resource_type(self.cache, principal, kafka_host(address), operation, resource_type,
                                          super_users=self.super_users, allow_if_no_acls=self.allow_if_no_acls)

    # ---- ACL administration (CreateAcls, DeleteAcls, DescribeAcls) ------------------------------------------
    def acls(self, binding_filter) -> list[AclBinding]:
        """The cached bindings a filter matches (AclAuthorizer.acls)."""
        return [AclBinding(p, e) for p, entries in sorted(self.cache.items()) for e in sorted(entries)
                if binding_filter.matches(AclBinding(p, e))]

    def create_acls(self, bindings: list[AclBinding]) -> None:
        """Add the bindings, one conditional write per resource (KafkaError UNKNOWN_SERVER_ERROR at the first one
        ZooKeeper refuses)."""
        by_pattern: dict[ResourcePattern, set] = {}
        for b in bindings:
            by_pattern.setdefault(b.pattern, set()).add(tuple(b.entry))
        for pattern, entries in by_pattern.items():
            self._update(pattern, lambda current, e=entries: current | e)

    def delete_acls(self, filters) -> list[list[AclBinding]]:
        """For each filter, the bindings it deleted: resources are those in the cache plus the ones a filter
        names exactly (AclAuthorizer.deleteAcls), each rewritten once without the entries any filter matches
        (KafkaError UNKNOWN_SERVER_ERROR at the first write ZooKeeper refuses)."""
        patterns = set(self.cache) | {p for f in filters for p in f.exact_patterns()}
        deleted: list[list[AclBinding]] = [[] for _ in filters]
        for pattern in sorted(patterns):
            matching = [(i, f) for i, f in enumerate(filters) if f.matches_pattern(pattern)]
            if not matching:
                continue
            removed: dict[AclEntry, int] = {}

            def drop(current, pattern=pattern, matching=matching, removed=removed):
                removed.clear()
                for a in current:
                    entry = AclEntry(*a)
                    index = next((i for i, f in matching if f.matches_entry(entry)), None)
                    if index is not None:
                        removed[entry] = index
                return {a for a in current if AclEntry(*a) not in removed}
            self._update(pattern, drop)
            for entry, index in sorted(removed.items()):
                deleted[index].append(AclBinding(pattern, entry))
        return deleted

    def _update(self, pattern: ResourcePattern, change) -> None:
        """Rewrite one resource's ACLs in ZooKeeper (change: current entries -> new ones) and cache the result."""
        try:
            _, new = self.zk.update_acls(*pattern, change)
        except (ZkError, ValueError) as e:   # ValueError: a path ZooKeeper's client refuses ("..")
            raise KafkaError(Errors.UNKNOWN_SERVER_ERROR, str(e)) from e
        self._set(pattern, new)


def _sequence(name: str) -> int:
    return int(name.rsplit("_", 1)[-1])
