"""Kafka's everyday tools in kadmin, with their options and output: `produce` (kafka-console-producer.sh),
`consume` (kafka-console-consumer.sh), `get-offsets` (kafka.tools.GetOffsetShell), `delete-records`
(kafka-delete-records.sh) and `log-dirs` (kafka-log-dirs.sh). They speak the Kafka protocol through the project's
client (--bootstrap-server, --command-config); records are built and read with kbroker.records.

What scripts parse keeps Kafka's format: the consumer's printed records (print.* properties, key.separator),
GetOffsetShell's `topic:partition:offset` lines, the delete tool's low watermarks and log-dirs' JSON. Headers on
the producer's input (`parse.headers=true`: `h1:v1,h2:v2<TAB>key<TAB>value`) are Kafka 3.2's KIP-798 syntax, which
2.8's console producer lacks. Values may be written and shown as text, JSON or hex (--format); bytes that are
not UTF-8 are printed with Python's backslash escapes, and control characters never reach the terminal raw.
"""
from __future__ import annotations

import contextlib
import json
import struct
import sys
import time

import click
from kafka.partitioner.default import murmur2
from kafka.protocol.admin import DeleteRecordsRequest

from kbroker.protocol.client import Errors, KafkaError, TopicPartition, error_name, error_text
from kbroker.records import entries as rec
from kbroker.records.batches import legacy_records, v2_records
from kbroker.records.builder import build_v2
from kbroker.records.compression import codec_id

from .context import Failure, settings, source
from .errors import EXIT_USAGE

LATEST, EARLIEST = -1, -2
_RECORD_LIMIT = 64 * 1024 * 1024          # decompressed bytes of one batch the consumer accepts
_FETCH_BYTES = 1024 * 1024
_PRODUCER_ID_OFFSET = 43               # producerId in a v2 batch header
# kafka-log-dirs prints a failed dir's exception class (an offline dir: KAFKA_STORAGE_ERROR)
_LOG_DIR_ERRORS = {Errors.KAFKA_STORAGE_ERROR: "org.apache.kafka.common.errors.KafkaStorageException"}


class Record:
    """A record to build a batch from (kbroker.records.builder's shape)."""
    __slots__ = ("headers", "key", "offset", "timestamp", "value")

    def __init__(self, timestamp: int, key: bytes | None, value: bytes | None, headers: list):
        self.offset, self.timestamp, self.key, self.value, self.headers = 0, timestamp, key, value, headers


def _properties(items: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", param_hint="--property")
        out[name.strip()] = value
    return out


def _unescape(text: str) -> str:
    """A separator as typed on a shell line: `\\t`, `\\n` mean tab and newline, as Kafka's tools read them."""
    return text.replace("\\t", "\t").replace("\\n", "\n")


def _encode(text: str, fmt: str) -> bytes:
    if fmt == "hex":
        return bytes.fromhex(text)
    if fmt == "json":
        return json.dumps(json.loads(text), separators=(",", ":")).encode()
    return text.encode()


def _show(data: bytes | None, fmt: str, null: str = "null") -> str:
    """Bytes as printable text: hex, JSON (pretty-printed on one line when it parses) or UTF-8 text; undecodable
    bytes and control characters (escape sequences a terminal would obey) are backslash-escaped."""
    if data is None:
        return null
    if fmt == "hex":
        return data.hex()
    text = data.decode("utf-8", "backslashreplace")
    if fmt == "json":
        try:
            text = json.dumps(json.loads(text), ensure_ascii=False)
        except ValueError:
            pass
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == "\t" else c.encode("unicode_escape").decode() for c in text)


def _require_bootstrap(ctx: click.Context) -> None:
    if not settings(ctx).bootstrap_server:
        raise click.UsageError("this command needs --bootstrap-server HOST:PORT (or KADMIN_BOOTSTRAP_SERVER).")


# ---- produce ----------------------------------------------------------------------------------------------------

def _parse_line(line: str, n: int, props: dict[str, str], fmt: str) -> tuple[bytes | None, bytes, list]:
    """(key, value, headers) of one input line, as the console producer's LineMessageReader reads it."""
    headers = []
    if props.get("parse.headers", "false").lower() == "true":
        delimiter = _unescape(props.get("headers.delimiter", "\t"))
        head, sep, line = line.partition(delimiter)
        if not sep:
            raise Failure(f"No headers delimiter found on line number {n}: '{head}'", EXIT_USAGE)
        for h in filter(None, head.split(_unescape(props.get("headers.separator", ",")))):
            name, _, value = h.partition(_unescape(props.get("headers.key.separator", ":")))
            headers.append((name, value.encode()))
    key = None
    if props.get("parse.key", "false").lower() == "true":
        separator = _unescape(props.get("key.separator", "\t"))
        text, sep, line = line.partition(separator)
        if not sep:
            raise Failure(f"No key found on line {n}: {text}", EXIT_USAGE)
        key = text.encode()
    try:
        return key, _encode(line, fmt), headers
    except ValueError as e:
        raise Failure(f"line {n} is not valid {fmt}: {e}", EXIT_USAGE) from None


@click.command("produce")
@click.argument("topic")
@click.option("--file", "path", type=click.Path(dir_okay=False), help="Read the records from FILE, not stdin.")
@click.option("--property", "props", multiple=True, metavar="NAME=VALUE",
              help="parse.key, key.separator (default TAB), parse.headers, headers.delimiter (TAB), "
                   "headers.separator (,), headers.key.separator (:), as the console producer takes them.")
@click.option("--acks", type=click.Choice(["0", "1", "-1", "all"]), default="-1", show_default=True)
@click.option("--compression", "compression", type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]),
              default="none", show_default=True)
@click.option("--partition", type=click.IntRange(min=0), help="Write every record to this partition (default: "
                                                                "murmur2 of the key, keyless records spread).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "hex"]), default="text", show_default=True,
              help="How each line's value is written: as is, as JSON (checked), or hex digits decoded to bytes.")
@click.option("--batch-size", type=click.IntRange(min=1), default=500, show_default=True,
              help="Records per Produce request and partition.")
@click.pass_context
def produce(ctx, topic, path, props, acks, compression, partition, fmt, batch_size):
    """Write one record per line of stdin (or --file) to TOPIC, as kafka-console-producer.sh does. A summary line
    goes to stderr; a line that cannot be parsed stops with exit status 2 (the records before it are written)."""
    _require_bootstrap(ctx)
    props = _properties(props)
    acks_n = -1 if acks == "all" else int(acks)
    codec = codec_id(compression)
    written = 0
    with source(ctx) as s, (open(path, encoding="utf-8", errors="surrogateescape") if path
                            else contextlib.nullcontext(sys.stdin)) as stream:
        client = s.admin
        partitions = client.topic_partitions([topic])[topic]
        if partition is not None and partition not in partitions:
            raise Failure(f"Topic '{topic}' has no partition {partition} (it has {len(partitions)}).")
        pending: dict[int, list[Record]] = {}
        spread = 0

        def flush(p: int) -> None:
            nonlocal written
            records = pending.pop(p, [])
            if records:
                batch = build_v2(records, first_offset=0, codec=codec, timestamp_type=0, log_append_time=-1)
                client.produce(TopicPartition(topic, p), bytes(batch), acks_n, int(settings(ctx).request_timeout
                                                                                  * 1000))
                written += len(records)
        try:
            for n, raw in enumerate(stream, 1):
                line = raw.rstrip("\n").rstrip("\r")
                try:
                    key, value, headers = _parse_line(line, n, props, fmt)
                except Failure:
                    for p in list(pending):         # the lines before the bad one are written, as Kafka's tool does
                        flush(p)
                    raise
                if partition is not None:
                    p = partition
                elif key is not None:
                    p = partitions[(murmur2(key) & 0x7FFFFFFF) % len(partitions)]
                else:
                    p, spread = partitions[spread % len(partitions)], spread + 1
                pending.setdefault(p, []).append(Record(int(time.time() * 1000), key, value, headers))
                if len(pending[p]) >= batch_size:
                    flush(p)
            for p in list(pending):
                flush(p)
        finally:
            click.echo(f"Produced {written} records to {topic}", err=True)


# ---- consume ----------------------------------------------------------------------------------------------------

def fetched_records(data: bytes, aborted: list, isolation: int, from_offset: int) -> tuple[list, int]:
    """The (record, timestamp type) of fetched bytes at or after from_offset, in order, and the next offset to
    fetch; under read_committed the batches of aborted transactions (Fetch's aborted_transactions) are left out,
    as Kafka's consumer does. Control batches are never shown."""
    out = []
    aborting: set[int] = set()
    pending_aborts = sorted(aborted or [], key=lambda a: a[1])
    next_offset = from_offset
    for entry in rec.iter_entries(data):
        next_offset = max(next_offset, entry.last_offset + 1)
        if entry.magic == 2:
            (pid,) = struct.unpack_from(">q", data, entry.position + _PRODUCER_ID_OFFSET)
            if isolation:
                while pending_aborts and pending_aborts[0][1] <= entry.last_offset:
                    aborting.add(pending_aborts.pop(0)[0])
            if entry.attributes & rec.CONTROL_MASK:
                aborting.discard(pid)
                continue
            if isolation and entry.attributes & rec.TRANSACTIONAL_MASK and pid in aborting:
                continue
            records = v2_records(data, entry.position, entry.size, _RECORD_LIMIT)
            ts_type = "LogAppendTime" if entry.attributes & rec.TIMESTAMP_TYPE_MASK_V2 else "CreateTime"
        else:
            records = legacy_records(data, entry.position, entry.size, _RECORD_LIMIT)
            ts_type = "NoTimestampType" if entry.magic == 0 else \
                "LogAppendTime" if entry.attributes & rec.TIMESTAMP_TYPE_MASK_V1 else "CreateTime"
        out.extend((r, ts_type) for r in records if r.offset >= from_offset)
    return out, next_offset


class _Formatter:
    """Records as DefaultMessageFormatter prints them: [timestamp][partition][offset][headers][key]value, the
    fields joined by key.separator, each record followed by line.separator (the print.* properties read once)."""

    def __init__(self, props: dict[str, str], fmt: str):
        def on(name: str, default: str = "false") -> bool:
            return props.get(f"print.{name}", default).lower() == "true"
        self.timestamp, self.partition, self.offset = on("timestamp"), on("partition"), on("offset")
        self.headers, self.key, self.value = on("headers"), on("key"), on("value", "true")
        self.sep, self.fmt = _unescape(props.get("key.separator", "\t")), fmt
        self.null = props.get("null.literal", "null")
        self.line_end = _unescape(props.get("line.separator", "\n"))
        self.header_sep = _unescape(props.get("headers.separator", ","))
        self.header_key_sep = _unescape(props.get("headers.key.separator", ":"))

    def __call__(self, tp: TopicPartition, r, ts_type: str) -> str:
        fields = []
        if self.timestamp:
            fields.append("NO_TIMESTAMP" if ts_type == "NoTimestampType" else f"{ts_type}:{r.timestamp}")
        if self.partition:
            fields.append(f"Partition:{tp.partition}")
        if self.offset:
            fields.append(f"Offset:{r.offset}")
        if self.headers:
            headers = list(r.headers or [])
            fields.append(self.header_sep.join(
                f"{_show(k.encode() if isinstance(k, str) else k, 'text')}{self.header_key_sep}"
                f"{_show(v, self.fmt, self.null)}" for k, v in headers) if headers else "NO_HEADERS")
        if self.key:
            fields.append(_show(r.key, self.fmt, self.null))
        if self.value:
            fields.append(_show(r.value, self.fmt, self.null))
        return self.sep.join(fields) + self.line_end


def _start_offsets(client, tps: list[TopicPartition], from_beginning: bool, offset: str | None,
                   timestamp: int | None, committed: dict, isolation: int) -> dict[TopicPartition, int]:
    if offset is not None and offset not in ("earliest", "latest"):
        return {tp: int(offset) for tp in tps}
    if timestamp is not None:
        spec = timestamp
    elif offset == "earliest" or (offset is None and from_beginning):
        spec = EARLIEST
    else:
        spec = LATEST
    wanted = [tp for tp in tps if tp not in committed or offset is not None or timestamp is not None]
    found = client.list_offsets({tp: spec for tp in wanted}, isolation) if wanted else {}
    out = dict(committed)
    for tp, (code, value) in found.items():
        if code:
            raise KafkaError(code, f"ListOffsets {tp}: {error_name(code)}")
        if value < 0:               # no record at or after the timestamp: the end
            value = client.list_offsets({tp: LATEST}, isolation)[tp][1]
        out[tp] = value
    return out


@click.command("consume")
@click.argument("topic")
@click.option("--from-beginning", is_flag=True, help="Start at the earliest offset (when no committed offset).")
@click.option("--offset", metavar="N|earliest|latest", help="Start here (a number needs --partition).")
@click.option("--partition", type=click.IntRange(min=0), help="Read only this partition.")
@click.option("--timestamp", type=int, metavar="MS", help="Start at the first record at or after this time.")
@click.option("--group", help="Start at GROUP's committed offsets and commit what was read.")
@click.option("--max-messages", type=click.IntRange(min=1), help="Stop after this many records.")
@click.option("--timeout-ms", type=click.IntRange(min=1), help="Stop when no record arrives for this long.")
@click.option("--isolation-level", type=click.Choice(["read_uncommitted", "read_committed"]),
              default="read_uncommitted", show_default=True)
@click.option("--property", "props", multiple=True, metavar="NAME=VALUE",
              help="print.key, print.timestamp, print.partition, print.offset, print.headers, print.value, "
                   "key.separator, line.separator, headers.separator, null.literal, as the console consumer takes "
                   "them (and headers.key.separator).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "hex"]), default="text", show_default=True,
              help="How keys, values and header values are shown.")
@click.pass_context
def consume(ctx, topic, from_beginning, offset, partition, timestamp, group, max_messages, timeout_ms,
            isolation_level, props, fmt):
    """Print TOPIC's records, one per line, as kafka-console-consumer.sh does; "Processed a total of N messages"
    goes to stderr at the end (--max-messages, --timeout-ms or Ctrl-C)."""
    _require_bootstrap(ctx)
    props = _properties(props)
    if offset is not None:
        if offset not in ("earliest", "latest") and not offset.lstrip("-").isdigit():
            raise click.BadParameter(f"{offset!r} is not a number, earliest or latest", param_hint="--offset")
        if partition is None:
            raise click.UsageError("--offset needs --partition (as the console consumer).")
        if offset.startswith("-"):
            raise click.BadParameter(f"offset {offset} is negative", param_hint="--offset")
    if group and partition is not None:
        raise click.UsageError("--group cannot be used with --partition (as the console consumer).")
    isolation = int(isolation_level == "read_committed")
    formatter = _Formatter(props, fmt)
    processed = 0
    with source(ctx) as s:
        client = s.admin
        partitions = client.topic_partitions([topic])[topic]
        if partition is not None and partition not in partitions:
            raise Failure(f"Topic '{topic}' has no partition {partition} (it has {len(partitions)}).")
        tps = [TopicPartition(topic, p) for p in partitions if partition is None or p == partition]
        committed = {}
        if group:
            committed = {tp: o for tp, o in client.committed_offsets(group).items() if tp in tps and o >= 0}
        positions = _start_offsets(client, tps, from_beginning, offset, timestamp, committed, isolation)
        last_record = time.monotonic()
        try:
            while max_messages is None or processed < max_messages:
                got = False
                for tp in tps:
                    fetched = client.fetch(tp, positions[tp], _FETCH_BYTES, max_wait_ms=200 if len(tps) > 1 else 500,
                                           isolation_level=isolation)
                    if fetched.error_code == Errors.OFFSET_OUT_OF_RANGE:
                        raise Failure(f"Offset {positions[tp]} is out of range for {tp} (the partition holds "
                                      f"[{fetched.log_start_offset}, {fetched.high_watermark})).")
                    if fetched.error_code:
                        raise KafkaError(fetched.error_code, f"Fetch {tp}: {error_name(fetched.error_code)}")
                    data = b"".join(bytes(r) for r in fetched.records)
                    records, next_offset = fetched_records(data, fetched.aborted_transactions, isolation, positions[tp])
                    if max_messages is not None and len(records) > max_messages - processed:
                        records = records[:max_messages - processed]
                        positions[tp] = records[-1][0].offset + 1
                    else:
                        positions[tp] = next_offset
                    if records:
                        click.echo("".join(formatter(tp, r, ts_type) for r, ts_type in records), nl=False)
                        processed += len(records)
                        got = True
                    if max_messages is not None and processed >= max_messages:
                        break
                if got:
                    last_record = time.monotonic()
                elif timeout_ms is not None and (time.monotonic() - last_record) * 1000 >= timeout_ms:
                    break
        except KeyboardInterrupt:
            pass
        finally:
            if group and processed:
                client.commit_offsets(group, {tp: positions[tp] for tp in tps})
            click.echo(f"Processed a total of {processed} messages", err=True)


# ---- get-offsets ------------------------------------------------------------------------------------------------

@click.command("get-offsets")
@click.option("--topic", required=True)
@click.option("--time", "at", default="-1", show_default=True, metavar="-1|-2|MS",
              help="-1 (latest), -2 (earliest) or a timestamp: the first offset at or after it.")
@click.option("--partitions", metavar="0,1,...", help="Only these partitions (default: all).")
@click.pass_context
def get_offsets(ctx, topic, at, partitions):
    """Print `topic:partition:offset` for each partition, as kafka.tools.GetOffsetShell does (nothing after the
    last colon when no record is at or after the time given)."""
    _require_bootstrap(ctx)
    try:
        spec = int(at)
        wanted = None if partitions is None else [int(p) for p in partitions.split(",") if p.strip()]
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    if spec < -2:
        raise click.BadParameter(f"{at} is not -1, -2 or a timestamp", param_hint="--time")
    with source(ctx) as s:
        have = s.admin.topic_partitions([topic])[topic]
        present = have if wanted is None else [p for p in wanted if p in have]
        if not present:
            raise Failure(f"Topic {topic} does not have any of the requested partitions {partitions}")
        for p in sorted(set(wanted or []) - set(have)):
            click.echo(f"Error: partition {p} does not exist", err=True)
        tps = [TopicPartition(topic, p) for p in present]
        found = s.admin.list_offsets({tp: spec for tp in tps})
    for tp in sorted(found):
        code, value = found[tp]
        if code:
            raise KafkaError(code, f"ListOffsets {tp}: {error_name(code)}")
        click.echo(f"{tp.topic}:{tp.partition}:{value if value >= 0 else ''}")


# ---- delete-records ---------------------------------------------------------------------------------------------

def _offset_json(path: str) -> list[tuple[str, int, int]]:
    """The (topic, partition, offset) of kafka-delete-records' --offset-json-file:
    {"partitions": [{"topic": "t", "partition": 0, "offset": 10}], "version": 1}."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        if doc.get("version", 1) != 1:
            raise ValueError(f"Not supported version field value {doc['version']}")
        out = [(p["topic"], int(p["partition"]), int(p["offset"])) for p in doc["partitions"]]
        if not all(isinstance(t, str) for t, _, _ in out):
            raise TypeError("topic is not a string")
    except OSError as e:
        raise click.BadParameter(f"cannot read {path}: {e.strerror}", param_hint="--offset-json-file") from None
    except (ValueError, KeyError, TypeError) as e:
        raise click.BadParameter(f"{path} is not a valid offset JSON file ({e.__class__.__name__}: {e}); expected "
                                 '{"partitions": [{"topic": "t", "partition": 0, "offset": 10}], "version": 1}',
                                 param_hint="--offset-json-file") from None
    if not out:
        raise click.BadParameter(f"{path} lists no partitions", param_hint="--offset-json-file")
    seen: set = set()
    duplicates = sorted({f"{t}-{p}" for t, p, _ in out if (t, p) in seen or seen.add((t, p))})
    if duplicates:
        raise Failure(f"Offset json file contains duplicate topic partitions: {','.join(duplicates)}")
    return out


@click.command("delete-records")
@click.option("--offset-json-file", "path", type=click.Path(dir_okay=False),
              help="Kafka's JSON: {\"partitions\": [{\"topic\": T, \"partition\": P, \"offset\": O}], \"version\": 1}; "
                   "offset -1 means the high watermark.")
@click.option("--topic")
@click.option("--partition", type=click.IntRange(min=0))
@click.option("--offset", type=int, help="Delete the records below this offset (-1: all).")
@click.pass_context
def delete_records(ctx, path, topic, partition, offset):
    """Move partitions' log start offsets forward (DeleteRecords) and print the new low watermarks, as
    kafka-delete-records.sh does. Exit status 1 when a partition was refused."""
    _require_bootstrap(ctx)
    if path and (topic or partition is not None or offset is not None):
        raise click.UsageError("give --offset-json-file or --topic/--partition/--offset, not both.")
    if path:
        wanted = _offset_json(path)
    elif topic is None or partition is None or offset is None:
        raise click.UsageError("--offset-json-file FILE, or --topic, --partition and --offset, are required.")
    else:
        wanted = [(topic, partition, offset)]
    click.echo("Executing records delete operation")
    with source(ctx) as s:
        client = s.admin
        deadline = client.deadline()
        by_leader, errors = client.group_by_leader({TopicPartition(t, p): o for t, p, o in wanted}, deadline)
        offsets = {TopicPartition(t, p): o for t, p, o in wanted}
        results = {tp: (code, -1) for tp, code in errors.items()}
        T = DeleteRecordsRequest.DeleteRecordsTopic
        timeout_ms = int(settings(ctx).request_timeout * 1000)
        for leader, tps in by_leader.items():
            topics: dict[str, list] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(T.DeleteRecordsPartition(partition_index=tp.partition,
                                                                                offset=offsets[tp]))
            r = client.send(leader, lambda c, topics=topics: DeleteRecordsRequest(
                version=c.version_for(DeleteRecordsRequest), timeout_ms=timeout_ms,
                topics=[T(name=t, partitions=ps) for t, ps in topics.items()]), deadline)
            for t in r.topics:
                for p in t.partitions:
                    results[TopicPartition(t.name, p.partition_index)] = (p.error_code, p.low_watermark)
    click.echo("Records delete operation completed:")
    failed = False
    for tp in sorted(results):
        code, low = results[tp]
        if code:
            failed = True
            click.echo(f"partition: {tp}\terror: {error_name(code)}: {error_text(code)}")
        else:
            click.echo(f"partition: {tp}\tlow_watermark: {low}")
    return 1 if failed else 0


# ---- log-dirs ---------------------------------------------------------------------------------------------------

@click.command("log-dirs")
@click.option("--broker-list", metavar="1,2,...", help="Only these brokers (default: every live broker).")
@click.option("--topic-list", metavar="a,b,...", help="Only these topics' partitions (default: all).")
@click.pass_context
def log_dirs(ctx, broker_list, topic_list):
    """Query the brokers' log directories (DescribeLogDirs) and print kafka-log-dirs.sh's JSON:
    {"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":..,"error":..,"partitions":[{"partition":"t-0",
    "size":..,"offsetLag":..,"isFuture":..}]}]}]}."""
    _require_bootstrap(ctx)
    try:
        ids = None if broker_list is None else [int(b) for b in broker_list.split(",") if b.strip()]
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--broker-list") from None
    topics = None if topic_list is None else {t.strip() for t in topic_list.split(",") if t.strip()}
    click.echo("Querying brokers for log directories information")
    with source(ctx) as s:
        client = s.admin
        deadline = client.deadline()
        brokers = client.brokers(deadline)
        ids = sorted(brokers) if ids is None else ids
        missing = [b for b in ids if b not in brokers]
        if missing:
            raise Failure(f"ERROR: The given brokers do not exist from --broker-list: {','.join(map(str, missing))}."
                          f" Current existent brokers: {','.join(map(str, sorted(brokers)))}")
        out = []
        for b in ids:
            dirs = []
            for d in client.describe_log_dirs(brokers[b], deadline):
                parts = [{"partition": f"{r.topic}-{r.partition}", "size": r.size, "offsetLag": r.offset_lag,
                          "isFuture": r.is_future} for r in d.replicas if topics is None or r.topic in topics]
                dirs.append({"logDir": d.path,
                             "error": _LOG_DIR_ERRORS.get(d.error_code, error_name(d.error_code))
                             if d.error_code else None,
                             "partitions": parts})
            out.append({"broker": b, "logDirs": dirs})
    click.echo(f"Received log directory information from brokers {','.join(map(str, ids))}")
    click.echo(json.dumps({"version": 1, "brokers": out}, separators=(",", ":")))


COMMANDS = (produce, consume, get_offsets, delete_records, log_dirs)
