"""Client quotas in ZooKeeper and through the client-quota APIs, against real brokers: DescribeClientQuotas and
AlterClientQuotas (KIP-546) by raw requests, with every validation error and Kafka's codes; the znodes and
/config/changes notifications exactly as Kafka 2.8 writes them (bytes, zkCli); a user's SCRAM credentials kept
beside its quotas; Kafka's filter semantics (match types, strict); a malformed znode and 10 000 entities;
kadmin quotas through ZooKeeper and through the brokers, each reading what the other wrote. (Enforcement is not
tested here.)

One 2-broker cluster serves the module, every test using its own names; the filter matrix and the 10 000
entities get a cluster of their own, as they look at every entity."""
from __future__ import annotations

import json
import math
import uuid

import pytest
from click.testing import CliRunner
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest
from kafka.protocol.metadata import ApiVersionsRequest

from admin_cli.main import cli
from kbroker.cluster import free_port
from kbroker.common.sanitizer import sanitize
from kbroker.protocol.sasl import scram
from tests.integration.conftest import Cluster
from tests.integration.test_kadmin_modes import kadmin, ok
from tests.integration.test_scram_credentials import send, unique
from zk.admin import AdminZkClient
from zk.launcher import zkcli_get

USER, CLIENT, IP = "user", "client-id", "ip"
EXACT, DEFAULT, ANY = 0, 1, 2
NONE, UNKNOWN_SERVER_ERROR, UNSUPPORTED_VERSION, INVALID_REQUEST = 0, -1, 35, 42
Component = DescribeClientQuotasRequest.ComponentData
Entry = AlterClientQuotasRequest.EntryData


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    c = Cluster(f"{zookeeper.connect}/t-{uuid.uuid4().hex[:10]}", str(tmp_path_factory.mktemp("quotas")))
    c.start_brokers(2)
    yield c
    c.stop()


def describe(c: Cluster, components, strict: bool = False, broker_id: int = 1, version: int = 1):
    """(error code, message, {entity: values}) with entities as ((type, name), ...) in the broker's order."""
    r = send(c, broker_id, DescribeClientQuotasRequest(version=version, strict=strict, components=[
        Component(entity_type=t, match_type=m, match=n) for t, m, n in components]))
    assert r.throttle_time_ms == 0
    entries = None if r.entries is None else {
        tuple((e.entity_type, e.entity_name) for e in x.entity): {v.key: v.value for v in x.values}
        for x in r.entries}
    return r.error_code, r.error_message, entries


def alter(c: Cluster, *entries, validate_only: bool = False, broker_id: int = 1, version: int = 1):
    """entries: (parts, {key: value or None (remove)}); returns [(parts, error code, message)]."""
    r = send(c, broker_id, AlterClientQuotasRequest(version=version, validate_only=validate_only, entries=[
        Entry(entity=[Entry.EntityData(entity_type=t, entity_name=n) for t, n in parts],
              ops=[Entry.OpData(key=k, value=0.0 if v is None else v, remove=v is None) for k, v in ops.items()])
        for parts, ops in entries]))
    assert r.throttle_time_ms == 0
    return [(tuple((e.entity_type, e.entity_name) for e in x.entity), x.error_code, x.error_message)
            for x in r.entries]


def znode(c: Cluster, path: str) -> bytes | None:
    data, stat = c.zk.get(path)
    assert stat is not None, f"{path} does not exist"
    return data


def notifications(c: Cluster) -> list[str]:
    names = sorted(c.zk.children("/config/changes"))
    return [json.loads(c.zk.get(f"/config/changes/{n}")[0])["entity_path"] for n in names]


# ---- the APIs ----------------------------------------------------------------------------------------------------

def test_alter_writes_every_entity_kind_as_kafka_writes_it(cluster):
    """Each entity's znode holds Kafka's JSON (values as strings: DOUBLE keys by Double.toString, LONG and INT as
    integers; several keys in Kafka's order), names sanitized, parents made with null data, and each write is
    followed by its notification; any broker writes (no controller needed); v0 and v1 alike."""
    c = cluster
    user, client, ip = unique("CN=alice,O=acme"), unique("app 1*"), "10.11.12.13"
    su, sc = sanitize(user), sanitize(client)
    assert su.startswith("CN%3Dalice%2CO%3Dacme-") and sc.startswith("app%201%2A-")
    before = len(notifications(c))
    results = alter(c,
                    (((USER, user),), {"producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0,
                                       "request_percentage": 200.0, "controller_mutation_rate": 10.5}),
                    (((USER, user), (CLIENT, client)), {"request_percentage": 200.0}),
                    (((USER, user), (CLIENT, None)), {"consumer_byte_rate": 1024.0}),
                    (((CLIENT, client),), {"consumer_byte_rate": 524288.0}),
                    (((IP, ip),), {"connection_creation_rate": 10.0}), broker_id=2)
    assert [code for _, code, _ in results] == [NONE] * 5
    assert alter(c, (((CLIENT, client), (USER, None)), {"controller_mutation_rate": 1e7}), version=0)[0][1] == NONE
    defaults = alter(c, (((USER, None),), {"producer_byte_rate": 1024.0}),
                     (((USER, None), (CLIENT, None)), {"request_percentage": 0.5}),
                     (((CLIENT, None),), {"consumer_byte_rate": 2048.0}),
                     (((IP, None),), {"connection_creation_rate": 100.0}))
    assert [code for _, code, _ in defaults] == [NONE] * 4

    expected = {
        f"/config/users/{su}": b'{"version":1,"config":{"request_percentage":"200.0","producer_byte_rate":"1048576",'
                               b'"consumer_byte_rate":"2097152","controller_mutation_rate":"10.5"}}',
        f"/config/users/{su}/clients/{sc}": b'{"version":1,"config":{"request_percentage":"200.0"}}',
        f"/config/users/{su}/clients/<default>": b'{"version":1,"config":{"consumer_byte_rate":"1024"}}',
        f"/config/clients/{sc}": b'{"version":1,"config":{"consumer_byte_rate":"524288"}}',
        f"/config/ips/{ip}": b'{"version":1,"config":{"connection_creation_rate":"10"}}',
        f"/config/users/<default>/clients/{sc}": b'{"version":1,"config":{"controller_mutation_rate":"1.0E7"}}',
        "/config/users/<default>": b'{"version":1,"config":{"producer_byte_rate":"1024"}}',
        "/config/users/<default>/clients/<default>": b'{"version":1,"config":{"request_percentage":"0.5"}}',
        "/config/clients/<default>": b'{"version":1,"config":{"consumer_byte_rate":"2048"}}',
        "/config/ips/<default>": b'{"version":1,"config":{"connection_creation_rate":"100"}}',
    }
    for path, data in expected.items():
        assert znode(c, path) == data, path
    assert znode(c, f"/config/users/{su}/clients") is None          # a parent made on the way: null data
    assert zkcli_get(c.zk_connect, f"/config/users/{su}/clients/{sc}") == \
        '{"version":1,"config":{"request_percentage":"200.0"}}'
    assert notifications(c)[before:] == [f"users/{su}", f"users/{su}/clients/{sc}", f"users/{su}/clients/<default>",
                                         f"clients/{sc}", f"ips/{ip}", f"users/<default>/clients/{sc}",
                                         "users/<default>", "users/<default>/clients/<default>", "clients/<default>",
                                         "ips/<default>"]
    _, config_stat = c.zk.get(f"/config/ips/{ip}")
    _, note_stat = c.zk.get(f"/config/changes/{sorted(c.zk.children('/config/changes'))[before + 4]}")
    assert config_stat.mzxid < note_stat.czxid                       # the entity first, then the notification

    # Read back through the other broker, names as given, values as doubles.
    assert describe(c, [(USER, EXACT, user)], strict=True, broker_id=2)[2] == {((USER, user),): {
        "producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0, "request_percentage": 200.0,
        "controller_mutation_rate": 10.5}}
    assert describe(c, [(USER, EXACT, user), (CLIENT, ANY, None)], strict=True, version=0)[2] == {
        ((USER, user), (CLIENT, client)): {"request_percentage": 200.0},
        ((USER, user), (CLIENT, None)): {"consumer_byte_rate": 1024.0}}
    assert describe(c, [(IP, EXACT, ip)])[2] == {((IP, ip),): {"connection_creation_rate": 10.0}}

    # Removing keys: the others stay; the last one gone leaves the znode with an empty config.
    assert alter(c, (((USER, user),), {"request_percentage": None, "controller_mutation_rate": None,
                                       "consumer_byte_rate": None}))[0][1] == NONE
    assert znode(c, f"/config/users/{su}") == b'{"version":1,"config":{"producer_byte_rate":"1048576"}}'
    assert alter(c, (((CLIENT, client),), {"consumer_byte_rate": None, "producer_byte_rate": None}))[0][1] == NONE
    assert znode(c, f"/config/clients/{sc}") == b'{"version":1,"config":{}}'
    assert describe(c, [(CLIENT, EXACT, client)], strict=True)[2] == {}
    assert notifications(c)[-1] == f"clients/{sc}"
    # The defaults apply to every client of the module's cluster, the other tests' requests too (the (user, client)
    # default's 0.5 % of request time throttled one of them once): removed again.
    removed = alter(c, (((USER, None),), {"producer_byte_rate": None}),
                    (((USER, None), (CLIENT, None)), {"request_percentage": None}),
                    (((CLIENT, None),), {"consumer_byte_rate": None}),
                    (((IP, None),), {"connection_creation_rate": None}))
    assert [code for _, code, _ in removed] == [NONE] * 4


def test_aiokafkas_own_codec_reads_what_the_broker_answers(cluster):
    """A second client library's encoding of DescribeClientQuotas v0 (aiokafka's schema, not kafka-python's)
    through its own client, which negotiates the version from ApiVersions."""
    import asyncio

    from aiokafka.client import AIOKafkaClient
    from aiokafka.protocol.admin import DescribeClientQuotasRequest as AioDescribeClientQuotas

    c = cluster
    client_id = unique("aio")
    assert alter(c, (((CLIENT, client_id),), {"producer_byte_rate": 65536.0, "request_percentage": 12.5}))[0][1] == 0

    async def run():
        client = AIOKafkaClient(bootstrap_servers=c.bootstrap)
        await client.bootstrap()
        try:
            node = next(iter(client.cluster.brokers())).nodeId
            return await client.send(node, AioDescribeClientQuotas([(CLIENT, EXACT, client_id)], True))
        finally:
            await client.close()
    r = asyncio.run(run())
    assert (r.error_code, r.error_message) == (0, None)
    assert [(list(map(tuple, entity)), sorted(map(tuple, values))) for entity, values in r.entries] == [
        ([(CLIENT, client_id)], [("producer_byte_rate", 65536.0), ("request_percentage", 12.5)])]


def test_a_users_scram_credentials_and_quotas_share_its_znode(cluster):
    """Quotas written beside SCRAM credentials keep them, and the other way round; a user with credentials only
    has no quotas to describe; removing the quotas leaves the credentials."""
    c = cluster
    user = unique("scram") + "@example.com"
    admin = AdminZkClient(c.zk)
    credential = scram.make_credential("SCRAM-SHA-256", "secret").to_config()
    admin.alter_user_credentials(user, {"SCRAM-SHA-256": credential}, [])
    assert describe(c, [(USER, EXACT, user)], strict=True)[2] == {}
    assert alter(c, (((USER, user),), {"producer_byte_rate": 4096.0}))[0][1] == NONE
    assert admin.user_config(user) == {"SCRAM-SHA-256": credential, "producer_byte_rate": "4096"}
    admin.alter_user_credentials(user, {"SCRAM-SHA-512": scram.make_credential("SCRAM-SHA-512", "x").to_config()}, [])
    assert describe(c, [(USER, EXACT, user)], strict=True)[2] == {((USER, user),): {"producer_byte_rate": 4096.0}}
    assert alter(c, (((USER, user),), {"producer_byte_rate": None}))[0][1] == NONE
    assert sorted(admin.user_config(user)) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    # The quota APIs cannot touch credentials (2.8 would remove one named in a remove op).
    assert alter(c, (((USER, user),), {"SCRAM-SHA-256": None}))[0][1:] == (
        INVALID_REQUEST, "Invalid configuration key SCRAM-SHA-256")
    assert sorted(admin.user_config(user)) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]


@pytest.mark.parametrize("parts, ops, message", [
    ((), {"producer_byte_rate": 1.0}, "Invalid empty client quota entity"),
    (((USER, "u"), ("group", "g")), {"producer_byte_rate": 1.0}, "Unhandled client quota entity type: group"),
    (((USER, ""),), {"producer_byte_rate": 1.0}, "Empty user not supported"),
    (((CLIENT, ""),), {"producer_byte_rate": 1.0}, "Empty client-id not supported"),
    (((CLIENT, "c"), (IP, "10.0.0.1")), {"connection_creation_rate": 1.0},
     "Invalid quota entity combination, IP entity should not be used with user/client ID entity."),
    (((IP, "not-a-host.invalid"),), {"connection_creation_rate": 1.0},
     "not-a-host.invalid is not a valid IP or resolvable host."),
    (((IP, "10.0.0.0/8"),), {"connection_creation_rate": 1.0}, "10.0.0.0/8 is not a valid IP or resolvable host."),
    (((USER, "u"), (USER, "v")), {"producer_byte_rate": 1.0},
     "Invalid client quota entity, duplicate entity entry user"),
    (((USER, "u"),), {"connection_creation_rate": 1.0}, "Invalid configuration key connection_creation_rate"),
    (((IP, "10.0.0.1"),), {"producer_byte_rate": 1.0}, "Invalid configuration key producer_byte_rate"),
    (((CLIENT, "c"),), {"bogus_rate": 1.0}, "Invalid configuration key bogus_rate"),
    (((CLIENT, "c"),), {"bogus_rate": None}, "Invalid configuration key bogus_rate"),
    (((CLIENT, "c"),), {"producer_byte_rate": 1.5}, "Configuration producer_byte_rate must be a LONG value"),
    (((IP, None),), {"connection_creation_rate": 0.5}, "Configuration connection_creation_rate must be a INT value"),
    (((CLIENT, "c"),), {"consumer_byte_rate": -1024.0}, "Configuration consumer_byte_rate must be a LONG value"),
    (((CLIENT, "c"),), {"request_percentage": -1.0},
     "Invalid value -1.0 for configuration request_percentage: Value must be at least 0"),
    (((CLIENT, "c"),), {"request_percentage": math.nan},
     "Invalid value NaN for configuration request_percentage: Value must be a finite number"),
    (((CLIENT, "c"),), {"producer_byte_rate": math.inf},
     "Invalid value Infinity for configuration producer_byte_rate: Value must be a finite number"),
])
def test_alter_refuses_bad_entities_keys_and_values_per_entity(cluster, parts, ops, message):
    """INVALID_REQUEST with Kafka's message for the entity, the others in the request still applied; nothing
    written for the refused one."""
    c = cluster
    good = unique("good")
    before = len(notifications(c))
    results = alter(c, (parts, ops), (((CLIENT, good),), {"producer_byte_rate": 1.0}))
    assert results == [(tuple(parts), INVALID_REQUEST, message), (((CLIENT, good),), NONE, None)]
    assert notifications(c)[before:] == [f"clients/{good}"]


def test_names_no_znode_can_have_are_refused_and_match_nothing(cluster):
    """"." and ".." stay as they are when sanitized and ZooKeeper refuses them as paths (as it refuses Kafka's
    write: UNKNOWN_SERVER_ERROR); describing them finds nothing."""
    c = cluster
    results = alter(c, (((USER, "."),), {"producer_byte_rate": 1.0}), (((CLIENT, ".."),), {"producer_byte_rate": 1.0}))
    assert [(parts, code) for parts, code, _ in results] == [(((USER, "."),), UNKNOWN_SERVER_ERROR),
                                                             (((CLIENT, ".."),), UNKNOWN_SERVER_ERROR)]
    assert all("cannot be a znode name" in message for _, _, message in results)
    assert describe(c, [(USER, EXACT, ".")], strict=True) == (NONE, None, {})
    assert describe(c, [(USER, EXACT, ".."), (CLIENT, EXACT, "x")], strict=True) == (NONE, None, {})


def test_validate_only_duplicates_and_removing_what_is_not_set(cluster):
    c = cluster
    client = unique("vo")
    before = len(notifications(c))
    assert alter(c, (((CLIENT, client),), {"producer_byte_rate": 1024.0}), validate_only=True) == [
        (((CLIENT, client),), NONE, None)]
    assert alter(c, (((CLIENT, client),), {"producer_byte_rate": 1.5}), validate_only=True)[0][1] == INVALID_REQUEST
    assert not c.zk.exists(f"/config/clients/{client}") and len(notifications(c)) == before
    # Removing a key that is not set succeeds (and writes the entity); the last op of a key wins.
    assert alter(c, (((CLIENT, client),), {"consumer_byte_rate": None}))[0][1] == NONE
    assert znode(c, f"/config/clients/{client}") == b'{"version":1,"config":{}}'
    # One answer per entity: the last entry naming it wins, as 2.8 answers from a map.
    results = alter(c, (((CLIENT, client),), {"producer_byte_rate": 1.5}),
                    (((CLIENT, client),), {"producer_byte_rate": 2048.0}))
    assert results == [(((CLIENT, client),), NONE, None)]
    assert znode(c, f"/config/clients/{client}") == b'{"version":1,"config":{"producer_byte_rate":"2048"}}'


@pytest.mark.parametrize("components, code, message", [
    ([(USER, ANY, None), (USER, EXACT, "a")], INVALID_REQUEST, "Duplicate user filter component entity type"),
    ([(CLIENT, DEFAULT, None), (CLIENT, DEFAULT, None)], INVALID_REQUEST,
     "Duplicate client filter component entity type"),
    ([("", ANY, None)], INVALID_REQUEST, "Unexpected empty filter component entity type"),
    ([("group", EXACT, "g")], UNSUPPORTED_VERSION, "Custom entity type 'group' not supported"),
    ([(USER, ANY, None), (IP, ANY, None)], INVALID_REQUEST,
     ("Invalid entity filter component combination, IP filter component should not be used with user or clientId "
      "filter component.")),
    ([(USER, 7, None)], INVALID_REQUEST, "Unexpected match type: 7"),
    ([(CLIENT, EXACT, None)], INVALID_REQUEST, "An exact match of entity type 'client-id' needs a name"),
])
def test_describe_refuses_bad_filters_with_kafkas_codes(cluster, components, code, message):
    assert describe(cluster, components) == (code, message, None)


def test_apis_are_advertised_with_kafka_28s_versions(cluster):
    r = send(cluster, 1, ApiVersionsRequest(version=0))
    versions = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
    assert versions[48] == versions[49] == (0, 1)


def test_a_malformed_znode_is_left_out_and_the_broker_keeps_serving(cluster):
    """/config/clients/<x> written by hand as not JSON, <y> with a value that is not a number: describe answers
    the good entities and y's good value, logs what it left out; altering x fails for x alone."""
    c = cluster
    x, y, z = unique("bad-json"), unique("bad-value"), unique("good")
    c.zk.create_recursive(f"/config/clients/{x}", b"{producer_byte_rate: 1}")
    c.zk.create_recursive(f"/config/clients/{y}", b'{"version":1,"config":{"producer_byte_rate":"lots",'
                                                  b'"consumer_byte_rate":"5"}}')
    c.zk.create_recursive(f"/config/clients/{z}", b'{"version":1,"config":{"producer_byte_rate":"7"}}')
    lower = unique("hand%3cwritten")          # not as Kafka sanitizes (%3C): still read under the name listed
    c.zk.create_recursive(f"/config/clients/{lower}", b'{"version":1,"config":{"producer_byte_rate":"8"}}')
    error, _, found = describe(c, [(CLIENT, ANY, None)], strict=True)
    assert error == NONE
    assert found[((CLIENT, lower.replace("%3c", "<")),)] == {"producer_byte_rate": 8.0}
    assert found[((CLIENT, y),)] == {"consumer_byte_rate": 5.0}
    assert found[((CLIENT, z),)] == {"producer_byte_rate": 7.0}
    assert ((CLIENT, x),) not in found
    assert describe(c, [(CLIENT, EXACT, x)], strict=True) == (NONE, None, {})
    with open(c.brokers[1].log_path) as f:
        log = f.read()
    assert f"Left out of DescribeClientQuotas: /config/clients/{x}: not a config znode's JSON" in log
    assert f"/config/clients/{y}: invalid value 'lots' for producer_byte_rate" in log

    results = alter(c, (((CLIENT, x),), {"producer_byte_rate": 1.0}), (((CLIENT, y),), {"request_percentage": 1.0}),
                    (((CLIENT, z),), {"request_percentage": 1.0}))
    assert results[0] == (((CLIENT, x),), UNKNOWN_SERVER_ERROR,
                          f"/config/clients/{x}: not a config znode's JSON: b'{{producer_byte_rate: 1}}'")
    assert results[1] == (((CLIENT, y),), INVALID_REQUEST,
                          "Invalid value lots for configuration producer_byte_rate: Not a number of type LONG")
    assert results[2] == (((CLIENT, z),), NONE, None)
    assert znode(c, f"/config/clients/{x}") == b"{producer_byte_rate: 1}"
    assert describe(c, [(CLIENT, EXACT, z)])[2] == {((CLIENT, z),): {"producer_byte_rate": 7.0,
                                                                     "request_percentage": 1.0}}


def test_the_filter_matches_entities_as_kafka_28(cluster_factory):
    """Kafka 2.8's ZkAdminManager semantics on a fixed set of entities: EXACT a name, DEFAULT the default entity,
    ANY any name (the default included); a type without a component matches entities without it when strict,
    anything otherwise; users with no quota (SCRAM only, or only (user, client) children) never appear."""
    c = cluster_factory(1)
    q = {"producer_byte_rate": 1.0}
    entities = [((USER, "alice"),), ((USER, None),), ((USER, "alice"), (CLIENT, "c1")),
                ((USER, "alice"), (CLIENT, None)), ((USER, None), (CLIENT, "c1")), ((USER, None), (CLIENT, None)),
                ((USER, "bob"), (CLIENT, "c2")), ((USER, "dave"), (CLIENT, "c1")), ((CLIENT, "c1"),),
                ((CLIENT, None),), ((IP, "10.0.0.1"),), ((IP, None),)]
    # IP rates high enough that this test's own connections (from 127.0.0.1, under <default>) are never throttled
    results = alter(c, *[(e, {"connection_creation_rate": 1000.0} if e[0][0] == IP else q) for e in entities])
    assert all(code == NONE for _, code, _ in results), results
    AdminZkClient(c.zk).alter_user_credentials("carol", {"SCRAM-SHA-256": scram.make_credential(
        "SCRAM-SHA-256", "x").to_config()}, [])
    assert alter(c, (((USER, "bob"),), q), (((USER, "bob"),), {"producer_byte_rate": None}))[0][1] == NONE
    alice, default_user = ((USER, "alice"),), ((USER, None),)
    pairs = [e for e in entities if len(e) == 2]
    with_user = [e for e in entities if e[0][0] == USER]
    cases = [
        ([], False, entities), ([], True, []),
        ([(USER, EXACT, "alice")], True, [alice]),
        ([(USER, EXACT, "alice")], False, [alice, ((USER, "alice"), (CLIENT, "c1")),
                                           ((USER, "alice"), (CLIENT, None))]),
        ([(USER, DEFAULT, None)], True, [default_user]),
        ([(USER, DEFAULT, None)], False, [default_user, ((USER, None), (CLIENT, "c1")),
                                          ((USER, None), (CLIENT, None))]),
        ([(USER, ANY, None)], True, [alice, default_user]),
        ([(USER, ANY, None)], False, with_user),
        ([(USER, ANY, None), (CLIENT, ANY, None)], True, pairs),
        ([(CLIENT, EXACT, "c1")], True, [((CLIENT, "c1"),)]),
        ([(CLIENT, EXACT, "c1")], False, [((CLIENT, "c1"),), ((USER, "alice"), (CLIENT, "c1")),
                                          ((USER, None), (CLIENT, "c1")), ((USER, "dave"), (CLIENT, "c1"))]),
        ([(CLIENT, ANY, None)], True, [((CLIENT, "c1"),), ((CLIENT, None),)]),
        ([(USER, EXACT, "alice"), (CLIENT, EXACT, "c1")], True, [((USER, "alice"), (CLIENT, "c1"))]),
        ([(USER, EXACT, "alice"), (CLIENT, DEFAULT, None)], False, [((USER, "alice"), (CLIENT, None))]),
        ([(USER, DEFAULT, None), (CLIENT, ANY, None)], True, [((USER, None), (CLIENT, "c1")),
                                                              ((USER, None), (CLIENT, None))]),
        ([(USER, EXACT, "carol")], False, []), ([(USER, EXACT, "nobody")], False, []),
        ([(IP, ANY, None)], True, [((IP, "10.0.0.1"),), ((IP, None),)]),
        ([(IP, EXACT, "10.0.0.1")], True, [((IP, "10.0.0.1"),)]), ([(IP, DEFAULT, None)], False, [((IP, None),)]),
        ([(IP, EXACT, "10.9.9.9")], False, []),
    ]
    problems = []
    for components, strict, expected in cases:
        error, _, found = describe(c, components, strict)
        if error != NONE or set(found) != set(expected):
            problems.append(f"{components} strict={strict}: {error} {sorted(found or {}, key=str)}")
    assert not problems, "\n".join(problems)
    # Entries come sorted: types in order user, client-id, ip; the default before names.
    _, _, found = describe(c, [], False)
    assert list(found)[:3] == [default_user, ((USER, None), (CLIENT, None)), ((USER, None), (CLIENT, "c1"))]


def test_ten_thousand_entities_are_described(cluster_factory):
    """10 000 client entities (written straight to ZooKeeper, pipelined): a describe of all of them answers
    every one, an exact one still only its own."""
    c = cluster_factory(1)
    c.zk.create_top_level_paths()
    kazoo = c.zk.zk
    names = [f"load-{i:05d}" for i in range(10_000)]
    for result in [kazoo.create_async(f"/config/clients/{n}", b'{"version":1,"config":{"consumer_byte_rate":"%d"}}'
                                      % i) for i, n in enumerate(names)]:
        result.get()
    error, _, found = describe(c, [(CLIENT, ANY, None)], strict=True)
    assert error == NONE and len(found) == 10_000
    assert found[((CLIENT, "load-09999"),)] == {"consumer_byte_rate": 9999.0}
    assert describe(c, [(CLIENT, EXACT, "load-04242")], strict=True)[2] == {
        ((CLIENT, "load-04242"),): {"consumer_byte_rate": 4242.0}}
    listed = kadmin(c, "bs", "quotas", "list", "--any-client-id", "--strict")
    assert len(json.loads(ok(listed))["quotas"]) == 10_000


# ---- kadmin quotas -------------------------------------------------------------------------------------------------

def refused(result, code: int, *fragments) -> str:
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    assert result.stdout == "" and "Traceback" not in result.stderr
    line = result.stderr.strip().splitlines()[-1]
    for f in fragments:
        assert f in line, line
    return line


def test_kadmin_writes_through_zookeeper_what_kafka_configs_writes_and_the_brokers_read_it(cluster):
    """--zookeeper: values stored as typed, SCRAM credentials kept, the notification after; --bootstrap-server
    shows the same; then the brokers' alteration is read back through ZooKeeper."""
    c = cluster
    user, client = unique("kadmin user"), unique("kadmin-app")
    su = sanitize(user)
    AdminZkClient(c.zk).alter_user_credentials(user, {"SCRAM-SHA-512": "salt=x"}, [])
    before = len(notifications(c))
    assert json.loads(ok(kadmin(c, "zk", "quotas", "alter", "--user", user, "--client-id", client, "--add-config",
                                "producer_byte_rate=1048576,request_percentage=200"))) == {
        "entity": {"user": user, "client-id": client}, "set": {"producer_byte_rate": "1048576",
                                                               "request_percentage": "200"}, "deleted": []}
    ok(kadmin(c, "zk", "quotas", "alter", "--user", user, "--add-config", "consumer_byte_rate=2048"))
    assert znode(c, f"/config/users/{su}/clients/{client}") == \
        b'{"version":1,"config":{"request_percentage":"200","producer_byte_rate":"1048576"}}'
    assert json.loads(znode(c, f"/config/users/{su}")) == {
        "version": 1, "config": {"SCRAM-SHA-512": "salt=x", "consumer_byte_rate": "2048"}}
    assert notifications(c)[before:] == [f"users/{su}/clients/{client}", f"users/{su}"]

    shown = {m: json.loads(ok(kadmin(c, m, "quotas", "list", "--user", user))) for m in ("zk", "bs")}
    assert shown["zk"] == shown["bs"] == {"quotas": [
        {"entity": {"user": user}, "values": {"consumer_byte_rate": 2048}},
        {"entity": {"user": user, "client-id": client}, "values": {"producer_byte_rate": 1048576,
                                                                   "request_percentage": 200.0}}]}
    tables = {m: ok(kadmin(c, m, "quotas", "list", "--user", user, output="table")) for m in ("zk", "bs")}
    assert tables["zk"] == tables["bs"]
    lines = tables["zk"].splitlines()
    assert lines[0].split() == ["ENTITY", "QUOTA", "VALUE"]
    assert lines[1].split()[-2:] == ["consumer_byte_rate", "2048"]
    assert lines[3].endswith("request_percentage  200.0") and f"client-id '{client}'" in lines[3]

    # Through the brokers: set one, delete another; ZooKeeper shows it, written as AlterClientQuotas writes.
    assert json.loads(ok(kadmin(c, "bs", "quotas", "alter", "--user", user, "--client-id", client,
                                "--add-config", "consumer_byte_rate=4096", "--delete-config", "request_percentage")))[
        "deleted"] == ["request_percentage"]
    assert znode(c, f"/config/users/{su}/clients/{client}") == \
        b'{"version":1,"config":{"producer_byte_rate":"1048576","consumer_byte_rate":"4096"}}'
    described = {m: json.loads(ok(kadmin(c, m, "quotas", "describe", "--user", user, "--client-id", client)))
                 for m in ("zk", "bs")}
    assert described["zk"] == described["bs"] == {"quotas": [{"entity": {"user": user, "client-id": client},
                                                              "values": {"consumer_byte_rate": 4096,
                                                                         "producer_byte_rate": 1048576}}]}
    assert ok(kadmin(c, "zk", "quotas", "describe", "--user-defaults", "--client-id", unique("none"),
                     output="table")).startswith("No quotas are set for the default user-principal, client-id '")


@pytest.mark.parametrize("mode", ["zk", "bs"])
def test_kadmin_defaults_and_ips_in_both_modes(cluster, mode):
    c = cluster
    ip = f"10.20.{1 if mode == 'zk' else 2}.1"
    ok(kadmin(c, mode, "quotas", "alter", "--ip", ip, "--add-config", "connection_creation_rate=15"))
    assert znode(c, f"/config/ips/{ip}") == b'{"version":1,"config":{"connection_creation_rate":"15"}}'
    ok(kadmin(c, mode, "quotas", "alter", "--client-defaults", "--add-config", "controller_mutation_rate=2.5"))
    assert json.loads(znode(c, "/config/clients/<default>"))["config"]["controller_mutation_rate"] == "2.5"
    assert json.loads(ok(kadmin(c, mode, "quotas", "describe", "--ip", ip)))["quotas"] == [
        {"entity": {"ip": ip}, "values": {"connection_creation_rate": 15}}]
    listed = json.loads(ok(kadmin(c, mode, "quotas", "list", "--any-ip")))["quotas"]
    assert {"entity": {"ip": ip}, "values": {"connection_creation_rate": 15}} in listed
    assert all(list(q["entity"]) == ["ip"] for q in listed)
    default_client = json.loads(ok(kadmin(c, mode, "quotas", "list", "--client-defaults", "--strict")))["quotas"]
    assert [q["entity"] for q in default_client] == [{"client-id": None}]
    assert default_client[0]["values"]["controller_mutation_rate"] == 2.5
    ok(kadmin(c, mode, "quotas", "alter", "--ip", ip, "--delete-config", "connection_creation_rate"))
    ok(kadmin(c, mode, "quotas", "alter", "--client-defaults", "--delete-config", "controller_mutation_rate"))
    assert znode(c, f"/config/ips/{ip}") == b'{"version":1,"config":{}}'
    assert "controller_mutation_rate" not in json.loads(znode(c, "/config/clients/<default>"))["config"]


@pytest.mark.parametrize("mode, args, code, fragments", [
    ("zk", ["alter", "--add-config", "producer_byte_rate=1"], 2, ["Give the entity"]),
    ("zk", ["alter", "--user", "u", "--user-defaults", "--add-config", "producer_byte_rate=1"], 2,
     ["Give only one of --user, --user-defaults"]),
    ("bs", ["alter", "--user", "u", "--ip", "10.0.0.1", "--add-config", "producer_byte_rate=1"], 2,
     ["An IP entity cannot be combined"]),
    ("zk", ["alter", "--user", "", "--add-config", "producer_byte_rate=1"], 2, ["an empty user is no entity"]),
    ("bs", ["alter", "--client-id", "c"], 2, ["At least one of --add-config or --delete-config"]),
    ("zk", ["alter", "--client-id", "c", "--add-config", "producer_byte_rate"], 2, ['format "key=val"']),
    ("zk", ["list", "--user", "u", "--any-user"], 2, ["Give only one of --user, --user-defaults and --any-user"]),
    ("zk", ["alter", "--client-id", "c", "--add-config", "bogus=1"], 1,
     ["Unknown Dynamic Configuration: Set(bogus).", "(INVALID_CONFIG)"]),
    ("bs", ["alter", "--client-id", "c", "--add-config", "bogus=1"], 1,
     ["Invalid configuration key bogus", "(INVALID_REQUEST)"]),
    ("zk", ["alter", "--client-id", "c", "--add-config", "producer_byte_rate=lots"], 1,
     ["Invalid value lots for configuration producer_byte_rate: Not a number of type LONG", "(INVALID_CONFIG)"]),
    ("bs", ["alter", "--client-id", "c", "--add-config", "producer_byte_rate=lots"], 1,
     ["Cannot parse quota configuration value for producer_byte_rate: lots"]),
    ("zk", ["alter", "--client-id", "c", "--add-config", "request_percentage=-5"], 1,
     ["request_percentage: Value must be at least 0"]),
    ("bs", ["alter", "--client-id", "c", "--add-config", "producer_byte_rate=1.5"], 1,
     ["Configuration producer_byte_rate must be a LONG value", "(INVALID_REQUEST)"]),
    ("bs", ["alter", "--ip", "not-a-host.invalid", "--add-config", "connection_creation_rate=1"], 1,
     ["not-a-host.invalid is not a valid IP or resolvable host.", "(INVALID_REQUEST)"]),
    ("zk", ["alter", "--ip", "not-a-host.invalid", "--add-config", "connection_creation_rate=1"], 1,
     ["not-a-host.invalid is not a valid IP or resolvable host."]),
    ("zk", ["alter", "--client-id", "never-set", "--delete-config", "producer_byte_rate"], 1,
     ["Invalid config(s): producer_byte_rate"]),
    ("bs", ["alter", "--client-id", "never-set", "--delete-config", "producer_byte_rate"], 1,
     ["Invalid config(s): producer_byte_rate"]),
])
def test_kadmin_refusals_and_usage_errors(cluster, mode, args, code, fragments):
    c = cluster
    before = len(notifications(c))
    refused(kadmin(c, mode, "quotas", *args), code, *fragments)
    assert len(notifications(c)) == before


def test_kadmin_unreachable_is_exit_3(cluster):
    runner = CliRunner()
    port = free_port()
    for target in (["--bootstrap-server", f"127.0.0.1:{port}", "--request-timeout", "2"],
                   ["--zookeeper", f"127.0.0.1:{port}", "--zk-timeout", "1"]):
        result = runner.invoke(cli, [*target, "quotas", "list"], catch_exceptions=False)
        assert result.exit_code == 3, (result.stdout, result.stderr)
        assert "Traceback" not in result.stderr
