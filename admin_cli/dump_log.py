"""`kadmin dump-log`: Kafka 2.8's kafka-dump-log.sh (kafka.tools.DumpLogSegments), offline on a broker's files.

`.log` segments print one line per batch (`baseOffset: ... lastOffset: ...` for v2, `offset: ...` for v0/v1)
and, with --deep-iteration (implied by --print-data-log and the decoders), one `| offset: ...` line per record;
`.index` prints `offset: N position: P`, `.timeindex` `timestamp: T offset: N`, `.txnindex` the aborted
transactions. --offsets-decoder and --transaction-log-decoder print `__consumer_offsets` and
`__transaction_state` records as Kafka's formatters do. The files are only read: the formats are kbroker's own
codecs (kbroker.records, kbroker.log.index, kbroker.log.txn_index, the coordinators' record schemas). Mismatches
and corrupt or truncated files are reported as Kafka reports them (a line, never a traceback); a file that
cannot be read, or a log with invalid bytes, makes the exit status 1.
"""
from __future__ import annotations

import json
import mmap
import os
import struct

import click
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from kbroker.common.transaction_log import STATE_NAMES, read_txn_key, read_txn_value
from kbroker.coordinator.schemas import GroupMetadataKey, read_group_value, read_key, read_offset_value
from kbroker.log.errors import CorruptIndex
from kbroker.log.index import OffsetIndex, TimeIndex
from kbroker.log.txn_index import ENTRY, ENTRY_SIZE
from kbroker.protocol.errors import KafkaError
from kbroker.records.batches import legacy_records, v2_records
from kbroker.records.entries import (
    CONTROL_MASK,
    TIMESTAMP_TYPE_MASK_V1,
    TIMESTAMP_TYPE_MASK_V2,
    TRANSACTIONAL_MASK,
    CorruptEntry,
    crc_valid,
    read_entry,
)

V2_FIELDS = struct.Struct(">iI")          # partitionLeaderEpoch, crc: right after baseOffset and batchLength
V2_PRODUCER = struct.Struct(">qhi")       # producerId, producerEpoch, baseSequence at byte 43
LEGACY_CRC = struct.Struct(">I")          # at byte 12
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT"}


class _Dump:
    """One run: what it printed to stderr afterwards (Kafka collects mismatches and prints them last)."""

    def __init__(self, max_message_size: int, deep: bool, print_data: bool, decoder, skip_metadata: bool):
        self.max_message_size = max_message_size
        self.skip_metadata = skip_metadata
        self.deep = deep
        self.print_data = print_data
        self.decoder = decoder
        self.index_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.time_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.out_of_order: dict[str, list[tuple[int, int]]] = {}
        self.not_found: dict[str, list[tuple[int, int]]] = {}
        self.non_consecutive: dict[str, list[tuple[int, int]]] = {}
        self.failed = False

    # ---- .log --------------------------------------------------------------------------------------------------

    def log(self, path: str, data: bytes) -> None:
        click.echo(f"Starting offset: {_base_offset(path)}")
        pos, last = 0, -1
        while pos < len(data):
            try:
                entry = read_entry(data, pos)
            except CorruptEntry as e:
                click.echo(f"Error: {path}: {e}", err=True)
                entry = None
            if entry is None:
                break
            self._batch_line(data, entry)
            if self.deep:
                last = self._records(path, data, entry, last)
            pos += entry.size
        if pos < len(data):
            click.echo(f"Found {len(data) - pos} invalid bytes at the end of {os.path.basename(path)}")
            self.failed = True

    def _batch_line(self, data: bytes, e) -> None:
        ts_type = _timestamp_type(e.magic, e.attributes)
        if e.magic == 2:
            epoch, crc = V2_FIELDS.unpack_from(data, e.position + 12)
            pid, pepoch, base_seq = V2_PRODUCER.unpack_from(data, e.position + 43)
            head = (f"baseOffset: {e.base_offset} lastOffset: {e.last_offset} count: {e.record_count} "
                    f"baseSequence: {base_seq} lastSequence: {_sequence(base_seq, e.last_offset - e.base_offset)} "
                    f"producerId: {pid} producerEpoch: {pepoch} partitionLeaderEpoch: {epoch} "
                    f"isTransactional: {_flag(e.attributes & TRANSACTIONAL_MASK)} "
                    f"isControl: {_flag(e.attributes & CONTROL_MASK)}")
        else:
            (crc,) = LEGACY_CRC.unpack_from(data, e.position + 12)
            head = f"offset: {e.last_offset}"
        click.echo(f"{head} position: {e.position} {ts_type}: {e.max_timestamp} size: {e.size} magic: {e.magic} "
                   f"compresscodec: {_codec(e.compression)} crc: {crc} isvalid: {_flag(crc_valid(data, e))}")

    def _records(self, path: str, data: bytes, e, last: int) -> int:
        try:
            if e.magic == 2:
                records = v2_records(data, e.position, e.size, self.max_message_size)
            else:
                records = legacy_records(data, e.position, e.size, self.max_message_size)
        except KafkaError as err:
            click.echo(f"Error: {path}: batch at position {e.position}: {err}", err=True)
            self.failed = True
            return last
        if e.magic == 2:
            epoch = V2_FIELDS.unpack_from(data, e.position + 12)[0]
            _, pepoch, base_seq = V2_PRODUCER.unpack_from(data, e.position + 43)
            base = e.base_offset
        else:   # Kafka's legacy batches: no producer fields, the first inner message's offset as the base
            epoch, pepoch, base_seq, base = -1, -1, -1, records[0].offset if records else e.last_offset
        batch = (f"{_timestamp_type(e.magic, e.attributes)}: {{}} baseOffset: {base} lastOffset: {e.last_offset} "
                 f"baseSequence: {base_seq} lastSequence: {_sequence(base_seq, e.last_offset - base)} "
                 f"producerEpoch: {pepoch} partitionLeaderEpoch: {epoch} batchSize: {e.size} magic: {e.magic} "
                 f"compressType: {_codec(e.compression)} position: {e.position}")
        control = e.magic == 2 and e.attributes & CONTROL_MASK
        for r in records:
            if last != -1 and r.offset != last + 1:
                self.non_consecutive.setdefault(os.path.abspath(path), []).append((last, r.offset))
            last = r.offset
            line, prefix = "", "| "
            if not self.skip_metadata:
                if e.magic == 2:   # v2 records carry no checksum of their own
                    valid, crc = "true", "null"
                    tail = (f" sequence: {_sequence(base_seq, r.offset - base)} "
                            f"headerKeys: [{','.join(k for k, _ in r.headers)}]")
                else:              # an inner message was checked when inflated; a plain one is the entry
                    valid = _flag(crc_valid(data, e)) if e.compression == 0 else "true"
                    crc = r.crc
                    tail = f" crc: {crc} isvalid: {valid}"
                line += (f"| offset: {r.offset} isValid: {valid} crc: {crc} keySize: {_size(r.key)} "
                         f"valueSize: {_size(r.value)} {batch.format(r.timestamp)}{tail}")
                if control:
                    line += _control(r)
                prefix = " "
            if self.print_data and not control:
                line += self._data(r, prefix)
            click.echo(line)
        return last

    def _data(self, r, prefix: str) -> str:
        """`<prefix>key: K payload: V`, each part only when there is one, as Kafka prints them."""
        if self.decoder is not None:
            try:
                key, value = self.decoder(r.key, r.value)
            except (ValueError, KeyError, struct.error) as err:
                return f"{prefix}undecodable: {err}"
        else:
            key = None if r.key is None else _text(r.key)
            value = None if r.value is None else _text(r.value)
        return ("" if key is None else f"{prefix}key: {key}") + ("" if value is None else f" payload: {value}")

    # ---- indexes -----------------------------------------------------------------------------------------------

    def index(self, path: str, sanity_only: bool, verify_only: bool) -> None:
        base = _base_offset(path)
        log = _read(_sibling(path, ".log"))
        index = OffsetIndex(path, base, os.path.getsize(path))
        try:
            if index.entries == 0:
                click.echo(f"{path} is empty.")
                return
            if sanity_only:
                index.sanity_check()
                click.echo(f"{path} passed sanity check.")
                return
            for i in range(index.entries):
                entry = index.entry(i)
                if entry.offset == base and i > 0:
                    return     # a preallocated tail of zeros, after a crash
                found = read_entry(log, entry.position) if entry.position < len(log) else None
                log_offset = found.last_offset if found is not None else -1
                if log_offset != entry.offset:
                    self.index_mismatches.setdefault(os.path.abspath(path), []).append((entry.offset, log_offset))
                if not verify_only:
                    click.echo(f"offset: {entry.offset} position: {entry.position}")
        finally:
            index.close_handlers()

    def time_index(self, path: str, sanity_only: bool, verify_only: bool) -> None:
        base = _base_offset(path)
        log = _read(_sibling(path, ".log"))
        index_path = _sibling(path, ".index")
        index = OffsetIndex(index_path, base, os.path.getsize(index_path)) if os.path.exists(index_path) else None
        time_index = TimeIndex(path, base, os.path.getsize(path))
        try:
            if sanity_only:
                time_index.sanity_check()
                click.echo(f"{path} passed sanity check.")
                return
            key, previous = os.path.abspath(path), -1
            for i in range(time_index.entries):
                entry = time_index.entry(i)
                if entry.offset == base and i > 0:
                    return
                position = index.lookup(entry.offset).position if index is not None else 0
                batch = _batch_holding(log, position, entry.offset)
                if batch is None or batch.last_offset != entry.offset:
                    self.not_found.setdefault(key, []).append((entry.offset, -1 if batch is None else
                                                               batch.last_offset))
                else:
                    if batch.max_timestamp != entry.timestamp:
                        self.time_mismatches.setdefault(key, []).append((entry.timestamp, batch.max_timestamp))
                    if previous >= entry.timestamp:
                        self.out_of_order.setdefault(key, []).append((entry.timestamp, previous))
                if not verify_only:
                    click.echo(f"timestamp: {entry.timestamp} offset: {entry.offset}")
                previous = entry.timestamp
        finally:
            time_index.close_handlers()
            if index is not None:
                index.close_handlers()

    def txn_index(self, path: str) -> None:
        data = _read(path)
        for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
            version, pid, first, last, lso = ENTRY.unpack_from(data, pos)
            click.echo(f"version: {version} producerId: {pid} firstOffset: {first} lastOffset: {last} "
                       f"lastStableOffset: {lso}")
        if len(data) % ENTRY_SIZE:
            click.echo(f"Error: {path}: {len(data) % ENTRY_SIZE} bytes of a partial entry at the end", err=True)
            self.failed = True

    # ---- Kafka's summaries on stderr ---------------------------------------------------------------------------

    def report(self) -> None:
        def err(line):
            click.echo(line, err=True)
        for name, pairs in self.index_mismatches.items():
            err(f"Mismatches in :{name}")
            for index_offset, log_offset in pairs:
                err(f"  Index offset: {index_offset}, log offset: {log_offset}")
        for name, pairs in self.time_mismatches.items():
            err(f"Found timestamp mismatch in :{name}")
            for index_ts, log_ts in pairs:
                err(f"  Index timestamp: {index_ts}, log timestamp: {log_ts}")
        for name, pairs in self.out_of_order.items():
            err(f"Found out of order timestamp in :{name}")
            for index_ts, previous in pairs:
                err(f"  Index timestamp: {index_ts}, Previously indexed timestamp: {previous}")
        for pairs in self.not_found.values():
            err("The following indexed offsets are not found in the log.")
            for index_offset, log_offset in pairs:
                err(f"Indexed offset: {index_offset}, found log offset: {log_offset}")
        for name, pairs in self.non_consecutive.items():
            err(f"Non-consecutive offsets in {name}")
            for first, second in pairs:
                err(f"  {first} is followed by {second}")


# ---- Kafka's decoders of the internal topics -----------------------------------------------------------------

def format_offsets_record(key: bytes | None, value: bytes | None) -> tuple[str, str]:
    """GroupMetadataManager.formatRecordKeyAndValue: offset commits and group metadata."""
    if key is None:
        raise ValueError("Failed to decode message using offset topic decoder (message had a missing key)")
    k = read_key(key)
    if isinstance(k, GroupMetadataKey):
        group = read_group_value(value)
        if group is None:
            return f"group_metadata::group={k.group}", "<DELETE>"
        return f"group_metadata::group={k.group}", json.dumps({
            "protocolType": group.protocol_type or "", "protocol": group.protocol,
            "generationId": group.generation,
            "assignment": "{" + ",".join(_member_assignment(group.protocol_type, m) for m in group.members) + "}",
        }, separators=(",", ":"))
    offset = read_offset_value(value)
    text = ("<DELETE>" if offset is None else f"offset={offset.offset}" if not offset.metadata
            else f"offset={offset.offset},metadata={offset.metadata}")
    return f"offset_commit::group={k.group},partition={k.topic}-{k.partition}", text


def _member_assignment(protocol_type: str, member) -> str:
    """`member=[topic-0, topic-1]` (`:HEX` of its user data) for the consumer protocol, `member=HEX` otherwise."""
    if protocol_type == "consumer":
        a = ConsumerProtocolAssignment.decode(bytes(member.assignment))
        partitions = ", ".join(f"{t}-{p}" for t, ps in a.assigned_partitions for p in ps)
        user_data = bytes(a.user_data or b"").hex().upper().lstrip("0")
        return f"{member.member_id}=[{partitions}]" + (f":{user_data}" if user_data else "")
    return f"{member.member_id}={bytes(member.assignment).hex().upper().lstrip('0')}"


def format_txn_record(key: bytes | None, value: bytes | None) -> tuple[str, str]:
    """TransactionLog.formatRecordKeyAndValue."""
    if key is None:
        raise ValueError("Failed to decode message using transaction log decoder (message had a missing key)")
    txn = read_txn_value(value)
    if txn is None:
        return f"transaction_metadata::transactionalId={read_txn_key(key)}", "<DELETE>"
    partitions = ",".join(f"{t}-{p}" for t, p in sorted(txn.partitions))
    return (f"transaction_metadata::transactionalId={read_txn_key(key)}",
            (f"producerId:{txn.producer_id},producerEpoch:{txn.producer_epoch},state={STATE_NAMES[txn.state]},"
             f"partitions=[{partitions}],txnLastUpdateTimestamp={txn.update_ms},txnTimeoutMs={txn.timeout_ms}"))


# ---- helpers -------------------------------------------------------------------------------------------------

def _base_offset(path: str) -> int:
    name = os.path.basename(path).split(".")[0]
    try:
        return int(name)
    except ValueError:
        raise click.BadParameter(f"{path}: the file name is not a segment's base offset",
                                 param_hint="--files") from None


def _sibling(path: str, suffix: str) -> str:
    return os.path.join(os.path.dirname(path), os.path.basename(path).split(".")[0] + suffix)


def _read(path: str):
    """The file's bytes, mapped read-only (a segment may be a GiB; only the pages read are loaded)."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def _batch_holding(log: bytes, position: int, offset: int):
    """The first whole batch from position whose last offset is >= offset, or None."""
    while position < len(log):
        try:
            entry = read_entry(log, position)
        except CorruptEntry:
            return None
        if entry is None:
            return None
        if entry.last_offset >= offset:
            return entry
        position += entry.size
    return None


def _timestamp_type(magic: int, attributes: int) -> str:
    if magic == 0:
        return "NoTimestampType"
    mask = TIMESTAMP_TYPE_MASK_V2 if magic == 2 else TIMESTAMP_TYPE_MASK_V1
    return "LogAppendTime" if attributes & mask else "CreateTime"


def _codec(codec: int) -> str:
    return ("NONE", "GZIP", "SNAPPY", "LZ4", "ZSTD")[codec] if 0 <= codec <= 4 else str(codec)


def _control(record) -> str:
    key, value = record.key or b"", record.value or b""
    type_id = struct.unpack_from(">h", key, 2)[0] if len(key) >= 4 else -1
    if type_id in CONTROL_TYPES and len(value) >= 6:
        return f" endTxnMarker: {CONTROL_TYPES[type_id]} coordinatorEpoch: {struct.unpack_from('>i', value, 2)[0]}"
    return f" controlType: UNKNOWN({type_id})"


def _sequence(base_sequence: int, delta: int) -> int:
    """A record's sequence number: the batch's base plus its offset delta, wrapping at Int.MaxValue; -1 for none."""
    return -1 if base_sequence < 0 else (base_sequence + delta) % 2 ** 31


def _flag(value) -> str:
    return "true" if value else "false"


def _size(b: bytes | None) -> int:
    return -1 if b is None else len(b)


def _text(b: bytes) -> str:
    return bytes(b).decode("utf-8", errors="replace")


@click.command("dump-log")
@click.option("--files", required=True, metavar="FILE1,FILE2,...",
              help="REQUIRED: The comma separated list of data and index log files to be dumped.")
@click.option("--print-data-log", is_flag=True,
              help="Print the records' keys and values (implies --deep-iteration).")
@click.option("--deep-iteration", is_flag=True, help="One line per record, not only per batch.")
@click.option("--verify-index-only", is_flag=True, help="Check the index against the log without printing it.")
@click.option("--index-sanity-check", is_flag=True,
              help="Only run the index sanity check a broker runs at start (to decide on rebuilding it).")
@click.option("--max-message-size", type=click.IntRange(min=1), default=5 * 1024 * 1024, show_default=True,
              help="Size of largest message (the most a compressed batch inflates to).")
@click.option("--offsets-decoder", is_flag=True,
              help="Decode the records as __consumer_offsets' offset commits and group metadata.")
@click.option("--transaction-log-decoder", is_flag=True,
              help="Decode the records as __transaction_state's transaction metadata.")
@click.option("--skip-record-metadata", is_flag=True, help="Print only the records' keys and values.")
def dump_log(files, print_data_log, deep_iteration, verify_index_only, index_sanity_check, max_message_size,
             offsets_decoder, transaction_log_decoder, skip_record_metadata):
    """Dump a broker's log files offline, as kafka-dump-log.sh does: .log segments (batches; records with
    --deep-iteration), .index, .timeindex and .txnindex files. Needs no cluster.

    \b
    kadmin dump-log --files /var/lib/kbroker/orders-0/00000000000000000000.log --print-data-log
    kadmin dump-log --files 00000000000000000000.index,00000000000000000000.timeindex --verify-index-only
    kadmin dump-log --offsets-decoder --files __consumer_offsets-12/00000000000000000000.log
    """
    decoder = (format_offsets_record if offsets_decoder else format_txn_record if transaction_log_decoder else None)
    print_data = print_data_log or decoder is not None
    run = _Dump(max_message_size, deep_iteration or print_data, print_data, decoder, skip_record_metadata)
    for path in files.split(","):
        click.echo(f"Dumping {path}")
        suffix = os.path.splitext(path)[1]
        try:
            if suffix == ".log":
                run.log(path, _read(path))
            elif suffix == ".index":
                run.index(path, index_sanity_check, verify_index_only)
            elif suffix == ".timeindex":
                run.time_index(path, index_sanity_check, verify_index_only)
            elif suffix == ".txnindex":
                run.txn_index(path)
            else:
                click.echo(f"Ignoring unknown file {path}", err=True)
        except OSError as e:
            click.echo(f"Error: cannot read {e.filename or path}: {e.strerror or e}", err=True)
            run.failed = True
        except CorruptIndex as e:
            click.echo(f"Error: {e}", err=True)
            run.failed = True
    run.report()
    return 1 if run.failed else 0
