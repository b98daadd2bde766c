"""The console's Brokers pages in a real browser against real brokers serving Prometheus metrics (metrics.port):
the traffic charts after a real producer wrote, log dirs, a dynamic config edited in the console and read back by
kadmin and confluent-kafka, and the refusals: a read-only config, a bad value, no reachable metrics endpoint."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

from kbroker.cluster import free_port, wait_until
from tests.conftest import fresh_chroot
from tests.console.conftest import ROOT, shot
from tests.console.test_console_overview import create
from tests.integration.conftest import Cluster

pytestmark = pytest.mark.xdist_group("console_brokers")
SECRET = "t0p-s3cret-encoder-key"


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    """Two brokers, each serving its metrics on its own metrics.port, one with a sensitive config set."""
    c = Cluster(fresh_chroot(zookeeper), str(tmp_path_factory.mktemp("brokers")))
    try:
        for i in (1, 2):
            c.add(i, **{"metrics.port": free_port(), "password.encoder.secret": SECRET})
        c.wait_ready([1, 2])
    except BaseException:
        c.stop()
        raise
    yield c
    c.stop()


@pytest.fixture(scope="module")
def console(cluster, console_factory):
    return console_factory(cluster)


def banners(page, kind: str) -> str:
    return " ".join(page.locator(f"main .banner.{kind}:not([hidden])").all_inner_texts())


def chart_values(page, name: str) -> list[float]:
    return page.evaluate(f"Chart.getChart(document.getElementById('chart-{name}')).data.datasets"
                         ".flatMap((d) => d.data.map((p) => p.y))")


def test_brokers_page_charts_the_traffic_read_from_the_brokers_metrics(cluster, console, page):
    create(cluster.bootstrap, "br-traffic", partitions=2, rf=2)
    page.goto(console.url + "/brokers")
    rows = page.locator("#brokers tbody tr")
    assert rows.count() == 2
    assert "controller" in page.inner_text("#brokers")
    for i, b in cluster.brokers.items():
        assert os.path.join(os.path.dirname(b.config_path), "data") in rows.nth(i - 1).inner_text()
    source = page.get_attribute(".chart-grid", "data-source")
    producer = Producer({"bootstrap.servers": cluster.bootstrap})

    def charted(name: str) -> float:
        d = page.evaluate("(url) => kb.getJSON(url)", source)
        return max((p["y"] for ds in d["charts"][name] for p in ds["points"]), default=0)

    def traffic_charted() -> bool:
        for i in range(200):
            producer.produce("br-traffic", value=b"x" * 100, key=b"%d" % i)
        producer.flush(20)
        return charted("bytesin") > 0 and charted("p99") > 0
    # Each poll scrapes both brokers: a rate, or a percentile, needs two scrapes of a broker around the writes.
    wait_until(traffic_charted, 30, interval=1.2, message="non-zero bytes in and Produce p99 from the metrics")
    d = page.evaluate("(url) => kb.getJSON(url)", source)
    assert [e["label"] for e in d["endpoints"]] == ["broker 1", "broker 2"]
    assert all(e["error"] is None for e in d["endpoints"]) and d["reachable"]
    assert {"Produce", "Metadata", "FetchFollower"} <= set(d["requests"])
    other = page.evaluate("(url) => kb.getJSON(url)", source + "?request=<NoSuchRequest>")
    assert [ds["points"] for ds in other["charts"]["p99"]] == [[], []]
    wait_until(lambda: max(chart_values(page, "bytesin"), default=0) > 0, 20, message="the bytes-in chart drawn")
    wait_until(lambda: max(chart_values(page, "requests"), default=0) > 0, 20, message="the requests chart drawn")
    wait_until(lambda: max(chart_values(page, "p99"), default=0) > 0, 20, message="the Produce p99 chart drawn")
    assert page.is_hidden("#metrics-status")
    shot(page, "brokers")
    assert page.script_errors == []


def kadmin_describe_config(cluster, broker: int) -> dict:
    p = subprocess.run([sys.executable, "-m", "admin_cli.main", "--bootstrap-server", cluster.bootstrap, "-o", "json",
                        "describe-config", "--broker", str(broker)], capture_output=True, text=True, timeout=60,
                       cwd=ROOT)
    assert p.returncode == 0, p.stderr
    (entity,) = json.loads(p.stdout)["entities"]
    return {c["name"]: c["value"] for c in entity["configs"]}


def config_row(page, name: str):
    return page.locator(f"#config-table tr[data-name='{name}']")


def test_a_dynamic_config_edited_in_the_console_is_seen_by_kadmin_and_confluent_kafka(cluster, console, page):
    page.goto(console.url + "/brokers/1")
    assert page.title().startswith("Broker 1")
    assert "online" in page.inner_text("#log-dirs")
    # Read-only configs have no form; sensitive values are never sent to the browser.
    assert config_row(page, "broker.id").locator("form").count() == 0
    assert "read-only" in config_row(page, "broker.id").inner_text()
    assert SECRET not in page.content()
    assert "(hidden)" in config_row(page, "password.encoder.secret").inner_text()
    page.fill("#config-filter", "cleaner.threads")
    assert page.locator("#config-table tbody tr:visible").count() == 1
    shot(page, "broker")

    row = config_row(page, "log.cleaner.threads")
    row.locator("input[name=value]").fill("2")
    with page.expect_navigation():
        row.locator("button[value=set]").click()
    assert "log.cleaner.threads set to 2" in banners(page, "ok")
    assert kadmin_describe_config(cluster, 1) == {"log.cleaner.threads": "2"}
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    described = admin.describe_configs([ConfigResource("BROKER", "1")])
    entry = next(iter(described.values())).result(20)["log.cleaner.threads"]
    assert entry.value == "2" and entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    # The broker applies the change when ZooKeeper's /config/changes notification reaches it, as Kafka's does: the
    # page rendered right after the POST may still show the old source; a reload shows the new one.
    def shows_it():
        page.reload()
        return "DYNAMIC_BROKER_CONFIG" in config_row(page, "log.cleaner.threads").inner_text()
    wait_until(shows_it, 15, message="the page to show log.cleaner.threads as a dynamic broker config")

    # A bad value is refused with the broker's message; nothing changes.
    row = config_row(page, "log.cleaner.threads")
    row.locator("input[name=value]").fill("many")
    with page.expect_navigation():
        row.locator("button[value=set]").click()
    assert "log.cleaner.threads" in banners(page, "error") and "INVALID_REQUEST" in banners(page, "error")
    assert kadmin_describe_config(cluster, 1) == {"log.cleaner.threads": "2"}

    # Removing the override goes back to the default.
    with page.expect_navigation():
        config_row(page, "log.cleaner.threads").locator("button[value=delete]").click()
    assert "override removed" in banners(page, "ok")
    assert kadmin_describe_config(cluster, 1) == {}
    assert page.script_errors == []


def test_an_unknown_broker_gets_a_message(console, page):
    response = page.goto(console.url + "/brokers/7")
    assert response.status == 404
    assert "Broker 7 is not a live broker" in page.inner_text("main")


def test_without_a_reachable_metrics_endpoint_the_page_says_so_and_shows_the_rest(cluster, console_factory, page):
    dead = f"http://127.0.0.1:{free_port()}/metrics"
    console = console_factory(cluster, "--metrics-url", dead)
    page.goto(console.url + "/brokers")
    page.wait_for_selector("#metrics-status:not([hidden])")
    assert "No metrics endpoint is reachable" in page.inner_text("#metrics-status")
    assert dead in page.inner_text("#metrics-status")
    assert page.locator("#brokers tbody tr").count() == 2
    assert page.is_hidden("#cluster-status")
    assert page.script_errors == []


def test_a_broker_going_down_is_shown_and_the_page_recovers(cluster, console, page):
    page.goto(console.url + "/brokers")
    assert page.locator("#brokers tr.down").count() == 0
    cluster.brokers[2].kill9()
    try:
        def shows_it_down():
            page.reload()
            return page.locator("#brokers tr.down").count() == 1
        # The controller drops it when its ZooKeeper session expires (4 s in these tests).
        wait_until(shows_it_down, 30, interval=1, message="broker 2 shown down")
        assert "down" in page.locator("#brokers tr.down").inner_text()
        assert page.locator("#brokers tr.down a").count() == 0          # no configs page for a broker that is gone
        source = page.get_attribute(".chart-grid", "data-source")
        d = page.evaluate("(url) => kb.getJSON(url)", source)
        assert [e["label"] for e in d["endpoints"]] == ["broker 1"] and d["reachable"]
        assert page.script_errors == []
    finally:
        cluster.brokers[2].start()
        cluster.wait_ready([1, 2])

    def recovered():
        page.reload()
        return page.locator("#brokers tbody tr").count() == 2 and page.locator("#brokers tr.down").count() == 0
    wait_until(recovered, 30, interval=1, message="both brokers shown up")
