"""The ACL decision (Kafka's AclAuthorizer.authorizeAction and authorizeByResourceType), binding filters, and the
ACL znodes' bytes as Kafka 2.8 writes them (ZkData: ResourceZNode, LiteralAclChangeStore, ExtendedAclChangeStore)."""
from __future__ import annotations

import pytest

from kbroker.protocol.acls import AclBinding, AclBindingFilter, AclEntry, ResourcePattern, filter_from_wire
from kbroker.security.authorizer import authorize, authorize_by_resource_type, parse_super_users
from zk import znodes as z

ALICE, BOB = "User:alice", "User:bob"
HOST, OTHER_HOST = "10.0.0.1", "10.0.0.2"


def lit(rtype, name, *entries):
    return {ResourcePattern(rtype, name, "LITERAL"): frozenset(AclEntry(*e) for e in entries)}


def pre(rtype, name, *entries):
    return {ResourcePattern(rtype, name, "PREFIXED"): frozenset(AclEntry(*e) for e in entries)}


def allowed(cache, op, rtype="Topic", name="orders", principal=ALICE, host=HOST, **kw) -> bool:
    return authorize(cache, principal, host, op, rtype, name, **kw)


def test_no_acls_denies_unless_allow_everyone_and_super_users_always_pass():
    assert not allowed({}, "Read")
    assert allowed({}, "Read", allow_if_no_acls=True)
    # ACLs on the resource (for someone else) mean allow.everyone.if.no.acl.found no longer applies.
    assert not allowed(lit("Topic", "orders", (BOB, "Allow", "Read", "*")), "Read", allow_if_no_acls=True)
    deny_all = lit("Topic", "orders", ("User:*", "Deny", "All", "*"))
    assert allowed(deny_all, "Write", super_users=parse_super_users("User:bob; User:alice"))
    assert parse_super_users(" User:a;User:b ;") == {"User:a", "User:b"}


@pytest.mark.parametrize("cache", [
    lit("Topic", "orders", (ALICE, "Allow", "Read", "*")),                 # literal name
    lit("Topic", "*", (ALICE, "Allow", "Read", "*")),                      # literal `*`
    pre("Topic", "ord", (ALICE, "Allow", "Read", "*")),                    # prefix
    pre("Topic", "orders", (ALICE, "Allow", "Read", "*")),                 # a prefix as long as the name
    lit("Topic", "orders", ("User:*", "Allow", "Read", "*")),              # wildcard principal
    lit("Topic", "orders", (ALICE, "Allow", "Read", HOST)),                # the client's host
    lit("Topic", "orders", (ALICE, "Allow", "All", "*")),                  # All
], ids=["literal", "wildcard-name", "prefixed", "prefix-equal-name", "wildcard-principal", "host", "all"])
def test_allow_matches(cache):
    assert allowed(cache, "Read")


@pytest.mark.parametrize("cache", [
    lit("Topic", "order", (ALICE, "Allow", "Read", "*")),                  # another literal name
    pre("Topic", "orders-eu", (ALICE, "Allow", "Read", "*")),              # a longer prefix
    lit("Topic", "orders", (BOB, "Allow", "Read", "*")),                   # another principal
    lit("Topic", "orders", (ALICE, "Allow", "Read", OTHER_HOST)),          # another host
    lit("Topic", "orders", (ALICE, "Allow", "Write", "*")),                # another operation
    lit("Group", "orders", (ALICE, "Allow", "Read", "*")),                 # another resource type
], ids=["other-literal", "longer-prefix", "other-principal", "other-host", "other-op", "other-type"])
def test_allow_does_not_match(cache):
    assert not allowed(cache, "Read")


def merged(*caches):
    out: dict = {}
    for cache in caches:
        for pattern, entries in cache.items():
            out[pattern] = out.get(pattern, frozenset()) | entries
    return out


def test_deny_beats_allow_wherever_it_comes_from():
    allow = lit("Topic", "orders", (ALICE, "Allow", "All", "*"))
    for deny in (lit("Topic", "*", ("User:*", "Deny", "Write", "*")), pre("Topic", "o", (ALICE, "Deny", "Write", HOST)),
                 lit("Topic", "orders", (ALICE, "Deny", "All", "*"))):
        assert not allowed(merged(allow, deny), "Write")
    # A deny of one operation leaves the others; a deny from another host does not apply.
    cache = merged(allow, lit("Topic", "orders", (ALICE, "Deny", "Write", OTHER_HOST), (ALICE, "Deny", "Read", "*")))
    assert allowed(cache, "Write") and not allowed(cache, "Read") and allowed(cache, "Describe")


@pytest.mark.parametrize("granted,asked,expected", [
    ("Read", "Describe", True), ("Write", "Describe", True), ("Delete", "Describe", True),
    ("Alter", "Describe", True), ("AlterConfigs", "DescribeConfigs", True), ("All", "AlterConfigs", True),
    ("Describe", "Read", False), ("Create", "Describe", False), ("DescribeConfigs", "AlterConfigs", False),
    ("Read", "DescribeConfigs", False), ("AlterConfigs", "Describe", False),
])
def test_implied_operations(granted, asked, expected):
    assert allowed(lit("Topic", "orders", (ALICE, "Allow", granted, "*")), asked) is expected


def test_deny_of_an_implying_operation_does_not_deny_describe():
    # Kafka: DENY Read does not deny Describe (only DENY Describe or All does).
    cache = lit("Topic", "orders", (ALICE, "Allow", "Describe", "*"), (ALICE, "Deny", "Read", "*"))
    assert allowed(cache, "Describe") and not allowed(cache, "Read")


def test_authorize_by_resource_type_kip_679():
    def any_write(cache, principal=ALICE, **kw):
        return authorize_by_resource_type(cache, principal, HOST, "Write", "Topic", **kw)
    assert not any_write({})
    assert any_write({}, allow_if_no_acls=True)
    assert any_write(lit("Topic", "t1", (ALICE, "Allow", "Write", "*")))
    assert any_write(pre("Topic", "t", (ALICE, "Allow", "All", "*")))
    assert not any_write(lit("Topic", "t1", (ALICE, "Allow", "Read", "*")))
    assert not any_write(lit("Topic", "t1", (BOB, "Allow", "Write", "*")))
    # A literal deny of the same name, or a deny prefix of it, cancels an allow; a deny on `*` cancels all.
    assert not any_write(lit("Topic", "t1", (ALICE, "Allow", "Write", "*"), (ALICE, "Deny", "Write", "*")))
    assert not any_write({**lit("Topic", "t1", (ALICE, "Allow", "Write", "*")),
                          **pre("Topic", "t", (ALICE, "Deny", "Write", "*"))})
    assert any_write({**lit("Topic", "t1", (ALICE, "Allow", "Write", "*")),
                      **pre("Topic", "t2", (ALICE, "Deny", "Write", "*"))})
    assert not any_write({**lit("Topic", "t1", (ALICE, "Allow", "Write", "*")),
                          **lit("Topic", "*", ("User:*", "Deny", "Write", "*"))}, allow_if_no_acls=True)
    assert any_write({}, principal="User:admin", super_users={"User:admin"})


def test_binding_filters_as_kafka():
    lit_orders = AclBinding(ResourcePattern("Topic", "orders", "LITERAL"), AclEntry(ALICE, "Allow", "Read", "*"))
    lit_star = AclBinding(ResourcePattern("Topic", "*", "LITERAL"), AclEntry(BOB, "Deny", "Write", HOST))
    pre_ord = AclBinding(ResourcePattern("Topic", "ord", "PREFIXED"), AclEntry(ALICE, "Allow", "All", "*"))
    group = AclBinding(ResourcePattern("Group", "orders", "LITERAL"), AclEntry(ALICE, "Allow", "Read", "*"))
    every = [lit_orders, lit_star, pre_ord, group]

    def matching(f):
        return [b for b in every if f.matches(b)]
    assert matching(AclBindingFilter()) == every
    assert matching(AclBindingFilter("Topic", "orders", "MATCH")) == [lit_orders, lit_star, pre_ord]
    assert matching(AclBindingFilter("Topic", "orders", "ANY")) == [lit_orders]
    assert matching(AclBindingFilter("Topic", "ord", "PREFIXED")) == [pre_ord]
    assert matching(AclBindingFilter("Topic", None, "LITERAL")) == [lit_orders, lit_star]
    assert matching(AclBindingFilter(principal=BOB, host=HOST, operation="Write", permission="Deny")) == [lit_star]
    assert AclBindingFilter("Topic", "x", "ANY").exact_patterns() == [ResourcePattern("Topic", "x", "LITERAL"),
                                                                      ResourcePattern("Topic", "x", "PREFIXED")]
    assert AclBindingFilter("Topic", "x", "MATCH").exact_patterns() == []
    # Wire codes: ANY (1) fields match all; UNKNOWN (0) is refused.
    assert filter_from_wire(1, None, 1, None, None, 1, 1) == AclBindingFilter()
    assert filter_from_wire(2, "t", 4, ALICE, "*", 12, 3) == AclBindingFilter("Topic", "t", "PREFIXED", ALICE, "*",
                                                                             "IdempotentWrite", "Allow")
    with pytest.raises(ValueError):
        filter_from_wire(0, None, 1, None, None, 1, 1)


def test_acl_znodes_hold_kafkas_bytes():
    assert z.AclZNode.path("LITERAL", "Topic", "orders") == "/kafka-acl/Topic/orders"
    assert z.AclZNode.path("PREFIXED", "TransactionalId", "tx-") == "/kafka-acl-extended/prefixed/TransactionalId/tx-"
    data = z.AclZNode.encode({("User:alice", "Allow", "IdempotentWrite", "*")})
    assert data == (b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",'
                    b'"operation":"IdempotentWrite","host":"*"}]}')
    # What Kafka writes decodes (key order and spacing free), and any case of the names is read as Kafka does.
    assert z.AclZNode.decode(b'{"version": 1, "acls": [{"host": "1.2.3.4", "permissionType": "Deny", '
                             b'"operation": "Read", "principal": "User:bob"}]}') == {("User:bob", "Deny", "Read",
                                                                                       "1.2.3.4")}
    assert z.LiteralAclChangeZNode.encode("TransactionalId", "tx") == b"TRANSACTIONAL_ID:tx"
    assert z.LiteralAclChangeZNode.decode(b"Topic:a:b") == ("Topic", "a:b", "LITERAL")
    assert z.LiteralAclChangeZNode.decode(b"TOPIC:orders") == ("Topic", "orders", "LITERAL")
    assert z.ExtendedAclChangeZNode.encode("Topic", "orders", "PREFIXED") == \
        b'{"version":1,"resourceType":"TOPIC","name":"orders","patternType":"PREFIXED"}'
    assert z.ExtendedAclChangeZNode.decode(
        b'{"version":1,"resourceType":"GROUP","name":"g","patternType":"PREFIXED"}') == ("Group", "g", "PREFIXED")
    assert z.ExtendedAclChangeZNode.decode(b'{"version":1,"resourceType":"NOPE","name":"g","patternType":"X"}') is None


def test_only_kafkas_acl_authorizer_class_is_accepted():
    from kbroker.config import BrokerConfig, ConfigError
    base = {"zookeeper.connect": "127.0.0.1:2181"}
    for name in ("kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer", ""):
        assert BrokerConfig({**base, "authorizer.class.name": name})["authorizer.class.name"] == name
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        BrokerConfig({**base, "authorizer.class.name": "com.example.MyAuthorizer"})


def test_prefix_lengths_index_finds_the_same_prefixes():
    cache = merged(pre("Topic", "or", (ALICE, "Allow", "Read", "*")),
                   pre("Topic", "orders-e", (BOB, "Allow", "Read", "*")))
    for name, principal, expected in (("orders-eu", ALICE, True), ("orders-eu", BOB, True), ("o", ALICE, False),
                                      ("orders", BOB, False)):
        assert allowed(cache, "Read", name=name, principal=principal, prefix_lengths=(2, 8)) is expected
        assert allowed(cache, "Read", name=name, principal=principal) is expected


def test_client_addresses_compare_as_kafka_prints_them():
    from kbroker.security.authorizer import kafka_host
    assert kafka_host("127.0.0.1") == "127.0.0.1"
    assert kafka_host("::ffff:10.1.2.3") == "10.1.2.3"
    assert kafka_host("::1") == "0:0:0:0:0:0:0:1"
