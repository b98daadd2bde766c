"""Messages: browse one partition of a topic, tail it live, and produce a message.

Browsing starts at the earliest offset, the newest page (latest), an offset, or a timestamp (ListOffsets: the
first record at or after it; milliseconds or kafka-consumer-groups' YYYY-MM-DDTHH:mm:SS.sss[zone]) and pages
both ways by offset. Records are fetched (read_uncommitted, control batches left out) and decoded with kadmin
consume's fetched_records; each shows its offset, timestamp and type, the batch's compression codec, key, value
and headers. Every key, value and header value is offered as text (kadmin's escaping of undecodable bytes and
control characters), JSON (pretty-printed, when it parses) and hex; the page picks JSON for valid UTF-8 JSON,
text for other UTF-8, else hex, and the visitor can switch per message or for the page (static/messages.js). A
null key or value shows as null. The filter keeps the records whose key, value, header names or values contain
a text (case-insensitive); a filtered page scans at most SCAN_BYTES.

The live tail polls tail.json from the end of the partition and appends the new records (built with
textContent in the browser). Produce writes one record (key empty: null; value as text, JSON or hex, as kadmin
produce's --format; headers `name:value`, one a line) with acks=all to the chosen partition, or to murmur2 of
the key as Kafka's default partitioner, or to a random partition for a null key.

Bad input (an offset outside the partition, a timestamp that does not parse, a partition the topic lacks, a
value that is not the chosen format) is a message on the page, never a 500.
"""
from __future__ import annotations

import datetime as dt
import json
import random
import time
from dataclasses import dataclass

from flask import Blueprint, request, url_for
from kafka.partitioner.default import murmur2

from admin_cli.console_tools import Record, _encode, _show, fetched_records
from admin_cli.groups import parse_datetime
from kbroker.protocol.client import EARLIEST, LATEST, Errors, KafkaError, TopicPartition, Unreachable, error_name
from kbroker.records import entries as rec
from kbroker.records.builder import build_v2
from kbroker.records.compression import CODEC_NAMES

from .web import as_json, client, done, form_text, page

blueprint = Blueprint("messages", __name__)
PAGE_SIZES = (20, 50, 100, 200)
FETCH_BYTES = 1024 * 1024
SCAN_BYTES = 16 * 1024 * 1024       # at most this much of the log read for one page or tail poll
SHOW_BYTES = 64 * 1024              # each shown key, value or header value is cut here
TAIL_RECORDS = 200


class BadInput(ValueError):
    """What the visitor asked for cannot be shown; the message says why."""


def views(data: bytes | None) -> dict:
    """The ways to show bytes: {"null": true}, or {"auto", "text", "json" (absent when not JSON), "hex",
    "size", "cut" (bytes left out of each view)}."""
    if data is None:
        return {"null": True}
    data = bytes(data)
    size, cut = len(data), max(0, len(data) - SHOW_BYTES)
    shown = data[:SHOW_BYTES]
    out = {"text": _show(shown, "text"), "hex": shown.hex(), "size": size, "cut": cut}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {**out, "auto": "hex"}
    if not cut:
        try:
            out["json"] = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except (ValueError, RecursionError):
            pass
    out["auto"] = "json" if "json" in out else "text"
    return out


@dataclass
class Shown:
    offset: int
    timestamp: int
    timestamp_type: str
    codec: str
    key: dict
    value: dict
    headers: list[tuple[str, dict]]

    @property
    def when(self) -> str:
        if self.timestamp < 0:
            return "no timestamp"
        return dt.datetime.fromtimestamp(self.timestamp / 1000, dt.UTC).isoformat(timespec="milliseconds")

    def to_json(self) -> dict:
        return {"offset": self.offset, "timestamp": self.timestamp, "when": self.when,
                "timestamp_type": self.timestamp_type, "codec": self.codec, "key": self.key, "value": self.value,
                "headers": [[n, v] for n, v in self.headers]}


def _text(data) -> str:
    return "" if data is None else bytes(data).decode("utf-8", "replace").lower()


def _matches(record, needle: str) -> bool:
    if not needle:
        return True
    fields = [record.key, record.value] + [x for k, v in (record.headers or []) for x in (
        k.encode() if isinstance(k, str) else k, v)]
    return any(needle in _text(f) for f in fields)


def _codecs(data: bytes) -> tuple[list[int], list[str]]:
    """The last offsets of the fetched batches, in order, and their compression codecs' names."""
    lasts, names = [], []
    for entry in rec.iter_entries(data):
        lasts.append(entry.last_offset)
        c = entry.compression
        names.append(CODEC_NAMES[c] if c < len(CODEC_NAMES) else str(c))
    return lasts, names


def read(tp: TopicPartition, start: int, limit: int, needle: str = "") -> tuple[list[Shown], int, int]:
    """Up to `limit` matching records of tp from offset `start`: (records, the next offset to read, the high
    watermark). Stops at the high watermark or after SCAN_BYTES."""
    c = client()
    out: list[Shown] = []
    position, scanned, high = start, 0, start
    while len(out) < limit and scanned < SCAN_BYTES:
        fetched = c.fetch(tp, position, FETCH_BYTES, max_wait_ms=0)
        if fetched.error_code == Errors.OFFSET_OUT_OF_RANGE:
            raise BadInput(f"Offset {position} is out of range for {tp}: it holds offsets "
                           f"{fetched.log_start_offset} to {fetched.high_watermark - 1}.")
        if fetched.error_code:
            raise KafkaError(fetched.error_code, f"Fetch {tp}: {error_name(fetched.error_code)}")
        high = fetched.high_watermark
        data = b"".join(bytes(r) for r in fetched.records)
        if not data:
            break
        scanned += len(data)
        records, next_offset = fetched_records(data, fetched.aborted_transactions, 0, position)
        lasts, codecs = _codecs(data)
        batch = 0
        for r, ts_type in records:
            if len(out) == limit:
                next_offset = r.offset
                break
            while batch < len(lasts) - 1 and lasts[batch] < r.offset:
                batch += 1
            if _matches(r, needle):
                out.append(Shown(r.offset, r.timestamp, ts_type, codecs[batch], views(r.key), views(r.value),
                                 [(_show(k.encode() if isinstance(k, str) else k, "text"), views(v))
                                  for k, v in (r.headers or [])]))
        if next_offset <= position:
            break
        position = next_offset
        if position >= high:
            break
    return out, position, high


def _bounds(tp: TopicPartition) -> tuple[int, int]:
    """(log start offset, high watermark) of tp."""
    c = client()
    start, end = c.list_offsets({tp: EARLIEST})[tp], c.list_offsets({tp: LATEST})[tp]
    for code, _ in (start, end):
        if code:
            raise KafkaError(code, f"ListOffsets {tp}: {error_name(code)}")
    return start[1], end[1]


def _start(tp: TopicPartition, mode: str, at: str, limit: int, first: int, end: int) -> int:
    if mode == "earliest":
        return first
    if mode == "latest":
        return max(first, end - limit)
    if mode == "offset":
        try:
            offset = int(at)
        except ValueError:
            raise BadInput(f"'{at}' is not an offset (a whole number).") from None
        if not first <= offset <= end:
            raise BadInput(f"Offset {offset} is out of range for {tp}: it holds offsets {first} to {end - 1}.")
        return offset
    if mode == "timestamp":
        try:
            ms = int(at) if at.lstrip("-").isdigit() else parse_datetime(at)
        except ValueError as e:
            raise BadInput(str(e)) from None
        code, offset = client().list_offsets({tp: ms})[tp]
        if code:
            raise KafkaError(code, f"ListOffsets {tp}: {error_name(code)}")
        return end if offset < 0 else offset
    raise BadInput(f"'{mode}' is not earliest, latest, offset or timestamp.")


def _topic_partitions() -> dict[str, int]:
    md = client().metadata(None)
    return {t: len(info.partitions) for t, info in sorted(md.topics.items())}


def _partition(topics: dict[str, int], topic: str, text: str) -> int:
    try:
        p = int(text or 0)
    except ValueError:
        raise BadInput(f"'{text}' is not a partition number.") from None
    if topic not in topics:
        raise BadInput(f"Topic '{topic}' does not exist (or you may not describe it).")
    if not 0 <= p < topics[topic]:
        raise BadInput(f"Topic '{topic}' has no partition {p} (it has {topics[topic]}).")
    return p


@blueprint.get("/messages")
def index():
    args = request.args
    topics = _topic_partitions()
    topic = args.get("topic", "")
    mode = args.get("from", "latest")
    at = args.get("at", "").strip()
    needle = args.get("filter", "")
    fmt = args.get("format", "auto") if args.get("format") in ("auto", "text", "json", "hex") else "auto"
    try:
        limit = int(args.get("limit", 50))
    except ValueError:
        limit = 50
    limit = limit if limit in PAGE_SIZES else 50
    ctx = {"topics": topics, "topic": topic, "mode": mode, "at": at, "needle": needle, "fmt": fmt, "limit": limit,
           "page_sizes": PAGE_SIZES, "partition": args.get("partition", "0"), "records": None, "error": None}
    if not topic:
        return page("messages.html", **ctx)
    try:
        p = _partition(topics, topic, args.get("partition", "0"))
        tp = TopicPartition(topic, p)
        first, end = _bounds(tp)
        start = _start(tp, mode, at, limit, first, end)
        records, next_offset, high = read(tp, start, limit, needle.lower())
    except BadInput as e:
        return page("messages.html", **{**ctx, "error": str(e)}), 400
    here = {"topic": topic, "partition": p, "filter": needle or None, "format": fmt if fmt != "auto" else None,
            "limit": limit}
    older = url_for("messages.index", **here, **{"from": "offset", "at": max(first, start - limit)}) \
        if start > first else None
    newer = url_for("messages.index", **here, **{"from": "offset", "at": next_offset}) if next_offset < high else None
    return page("messages.html", **{**ctx, "partition": p, "records": records, "start": start, "next": next_offset,
                                    "first": first, "end": high, "older": older, "newer": newer,
                                    "tail": url_for("messages.tail", topic=topic, partition=p)})


@blueprint.get("/messages/tail.json")
def tail():
    """The records of a partition from `offset` (default: its end): {"records", "next", "end"}."""
    args = request.args
    topic = args.get("topic", "")
    try:
        p = _partition(_topic_partitions(), topic, args.get("partition", "0"))
        tp = TopicPartition(topic, p)
        offset = args.get("offset")
        if offset is None:
            offset = str(_bounds(tp)[1])
        if not offset.isdigit():
            raise BadInput(f"'{offset}' is not an offset.")
        records, next_offset, high = read(tp, int(offset), TAIL_RECORDS, args.get("filter", "").lower())
    except BadInput as e:
        return as_json({"error": str(e)}, 400)
    return as_json({"records": [r.to_json() for r in records], "next": next_offset, "end": high})


def _headers(text: str) -> list[tuple[str, bytes]]:
    headers = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise BadInput(f"Header line {n} is not name:value ('{line}').")
        headers.append((name.strip(), value.lstrip().encode()))
    return headers


@blueprint.post("/messages/produce")
def produce():
    topic = form_text("topic")
    fmt = form_text("value_format", "text")
    try:
        topics = _topic_partitions()
        if topic not in topics:
            raise BadInput(f"Topic '{topic}' does not exist (or you may not describe it).")
        key = request.form.get("key", "")
        key_bytes = key.encode() if key else None
        if request.form.get("value_null"):
            value = None
        else:
            try:
                value = _encode(request.form.get("value", ""), fmt if fmt in ("text", "json", "hex") else "text")
            except ValueError as e:
                raise BadInput(f"The value is not valid {fmt}: {e}") from None
        headers = _headers(request.form.get("headers", ""))
        if form_text("partition"):
            p = _partition(topics, topic, form_text("partition"))
        elif key_bytes is not None:
            p = (murmur2(key_bytes) & 0x7FFFFFFF) % topics[topic]
        else:
            p = random.randrange(topics[topic])
        batch = build_v2([Record(int(time.time() * 1000), key_bytes, value, headers)], first_offset=0, codec=0,
                         timestamp_type=0, log_append_time=-1)
        tp = TopicPartition(topic, p)
        offset = client().produce(tp, bytes(batch), -1, 10000)
    except (BadInput, KafkaError) as e:
        if isinstance(e, Unreachable):
            raise
        return done(f"Nothing was produced: {e}", "messages.index", "error", topic=topic or None)
    return done(f"Produced a message to {tp} at offset {offset}.", "messages.index", topic=topic, partition=p,
                **{"from": "offset", "at": offset})
