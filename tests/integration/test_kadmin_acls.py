"""`kadmin acls --zookeeper` against a real ZooKeeper (no broker needed): the znodes and change notifications it
writes are the bytes Kafka's AclAuthorizer (kafka-acls.sh --authorizer-properties zookeeper.connect=...) writes,
listing and removing follow kafka-acls.sh's filters, and bad options are usage errors."""
from __future__ import annotations

import json

from click.testing import CliRunner

from admin_cli.main import cli

ALICE_READ = (b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read",'
              b'"host":"*"}]}')


def kadmin(zk_connect, *args):
    return CliRunner().invoke(cli, ["--zookeeper", zk_connect, *args], catch_exceptions=False)


def kadmin_json(zk_connect, *args) -> dict:
    result = kadmin(zk_connect, "-o", "json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def notifications(zk_client, root: str) -> list[bytes]:
    return [zk_client.get(f"{root}/{n}")[0] for n in sorted(zk_client.children(root))]


def test_add_list_remove_write_kafkas_znodes_and_notifications(zk_connect, zk_client):
    added = kadmin_json(zk_connect, "acls", "add", "--allow-principal", "User:alice", "--operation", "read",
                        "--topic", "orders", "--group", "billing")["added"]
    assert len(added) == 2
    assert zk_client.get("/kafka-acl/Topic/orders")[0] == ALICE_READ
    assert zk_client.get("/kafka-acl/Group/billing")[0] == ALICE_READ
    assert notifications(zk_client, "/kafka-acl-changes") == [b"TOPIC:orders", b"GROUP:billing"]
    # Kafka's layout: a child per resource type under both roots.
    assert sorted(zk_client.children("/kafka-acl")) == ["Cluster", "DelegationToken", "Group", "Topic",
                                                        "TransactionalId"]
    kadmin_json(zk_connect, "acls", "add", "--deny-principal", "User:*", "--deny-host", "10.0.0.9",
                "--operation", "IdempotentWrite", "--operation", "Describe", "--cluster")
    kadmin_json(zk_connect, "acls", "add", "--allow-principal", "User:bob", "--operation", "Write",
                "--transactional-id", "tx-", "--resource-pattern-type", "prefixed")
    assert zk_client.get("/kafka-acl-extended/prefixed/TransactionalId/tx-")[0] == (
        b'{"version":1,"acls":[{"principal":"User:bob","permissionType":"Allow","operation":"Write","host":"*"}]}')
    assert notifications(zk_client, "/kafka-acl-extended-changes") == [
        b'{"version":1,"resourceType":"TRANSACTIONAL_ID","name":"tx-","patternType":"PREFIXED"}']
    cluster = json.loads(zk_client.get("/kafka-acl/Cluster/kafka-cluster")[0])
    assert sorted(a["operation"] for a in cluster["acls"]) == ["Describe", "IdempotentWrite"]
    assert all(a["host"] == "10.0.0.9" and a["permissionType"] == "Deny" for a in cluster["acls"])

    everything = kadmin_json(zk_connect, "acls", "list")["acls"]
    assert len(everything) == 5
    assert kadmin_json(zk_connect, "acls", "list", "--principal", "User:bob")["acls"] == [
        {"resource_type": "TransactionalId", "name": "tx-", "pattern_type": "PREFIXED", "principal": "User:bob",
         "host": "*", "operation": "Write", "permission": "Allow"}]
    assert [a["name"] for a in kadmin_json(zk_connect, "acls", "list", "--transactional-id", "tx-42",
                                           "--resource-pattern-type", "match")["acls"]] == ["tx-"]
    table = kadmin(zk_connect, "acls", "list", "--topic", "orders")
    assert table.exit_code == 0 and "User:alice" in table.stdout and "billing" not in table.stdout

    # Removing a named binding keeps the others; removing the last ACL deletes the znode (with a notification).
    removed = kadmin_json(zk_connect, "acls", "remove", "--deny-principal", "User:*", "--deny-host", "10.0.0.9",
                          "--operation", "Describe", "--cluster")["removed"]
    assert [r["operation"] for r in removed] == ["Describe"]
    assert json.loads(zk_client.get("/kafka-acl/Cluster/kafka-cluster")[0])["acls"][0]["operation"] == \
        "IdempotentWrite"
    assert kadmin_json(zk_connect, "acls", "remove", "--topic", "orders")["removed"][0]["principal"] == "User:alice"
    assert zk_client.exists("/kafka-acl/Topic/orders") is None
    assert notifications(zk_client, "/kafka-acl-changes")[-1] == b"TOPIC:orders"
    assert kadmin_json(zk_connect, "acls", "remove", "--topic", "orders")["removed"] == []


def test_producer_and_consumer_shortcuts_add_what_kafka_acls_sh_adds(zk_connect, zk_client):
    added = kadmin_json(zk_connect, "acls", "add", "--allow-principal", "User:p", "--producer", "--idempotent",
                        "--topic", "orders", "--transactional-id", "tx")["added"]
    assert sorted((a["resource_type"], a["operation"]) for a in added) == [
        ("Cluster", "IdempotentWrite"), ("Topic", "Create"), ("Topic", "Describe"), ("Topic", "Write"),
        ("TransactionalId", "Describe"), ("TransactionalId", "Write")]
    added = kadmin_json(zk_connect, "acls", "add", "--allow-principal", "User:c", "--consumer", "--topic", "orders",
                        "--group", "billing", "--resource-pattern-type", "prefixed")["added"]
    assert sorted((a["resource_type"], a["operation"], a["pattern_type"]) for a in added) == [
        ("Group", "Read", "PREFIXED"), ("Topic", "Describe", "PREFIXED"), ("Topic", "Read", "PREFIXED")]
    assert len(json.loads(zk_client.get("/kafka-acl/Topic/orders")[0])["acls"]) == 3


def test_bad_acl_options_are_usage_errors(zk_connect):
    for args in (["acls", "add", "--allow-principal", "User:a", "--operation", "Read", "--cluster"],  # not on Cluster
                 ["acls", "add", "--allow-principal", "alice", "--topic", "t"],                     # no type
                 ["acls", "add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"],
                 ["acls", "add", "--operation", "Read", "--topic", "t"],                             # no principal
                 ["acls", "add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"],
                 ["acls", "remove", "--allow-principal", "User:a"],                                 # no resource
                 ["acls", "add", "--allow-principal", "User:a", "--consumer", "--cluster"],
                 ["acls", "add", "--allow-principal", "User:a", "--idempotent", "--topic", "t"]):
        result = kadmin(zk_connect, *args)
        assert result.exit_code == 2, (args, result.output)
        assert result.stderr.startswith("Error:"), result.stderr
