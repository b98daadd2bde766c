"""Hand-written codecs for the two hot paths: Produce requests in, Fetch responses out (and back in).

Why by hand: a produce request is mostly record bytes, and the library's decoder copies them; here each
partition's records stay a memoryview into the request frame, so the v2 append path can patch offsets in
place and write the same bytes. A fetch response is mostly log bytes; it is built as a list of pieces, small
encoded headers plus FileSlices that the network layer sends with os.sendfile, so record bytes never pass
through user space (a file slice is any object with `fd`, `position` and `length`, as the log's FileSlice).
A fetch response read by a client (the replica fetchers, Spark, the benchmarks) is decoded the same way round:
each partition's records are one memoryview slice of the received frame, never copied. All three are checked
against kafka-python's schema codecs in the tests (byte for byte, or field for field in every version).

Produce request v0-v9 (v3+ transactional_id; v9+ flexible: compact strings/arrays and tagged fields).
Fetch response v0-v12 (v1+ throttle; v4+ last stable offset and aborted transactions; v5+ log start offset;
v7+ error code and session id; v11+ preferred read replica; v12 flexible).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .errors import Errors
from .header import MalformedRequest, read_uvarint, skip_tagged_fields

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


# ---- primitives ----------------------------------------------------------------------------------------------
def _need(buf, pos, n):
    if pos + n > len(buf):
        raise MalformedRequest("message body is truncated")


def _sized(buf, pos, compact, width):
    """A length-prefixed field (int16/int32 length by `width`, or a compact uvarint length + 1) as a view of
    `buf`; None when null."""
    if compact:
        n, pos = read_uvarint(buf, pos)
        n -= 1
    else:
        _need(buf, pos, width.size)
        n = width.unpack_from(buf, pos)[0]
        pos += width.size
    if n < 0:
        return None, pos
    _need(buf, pos, n)
    return buf[pos:pos + n], pos + n


def _string(buf, pos, compact):
    """A string; bytes that are not UTF-8 become U+FFFD, as Java's String decoding in Kafka makes them."""
    raw, pos = _sized(buf, pos, compact, _I16)
    return (None if raw is None else bytes(raw).decode("utf-8", "replace")), pos


def _bytes(buf, pos, compact):
    return _sized(buf, pos, compact, _I32)


def _array_len(buf, pos, compact):
    if compact:
        n, pos = read_uvarint(buf, pos)
        return n - 1, pos
    _need(buf, pos, 4)
    return _I32.unpack_from(buf, pos)[0], pos + 4


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# ---- Produce request ----------------------------------------------------------------------------------------
@dataclass
class ProducePartition:
    index: int
    records: memoryview | None


@dataclass
class ProduceTopic:
    name: str
    partitions: list[ProducePartition] = field(default_factory=list)


@dataclass
class ProduceRequestData:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topics: list[ProduceTopic]


def decode_produce_request(body: memoryview, version: int) -> ProduceRequestData:
    """Decode a Produce request body; records are views into `body`, not copies."""
    compact = version >= 9
    pos = 0
    txn = None
    if version >= 3:
        txn, pos = _string(body, pos, compact)
    _need(body, pos, 6)
    acks, timeout = struct.unpack_from(">hi", body, pos)
    pos += 6
    n_topics, pos = _array_len(body, pos, compact)
    if n_topics < 0 or n_topics > len(body):
        raise MalformedRequest("bad topic count")
    topics = []
    for _ in range(n_topics):
        name, pos = _string(body, pos, compact)
        if name is None:
            raise MalformedRequest("null topic name")
        n_parts, pos = _array_len(body, pos, compact)
        if n_parts < 0 or n_parts > len(body):
            raise MalformedRequest("bad partition count")
        topic = ProduceTopic(name)
        for _ in range(n_parts):
            _need(body, pos, 4)
            index = _I32.unpack_from(body, pos)[0]
            records, pos = _bytes(body, pos + 4, compact)
            if compact:
                pos = skip_tagged_fields(body, pos)
            topic.partitions.append(ProducePartition(index, records))
        if compact:
            pos = skip_tagged_fields(body, pos)
        topics.append(topic)
    if compact:
        pos = skip_tagged_fields(body, pos)
    return ProduceRequestData(txn, acks, timeout, topics)


# ---- Fetch response -----------------------------------------------------------------------------------------
def is_file_slice(piece) -> bool:
    return hasattr(piece, "fd")


def piece_size(piece) -> int:
    return piece.length if is_file_slice(piece) else len(piece)


@dataclass
class FetchPartitionData:
    partition: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: list | None = None   # [(producer_id, first_offset)] or None
    preferred_read_replica: int = -1
    records: list = field(default_factory=list)  # pieces: bytes-like and file slices, concatenated
    at_end: bool = False   # not sent: read at the fetchable end, nothing to read until the partition changes

    @property
    def records_size(self) -> int:
        records = self.records
        if len(records) == 1:       # as a read returns them (on the fetch path: no generator for one piece)
            r = records[0]
            return r.length if hasattr(r, "fd") else len(r)
        return sum(piece_size(r) for r in records)


def encode_fetch_response(version: int, throttle_ms: int, error_code: int, session_id: int,
                          topics: list[tuple[str, list[FetchPartitionData]]]) -> list:
    """Fetch response body as a list of pieces (bytes and file slices), in wire order."""
    flexible = version >= 12
    pieces: list = []
    head = bytearray()
    if version >= 1:
        head += _I32.pack(throttle_ms)
    if version >= 7:
        head += struct.pack(">hi", error_code, session_id)
    head += uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics))
    for name, partitions in topics:
        encoded = name.encode()
        head += (uvarint(len(encoded) + 1) if flexible else _I16.pack(len(encoded))) + encoded
        head += uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions))
        for p in partitions:
            head += struct.pack(">ihq", p.partition, p.error_code, p.high_watermark)
            if version >= 4:
                head += _I64.pack(p.last_stable_offset)
                if version >= 5:
                    head += _I64.pack(p.log_start_offset)
                aborted = p.aborted_transactions
                if aborted is None:
                    head += b"\x00" if flexible else _I32.pack(-1)
                else:
                    head += uvarint(len(aborted) + 1) if flexible else _I32.pack(len(aborted))
                    for producer_id, first_offset in aborted:
                        head += struct.pack(">qq", producer_id, first_offset)
                        if flexible:
                            head += b"\x00"
            if version >= 11:
                head += _I32.pack(p.preferred_read_replica)
            size = p.records_size
            head += uvarint(size + 1) if flexible else _I32.pack(size)
            if size:
                pieces.append(bytes(head))
                head = bytearray()
                pieces.extend(r for r in p.records if piece_size(r))
            if flexible:
                head += b"\x00"  # partition tagged fields
        if flexible:
            head += b"\x00"      # topic tagged fields
    if flexible:
        head += b"\x00"          # response tagged fields
    pieces.append(bytes(head))
    return pieces


def _prefix_size(n: int, flexible: bool, width: int) -> int:
    """The size of a length or count prefix: a compact uvarint of n + 1, else `width` bytes."""
    return len(uvarint(n + 1)) if flexible else width


def fetch_response_size(version: int, partitions: list[tuple[str, FetchPartitionData]]) -> int:
    """The size of encode_fetch_response's body for these (topic, partition) results in response order (a topic's
    together), without building it (a consumer's quota weighs every response: this is on the fetch path)."""
    flexible = version >= 12
    fixed = 14 + (4 if version >= 11 else 0) + flexible + (16 if version >= 5 else 8 if version >= 4 else 0)
    size = (4 if version >= 1 else 0) + (6 if version >= 7 else 0) + flexible
    topics, topic, count = 0, None, 0
    for name, p in partitions:
        if name != topic:
            if topic is not None:
                size += _prefix_size(count, flexible, 4)
            topics, topic, count = topics + 1, name, 0
            n = len(name.encode())
            size += _prefix_size(n, flexible, 2) + n + flexible
        count += 1
        records = p.records_size
        size += fixed + records + (_prefix_size(records, True, 4) if flexible else 4)
        if version >= 4:
            aborted = p.aborted_transactions
            size += _prefix_size(-1 if aborted is None else len(aborted), flexible, 4)
            if aborted:
                size += len(aborted) * (16 + flexible)
    if topic is not None:
        size += _prefix_size(count, flexible, 4)
    return size + _prefix_size(topics, flexible, 4)


@dataclass
class FetchResponseData:
    """A Fetch response body: what a broker's Fetch handler answers (encode() builds its pieces) and what
    decode_fetch_response reads."""
    throttle_time_ms: int
    error_code: int
    session_id: int
    topics: list[tuple[str, list[FetchPartitionData]]]

    def encode(self, version: int) -> list:
        return encode_fetch_response(version, self.throttle_time_ms, self.error_code, self.session_id, self.topics)

    def partition(self, topic: str, partition: int) -> FetchPartitionData:
        """One partition's answer; a top-level error, or the partition missing (UNKNOWN_TOPIC_OR_PARTITION),
        stands in for it."""
        if self.error_code:
            return FetchPartitionData(partition, self.error_code)
        for name, partitions in self.topics:
            for p in partitions:
                if name == topic and p.partition == partition:
                    return p
        return FetchPartitionData(partition, Errors.UNKNOWN_TOPIC_OR_PARTITION)


def decode_fetch_response(body: memoryview, version: int) -> FetchResponseData:
    """Decode a Fetch response body (after the response header); each partition's records are [a view into
    `body`] ([] when null), so encode_fetch_response of the result gives the same bytes back."""
    flexible = version >= 12
    pos = throttle = session_id = error_code = 0
    if version >= 1:
        _need(body, pos, 4)
        throttle = _I32.unpack_from(body, pos)[0]
        pos += 4
    if version >= 7:
        _need(body, pos, 6)
        error_code, session_id = struct.unpack_from(">hi", body, pos)
        pos += 6
    n_topics, pos = _array_len(body, pos, flexible)
    if n_topics > len(body):
        raise MalformedRequest("bad topic count")
    topics = []
    for _ in range(max(n_topics, 0)):
        name, pos = _string(body, pos, flexible)
        n_parts, pos = _array_len(body, pos, flexible)
        if n_parts > len(body):
            raise MalformedRequest("bad partition count")
        partitions = []
        for _ in range(max(n_parts, 0)):
            _need(body, pos, 14)
            p = FetchPartitionData(*struct.unpack_from(">ihq", body, pos))
            pos += 14
            if version >= 4:
                _need(body, pos, 8)
                p.last_stable_offset = _I64.unpack_from(body, pos)[0]
                pos += 8
                if version >= 5:
                    _need(body, pos, 8)
                    p.log_start_offset = _I64.unpack_from(body, pos)[0]
                    pos += 8
                n_aborted, pos = _array_len(body, pos, flexible)
                if n_aborted >= 0:
                    _need(body, pos, 16 * n_aborted)
                    p.aborted_transactions = []
                    for _ in range(n_aborted):
                        p.aborted_transactions.append(struct.unpack_from(">qq", body, pos))
                        pos += 16
                        if flexible:
                            pos = skip_tagged_fields(body, pos)
            if version >= 11:
                _need(body, pos, 4)
                p.preferred_read_replica = _I32.unpack_from(body, pos)[0]
                pos += 4
            records, pos = _bytes(body, pos, flexible)
            p.records = [] if records is None else [records]
            if flexible:
                pos = skip_tagged_fields(body, pos)
            partitions.append(p)
        if flexible:
            pos = skip_tagged_fields(body, pos)
        topics.append((name, partitions))
    if flexible:
        skip_tagged_fields(body, pos)
    return FetchResponseData(throttle, error_code, session_id, topics)
