"""Produce-side validation and offset assignment for one partition: Kafka 2.8's ProduceRequest.validateRecords,
Log.analyzeAndValidateRecords and LogValidator, on the bytes a producer sent.

Every entry is checked from its header first (lengths, magic, CRC, size against max.message.bytes, v2 header
consistency). Then, as LogValidator:
- uncompressed, same magic as the topic: offsets assigned in place. A v2 batch is checked from its 61-byte
  header only (record count against its size, firstTimestamp/maxTimestamp against the allowed difference)
  and gets baseOffset and partitionLeaderEpoch patched, both outside the CRC, so no record is touched;
  LogAppendTime also sets the timestamp-type bit and maxTimestamp and recomputes the CRC-32C. (Kafka walks
  every record here; we walk them only for a compacted topic's keys, or to name the rejected records once a
  batch fails.) v0/v1 messages get their offsets rewritten (v1 LogAppendTime: timestamp, bit, CRC-32).
- uncompressed, other magic: all records rebuilt into the topic's magic (one v2 batch, or v0/v1 messages).
- compressed (either side): the records are inflated (within config.decompression_limit) and validated one
  by one; kept in place when codec and magic are unchanged, magic > 0 and the inner offsets run 0..n-1
  (v2: header patched; v1: wrapper offset set to the last offset, maxTimestamp/LogAppendTime on the
  wrapper), else rebuilt in the topic's magic and codec.

Error codes are Kafka 2.8's. Where Kafka fails with an unchecked exception (UNKNOWN_SERVER_ERROR) we answer
instead: CORRUPT_MESSAGE for a payload that does not decompress or inflates past the limit, for an unknown
codec and for a truncated entry (Kafka silently drops a partial trailing entry); UNSUPPORTED_FOR_MESSAGE_FORMAT
for record headers in a v0/v1 topic; UNSUPPORTED_COMPRESSION_TYPE for zstd in a v0/v1 topic; INVALID_TIMESTAMP
for a timestamp below -1 in records being rebuilt.
"""
from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..protocol.errors import Errors, KafkaError
from .batches import (CREATE_TIME, LOG_APPEND_TIME, MIN_V2_RECORD_SIZE, V2_MAX_TIMESTAMP_OFFSET, check_v2_framing,
                      invalid, legacy_message, legacy_records, set_legacy_crc, set_v2_crc, v2_records)
from .builder import build_legacy, build_v2
from .compression import NONE, ZSTD, codec_id
from .entries import (COMPRESSION_MASK, CONTROL_MASK, MAGIC_OFFSET, NO_TIMESTAMP,
                      TIMESTAMP_TYPE_MASK_V1, TIMESTAMP_TYPE_MASK_V2, TRANSACTIONAL_MASK, V2_ATTRIBUTES_OFFSET,
                      V2_HEADER, V2_HEADER_SIZE, CorruptEntry, Entry, crc_valid, iter_entries, read_entry)

DEFAULT_DECOMPRESSION_LIMIT = 64 * 1024 * 1024
_V2_KEPT_ATTRIBUTES = COMPRESSION_MASK | TRANSACTIONAL_MASK | CONTROL_MASK


def magic_for_format_version(version: str) -> int:
    """The record magic of a message.format.version: 0.8.x/0.9.0 → 0, 0.10.x → 1, 0.11.0 and later → 2."""
    parts = version.strip().split("-")[0].split(".")
    try:
        major, minor = int(parts[0]), int(parts[1])
    except (ValueError, IndexError):
        raise ValueError(f"not a message format version: {version!r}") from None
    if major > 0 or minor >= 11:
        return 2
    return 1 if minor == 10 else 0


MAX_LONG = 2 ** 63 - 1


@dataclass(frozen=True)
class RecordsConfig:
    """The topic settings validation depends on (Kafka's LogConfig names in the comments)."""
    magic: int = 2                                   # message.format.version, via magic_for_format_version
    timestamp_type: int = CREATE_TIME                # message.timestamp.type: CREATE_TIME or LOG_APPEND_TIME
    max_timestamp_difference_ms: int = MAX_LONG      # message.timestamp.difference.max.ms
    compression_type: str = "producer"               # compression.type
    max_message_bytes: int = 1048588                 # max.message.bytes
    compacted: bool = False                          # cleanup.policy contains "compact"
    decompression_limit: int = DEFAULT_DECOMPRESSION_LIMIT   # most bytes one entry may inflate to

    @classmethod
    def from_topic_config(cls, config: Mapping[str, object],
                          decompression_limit: int = DEFAULT_DECOMPRESSION_LIMIT) -> RecordsConfig:
        """From a topic's effective configs by Kafka name (strings as stored, or parsed values)."""
        policy = config.get("cleanup.policy", "delete")
        policies = [p.strip() for p in policy.split(",")] if isinstance(policy, str) else list(policy)
        return cls(
            magic=magic_for_format_version(str(config.get("message.format.version", "2.8"))),
            timestamp_type=(LOG_APPEND_TIME if config.get("message.timestamp.type") == "LogAppendTime"
                            else CREATE_TIME),
            max_timestamp_difference_ms=int(config.get("message.timestamp.difference.max.ms", 2 ** 63 - 1)),
            compression_type=str(config.get("compression.type", "producer")),
            max_message_bytes=int(config.get("max.message.bytes", 1048588)),
            compacted="compact" in policies,
            decompression_limit=decompression_limit)

    def target_codec(self, source_codec: int) -> int:
        """The codec appended data ends up in (Kafka's BrokerCompressionCodec.getTargetCompressionCodec)."""
        return source_codec if self.compression_type == "producer" else codec_id(self.compression_type)


@dataclass(frozen=True)
class BatchInfo:
    """What the producer state and the leader-epoch cache need from one appended v2 batch."""
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    is_transactional: bool
    is_control: bool
    first_offset: int
    last_offset: int


@dataclass
class AppendInfo:
    """The outcome of validate_and_assign: what to append and what the log and the response need."""
    records: bytearray | memoryview  # the bytes to append: the input itself, patched, unless `rebuilt`
    first_offset: int                # -1 if there was nothing to append
    last_offset: int
    max_timestamp: int               # -1 if none
    offset_of_max_timestamp: int     # the last offset of the entry holding it ("shallow"), -1 if none
    log_append_time: int             # now_ms under LogAppendTime, else -1
    record_count: int
    source_magic: int
    source_codec: int
    target_codec: int
    rebuilt: bool                    # records were converted or recompressed (Kafka: messageSizeMaybeChanged)
    batches: list[BatchInfo] = field(default_factory=list)   # one per appended v2 batch


class RecordValidationError(KafkaError):
    """Some records were rejected; record_errors lists (index in its batch, message) as ProduceResponse v8
    reports them."""

    def __init__(self, code: Errors, message: str, record_errors: list[tuple[int, str]]):
        super().__init__(code, message)
        self.record_errors = record_errors


def validate_and_assign(buf, *, produce_version: int | None, next_offset: int, now_ms: int,
                        config: RecordsConfig, partition_leader_epoch: int) -> AppendInfo:
    """Validate one partition's produce data and assign offsets from next_offset; raise KafkaError.

    `buf` is a bytearray, memoryview or bytes; in-place results patch it (a read-only buffer is copied once
    first). produce_version is the Produce request version; None means an append by the broker itself
    (coordinators), which may write control batches and any base offset, as Kafka's non-client origins.
    """
    view = memoryview(buf)
    from_client = produce_version is not None
    entries = _scan(view, produce_version, from_client, config)
    if not entries:
        return AppendInfo(bytearray(), -1, -1, NO_TIMESTAMP, -1, -1, 0, config.magic, NONE, NONE, False)
    first = entries[0]
    source_codec = NONE
    for entry in entries:
        if entry.compression != NONE:
            source_codec = entry.compression
    if source_codec > ZSTD:
        raise KafkaError(Errors.CORRUPT_MESSAGE, f"unknown compression codec {source_codec}")
    if source_codec == ZSTD and first.magic < 2:
        raise invalid(f"Invalid wrapper compression type zstd for magic {first.magic}")
    target_codec = config.target_codec(source_codec)
    if len(entries) > 1 and (first.magic >= 2 or source_codec != NONE):
        raise invalid("Compressed outer record has more than one batch")
    for entry in entries:
        _validate_batch(view, first, entry, from_client, config.magic)
    if target_codec == ZSTD and config.magic < 2:
        raise KafkaError(Errors.UNSUPPORTED_COMPRESSION_TYPE,
                         f"zstd compression is not supported for message format v{config.magic}")
    job = _Job(buf, entries, next_offset, now_ms, config, partition_leader_epoch, source_codec, target_codec)
    if source_codec == NONE and target_codec == NONE:
        if first.magic == config.magic:
            return job.assign_v2_in_place() if first.magic == 2 else job.assign_legacy_in_place()
        return job.convert_uncompressed()
    return job.compressed()


def _scan(view: memoryview, produce_version: int | None, from_client: bool, config: RecordsConfig) -> list[Entry]:
    entries = []
    pos, end = 0, len(view)
    while pos < end:
        try:
            entry = read_entry(view, pos, end)
        except CorruptEntry as e:
            raise KafkaError(Errors.CORRUPT_MESSAGE, str(e)) from e
        if entry is None:
            if not entries and produce_version is not None and produce_version >= 3:
                raise invalid(f"Produce requests with version {produce_version} must have at least one record "
                              "batch (the data holds no whole batch)")
            raise KafkaError(Errors.CORRUPT_MESSAGE, f"truncated entry at byte {pos} ({end - pos} bytes left)")
        entries.append(entry)
        pos += entry.size
    if produce_version is not None and produce_version >= 3:
        if not entries:
            raise invalid(f"Produce requests with version {produce_version} must have at least one record batch")
        if entries[0].magic != 2:
            raise invalid(f"Produce requests with version {produce_version} are only allowed to contain "
                          "record batches with magic version 2")
        if produce_version < 7 and entries[0].compression == ZSTD:
            raise KafkaError(Errors.UNSUPPORTED_COMPRESSION_TYPE, f"Produce requests with version "
                             f"{produce_version} are not allowed to use ZStandard compression")
        if len(entries) > 1:
            raise invalid(f"Produce requests with version {produce_version} are only allowed to contain "
                          "exactly one record batch")
    for entry in entries:
        if entry.magic >= 2 and from_client and entry.base_offset != 0:
            raise invalid(f"The baseOffset of the record batch should be 0, but it is {entry.base_offset}")
        if entry.size > config.max_message_bytes:
            raise KafkaError(Errors.MESSAGE_TOO_LARGE, f"The record batch size is {entry.size} bytes which "
                             f"exceeds the maximum configured value of {config.max_message_bytes}.")
        if not crc_valid(view, entry):
            raise KafkaError(Errors.CORRUPT_MESSAGE, f"Record is corrupt (CRC mismatch) at byte {entry.position}")
    return entries


def _validate_batch(view, first: Entry, entry: Entry, from_client: bool, to_magic: int) -> None:
    if entry.magic != first.magic:
        raise invalid(f"Batch magic {entry.magic} is not the same as the first batch's magic byte {first.magic}")
    if entry.magic < 2:
        return
    producer_id, base_sequence = struct.unpack_from(">q2xi", view, entry.position + 43)
    if from_client:
        count_from_offsets = entry.last_offset - entry.base_offset + 1
        if count_from_offsets <= 0:
            raise invalid(f"Batch has an invalid offset range: [{entry.base_offset}, {entry.last_offset}]")
        if entry.record_count <= 0:
            raise invalid(f"Invalid reported count for record batch: {entry.record_count}")
        if count_from_offsets != entry.record_count:
            raise invalid(f"Inconsistent batch offset range [{entry.base_offset}, {entry.last_offset}] and "
                          f"count of records {entry.record_count}")
        if entry.attributes & CONTROL_MASK:
            raise invalid("Clients are not allowed to write control records")
        if producer_id >= 0 and base_sequence < 0:
            raise invalid(f"Invalid sequence number {base_sequence} in record batch with producerId {producer_id}")
    if entry.attributes & TRANSACTIONAL_MASK and to_magic < 2:
        raise KafkaError(Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT,
                         f"Transactional records cannot be used with magic version {to_magic}")
    if producer_id >= 0 and to_magic < 2:
        raise KafkaError(Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT,
                         f"Idempotent records cannot be used with magic version {to_magic}")


def _raise_record_errors(errors: list[tuple[int, Errors, str]]) -> None:
    if not errors:
        return
    listed = [(index, message) for index, _, message in errors]
    if any(code == Errors.INVALID_TIMESTAMP for _, code, _ in errors):
        raise RecordValidationError(Errors.INVALID_TIMESTAMP,
                                    "One or more records have been rejected due to invalid timestamp", listed)
    raise RecordValidationError(Errors.INVALID_RECORD, "One or more records have been rejected", listed)


def _last_sequence(base_sequence: int, delta: int) -> int:
    if base_sequence < 0:
        return -1
    return base_sequence + delta if base_sequence <= 2 ** 31 - 1 - delta else delta - (2 ** 31 - 1 - base_sequence) - 1


def _v2_batch_info(buf, pos: int) -> BatchInfo:
    (base, _, _, _, _, attributes, last_delta, _, _, producer_id, producer_epoch, base_sequence,
     _) = V2_HEADER.unpack_from(buf, pos)
    return BatchInfo(producer_id, producer_epoch, base_sequence, _last_sequence(base_sequence, last_delta),
                     bool(attributes & TRANSACTIONAL_MASK), bool(attributes & CONTROL_MASK), base, base + last_delta)


def _writable(buf):
    if isinstance(buf, bytearray) or (isinstance(buf, memoryview) and not buf.readonly):
        return buf
    return bytearray(buf)


class _Job:
    """One validate_and_assign call past the header checks: the LogValidator cases as methods."""

    def __init__(self, buf, entries, next_offset, now_ms, config, partition_leader_epoch, source_codec,
                 target_codec):
        self.buf = buf
        self.entries = entries
        self.next_offset = next_offset
        self.now = now_ms
        self.config = config
        self.epoch = partition_leader_epoch
        self.source_codec = source_codec
        self.target_codec = target_codec
        self.log_append = config.timestamp_type == LOG_APPEND_TIME

    # per-record checks (LogValidator.validateKey / validateTimestamp) ---------------------------------

    def record_error(self, key, timestamp: int, offset: int, batch_log_append: bool):
        if self.config.compacted and key is None:
            return Errors.INVALID_RECORD, "Compacted topic cannot accept message without key."
        return self.timestamp_error(timestamp, offset, batch_log_append)

    def timestamp_error(self, timestamp: int, offset: int, batch_log_append: bool):
        diff = self.config.max_timestamp_difference_ms
        if not self.log_append and timestamp != NO_TIMESTAMP and abs(timestamp - self.now) > diff:
            return (Errors.INVALID_TIMESTAMP,
                    f"Timestamp {timestamp} of message with offset {offset} is out of range. The timestamp "
                    f"should be within [{self.now - diff}, {self.now + diff}]")
        if batch_log_append:
            return Errors.INVALID_TIMESTAMP, "Producer should not set timestamp type to LogAppendTime."
        return None

    def check_records(self, records, batch_log_append: bool) -> None:
        errors = []
        for index, r in enumerate(records):
            error = self.record_error(r.key, r.timestamp, r.offset, batch_log_append)
            if error:
                errors.append((index, *error))
        _raise_record_errors(errors)

    # the cases ---------------------------------------------------------------------------------------

    def assign_v2_in_place(self) -> AppendInfo:
        entry = self.entries[0]
        pos, size = entry.position, entry.size
        (_, _, _, _, _, attributes, last_delta, first_ts, max_ts, _, _, _, count) = V2_HEADER.unpack_from(self.buf, pos)
        if count < 0 or count * MIN_V2_RECORD_SIZE > size - V2_HEADER_SIZE:
            raise invalid(f"record count {count} does not fit in {size - V2_HEADER_SIZE} bytes of records")
        batch_log_append = bool(attributes & TIMESTAMP_TYPE_MASK_V2)
        header_error = count > 0 and (self.timestamp_error(first_ts, entry.base_offset, batch_log_append)
                                      or self.timestamp_error(max_ts, entry.last_offset, False))
        if header_error or self.config.compacted or self.config.max_timestamp_difference_ms < MAX_LONG:
            # Records are read one by one only when a setting needs it: keys of compacted topics, each
            # record's timestamp under a time limit, or to name the records a bad header points at.
            self.check_records(v2_records(self.buf, pos, size, self.config.decompression_limit), batch_log_append)
            if header_error:
                raise RecordValidationError(header_error[0], header_error[1], [(0, header_error[1])])
        else:
            check_v2_framing(self.buf, pos, size)
        buf = _writable(self.buf)
        last = self.next_offset + count - 1
        base = last - last_delta
        struct.pack_into(">q", buf, pos, base)
        struct.pack_into(">i", buf, pos + 12, self.epoch)
        if self.log_append:
            max_ts = self.now
            self.set_v2_max_timestamp(buf, pos, size, attributes, LOG_APPEND_TIME, max_ts)
        return AppendInfo(buf, base, last, max_ts, last if max_ts != NO_TIMESTAMP else -1,
                          self.now if self.log_append else -1, count, 2, NONE, NONE, False,
                          [_v2_batch_info(buf, pos)])

    def assign_legacy_in_place(self) -> AppendInfo:
        buf = _writable(self.buf)
        view = memoryview(buf)
        offset = self.next_offset
        max_ts, offset_of_max = NO_TIMESTAMP, -1
        for entry in self.entries:
            pos, end = entry.position, entry.position + entry.size
            message, _ = legacy_message(view, pos, end, check_crc=False)
            log_append_bit = bool(message.magic == 1 and message.attributes & TIMESTAMP_TYPE_MASK_V1)
            error = self.record_error(message.key, message.timestamp, message.offset, log_append_bit)
            if error:
                _raise_record_errors([(0, *error)])
            struct.pack_into(">q", buf, pos, offset)
            if message.magic == 1:
                if message.timestamp > max_ts:
                    max_ts, offset_of_max = message.timestamp, offset
                if self.log_append and not (log_append_bit and message.timestamp == self.now):
                    buf[pos + MAGIC_OFFSET + 1] = (message.attributes | TIMESTAMP_TYPE_MASK_V1) & 0xFF
                    struct.pack_into(">q", buf, pos + MAGIC_OFFSET + 2, self.now)
                    set_legacy_crc(buf, pos, end)
            offset += 1
        if self.log_append:
            max_ts, offset_of_max = self.now, self.next_offset
        return AppendInfo(buf, self.next_offset, offset - 1, max_ts, offset_of_max,
                          self.now if self.log_append else -1, len(self.entries), self.entries[0].magic,
                          NONE, NONE, False)

    def convert_uncompressed(self) -> AppendInfo:
        records = []
        for entry in self.entries:
            decoded, batch_log_append = self.decode(entry)
            errors = []
            for index, r in enumerate(decoded):
                error = self.record_error(r.key, r.timestamp, r.offset, batch_log_append)
                if error:
                    errors.append((index, *error))
                elif not errors:
                    records.append(r)
            _raise_record_errors(errors)
        return self.rebuild(records)

    def compressed(self) -> AppendInfo:
        config, first = self.config, self.entries[0]
        in_place = (self.source_codec == self.target_codec and first.magic == config.magic and config.magic > 0)
        if self.source_codec == NONE and first.attributes & CONTROL_MASK:
            in_place = True    # Kafka does not compress control records written uncompressed
        validated = []
        max_ts = NO_TIMESTAMP
        expected = 0
        for entry in self.entries:
            decoded, batch_log_append = self.decode(entry)
            errors = []
            for index, r in enumerate(decoded):
                error = None
                if entry.magic < 2 and self.source_codec != NONE and r.attributes & COMPRESSION_MASK:
                    error = (Errors.INVALID_RECORD, "Compressed outer record should not have an inner record "
                             "with a compression attribute set")
                elif entry.magic < 2 and r.magic != entry.magic:
                    error = (Errors.INVALID_RECORD, f"Record's magic {r.magic} does not match outer magic "
                             f"{entry.magic}")
                else:
                    error = self.record_error(r.key, r.timestamp, r.offset, batch_log_append)
                if error is None and entry.magic > 0 and config.magic > 0:
                    max_ts = max(max_ts, r.timestamp)
                    if r.offset != expected:
                        in_place = False   # older clients get inner offsets wrong: rewrite, don't reject
                expected += 1
                if error:
                    errors.append((index, *error))
                else:
                    validated.append(r)
            _raise_record_errors(errors)
        if not in_place:
            return self.rebuild(validated)
        buf = _writable(self.buf)
        pos, size = first.position, first.size
        last = self.next_offset + len(validated) - 1
        timestamp_type = LOG_APPEND_TIME if self.log_append else CREATE_TIME
        if self.log_append:
            max_ts = self.now
        batches = []
        if first.magic == 2:
            (_, _, _, _, _, attributes, last_delta) = struct.unpack_from(">qiibIhi", buf, pos)
            struct.pack_into(">q", buf, pos, last - last_delta)
            struct.pack_into(">i", buf, pos + 12, self.epoch)
            self.set_v2_max_timestamp(buf, pos, size, attributes, timestamp_type, max_ts)
            batches.append(_v2_batch_info(buf, pos))
            first_offset = last - last_delta
        else:
            struct.pack_into(">q", buf, pos, last)
            attributes, wrapper_ts = struct.unpack_from(">bq", buf, pos + MAGIC_OFFSET + 1)
            wanted = (attributes & ~TIMESTAMP_TYPE_MASK_V1) | (TIMESTAMP_TYPE_MASK_V1 if self.log_append else 0)
            if (attributes, wrapper_ts) != (wanted, max_ts):
                struct.pack_into(">bq", buf, pos + MAGIC_OFFSET + 1, wanted, max_ts)
                set_legacy_crc(buf, pos, pos + size)
            first_offset = self.next_offset
        return AppendInfo(buf, first_offset, last, max_ts, last, self.now if self.log_append else -1,
                          len(validated), first.magic, self.source_codec, self.target_codec, False, batches)

    # helpers -----------------------------------------------------------------------------------------

    def decode(self, entry: Entry):
        """The entry's records and whether its batch-level timestamp type is LogAppendTime."""
        limit = self.config.decompression_limit
        if entry.magic == 2:
            return (v2_records(self.buf, entry.position, entry.size, limit),
                    bool(entry.attributes & TIMESTAMP_TYPE_MASK_V2))
        return (legacy_records(self.buf, entry.position, entry.size, limit),
                bool(entry.magic == 1 and entry.attributes & TIMESTAMP_TYPE_MASK_V1))

    def set_v2_max_timestamp(self, buf, pos: int, size: int, attributes: int, timestamp_type: int,
                             max_ts: int) -> None:
        """DefaultRecordBatch.setMaxTimestamp: rewrite type bit and maxTimestamp, and the CRC, if they change."""
        (current,) = struct.unpack_from(">q", buf, pos + V2_MAX_TIMESTAMP_OFFSET)
        is_log_append = bool(attributes & TIMESTAMP_TYPE_MASK_V2)
        if is_log_append == (timestamp_type == LOG_APPEND_TIME) and current == max_ts:
            return
        attributes &= _V2_KEPT_ATTRIBUTES
        if timestamp_type == LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_MASK_V2
        struct.pack_into(">h", buf, pos + V2_ATTRIBUTES_OFFSET, attributes)
        struct.pack_into(">q", buf, pos + V2_MAX_TIMESTAMP_OFFSET, max_ts)
        set_v2_crc(buf, pos, pos + size)

    def rebuild(self, records) -> AppendInfo:
        """Kafka's MemoryRecordsBuilder path: records renumbered from next_offset in the topic's magic and
        target codec, with the first batch's producer state; sizes checked again."""
        config, first = self.config, self.entries[0]
        if not records:
            raise invalid("no records to append")
        max_ts, max_index = NO_TIMESTAMP, len(records) - 1
        for i, r in enumerate(records):
            if r.timestamp > max_ts:
                max_ts, max_index = r.timestamp, i
            elif r.timestamp < NO_TIMESTAMP:
                raise KafkaError(Errors.INVALID_TIMESTAMP, f"Invalid negative timestamp {r.timestamp}")
            if r.headers and config.magic < 2:
                raise KafkaError(Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT,
                                 f"Magic v{config.magic} does not support record headers")
        timestamp_type = LOG_APPEND_TIME if self.log_append else CREATE_TIME
        if config.magic == 2:
            producer_id = producer_epoch = base_sequence = -1
            transactional = False
            if first.magic == 2:
                (_, _, _, _, _, _, _, _, _, producer_id, producer_epoch, base_sequence,
                 _) = V2_HEADER.unpack_from(self.buf, first.position)
                transactional = bool(first.attributes & TRANSACTIONAL_MASK)
            out = build_v2(records, first_offset=self.next_offset, codec=self.target_codec,
                           timestamp_type=timestamp_type, log_append_time=self.now, producer_id=producer_id,
                           producer_epoch=producer_epoch, base_sequence=base_sequence,
                           transactional=transactional, partition_leader_epoch=self.epoch)
        else:
            out = build_legacy(records, first_offset=self.next_offset, magic=config.magic,
                               codec=self.target_codec, timestamp_type=timestamp_type, log_append_time=self.now)
        batches = []
        for entry in iter_entries(out):
            if entry.size > config.max_message_bytes:
                raise KafkaError(Errors.MESSAGE_TOO_LARGE, f"Message batch size is {entry.size} bytes which "
                                 f"exceeds the maximum configured size of {config.max_message_bytes}.")
            if entry.magic == 2:
                batches.append(_v2_batch_info(out, entry.position))
        first_offset, last = self.next_offset, self.next_offset + len(records) - 1
        shallow = self.target_codec != NONE or config.magic == 2   # the builder reports the last offset
        if self.log_append:
            max_ts, offset_of_max = self.now, last if shallow else first_offset
        else:
            offset_of_max = last if shallow or max_ts == NO_TIMESTAMP else first_offset + max_index
        return AppendInfo(out, first_offset, last, max_ts, offset_of_max, self.now if self.log_append else -1,
                          len(records), first.magic, self.source_codec, self.target_codec, True, batches)
