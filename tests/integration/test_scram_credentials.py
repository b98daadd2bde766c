"""SCRAM credential management against one real 2-broker cluster: Describe/AlterUserScramCredentials (KIP-554)
through raw requests, confluent-kafka's and kafka-python's admin APIs, with Kafka 2.8's per-user errors and
messages; /config/users/<user> and its /config/changes notification as kafka-configs.sh writes them; kadmin
users through ZooKeeper and through the brokers; kadmin --command-config refusing bad files.

One cluster serves the module; every test uses its own user names."""
from __future__ import annotations

import json
import uuid

import pytest
from click.testing import CliRunner

from admin_cli.main import cli
from kafka.protocol.admin import AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest
from kbroker.protocol.client import Connection
from kbroker.protocol.sasl import scram
from kbroker.cluster import free_port
from tests.integration.conftest import Cluster, fill_port, wait_until
from zk.admin import AdminZkClient

Upsertion = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
Deletion = AlterUserScramCredentialsRequest.ScramCredentialDeletion
Name = DescribeUserScramCredentialsRequest.UserName
SHA256, SHA512 = 1, 2
NONE, UNSUPPORTED_SASL_MECHANISM, NOT_CONTROLLER = 0, 33, 41
RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE, UNACCEPTABLE_CREDENTIAL = 91, 92, 93


ADMIN = ("admin", "admin-secret")       # a SCRAM user written before the brokers start, for kadmin over SASL
TOPIC = "scram-logins"


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    """Two brokers, each with a PLAINTEXT listener (inter-broker, the tests' setup) and a SASL_PLAINTEXT one
    serving SCRAM-SHA-256/512 (c.sasl_bootstrap)."""
    c = Cluster(f"{zookeeper.connect}/t-{uuid.uuid4().hex[:10]}", str(tmp_path_factory.mktemp("scram")))
    c.zk.create_top_level_paths()
    AdminZkClient(c.zk).change_user_config(ADMIN[0], {
        m: scram.make_credential(m, ADMIN[1]).to_config() for m in scram.MECHANISMS})
    sasl_ports = {}
    for i in (1, 2):
        sasl_ports[i] = free_port()
        b = c.add(i, start=False, **{"listeners": f"PLAINTEXT://127.0.0.1:{{port}},"
                                                  f"SASL_PLAINTEXT://127.0.0.1:{sasl_ports[i]}",
                                     "inter.broker.listener.name": "PLAINTEXT",
                                     "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
                                     "offsets.topic.replication.factor": 2})
        fill_port(b)
        b.start()
    c.wait_ready((1, 2))
    c.sasl_bootstrap = ",".join(f"127.0.0.1:{p}" for p in sasl_ports.values())
    AdminZkClient(c.zk).create_topic(TOPIC, partitions=1, replication_factor=2)
    yield c
    c.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def send(c: Cluster, broker_id: int, request):
    host, port = c.brokers[broker_id].bootstrap.rsplit(":", 1)
    conn = Connection(host, int(port), "test")
    try:
        return conn.send(request)
    finally:
        conn.close()


def controller_and_other(c: Cluster) -> tuple[int, int]:
    controller = c.zk.get_controller_id()
    return controller, next(i for i in c.brokers if i != controller)


def upsertion(user: str, mechanism: int, password: str, iterations: int = 4096, salt: bytes = b"salt-1234"):
    name = scram.MECHANISM_BY_ID.get(mechanism, "SCRAM-SHA-256")
    return Upsertion(name=user, mechanism=mechanism, iterations=iterations, salt=salt,
                     salted_password=scram.salted_password(name, password, salt, max(iterations, 1)))


def alter(c, broker_id, upsertions=(), deletions=()):
    r = send(c, broker_id, AlterUserScramCredentialsRequest(version=0, upsertions=list(upsertions),
                                                            deletions=list(deletions)))
    return {x.user: (x.error_code, x.error_message) for x in r.results}


def describe(c, broker_id, users):
    r = send(c, broker_id, DescribeUserScramCredentialsRequest(
        version=0, users=None if users is None else [Name(name=u) for u in users]))
    assert (r.error_code, r.error_message) == (0, None)
    return [(x.user, x.error_code, x.error_message, [(i.mechanism, i.iterations) for i in x.credential_infos])
            for x in r.results]


def user_znode(c: Cluster, user: str) -> tuple[bytes, dict]:
    from kbroker.common.sanitizer import sanitize
    data, _ = c.zk.get(f"/config/users/{sanitize(user)}")
    return data, json.loads(data)


def notifications(c: Cluster) -> list[dict]:
    names = sorted(c.zk.children("/config/changes"))
    return [json.loads(c.zk.get(f"/config/changes/{n}")[0]) for n in names]


def check_credential(text: str, mechanism: str, password: str, iterations: int) -> bytes:
    """The credential text is Kafka's credentialToString of `password`; returns the salt."""
    fields = dict(item.split("=", 1) for item in text.split(","))
    assert list(fields) == ["salt", "stored_key", "server_key", "iterations"]
    cred = scram.ScramCredential.from_config(text)
    assert cred == scram.make_credential(mechanism, password, iterations, salt=cred.salt)
    assert int(fields["iterations"]) == iterations
    return cred.salt


def test_alter_and_describe_with_kafkas_errors(cluster):
    c = cluster
    controller, other = controller_and_other(c)
    alice, bob, carol, dave, erin, frank, gina = (unique(n) for n in
                                                  ("alice", "bob", "carol", "dave", "erin", "frank", "gina"))
    results = alter(c, controller, upsertions=[
        upsertion(alice, SHA256, "alice-secret", 8192), upsertion(alice, SHA512, "alice-secret"),
        upsertion(bob, SHA512, "bob-secret"),
        upsertion(dave, 3, "x"), upsertion(erin, SHA256, "x", 4095), upsertion(frank, SHA512, "x", 16385),
        upsertion("", SHA256, "x"),
        upsertion(gina, SHA256, "x"), upsertion(gina, SHA256, "y")],
        deletions=[Deletion(name=carol, mechanism=SHA256)])
    assert results == {
        alice: (NONE, None), bob: (NONE, None),
        carol: (RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        dave: (UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        erin: (UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        frank: (UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "": (UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        gina: (DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")}

    # The broker derived Kafka's credential from the salt and salted password; nobody failing was written.
    _, node = user_znode(c, alice)
    assert sorted(node["config"]) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert check_credential(node["config"]["SCRAM-SHA-256"], "SCRAM-SHA-256", "alice-secret", 8192) == b"salt-1234"
    for user in (carol, dave, erin, frank, gina):
        assert not c.zk.exists(f"/config/users/{user}")
    assert {"version": 2, "entity_path": f"users/{alice}"} in notifications(c)

    # Describe: named users in request order, each once; any broker answers.
    assert describe(c, other, [bob, alice, carol, "", gina, gina]) == [
        (bob, NONE, None, [(SHA512, 4096)]),
        (alice, NONE, None, [(SHA256, 8192), (SHA512, 4096)]),
        (carol, RESOURCE_NOT_FOUND, f"Attempt to describe a user credential that does not exist: {carol}", []),
        ("", RESOURCE_NOT_FOUND, "Username must not be empty", []),
        (gina, DUPLICATE_RESOURCE,
         f"Cannot describe SCRAM credentials for the same user twice in a single request: {gina}", [])]
    everyone = describe(c, controller, None)
    assert [u for u, *_ in everyone] == sorted(u for u, *_ in everyone)
    assert {(u, tuple(infos)) for u, _, _, infos in everyone} >= {(alice, ((SHA256, 8192), (SHA512, 4096))),
                                                                  (bob, ((SHA512, 4096),))}
    assert describe(c, controller, []) == everyone

    # Deleting one mechanism keeps the other; a user with a failing part is not touched at all.
    assert alter(c, controller, upsertions=[upsertion(alice, SHA256, "new", 4096)],
                 deletions=[Deletion(name=alice, mechanism=SHA512), Deletion(name=bob, mechanism=SHA256)]) == {
        alice: (NONE, None),
        bob: (RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")}
    assert describe(c, controller, [alice, bob]) == [(alice, NONE, None, [(SHA256, 4096)]),
                                                     (bob, NONE, None, [(SHA512, 4096)])]
    # The last credential gone, the znode stays with an empty config (as 2.8's setOrCreateEntityConfigs).
    assert alter(c, controller, deletions=[Deletion(name=bob, mechanism=SHA512)]) == {bob: (NONE, None)}
    assert user_znode(c, bob)[0] == b'{"version":1,"config":{}}'
    assert describe(c, controller, [bob])[0][1] == RESOURCE_NOT_FOUND


def test_only_the_controller_alters(cluster):
    c = cluster
    _, other = controller_and_other(c)
    zed, amy = unique("zed"), unique("amy")
    message = "This is not the correct controller for this cluster."
    assert alter(c, other, upsertions=[upsertion(zed, SHA256, "x")], deletions=[Deletion(name=amy, mechanism=1)]) \
        == {amy: (NOT_CONTROLLER, message), zed: (NOT_CONTROLLER, message)}
    r = send(c, other, AlterUserScramCredentialsRequest(version=0, upsertions=[upsertion(zed, SHA256, "x")],
                                                        deletions=[Deletion(name=amy, mechanism=1)]))
    assert [x.user for x in r.results] == sorted([zed, amy])
    assert not c.zk.exists(f"/config/users/{zed}")


def test_confluent_and_kafka_python_admin(cluster):
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialDeletion, UserScramCredentialUpsertion)
    from confluent_kafka import KafkaException
    from kafka.admin import KafkaAdminClient

    c = cluster
    user, missing = unique("cf"), unique("none")
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"cf-secret"),
        UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"cf-secret"),
        UserScramCredentialDeletion(missing, ScramMechanism.SCRAM_SHA_512)])
    futures[user].result(timeout=30)
    with pytest.raises(KafkaException) as e:
        futures[missing].result(timeout=30)
    assert e.value.args[0].code() == RESOURCE_NOT_FOUND
    # librdkafka salted the password itself: the credential is the password's.
    _, node = user_znode(c, user)
    check_credential(node["config"]["SCRAM-SHA-256"], "SCRAM-SHA-256", "cf-secret", 8192)
    check_credential(node["config"]["SCRAM-SHA-512"], "SCRAM-SHA-512", "cf-secret", 4096)

    described = admin.describe_user_scram_credentials([user])[user].result(timeout=30)
    assert sorted((i.mechanism, i.iterations) for i in described.scram_credential_infos) == [
        (ScramMechanism.SCRAM_SHA_256, 8192), (ScramMechanism.SCRAM_SHA_512, 4096)]
    with pytest.raises(KafkaException) as e:
        admin.describe_user_scram_credentials([missing])[missing].result(timeout=30)
    assert e.value.args[0].code() == RESOURCE_NOT_FOUND

    kp = KafkaAdminClient(bootstrap_servers=c.bootstrap)
    try:
        got = kp.describe_user_scram_credentials([user, missing])
    finally:
        kp.close()
    assert sorted((int(i["mechanism"]), i["iterations"]) for i in got[user]["credential_infos"]) == [
        (SHA256, 8192), (SHA512, 4096)]
    assert got[missing]["error"].startswith("Attempt to describe a user credential that does not exist")


# ---- kadmin users ------------------------------------------------------------------------------------------------

def kadmin(c: Cluster, mode: str, *args, input=None, output="json"):
    target = ["--zookeeper", c.zk_connect] if mode == "zk" else ["--bootstrap-server", c.bootstrap]
    return CliRunner().invoke(cli, [*target, "--output", output, *map(str, args)], input=input,
                              catch_exceptions=False)


def ok(result) -> str:
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return result.stdout


def test_kadmin_zookeeper_writes_what_kafka_configs_writes(cluster):
    """kafka-configs.sh --zookeeper --alter --entity-type users --entity-name <u> --add-config
    'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]', then
    --delete-config SCRAM-SHA-512: the user's other keys stay, the name is sanitized, each write is followed by
    its notification."""
    c = cluster
    user = unique("alice") + "@example.com"
    sanitized = user.replace("@", "%40")
    c.zk.create_recursive(f"/config/users/{sanitized}", b'{"version":1,"config":{"producer_byte_rate":"1024"}}')
    before = len(notifications(c))
    assert json.loads(ok(kadmin(c, "zk", "users", "add", user, "--mechanism", "SCRAM-SHA-256", "--iterations", 8192,
                                "--password", "alice-secret"))) == {
        "user": user, "set": [{"mechanism": "SCRAM-SHA-256", "iterations": 8192}], "removed": []}
    ok(kadmin(c, "zk", "users", "add", user, "--mechanism", "scram-sha-512", "--password-stdin",
              input="alice-secret\n"))
    data, node = user_znode(c, user)
    assert data.startswith(b'{"version":1,"config":{') and b" " not in data
    assert set(node) == {"version", "config"} and node["version"] == 1
    assert sorted(node["config"]) == ["SCRAM-SHA-256", "SCRAM-SHA-512", "producer_byte_rate"]
    salt = check_credential(node["config"]["SCRAM-SHA-256"], "SCRAM-SHA-256", "alice-secret", 8192)
    check_credential(node["config"]["SCRAM-SHA-512"], "SCRAM-SHA-512", "alice-secret", 4096)
    assert salt.isalnum() and salt == salt.lower()       # ScramFormatter's salt: base-36 digits as bytes
    assert notifications(c)[before:] == [{"version": 2, "entity_path": f"users/{sanitized}"}] * 2

    # Both ways show the same; the brokers read what ZooKeeper holds.
    shown = {mode: json.loads(ok(kadmin(c, mode, "users", "list", user))) for mode in ("zk", "bs")}
    assert shown["zk"] == shown["bs"] == {"users": [{"user": user, "credentials": [
        {"mechanism": "SCRAM-SHA-256", "iterations": 8192}, {"mechanism": "SCRAM-SHA-512", "iterations": 4096}]}],
        "errors": []}
    # Listing everyone names the user, not its znode (2.8 answered "alice%40...": KAFKA-15243).
    assert user in [u["user"] for u in json.loads(ok(kadmin(c, "bs", "users", "list")))["users"]]
    table = ok(kadmin(c, "zk", "users", "list", user, output="table")).splitlines()
    assert table[0].split() == ["USER", "MECHANISM", "ITERATIONS"]
    assert [row.split() for row in table[1:]] == [[user, "SCRAM-SHA-256", "8192"], [user, "SCRAM-SHA-512", "4096"]]

    ok(kadmin(c, "zk", "users", "remove", user, "--mechanism", "SCRAM-SHA-512"))
    assert sorted(user_znode(c, user)[1]["config"]) == ["SCRAM-SHA-256", "producer_byte_rate"]
    # Removing what is not there is refused as kafka-configs.sh refuses it; nothing is written.
    r = kadmin(c, "zk", "users", "remove", user, "--mechanism", "SCRAM-SHA-512")
    assert (r.exit_code, r.stdout) == (1, "")
    assert r.stderr == "Error: Invalid config(s): SCRAM-SHA-512 (INVALID_CONFIG)\n"
    ok(kadmin(c, "zk", "users", "remove", user))
    assert user_znode(c, user)[1] == {"version": 1, "config": {"producer_byte_rate": "1024"}}


def test_kadmin_bootstrap_server(cluster):
    c = cluster
    user, nobody = unique("bs"), unique("nobody")
    r = kadmin(c, "bs", "users", "add", user, "--iterations", 5000, input="pw-1\npw-1\n")   # hidden prompt, twice
    assert json.loads(r.stdout) == {"user": user, "removed": [], "set": [
        {"mechanism": "SCRAM-SHA-256", "iterations": 5000}, {"mechanism": "SCRAM-SHA-512", "iterations": 5000}]}
    _, node = user_znode(c, user)
    check_credential(node["config"]["SCRAM-SHA-512"], "SCRAM-SHA-512", "pw-1", 5000)

    # Named users without credentials are reported and make the exit status 1; the others still show.
    r = kadmin(c, "bs", "users", "list", user, nobody)
    assert r.exit_code == 1
    assert [u["user"] for u in json.loads(r.stdout)["users"]] == [user]
    assert r.stderr == f"Error: User '{nobody}' has no SCRAM credentials. (RESOURCE_NOT_FOUND)\n"
    assert kadmin(c, "zk", "users", "list", user, nobody).stderr == r.stderr
    every = json.loads(ok(kadmin(c, "bs", "users", "list")))["users"]
    assert user in [u["user"] for u in every]
    assert every == json.loads(ok(kadmin(c, "zk", "users", "list")))["users"]

    # The brokers' refusals, one line, exit 1.
    r = kadmin(c, "bs", "users", "add", user, "--iterations", 16385, "--password", "x")
    assert (r.exit_code, r.stderr) == (1, f"Error: Too many iterations (user '{user}', UNACCEPTABLE_CREDENTIAL)\n")
    r = kadmin(c, "bs", "users", "remove", nobody)
    assert (r.exit_code, r.stderr) == (1, f"Error: User '{nobody}' has no SCRAM credentials. (RESOURCE_NOT_FOUND)\n")
    assert kadmin(c, "zk", "users", "remove", nobody).stderr == r.stderr

    assert json.loads(ok(kadmin(c, "bs", "users", "remove", user))) == {
        "user": user, "set": [], "removed": ["SCRAM-SHA-256", "SCRAM-SHA-512"]}
    assert user_znode(c, user)[1] == {"version": 1, "config": {}}


@pytest.mark.parametrize("args, fragment", [
    (["users", "add", "x", "--iterations", "4095", "--password", "p"], "4095 is not in the range x>=4096"),
    (["users", "add", "x", "--password", "p", "--password-stdin"], "only one of --password and --password-stdin"),
    (["users", "add", "", "--password", "p"], "a user name must not be empty"),
    (["users", "add", "x", "--mechanism", "PLAIN", "--password", "p"], "'PLAIN' is not one of"),
])
def test_kadmin_users_usage_errors(zk_connect, args, fragment):
    r = CliRunner().invoke(cli, ["--zookeeper", zk_connect, *args], catch_exceptions=False)
    assert r.exit_code == 2 and fragment in r.stderr, r.stderr


@pytest.mark.parametrize("content, fragment", [
    (None, "cannot read"),
    ("security.protocol=BOGUS\n", "security.protocol='BOGUS' is not one of"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n", "needs a username and a password"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n", "sasl.mechanism='GSSAPI' is not supported"),
    ("security.protocol=SSL\nssl.truststore.type=JKS\nssl.truststore.location=/none/t.jks\n",
     "trust store /none/t.jks: cannot read it"),
    ("no separator here\n", "cannot parse line"),
])
def test_command_config_bad_file_is_a_usage_error(tmp_path, content, fragment):
    path = tmp_path / "client.properties"
    if content is not None:
        path.write_text(content)
    r = CliRunner().invoke(cli, ["--bootstrap-server", "127.0.0.1:1", "--command-config", str(path), "list-topics"],
                           catch_exceptions=False)
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert r.stderr.startswith("Error: Invalid value for --command-config: ") and fragment in r.stderr, r.stderr


def test_command_config_plaintext_reaches_the_cluster(cluster, tmp_path):
    c = cluster
    path = tmp_path / "client.properties"
    path.write_text("# a plaintext cluster\nsecurity.protocol=PLAINTEXT\n")
    user = unique("cc")
    for mode in ("bs", "zk"):   # zk: `users` writes to ZooKeeper; groups bootstrap from /brokers/ids
        target = ["--zookeeper", c.zk_connect] if mode == "zk" else ["--bootstrap-server", c.bootstrap]
        r = CliRunner().invoke(cli, [*target, "--command-config", str(path), "users", "add", f"{user}-{mode}",
                                     "--password", "p"], catch_exceptions=False)
        assert r.exit_code == 0, r.stderr
        r = CliRunner().invoke(cli, [*target, "--command-config", str(path), "groups", "list"],
                               catch_exceptions=False)
        assert r.exit_code == 0, r.stderr


# ---- end to end over SASL_PLAINTEXT --------------------------------------------------------------------------

def sasl_conf(c: Cluster, user: str, password: str, mechanism: str) -> dict:
    return {"bootstrap.servers": c.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": password}


def scram_produce(c: Cluster, user: str, password: str, mechanism: str) -> str:
    """"ok" once a confluent-kafka producer logged in as user has delivered a record, "authentication" when its
    login is refused, else the delivery error."""
    from confluent_kafka import KafkaError, Producer
    outcome = []

    def on_error(e):
        if e.code() == KafkaError._AUTHENTICATION:
            outcome.append("authentication")
    p = Producer({**sasl_conf(c, user, password, mechanism), "message.timeout.ms": 10000, "error_cb": on_error})
    p.produce(TOPIC, b"x", on_delivery=lambda err, _msg: outcome.append("ok" if err is None else str(err)))
    while not outcome:
        p.poll(0.05)
    p.purge()
    p.flush(1)
    return outcome[0]


def admin_properties(tmp_path, password: str = ADMIN[1]) -> str:
    path = tmp_path / f"admin-{password}.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                    f"username=\"{ADMIN[0]}\" password=\"{password}\";\n")
    return str(path)


def test_users_added_at_runtime_log_in_and_removed_ones_cannot(cluster, tmp_path):
    """Users added through kadmin --zookeeper, kadmin --bootstrap-server (itself logged in over SASL with
    --command-config) and confluent-kafka's AlterUserScramCredentials log in without a restart; removed, they
    no longer can."""
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialDeletion, UserScramCredentialUpsertion)
    c = cluster
    props = admin_properties(tmp_path)
    secured = ["--bootstrap-server", c.sasl_bootstrap, "--command-config", props]
    by_zk, by_kadmin, by_admin = unique("zk"), unique("kadmin"), unique("admin")
    users = {by_zk: ("pw-zk", "SCRAM-SHA-256"), by_kadmin: ("pw-kadmin", "SCRAM-SHA-512"),
             by_admin: ("pw-admin", "SCRAM-SHA-256")}

    ok(kadmin(c, "zk", "users", "add", by_zk, "--mechanism", "SCRAM-SHA-256", "--password", "pw-zk"))
    ok(CliRunner().invoke(cli, [*secured, "users", "add", by_kadmin, "--mechanism", "SCRAM-SHA-512",
                                "--password", "pw-kadmin"], catch_exceptions=False))
    admin = AdminClient(sasl_conf(c, *ADMIN, "SCRAM-SHA-512"))
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        by_admin, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw-admin")])[by_admin].result(30)
    for user, (password, mechanism) in users.items():
        wait_until(lambda: scram_produce(c, user, password, mechanism) == "ok", 20, 0.1, f"{user} to log in")
        assert scram_produce(c, user, "wrong", mechanism) == "authentication"
    listed = json.loads(ok(CliRunner().invoke(cli, [*secured, "-o", "json", "users", "list", *users],
                                              catch_exceptions=False)))
    assert [u["user"] for u in listed["users"]] == list(users)

    ok(kadmin(c, "zk", "users", "remove", by_zk))
    ok(CliRunner().invoke(cli, [*secured, "users", "remove", by_kadmin], catch_exceptions=False))
    admin.alter_user_scram_credentials([UserScramCredentialDeletion(
        by_admin, ScramMechanism.SCRAM_SHA_256)])[by_admin].result(30)
    for user, (password, mechanism) in users.items():
        wait_until(lambda: scram_produce(c, user, password, mechanism) == "authentication", 20, 0.1,
                   f"{user}'s login to be refused")


def test_command_config_reaches_the_sasl_listener(cluster, tmp_path):
    c = cluster
    props = admin_properties(tmp_path)
    # --zookeeper: the brokers registered there are reached on their SASL_PLAINTEXT endpoints.
    for target in (["--bootstrap-server", c.sasl_bootstrap], ["--zookeeper", c.zk_connect]):
        r = CliRunner().invoke(cli, [*target, "--command-config", props, "-o", "json", "groups", "list"],
                               catch_exceptions=False)
        assert r.exit_code == 0, r.stderr
    # With a wrong password: Kafka's refusal, one line, exit 1.
    r = CliRunner().invoke(cli, ["--bootstrap-server", c.sasl_bootstrap, "--command-config",
                                 admin_properties(tmp_path, "wrong"), "groups", "list"], catch_exceptions=False)
    assert (r.exit_code, r.stderr) == (1, "Error: Authentication failed during authentication due to invalid "
                                          "credentials with SASL mechanism SCRAM-SHA-512\n")
