"""The console's Messages page in a real browser against a real cluster: browsing a partition written by real
clients (formats, compression, nulls, headers, paging, offsets and timestamps, the filter), the live tail,
producing a message read back by confluent-kafka, and hostile or bad input."""
from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.cluster import wait_until
from tests.console.conftest import shot

pytestmark = pytest.mark.xdist_group("console_messages")
BASE_TS = 1_700_000_000_000
HOSTILE_KEY = b"<script>window.__pwned=1;alert(1)</script>"
HOSTILE_VALUE = b'<img src=x onerror="window.__pwned=2;alert(2)">'
HOSTILE_HEADER = b"<script>window.__pwned=3</script>"


@pytest.fixture(scope="module")
def console(cluster2m, console_factory):
    return console_factory(cluster2m)


def create(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(20)


@pytest.fixture(scope="module")
def browsed(cluster2m):
    """msg-browse partition 0: 30 records written by confluent-kafka, of every kind the page tells apart."""
    create(cluster2m.bootstrap, "msg-browse", partitions=2)
    plain = Producer({"bootstrap.servers": cluster2m.bootstrap, "linger.ms": 0})
    gzipped = Producer({"bootstrap.servers": cluster2m.bootstrap, "compression.type": "gzip", "linger.ms": 0})
    kinds = {0: (b"k0", json.dumps({"order": 0, "items": [1, 2]}).encode(), [("trace", b"t-0")]),
             1: (None, b"plain text 1", []),
             2: (b"k2", b"\xff\xfe\x00\x01binary", [("bin", b"\x00\xff")]),
             3: (b"k3", None, []),
             4: (b"k4", b"the needle is here", [])}
    for i in range(30):
        key, value, headers = kinds.get(i, (b"k%d" % i, b"value %d" % i, []))
        producer = plain
        if 10 <= i < 20:                # compressible, so that librdkafka keeps its gzip batch
            producer, value = gzipped, value * 40
        producer.produce("msg-browse", key=key, value=value, headers=headers, partition=0,
                         timestamp=BASE_TS + i * 1000)
        producer.flush(20)
    return "msg-browse"


def rows(page) -> list[dict]:
    out = []
    for tr in page.locator("#messages tbody tr").all():
        cells = tr.locator("td").all_inner_texts()
        out.append({"offset": int(cells[0]), "time": cells[1], "key": cells[2], "value": cells[3],
                    "headers": cells[4]})
    return out


def test_browsing_shows_each_record_as_it_is_and_pages_both_ways(console, browsed, page):
    page.goto(f"{console.url}/messages?topic={browsed}&partition=0&from=earliest&limit=20")
    shown = rows(page)
    assert [r["offset"] for r in shown] == list(range(20))
    assert json.loads(shown[0]["value"]) == {"order": 0, "items": [1, 2]}           # JSON, pretty-printed
    assert "\n" in shown[0]["value"]
    assert "trace" in shown[0]["headers"] and "t-0" in shown[0]["headers"]
    assert shown[1]["key"] == "null" and shown[1]["value"] == "plain text 1"      # a null key; text
    assert shown[2]["value"] == "fffe000162696e617279"                            # not UTF-8: hex
    assert "00ff" in shown[2]["headers"]
    assert shown[3]["value"] == "null"                                           # a tombstone
    assert "CreateTime" in shown[0]["time"] and "2023-11-14T22:13:20.000+00:00" in shown[0]["time"]
    assert "none" in shown[0]["time"] and "gzip" in shown[10]["time"]            # the batch's codec
    # Switch one message, then the page, to another format.
    row0 = page.locator('#messages tr[data-offset="0"]')
    row0.locator("select.row-format").select_option("hex")
    assert row0.locator("td.value").inner_text() == json.dumps({"order": 0, "items": [1, 2]}).encode().hex()
    page.select_option("#page-format", "text")
    assert rows(page)[0]["value"] == '{"order": 0, "items": [1, 2]}'
    assert rows(page)[2]["value"] == "\\xff\\xfe\\x00\\x01binary"
    page.select_option("#page-format", "auto")
    shot(page, "messages")

    with page.expect_navigation():                      # a click returns once the page starts loading
        page.click("#newer")
    assert [r["offset"] for r in rows(page)] == list(range(20, 30))
    assert page.locator("#newer").count() == 0                                  # the end of the partition
    with page.expect_navigation():
        page.click("#older")
    assert [r["offset"] for r in rows(page)] == list(range(20))

    page.goto(f"{console.url}/messages?topic={browsed}&partition=0&from=latest&limit=20")
    assert [r["offset"] for r in rows(page)] == list(range(10, 30))
    page.goto(f"{console.url}/messages?topic={browsed}&partition=0&from=offset&at=25&limit=20")
    assert [r["offset"] for r in rows(page)] == list(range(25, 30))
    page.goto(f"{console.url}/messages?topic={browsed}&partition=0&from=timestamp&at={BASE_TS + 7000}&limit=20")
    assert rows(page)[0]["offset"] == 7
    page.goto(f"{console.url}/messages?topic={browsed}&partition=0&from=timestamp&at=2023-11-14T22:13:32.000Z"
              "&limit=20")
    assert rows(page)[0]["offset"] == 12
    page.goto(f"{console.url}/messages?topic={browsed}&partition=0&from=earliest&filter=NEEDLE")
    assert [r["offset"] for r in rows(page)] == [4]
    assert page.script_errors == []


@pytest.mark.parametrize("query, says", [
    ("from=offset&at=999", "Offset 999 is out of range for msg-browse-0: it holds offsets 0 to 29."),
    ("from=offset&at=-5", "Offset -5 is out of range"),
    ("from=offset&at=ten", "'ten' is not an offset"),
    ("from=timestamp&at=yesterday", "is not a datetime"),
    ("partition=7", "Topic 'msg-browse' has no partition 7 (it has 2)."),
])
def test_bad_browsing_input_gets_a_message(console, browsed, page, query, says):
    response = page.goto(f"{console.url}/messages?topic={browsed}&partition=0&{query}".replace(
        "partition=0&partition", "partition"))
    assert response.status == 400
    assert says in page.inner_text("#browse-error")
    assert page.script_errors == []


def test_an_unknown_topic_gets_a_message(console, page):
    response = page.goto(f"{console.url}/messages?topic=no-such-topic")
    assert response.status == 400
    assert "does not exist" in page.inner_text("#browse-error")


def test_hostile_bytes_from_a_real_client_are_shown_as_text_and_never_run(cluster2m, console, page):
    create(cluster2m.bootstrap, "msg-hostile")
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    producer = Producer({"bootstrap.servers": cluster2m.bootstrap})
    producer.produce("msg-hostile", key=HOSTILE_KEY, value=HOSTILE_VALUE, headers=[("x-evil", HOSTILE_HEADER)])
    producer.flush(20)
    page.goto(f"{console.url}/messages?topic=msg-hostile&from=earliest")
    (shown,) = rows(page)
    assert shown["key"] == HOSTILE_KEY.decode() and shown["value"] == HOSTILE_VALUE.decode()
    assert HOSTILE_HEADER.decode() in shown["headers"]
    for fmt in ("text", "json", "hex", "auto"):
        page.select_option("#page-format", fmt)
    # The live tail builds its rows in the browser: the same bytes arriving there stay text too.
    page.click("#tail")
    producer.produce("msg-hostile", key=HOSTILE_KEY, value=HOSTILE_VALUE, headers=[("x-evil", HOSTILE_HEADER)])
    producer.flush(20)
    page.wait_for_selector("#messages tr.tailed")
    tailed = rows(page)[-1]
    assert tailed["offset"] == 1 and tailed["key"] == HOSTILE_KEY.decode()
    assert tailed["value"] == HOSTILE_VALUE.decode() and HOSTILE_HEADER.decode() in tailed["headers"]
    page.wait_for_timeout(500)                       # an onerror would have fired by now
    assert page.evaluate("window.__pwned") is None
    assert dialogs == [] and page.script_errors == []


def test_the_live_tail_appends_new_records(cluster2m, console, page):
    create(cluster2m.bootstrap, "msg-tail")
    producer = Producer({"bootstrap.servers": cluster2m.bootstrap})
    producer.produce("msg-tail", value=b"before")
    producer.flush(20)
    page.goto(f"{console.url}/messages?topic=msg-tail")
    assert [r["value"] for r in rows(page)] == ["before"]
    page.click("#tail")
    for i in range(3):
        producer.produce("msg-tail", key=b"t%d" % i, value=json.dumps({"n": i}).encode())
    producer.flush(20)
    page.wait_for_function("document.querySelectorAll('#messages tr.tailed').length === 3")
    shown = rows(page)
    assert [r["offset"] for r in shown] == [0, 1, 2, 3]
    assert json.loads(shown[3]["value"]) == {"n": 2} and shown[3]["key"] == "t2"
    page.click("#tail")                              # stop
    assert page.inner_text("#tail") == "Live tail"
    assert page.script_errors == []


def test_a_message_produced_in_the_console_is_read_by_a_consumer(cluster2m, console, page):
    create(cluster2m.bootstrap, "msg-produced", partitions=2)
    page.goto(f"{console.url}/messages?topic=msg-produced")
    form = page.locator("#produce")
    form.locator("select[name=topic]").select_option("msg-produced")
    form.locator("input[name=partition]").fill("1")
    form.locator("input[name=key]").fill("order-7")
    form.locator("select[name=value_format]").select_option("json")
    form.locator("textarea[name=value]").fill('{"total": 12.5, "items": ["a", "b"]}')
    form.locator("textarea[name=headers]").fill("trace-id:abc123\nsource: console")
    with page.expect_navigation():
        form.locator("button[type=submit]").click()
    assert "Produced a message to msg-produced-1 at offset 0." in page.inner_text("main")
    assert rows(page)[0]["key"] == "order-7"

    consumer = Consumer({"bootstrap.servers": cluster2m.bootstrap, "group.id": "msg-reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("msg-produced", 1, 0)])
    try:
        message = wait_until(lambda: consumer.poll(0.5), 20, message="the consumer to read the message")
        assert message.error() is None
        assert message.key() == b"order-7"
        assert message.value() == b'{"total":12.5,"items":["a","b"]}'
        assert message.headers() == [("trace-id", b"abc123"), ("source", b"console")]
    finally:
        consumer.close()

    form = page.locator("#produce")
    form.locator("select[name=value_format]").select_option("json")
    form.locator("textarea[name=value]").fill("{not json")
    with page.expect_navigation():
        form.locator("button[type=submit]").click()
    assert "Nothing was produced: The value is not valid json" in page.inner_text(".banner.error[role=status]")
    form = page.locator("#produce")
    form.locator("input[name=partition]").fill("5")
    with page.expect_navigation():
        form.locator("button[type=submit]").click()
    assert "has no partition 5" in page.inner_text(".banner.error[role=status]")
    assert page.script_errors == []
