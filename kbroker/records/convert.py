"""Fetch-side down-conversion for clients that cannot read the log's magic (Fetch v0-1 read magic 0, v2-3
magic 1), lazy and chunked as Kafka's LazyDownConversionRecords (KIP-283): entries are converted one at a
time as the caller consumes chunks, so memory stays bounded by the chunk size plus one entry.

As Kafka's RecordsUtil.downConvert: entries already at or below the wanted magic pass through unchanged;
control batches are dropped (v0/v1 have no transaction markers); zstd batches cannot be converted (answered
with UNSUPPORTED_COMPRESSION_TYPE if nothing was converted yet, else the output stops before them so the
client's next fetch gets the error); offsets are kept (compressed: v1 wrapper = last offset with relative
inner offsets, v0 absolute inner offsets, same codec); timestamps are kept with their type for v1 and
dropped for v0; headers are dropped. From an uncompressed v2 batch, records before the fetch offset are
skipped (each becomes its own message, so they can be; a compressed batch is converted whole).

The output never exceeds max_bytes, except that the conversion of the first entry is always returned whole
so a consumer can make progress whatever its fetch size.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..protocol.errors import Errors, KafkaError
from .batches import CREATE_TIME, LOG_APPEND_TIME, legacy_records, v2_records
from .builder import build_legacy
from .compression import NONE, ZSTD
from .entries import CONTROL_MASK, TIMESTAMP_TYPE_MASK_V1, TIMESTAMP_TYPE_MASK_V2, CorruptEntry, Entry, iter_entries
from .validator import DEFAULT_DECOMPRESSION_LIMIT

DEFAULT_CHUNK_BYTES = 128 * 1024   # Kafka's LazyDownConversionRecordsSend.MAX_READ_SIZE


def magic_for_fetch_version(version: int) -> int:
    """The newest record magic a Fetch request of this version can carry."""
    return 0 if version <= 1 else 1 if version <= 3 else 2


def down_convert(source, to_magic: int, *, fetch_offset: int, max_bytes: int,
                 chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                 decompression_limit: int = DEFAULT_DECOMPRESSION_LIMIT) -> Iterator[bytes | bytearray | memoryview]:
    """Yield the entries of `source` (a buffer, or an iterable of buffers read from the log in order; an entry
    may straddle two) converted to `to_magic`, in chunks of about chunk_bytes, at most max_bytes in all
    except that the first converted entry is always whole. A partial entry at the very end is ignored."""
    budget = max_bytes
    out = bytearray()
    started = False
    for view, entry in _entries(source):
        if to_magic < 2 and entry.magic == 2 and entry.attributes & CONTROL_MASK:
            continue
        if to_magic < 2 and entry.compression == ZSTD:
            if not started:
                raise KafkaError(Errors.UNSUPPORTED_COMPRESSION_TYPE,
                                 "Down-conversion of zstandard-compressed batches is not supported")
            break
        if entry.magic <= to_magic:
            piece = view[entry.position:entry.position + entry.size]
        else:
            piece = _convert(view, entry, to_magic, fetch_offset, decompression_limit)
        if not piece:
            continue
        if started and len(piece) > budget:
            out += piece[:_fitting_prefix(piece, budget)]
            break
        started = True
        budget -= len(piece)
        if not out and len(piece) >= chunk_bytes:
            yield piece
            continue
        out += piece
        if len(out) >= chunk_bytes:
            yield out
            out = bytearray()
    if out:
        yield out


def _entries(source) -> Iterator[tuple[memoryview, Entry]]:
    """(buffer, entry) for every whole entry of the buffers, stitching an entry split between two."""
    buffers: Iterable = (source,) if isinstance(source, (bytes, bytearray, memoryview)) else source
    carry = b""
    for chunk in buffers:
        view = memoryview(chunk)
        if carry:
            view = memoryview(carry + bytes(view))
        end = 0
        try:
            for entry in iter_entries(view):
                yield view, entry
                end = entry.position + entry.size
        except CorruptEntry as e:
            raise KafkaError(Errors.CORRUPT_MESSAGE, f"corrupt log data: {e}") from e
        carry = bytes(view[end:])


def _convert(view, entry: Entry, to_magic: int, fetch_offset: int, limit: int) -> bytearray | None:
    if entry.magic == 2:
        records = v2_records(view, entry.position, entry.size, limit)
        log_append = entry.attributes & TIMESTAMP_TYPE_MASK_V2
    else:
        records = legacy_records(view, entry.position, entry.size, limit)
        log_append = entry.magic == 1 and entry.attributes & TIMESTAMP_TYPE_MASK_V1
    codec = entry.compression
    if codec == NONE and records and records[0].offset < fetch_offset:
        records = [r for r in records if r.offset >= fetch_offset]
    if not records:
        return None
    return build_legacy(records, magic=to_magic, codec=codec,
                        timestamp_type=LOG_APPEND_TIME if log_append else CREATE_TIME,
                        log_append_time=entry.max_timestamp)


def _fitting_prefix(piece, budget: int) -> int:
    """How many bytes of whole entries at the start of piece fit in budget."""
    end = 0
    for entry in iter_entries(piece):
        if entry.position + entry.size > budget:
            break
        end = entry.position + entry.size
    return end
