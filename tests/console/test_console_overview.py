"""The console's Overview in a real browser, and what every page relies on: the layout, the error page when the
cluster does not answer, and the refusal of forged cross-site requests."""
from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.cluster import wait_until
from tests.console.conftest import shot

pytestmark = pytest.mark.xdist_group("console_overview")


def create(bootstrap: str, name: str, partitions: int = 1, rf: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, rf)])[name].result(20)


@pytest.fixture(scope="module")
def console(cluster2m, console_factory):
    return console_factory(cluster2m)


def test_overview_shows_the_cluster_and_its_throughput(cluster2m, console, page):
    create(cluster2m.bootstrap, "ov-orders", partitions=2, rf=2)
    page.goto(console.url + "/")
    assert page.title().startswith("Overview")
    tiles = page.inner_text(".tiles")
    assert "2 up" in tiles
    rows = page.locator("#brokers tbody tr")
    assert rows.count() == 2
    assert "controller" in page.inner_text("#brokers")
    assert page.inner_text("#offline-count") == "0"
    producer = Producer({"bootstrap.servers": cluster2m.bootstrap})
    for i in range(300):
        producer.produce("ov-orders", value=b"v%d" % i)
    producer.flush(20)
    # The page samples the end offsets every 3 s: a rate above zero shows once two samples straddle the writes.
    page.wait_for_function("document.getElementById('rate-now').textContent !== '…'")
    for i in range(300):
        producer.produce("ov-orders", value=b"w%d" % i)
    producer.flush(20)
    page.wait_for_function("parseFloat(document.getElementById('rate-now').textContent.replace(/,/g, '')) > 0",
                           timeout=20000)
    assert page.script_errors == []
    shot(page, "overview")


def test_a_broker_going_down_shows_and_the_page_recovers(cluster_factory, console_factory, page):
    cluster = cluster_factory(2)
    create(cluster.bootstrap, "ov-replicated", partitions=2, rf=2)
    console = console_factory(cluster, bootstrap=cluster.brokers[1].bootstrap)
    page.goto(console.url + "/")
    assert "2 up" in page.inner_text(".tiles")
    cluster.brokers[2].kill9()
    # The controller notices the dead broker when its ZooKeeper session expires (4 s in these tests).
    def shows_it_down():
        page.reload()
        return "1 down" in page.inner_text(".tiles")
    wait_until(shows_it_down, 30, message="the overview to show broker 2 down")
    assert "down" in page.locator("#brokers tr.down").inner_text()
    assert page.locator("#under-replicated tbody tr").count() == 2
    shot(page, "overview-broker-down")
    cluster.brokers[2].start()
    cluster.wait_ready([1, 2])

    def recovered():
        page.reload()
        return "2 up" in page.inner_text(".tiles") and page.locator("#under-replicated").count() == 0
    wait_until(recovered, 40, message="the overview to show both brokers up and every partition replicated")


def test_an_unreachable_cluster_gets_the_error_page_and_the_page_recovers(cluster_factory, console_factory, page):
    cluster = cluster_factory(1)
    console = console_factory(cluster)
    cluster.brokers[1].stop()
    response = page.goto(console.url + "/")
    assert response.status == 503
    assert "did not answer" in page.inner_text("h1")
    assert page.locator("a", has_text="Try again").count() == 1
    shot(page, "error-unreachable")
    cluster.brokers[1].start()
    cluster.wait_ready([1])
    page.click("text=Try again")
    assert page.title().startswith("Overview")


def test_forged_cross_site_posts_are_refused(console, page):
    page.goto(console.url + "/")
    token = page.get_attribute('meta[name="csrf-token"]', "content")
    assert token and len(token) > 20
    cookie = "; ".join(f"{c['name']}={c['value']}" for c in page.context.cookies())

    def post(headers: dict, body: bytes) -> int:
        req = urllib.request.Request(console.url + "/logout", data=body, method="POST",
                                     headers={"Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded",
                                              **headers})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
    assert post({}, b"") == 403                                              # no token
    assert post({}, b"csrf_token=guessed") == 403                            # a wrong one
    assert post({"Origin": "http://evil.example"}, f"csrf_token={token}".encode()) == 403   # the right one, elsewhere
    assert post({"Sec-Fetch-Site": "cross-site"}, f"csrf_token={token}".encode()) == 403
    # A page of another site submitting a form to the console: the browser sends it cross-site, without the token.
    page.set_content(f'<form method="post" action="{console.url}/logout"><button>go</button></form>')
    with page.expect_navigation():
        page.click("button")
    assert "Refused" in page.inner_text("h1")
    # The console's own form, with its token, is accepted.
    assert post({"Origin": console.url}, f"csrf_token={token}".encode()) == 200


def test_pages_send_a_content_security_policy(console):
    with urllib.request.urlopen(console.url + "/", timeout=10) as r:
        policy = r.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy


def test_without_the_brokers_metrics_the_topics_page_says_why_there_is_no_rate_out(console, page):
    page.goto(console.url + "/topics")
    assert page.locator("#topics th", has_text="Out").count() == 0
    assert "metrics.port" in page.inner_text("main") and "--metrics-url" in page.inner_text("main")
