"""The console's Topics pages in a real browser against a real two-broker cluster: the list, a topic's page, and
what they change (create, configs, partitions, delete), cross-checked with kcat and confluent-kafka."""
from __future__ import annotations

import subprocess

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from kbroker.cluster import free_port, wait_until
from tests.clients._util import leaders_known
from tests.conftest import fresh_chroot
from tests.console.conftest import shot
from tests.integration.conftest import Cluster

pytestmark = pytest.mark.xdist_group("console_topics")
GROUP_SETTINGS = {"offsets.topic.replication.factor": 2, "offsets.topic.num.partitions": 3,
                  "group.initial.rebalance.delay.ms": 0}
PWNED = "window.__pwned === undefined"


@pytest.fixture(scope="module")
def cluster2m(zookeeper, tmp_path_factory):
    """Two brokers serving Prometheus metrics, whose groups' offsets topic fits them (two replicas)."""
    c = Cluster(fresh_chroot(zookeeper), str(tmp_path_factory.mktemp("console-topics")))
    try:
        for i in (1, 2):
            port = free_port()
            c.add(i, **GROUP_SETTINGS, **{"metrics.port": port}).metrics_url = f"http://127.0.0.1:{port}/metrics"
        c.wait_ready([1, 2])
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def console(cluster2m, console_factory):
    urls = [option for b in cluster2m.brokers.values() for option in ("--metrics-url", b.metrics_url)]
    return console_factory(cluster2m, *urls)


@pytest.fixture(scope="module")
def console_without_metrics(cluster2m, console_factory):
    return console_factory(cluster2m)


def create(cluster: Cluster, name: str, partitions: int = 1, rf: int = 1) -> None:
    """Create the topic and wait until every broker lists it with its leaders: CreateTopics answers once the
    controller knows it, and the broker the console asks may learn it a moment later (as in Kafka)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, partitions, rf)])[name].result(20)
    wait_until(lambda: leaders_known(cluster, name, partitions), 20, message=f"every broker to list {name}")


def produce(bootstrap: str, topic: str, n: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        producer.produce(topic, value=b"message %d" % i, partition=partition)
    producer.flush(20)


def commit(bootstrap: str, group: str, topic: str, partition: int, offset: int) -> None:
    """A confluent-kafka consumer of GROUP joins it on TOPIC, commits OFFSET and leaves (the group is then Empty)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        wait_until(lambda: consumer.poll(0.2) is None and consumer.assignment(), 30, message="the assignment")
        consumer.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)
    finally:
        consumer.close()


def topic_configs(bootstrap: str, topic: str) -> dict:
    """The topic's configs as confluent-kafka's AdminClient describes them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("topic", topic)
    return admin.describe_configs([resource])[resource].result(20)


def kcat_partitions(bootstrap: str, topic: str) -> int | None:
    """The partition count kcat's metadata listing gives topic (None: not listed)."""
    out = subprocess.run(["kcat", "-b", bootstrap, "-L"], capture_output=True, text=True, check=True,
                         timeout=30).stdout
    for line in out.splitlines():
        if line.strip().startswith(f'topic "{topic}" with'):
            return int(line.split(" with ")[1].split()[0])
    return None


def submit_create(page, console, name: str, partitions: str = "", rf: str = "", configs: str = "") -> None:
    page.goto(console.url + "/topics")
    page.fill("#create-topic input[name=name]", name)
    page.fill("#create-topic input[name=partitions]", partitions)
    page.fill("#create-topic input[name=replication_factor]", rf)
    page.fill("#create-topic textarea[name=configs]", configs)
    with page.expect_navigation():
        page.click("#create-topic button[type=submit]")


def rate(page, topic: str, kind: str) -> str:
    return f"document.querySelector('tr[data-topic=\"{topic}\"] td[data-rate={kind}]').textContent"


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tp-all", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    try:
        wait_until(lambda: (got.extend(consumer.consume(100, 0.5)) or len(got) >= expected), 30,
                   message=f"{expected} messages of {topic}")
    finally:
        consumer.close()


def test_the_list_shows_each_topic_and_a_created_topic_is_seen_by_kcat(cluster2m, console, console_without_metrics,
                                                                      page):
    create(cluster2m, "tp-orders", partitions=3, rf=2)
    produce(cluster2m.bootstrap, "tp-orders", 50)
    # Without --metrics-url the console finds the endpoints from the brokers' metrics.port.
    page.goto(console_without_metrics.url + "/topics")
    assert page.locator("#topics th", has_text="Out").count() == 1
    page.goto(console.url + "/topics")
    row = page.locator('#topics tr[data-topic="tp-orders"]')
    cells = row.locator("td").all_inner_texts()
    assert cells[1:3] == ["3", "2"]                                 # partitions, RF
    assert cells[3].endswith("B") and cells[3] != "0 B"              # the leaders' bytes
    assert cells[4:6] == ["0", "0"]                                  # under-replicated, offline
    # The rates: the page samples the end offsets and the brokers' counters every 5 s; what is written and read
    # between samples shows.
    page.wait_for_function(f"{rate(page, 'tp-orders', 'in')} !== '…' && {rate(page, 'tp-orders', 'out')} !== '…'",
                           timeout=20000)
    produce(cluster2m.bootstrap, "tp-orders", 500)
    consume_all(cluster2m.bootstrap, "tp-orders", 3, 550)
    for kind in ("in", "out"):
        page.wait_for_function(f"parseFloat({rate(page, 'tp-orders', kind)}.replace(/,/g, '')) > 0", timeout=20000)

    submit_create(page, console, "tp-created", "4", "2", "retention.ms=3600000\ncleanup.policy=compact")
    assert page.title().startswith("Topic tp-created")
    assert "Created topic 'tp-created' (4 partitions, replication factor 2)" in page.inner_text("main")
    wait_until(lambda: kcat_partitions(cluster2m.bootstrap, "tp-created") == 4, 20,
               message="kcat -L to list tp-created with 4 partitions")
    configs = topic_configs(cluster2m.bootstrap, "tp-created")
    assert configs["retention.ms"].value == "3600000" and configs["cleanup.policy"].value == "compact"
    page.goto(console.url + "/topics")
    assert page.locator('#topics tr[data-topic="tp-created"]').count() == 1
    # Internal topics are listed, marked.
    commit(cluster2m.bootstrap, "tp-marker", "tp-orders", 0, 1)
    page.reload()
    assert "internal" in page.locator('#topics tr[data-topic="__consumer_offsets"]').inner_text()
    assert "internal" not in page.locator('#topics tr[data-topic="tp-orders"]').inner_text()
    assert page.script_errors == []
    shot(page, "topics")


def test_a_topics_page_shows_partitions_readers_and_changes_configs_and_partitions(cluster2m, console, page):
    create(cluster2m, "tp-detail", partitions=2, rf=2)
    produce(cluster2m.bootstrap, "tp-detail", 10, partition=0)
    commit(cluster2m.bootstrap, "tp-reader", "tp-detail", 0, 4)
    page.goto(console.url + "/topics/tp-detail")
    p0 = page.locator('#partitions tr[data-partition="0"] td').all_inner_texts()
    assert p0[0] == "0" and sorted(p0[2].split(", ")) == ["1", "2"] and sorted(p0[3].split(", ")) == ["1", "2"]
    assert p0[4:7] == ["0", "10", "10"]                               # log start, log end, messages
    assert p0[7].count("B") == 2                                     # a size for each replica
    reader = page.locator('#readers tr[data-group="tp-reader"] td').all_inner_texts()
    assert reader[1:] == ["Empty", "0", "4", "10", "6"]               # state, partition, committed, end, lag

    page.fill("#set-config input[name=config_name]", "retention.ms")
    page.fill("#set-config input[name=config_value]", "7200000")
    with page.expect_navigation():
        page.click("#set-config button[type=submit]")
    assert "Set retention.ms=7200000" in page.inner_text("main")
    row = page.locator('#config-table tr[data-config="retention.ms"]')
    assert "7200000" in row.inner_text() and "override" in row.inner_text()
    assert "default config" in page.locator('#config-table tr[data-config="segment.bytes"]').inner_text()
    assert topic_configs(cluster2m.bootstrap, "tp-detail")["retention.ms"].value == "7200000"
    shot(page, "topic")
    with page.expect_navigation():
        row.locator("button", has_text="Reset to default").click()
    assert "override" not in page.locator('#config-table tr[data-config="retention.ms"]').inner_text()
    assert topic_configs(cluster2m.bootstrap, "tp-detail")["retention.ms"].value == "604800000"

    page.fill("#set-config input[name=config_name]", "no.such.config")
    page.fill("#set-config input[name=config_value]", "1")
    with page.expect_navigation():
        page.click("#set-config button[type=submit]")
    assert "were not changed" in page.locator(".banner.error[role=status]").inner_text()

    page.fill("#add-partitions input[name=count]", "1")
    with page.expect_navigation():
        page.click("#add-partitions button[type=submit]")
    assert "No partitions were added" in page.locator(".banner.error[role=status]").inner_text()
    page.fill("#add-partitions input[name=count]", "3")
    with page.expect_navigation():
        page.click("#add-partitions button[type=submit]")
    assert "now has 3 partitions" in page.inner_text("main")
    wait_until(lambda: kcat_partitions(cluster2m.bootstrap, "tp-detail") == 3, 20, message="kcat to see 3 partitions")
    # The broker the console asks may learn of the new partitions (UpdateMetadata) after the one kcat asked.
    def three_rows():
        page.reload()
        return page.locator("#partitions tbody tr").count() == 3
    wait_until(three_rows, 15, message="the topic's page to list 3 partitions")
    assert page.script_errors == []


@pytest.mark.parametrize("name, partitions, rf, says", [
    ("<script>window.__pwned=1;alert(1)</script>", "1", "1", "<script>window.__pwned=1;alert(1)</script>"),
    ('<img src=x onerror="window.__pwned=2">', "1", "1", '<img src=x onerror="window.__pwned=2">'),
    ("..", "1", "1", "'..'"),
    ("t" * 250, "1", "1", "249"),
    ("tp-zero", "0", "1", "Partitions must be at least 1"),
    ("tp-too-many-replicas", "1", "3", "INVALID_REPLICATION_FACTOR"),
    ("tp-negative", "-1", "1", "Partitions must be at least 1"),
], ids=["script", "img-onerror", "dots", "250-chars", "0-partitions", "rf-above-brokers", "negative"])
def test_bad_topics_are_refused_with_a_message_and_shown_inert(cluster2m, console, page, name, partitions, rf, says):
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    submit_create(page, console, name, partitions, rf)
    banner = page.locator(".banner.error[role=status]").inner_text()
    assert "was not created" in banner and says in banner
    assert page.evaluate(PWNED)
    assert dialogs == [] and page.script_errors == []
    page.goto(console.url + "/topics")
    assert page.locator("#topics tbody tr").filter(has_text=name[:40]).count() == 0


def test_deleting_a_topic_asks_first(cluster2m, console, page):
    create(cluster2m, "tp-doomed", partitions=1, rf=1)
    page.goto(console.url + "/topics/tp-doomed")
    asked = []
    page.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    page.click("button:has-text('Delete topic')")
    assert asked and "tp-doomed" in asked[0]
    assert page.title().startswith("Topic tp-doomed")               # dismissed: nothing happened
    page.once("dialog", lambda d: d.accept())
    with page.expect_navigation():
        page.click("button:has-text('Delete topic')")
    assert "marked for deletion" in page.inner_text("main")
    wait_until(lambda: kcat_partitions(cluster2m.bootstrap, "tp-doomed") is None, 30,
               message="kcat to stop listing tp-doomed")

    def gone_from_the_list() -> bool:           # the broker the console asks may learn it a moment after kcat's
        page.goto(console.url + "/topics")
        return page.locator('#topics tr[data-topic="tp-doomed"]').count() == 0
    wait_until(gone_from_the_list, 20, message="the Topics list to drop tp-doomed")
    assert page.script_errors == []
