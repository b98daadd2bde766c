"""The console's Consumer groups pages in a real browser against a real cluster: groups of real consumers
(confluent-kafka), their lag over time, resetting their offsets (checked with `kadmin groups describe`, a
subprocess) and the refusals: an active group, bad offsets and timestamps, an unknown group."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, Producer

from kbroker.cluster import wait_until
from tests.clients.conftest import _start_cluster
from tests.console.conftest import ROOT, shot
from tests.console.test_console_overview import create

pytestmark = pytest.mark.xdist_group("console_groups")


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    """Two brokers whose groups' offsets topic fits them (RF 2, 4 partitions: quick to create), shared by the
    module's tests; a group joins at once (no initial rebalance delay)."""
    c = _start_cluster(zookeeper, tmp_path_factory, 2, **{"offsets.topic.replication.factor": 2,
                                                         "offsets.topic.num.partitions": 4,
                                                         "group.initial.rebalance.delay.ms": 0})
    yield c
    c.stop()


@pytest.fixture(scope="module")
def console(cluster, console_factory):
    return console_factory(cluster)


def produce(bootstrap: str, topic: str, n: int, prefix: str = "m") -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        producer.produce(topic, key=b"k%d" % (i % 7), value=f"{prefix}{i}".encode())
    assert producer.flush(20) == 0


def consumer(bootstrap: str, group: str, topic: str) -> Consumer:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"{group}-client",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "session.timeout.ms": 6000,
                  "heartbeat.interval.ms": 300})
    c.subscribe([topic])
    return c


def consume(c: Consumer, n: int) -> None:
    """Read n messages, committing as it goes (synchronously, so the offsets are there when it returns)."""
    got = 0

    def more():
        nonlocal got
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
            c.commit(message=m, asynchronous=False)
        return got >= n
    wait_until(more, 60, interval=0, message=f"{n} messages consumed")


def committed_group(bootstrap: str, topic: str, group: str, n: int, partitions: int = 1) -> None:
    """Topic with n messages, read and committed by group's consumer, which then leaves (the group is Empty)."""
    create(bootstrap, topic, partitions=partitions)
    produce(bootstrap, topic, n)
    c = consumer(bootstrap, group, topic)
    consume(c, n)
    c.close()


def kadmin_describe(bootstrap: str, group: str) -> dict:
    """`kadmin groups describe GROUP` as a user runs it: {(topic, partition): current offset}."""
    p = subprocess.run([sys.executable, "-m", "admin_cli.main", "--bootstrap-server", bootstrap, "-o", "json",
                        "groups", "describe", group], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    (g,) = json.loads(p.stdout)["groups"]
    return {(r["topic"], r["partition"]): r["current_offset"] for r in g["offsets"]}


def banners(page, kind: str) -> str:
    return " ".join(page.locator(f"main .banner.{kind}:not([hidden])").all_inner_texts())


def reset_form(page, kind: str, value: str = "", topic: str = "") -> None:
    page.fill("#reset-form input[name=topic]", topic)
    page.select_option("#reset-kind", kind)
    if value:
        page.fill("#reset-value", value)
    else:
        assert not page.is_visible("#reset-value")      # earliest, latest: no value asked for
    with page.expect_navigation():
        page.click("#reset-form button[value=preview]")


def test_groups_list_and_an_active_groups_page(cluster, console, page):
    create(cluster.bootstrap, "gr-orders", partitions=2, rf=2)
    produce(cluster.bootstrap, "gr-orders", 60)
    active = consumer(cluster.bootstrap, "gr-app", "gr-orders")
    try:
        consume(active, 60)
        produce(cluster.bootstrap, "gr-orders", 15, prefix="late")
        page.goto(console.url + "/groups")
        row = page.locator("#groups tr", has_text="gr-app")
        cells = row.locator("td").all_inner_texts()
        assert cells[:5] == ["gr-app", "Stable", "1", "range", "gr-orders"]
        assert cells[5] == "15"
        shot(page, "groups")

        with page.expect_navigation():                  # a click returns once the page starts loading
            row.locator("a", has_text="gr-app").click()
        assert page.title().startswith("Group gr-app")
        assert page.inner_text("#group-state") == "Stable"
        members = page.inner_text("#members")
        assert "gr-app-client" in members and "gr-orders-0" in members and "gr-orders-1" in members
        offsets = page.locator("#offsets tbody tr")
        assert offsets.count() == 2
        assert sum(int(t) for t in offsets.locator("td:nth-child(5)").all_inner_texts()) == 15
        assert "gr-app-client" in offsets.first.inner_text()
        page.wait_for_function("Chart.getChart(document.getElementById('lag-chart')).data.datasets.length == 2")
        shot(page, "group-members")

        # An active group's offsets are not reset, nor is it deleted: Kafka's refusals are shown.
        reset_form(page, "earliest")
        assert "NON_EMPTY_GROUP" in banners(page, "error") or "inactive" in banners(page, "error")
        assert page.locator("#reset-plan").count() == 0
        page.once("dialog", lambda d: d.accept())
        with page.expect_navigation():
            page.click("button:has-text('Delete group')")
        assert "NON_EMPTY_GROUP" in banners(page, "error")
        assert sum(kadmin_describe(cluster.bootstrap, "gr-app").values()) == 60     # nothing was reset
    finally:
        active.close()
    assert page.script_errors == []


def test_resetting_offsets_is_seen_by_kadmin(cluster, console, page):
    committed_group(cluster.bootstrap, "gr-reset-t", "gr-reset", 40)
    assert kadmin_describe(cluster.bootstrap, "gr-reset") == {("gr-reset-t", 0): 40}
    page.goto(console.url + "/groups/gr-reset")
    assert page.inner_text("#group-state") == "Empty"

    def execute():
        page.once("dialog", lambda d: d.accept())
        with page.expect_navigation():
            page.click("#reset button:has-text('Reset offsets')")

    reset_form(page, "earliest")                          # a dry run first: nothing committed
    assert page.locator("#reset-plan tbody tr").all_inner_texts() == ["gr-reset-t\t0\t40\t0"]
    assert kadmin_describe(cluster.bootstrap, "gr-reset") == {("gr-reset-t", 0): 40}
    execute()
    assert "reset on 1 partition" in banners(page, "ok")
    assert kadmin_describe(cluster.bootstrap, "gr-reset") == {("gr-reset-t", 0): 0}

    reset_form(page, "offset", "25", topic="gr-reset-t")
    execute()
    assert kadmin_describe(cluster.bootstrap, "gr-reset") == {("gr-reset-t", 0): 25}
    assert page.locator("#offsets tbody td:nth-child(5)").inner_text() == "15"

    reset_form(page, "timestamp", "2100-01-01T00:00:00.000")   # no record that recent: the end offset
    assert page.locator("#reset-plan tbody tr").all_inner_texts() == ["gr-reset-t\t0\t25\t40"]
    execute()
    assert kadmin_describe(cluster.bootstrap, "gr-reset") == {("gr-reset-t", 0): 40}
    reset_form(page, "latest")
    assert page.script_errors == []


@pytest.fixture(scope="module")
def empty_group(cluster):
    """Group gr-bad-app, without members, at offset 5 of gr-bad's 5 messages."""
    committed_group(cluster.bootstrap, "gr-bad", "gr-bad-app", 5)
    return "gr-bad-app"


@pytest.mark.parametrize("kind, value, topic, message", [
    ("offset", "-5", "", "cannot be negative"),
    ("offset", "ten", "", "not an offset"),
    ("timestamp", "yesterday", "", "not a datetime"),
    ("timestamp", "2024-13-45T00:00:00.000", "", "not a valid datetime"),
    ("timestamp", "99999999999999999999", "", "outside the timestamps"),
    ("earliest", "", "gr-no-such-topic", "does not exist"),
])
def test_bad_reset_input_gets_a_message(cluster, console, page, empty_group, kind, value, topic, message):
    page.goto(console.url + "/groups/gr-bad-app")
    page.fill("#reset-form input[name=topic]", topic)
    page.select_option("#reset-kind", kind)
    if value:
        page.fill("#reset-value", value)
    with page.expect_navigation() as nav:
        page.click("#reset-form button[value=preview]")
    assert nav.value.status in (400, 409)
    assert message in banners(page, "error")
    assert page.locator("#reset-plan").count() == 0
    assert kadmin_describe(cluster.bootstrap, "gr-bad-app") == {("gr-bad", 0): 5}


def test_an_offset_beyond_the_end_and_an_unknown_group(cluster, console, page):
    committed_group(cluster.bootstrap, "gr-end", "gr-end-app", 12)
    page.goto(console.url + "/groups/gr-end-app")
    reset_form(page, "offset", "999999")
    assert "higher than latest offset" in banners(page, "warn")
    assert page.locator("#reset-plan tbody tr").all_inner_texts() == ["gr-end\t0\t12\t12"]

    response = page.goto(console.url + "/groups/no-such-group")
    assert response.status == 404
    assert "does not exist" in banners(page, "error")
    assert page.inner_text("#group-state") == "Dead"
    with page.expect_navigation():
        page.goto(console.url + "/groups/no-such-group")
    reset_form(page, "earliest")                  # no offsets, no topic named: nothing to reset, and it says so
    assert "Nothing to reset" in banners(page, "warn")
    reset_form(page, "latest", topic="gr-end")      # as Kafka's tool: a new group's offsets may be set up front
    assert page.locator("#reset-plan tbody tr").all_inner_texts() == ["gr-end\t0\t–\t12"]
    # Deleting the group (Empty) works; the list no longer shows it.
    page.goto(console.url + "/groups/gr-end-app")
    page.once("dialog", lambda d: d.accept())
    with page.expect_navigation():
        page.click("button:has-text('Delete group')")
    assert "was deleted" in banners(page, "ok")
    assert page.locator("#groups tr", has_text="gr-end-app").count() == 0
    assert page.script_errors == []


def test_the_lag_chart_rises_while_the_consumer_is_stopped_and_falls_when_it_resumes(cluster, console, page):
    committed_group(cluster.bootstrap, "gr-lag", "gr-lag-app", 20, partitions=2)   # the consumer stops
    page.goto(console.url + "/groups/gr-lag-app")
    source = page.get_attribute("#lag-chart", "data-source")

    def history() -> list[int]:
        d = page.evaluate("(url) => kb.getJSON(url)", source)
        return [p["y"] for p in d["datasets"][0]["points"]]

    def canvas_points() -> list[float]:
        return page.evaluate("Chart.getChart(document.getElementById('lag-chart')).data.datasets[0].data"
                             ".map((p) => p.y)")

    wait_until(lambda: len(canvas_points()) >= 1, 20, message="the chart's first point")
    for batch in range(4):                                  # producers write while nobody consumes
        produce(cluster.bootstrap, "gr-lag", 50, prefix=f"b{batch}-")
        want = 50 * (batch + 1)
        wait_until(lambda w=want: history()[-1] >= w, 20, message=f"the lag to reach {want}")
    rising = history()
    assert rising[0] == 0 and rising[-1] == 200 and rising == sorted(rising)
    wait_until(lambda: max(canvas_points()) == 200, 20, message="the canvas to draw the lag of 200")
    wait_until(lambda: sum(int(t) for t in page.locator("#offsets td.lag").all_inner_texts()) == 200, 20,
               message="the partitions table to follow the lag")

    c = consumer(cluster.bootstrap, "gr-lag-app", "gr-lag")   # it resumes
    try:
        consume(c, 200)
        wait_until(lambda: history()[-1] == 0, 20, message="the lag back to 0")
    finally:
        c.close()
    after = history()
    peak = after.index(200)
    assert after[-1] == 0 and after[peak:] == sorted(after[peak:], reverse=True)
    wait_until(lambda: canvas_points()[-1] == 0, 20, message="the canvas to draw the lag back at 0")
    assert len(page.evaluate("Chart.getChart(document.getElementById('lag-chart')).data.datasets")) == 2  # + gr-lag
    assert page.inner_text("#lag-now") == "0"
    wait_until(lambda: sum(int(t) for t in page.locator("#offsets td.committed").all_inner_texts()) == 220, 20,
               message="the partitions table to show the new committed offsets")
    shot(page, "group")
    # A reload keeps the history (the console keeps it, not the page).
    page.reload()
    wait_until(lambda: 200 in canvas_points() and canvas_points()[-1] == 0, 20, message="the history after reload")
    assert page.script_errors == []


def test_markup_in_a_group_id_is_shown_as_text(cluster, console, page):
    group = '<img id="injected" src=x>"gr-evil'
    committed_group(cluster.bootstrap, "gr-evil", group, 3)
    page.goto(console.url + "/groups")
    assert page.locator("#injected").count() == 0
    with page.expect_navigation():
        page.locator("#groups a", has_text=group).click()
    assert page.inner_text("h1") == f"Consumer group {group}"
    assert page.locator("#injected").count() == 0
    page.wait_for_function("document.getElementById('group-state').textContent === 'Empty'")
    assert kadmin_describe(cluster.bootstrap, group) == {("gr-evil", 0): 3}
    assert page.script_errors == []
