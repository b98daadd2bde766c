"""The console's Security, Transactions and Reassignments pages in a real browser, on a plaintext cluster with an
authorizer (the console's anonymous principal is a super user): an ACL added in the console is seen by `kadmin
acls list` (a subprocess) and removed again, a SCRAM user and a quota are set and removed, a hanging transaction
(transactional records produced raw, never ended) is found and aborted so that a read_committed confluent-kafka
consumer gets past it, a reassignment held back by a throttle (started with kadmin) is listed and cancelled, and
bad input (an unknown operation, an empty principal, a `<script>` principal) gets a message, never a 500."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from confluent_kafka import Producer

from kbroker.cluster import wait_until
from tests.clients._util import create_topic, unique
from tests.console.conftest import shot
from tests.integration.test_kadmin_transactions import read_committed
from tests.integration.test_produce_fetch_bad_input import init_producer_id, v2_batch
from tests.integration.test_txn_log import READ_COMMITTED, list_latest
from tests.txn_helpers import produce_txn, txn_batch

pytestmark = pytest.mark.xdist_group("console_admin_pages")

KADMIN = os.path.join(os.path.dirname(sys.executable), "kadmin")
SETTINGS = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:ANONYMOUS",
            "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 2}


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    from tests.clients.conftest import _start_cluster
    c = _start_cluster(zookeeper, tmp_path_factory, 2, **SETTINGS)
    yield c
    c.stop()


@pytest.fixture(scope="module")
def console(cluster, console_factory):
    return console_factory(cluster)


def kadmin(cluster, *args) -> dict:
    out = subprocess.run([KADMIN, "--bootstrap-server", cluster.bootstrap, "-o", "json", *map(str, args)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def banner(page) -> str:
    return " ".join(page.locator("main > .banner[role=status]").all_inner_texts())


def submit(page, form: str, **fields) -> int:
    """Fill a form of the page by its field names and submit it; the status of the page it lands on."""
    page.locator(f"#{form}").evaluate("f => f.closest('details') && (f.closest('details').open = true)")
    for name, value in fields.items():
        field = page.locator(f"#{form} [name='{name}']")
        if field.evaluate("e => e.tagName") == "SELECT":
            field.select_option(value)
        else:
            field.fill(value)
    with page.expect_navigation() as nav:
        page.locator(f"#{form} button[type=submit]").click()
    return nav.value.status


def test_acls_added_in_the_console_are_seen_by_kadmin_and_removed(cluster, console, page):
    topic = unique("acl-orders")
    page.goto(console.url + "/security")
    assert page.title().startswith("Security")
    assert submit(page, "acl-add", permission="Allow", principal="User:alice", operation="Read",
                  resource_type="Topic", name=topic, pattern_type="LITERAL") == 200
    assert "Added: Allow User:alice Read" in banner(page)
    listed = kadmin(cluster, "acls", "list", "--topic", topic)["acls"]
    assert listed == [{"resource_type": "Topic", "name": topic, "pattern_type": "LITERAL", "principal": "User:alice",
                       "host": "*", "operation": "Read", "permission": "Allow"}]
    # kadmin's ACLs show on the page; the filter by principal selects.
    kadmin(cluster, "acls", "add", "--deny-principal", "User:mallory", "--operation", "Write", "--topic", topic)
    page.goto(f"{console.url}/security?resource_type=Topic&name={topic}&principal=User:mallory")
    rows = page.locator("#acls tbody tr")
    assert rows.count() == 1 and "Deny" in rows.inner_text() and "Write" in rows.inner_text()
    page.goto(f"{console.url}/security?resource_type=Topic&name={topic}")
    assert page.locator("#acls tbody tr").count() == 2
    page.once("dialog", lambda d: d.accept())
    with page.expect_navigation():
        page.locator("#acls tr[data-principal='User:alice'] button", has_text="Remove").click()
    assert "Removed 1 ACL(s) of User:alice" in banner(page)
    assert [a["principal"] for a in kadmin(cluster, "acls", "list", "--topic", topic)["acls"]] == ["User:mallory"]
    assert page.script_errors == []


def test_bad_acl_input_gets_a_message_and_script_is_shown_inert(cluster, console, page):
    topic = unique("acl-bad")
    page.goto(console.url + "/security")
    assert submit(page, "acl-add", principal="", operation="Read", resource_type="Topic", name=topic) == 200
    assert "ACL not added: Expected a principal in format principalType:principalName" in banner(page)
    assert submit(page, "acl-add", principal="User:bob", operation="Read", resource_type="Group", name="") == 200
    assert "Give the resource's name" in banner(page)
    # An operation the resource type does not support (kafka-acls.sh's check), and one that does not exist (a
    # forged form: the page only offers real ones).
    assert submit(page, "acl-add", principal="User:bob", operation="Write", resource_type="Group", name="g") == 200
    assert "ResourceType Group only supports operations" in banner(page)
    page.locator("#acl-add select[name=operation]").evaluate(
        "s => { const o = document.createElement('option'); o.value = o.textContent = 'Fly'; s.append(o); }")
    assert submit(page, "acl-add", principal="User:bob", operation="Fly", resource_type="Topic", name=topic) == 200
    assert "unknown operation 'Fly'" in banner(page)
    assert kadmin(cluster, "acls", "list", "--topic", topic)["acls"] == []
    # A principal (any bytes after "Type:") that is markup: stored as given, shown as text, never run.
    evil = "User:<script>window.pwned=1</script><img src=x onerror=window.pwned=2>"
    assert submit(page, "acl-add", principal=evil, operation="Describe", resource_type="Topic", name=topic) == 200
    assert [a["principal"] for a in kadmin(cluster, "acls", "list", "--topic", topic)["acls"]] == [evil]
    page.goto(f"{console.url}/security?resource_type=Topic&name={topic}")
    assert page.locator("#acls td.principal").inner_text() == evil
    assert page.evaluate("window.pwned") is None
    assert page.locator("#acls script, #acls img").count() == 0
    # A bad filter is a message too; the page still shows.
    response = page.goto(f"{console.url}/security?resource_type=Planet")
    assert response.status == 200 and "unknown resource type 'Planet'" in page.inner_text("#acls-card")
    assert page.script_errors == []


def test_scram_users_and_quotas(cluster, console, page):
    user = unique("carol")
    page.goto(console.url + "/security")
    assert submit(page, "user-set", user=user, password="s3cret", mechanism="SCRAM-SHA-512", iterations="8192") == 200
    assert f"Set SCRAM-SHA-512 credentials of {user}" in banner(page)
    assert page.locator(f"#users tr[data-user='{user}']").inner_text().split() == [user, "SCRAM-SHA-512", "8192",
                                                                                 "Delete"]
    assert kadmin(cluster, "users", "list", user)["users"] == [
        {"user": user, "credentials": [{"mechanism": "SCRAM-SHA-512", "iterations": 8192}]}]
    # Refused by the brokers (iterations over 16384; the browser would stop it, a forged form does not): the
    # broker's words, nothing set.
    page.locator("#user-set [name=iterations]").evaluate("e => e.removeAttribute('max')")
    assert submit(page, "user-set", user=user + "x", password="p", iterations="99999") == 200
    assert "not set" in banner(page) and "UNACCEPTABLE_CREDENTIAL" in banner(page)
    assert submit(page, "user-set", user="", password="p") == 200 and "Give a user name" in banner(page)

    assert submit(page, "quota-set", kind="user+client-id", user=user, **{"client-id": ""},
                  key="producer_byte_rate", value="1048576") == 200
    assert "Set producer_byte_rate=1048576" in banner(page)
    doc = kadmin(cluster, "quotas", "describe", "--user", user, "--client-defaults")
    assert doc["quotas"] == [{"entity": {"user": user, "client-id": None},
                              "values": {"producer_byte_rate": 1048576}}]
    row = page.locator("#quotas tr", has_text=user)
    assert "the default client-id" in row.inner_text() and "1048576" in row.inner_text()
    page.goto(console.url + "/security")
    shot(page, "security")
    page.once("dialog", lambda d: d.accept())
    with page.expect_navigation():
        page.locator(f"#users tr[data-user='{user}'] button").click()
    assert f"Removed SCRAM-SHA-512 credentials of {user}" in banner(page)
    assert page.locator(f"#users tr[data-user='{user}']").count() == 0
    assert submit(page, "quota-set", kind="ip", ip="not an ip!", key="connection_creation_rate", value="5") == 200
    assert "Quota not set" in banner(page)
    assert submit(page, "quota-set", kind="user", user=user, key="request_percentage", value="lots") == 200
    assert "Quota not set" in banner(page) and "request_percentage" in banner(page)
    page.once("dialog", lambda d: d.accept())
    with page.expect_navigation():
        page.locator("#quotas tr", has_text=user).locator("button").click()
    assert "Removed producer_byte_rate" in banner(page)
    assert kadmin(cluster, "quotas", "describe", "--user", user, "--client-defaults")["quotas"] == []
    assert page.script_errors == []


def test_a_transactional_producer_shows_in_the_list(cluster, console, page):
    topic, tid = unique("txl"), unique("tid")
    create_topic(cluster, topic)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"x")
    p.flush(10)
    page.goto(console.url + "/transactions")
    row = page.locator(f"#transactions tr[data-transactional-id='{tid}']")
    assert "Ongoing" in row.inner_text() and f"{topic}-0" in row.inner_text()
    p.commit_transaction(30)
    # EndTxn answers once PrepareCommit is written; CompleteCommit follows the markers, as in Kafka.
    def completed():
        page.reload()
        return "CompleteCommit" in page.locator(f"#transactions tr[data-transactional-id='{tid}']").inner_text()
    wait_until(completed, 15, message="the transaction listed as CompleteCommit")


def test_a_hanging_transaction_is_found_and_aborted(cluster, console, page):
    topic = unique("hang")
    create_topic(cluster, topic)
    b = next(b for b in cluster.brokers.values() if b.alive())
    leader = cluster.brokers[_leader(cluster, topic)]
    pid, epoch = init_producer_id(b)
    assert produce_txn(leader, topic, v2_batch([b"before"])).error_code == 0                   # offset 0
    assert produce_txn(leader, topic, txn_batch([b"h1", b"h2"], pid, epoch, 0)).error_code == 0  # 1-2, never ended
    assert produce_txn(leader, topic, v2_batch([b"after"])).error_code == 0                    # 3
    assert list_latest(leader, topic, READ_COMMITTED) == 1
    # Too young for the default 15 minutes; found with 0.
    page.goto(console.url + "/transactions")
    assert page.locator(f"#hanging tr[data-producer-id='{pid}']").count() == 0
    page.goto(console.url + "/transactions?max_minutes=0")
    row = page.locator(f"#hanging tr[data-producer-id='{pid}']")
    assert f"{topic}-0" in row.inner_text() and "partition (no coordinator)" in row.inner_text()
    shot(page, "transactions")
    page.once("dialog", lambda d: d.accept())
    with page.expect_navigation():
        row.locator("button", has_text="Abort").click()
    assert f"Aborted the transaction of producer {pid} (epoch {epoch}) on {topic}-0 from offset 1" in banner(page)
    assert page.locator(f"#hanging tr[data-producer-id='{pid}']").count() == 0
    assert list_latest(leader, topic, READ_COMMITTED) == list_latest(leader, topic, 0)
    assert read_committed(cluster.bootstrap, topic, 2) == [b"before", b"after"]
    # Bad input: a threshold that is no number is a message; an abort of nothing open is refused with one.
    page.goto(console.url + "/transactions?max_minutes=soon")
    assert "'soon' is not a number of minutes" in page.inner_text("#hanging-card")
    status = page.evaluate("""async (t) => (await fetch('/transactions/abort', {method: 'POST', redirect: 'manual',
        headers: {'Content-Type': 'application/x-www-form-urlencoded'},
        body: new URLSearchParams({csrf_token: document.querySelector('meta[name=csrf-token]').content,
                                   topic: t, partition: '0', start_offset: '1'})})).type""", topic)
    assert status == "opaqueredirect"
    page.goto(console.url + "/transactions")
    assert "Not aborted: No open transaction on" in banner(page)
    assert page.script_errors == []


def _leader(cluster, topic: str) -> int:
    return cluster.zk.get_partition_state(topic, 0).leader


def test_a_reassignment_in_progress_is_listed_and_cancelled(cluster, console, page, tmp_path):
    topic = unique("moving")
    create_topic(cluster, topic)
    source = _leader(cluster, topic)
    target = 1 if source == 2 else 2
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 50})
    for i in range(60):
        producer.produce(topic, value=os.urandom(50_000))
    producer.flush(30)
    page.goto(console.url + "/reassignments")
    assert "No reassignment in progress" in page.inner_text("#reassignments")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [source, target]}]}))
    # 1 byte/s: the new replica copies its first fetch, then waits out the throttle.
    kadmin(cluster, "reassign", "--reassignment-json-file", plan, "--throttle", 1, "--no-wait")
    page.goto(console.url + "/reassignments")
    row = page.locator(f"#reassignments tr[data-partition='{topic}-0']")
    cells = row.locator("td").all_inner_texts()
    assert cells[1:4] == [f"{source}, {target}", str(target), "–"]
    shot(page, "reassignments")
    page.once("dialog", lambda d: d.accept())
    with page.expect_navigation():
        row.locator("button", has_text="Cancel").click()
    assert f"Cancelled the reassignment of {topic}-0" in banner(page)
    wait_until(lambda: cluster.zk.get_topic_assignment(topic).partitions[0] == [source], 20,
               message="the partition back on its original replica")
    page.goto(console.url + "/reassignments")
    assert "No reassignment in progress" in page.inner_text("#reassignments")
    # Cancelling what is not moving is the controller's refusal, shown as a message.
    status = page.evaluate("""async (t) => (await fetch('/reassignments/cancel', {method: 'POST', redirect: 'manual',
        headers: {'Content-Type': 'application/x-www-form-urlencoded'},
        body: new URLSearchParams({csrf_token: document.querySelector('meta[name=csrf-token]').content,
                                   topic: t, partition: '0'})})).type""", topic)
    assert status == "opaqueredirect"
    page.goto(console.url + "/reassignments")
    assert "NO_REASSIGNMENT_IN_PROGRESS" in banner(page)
    assert page.script_errors == []
