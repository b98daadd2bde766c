"""Kafka's compression codecs, by the id stored in the attributes (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).

Data is framed the way Kafka 2.8's Java client and broker frame it, so what we write any Kafka client reads:
- gzip: a gzip stream (GZIPOutputStream, level 6); reading accepts concatenated members.
- snappy: xerial's SnappyOutputStream framing for every magic (Kafka uses it for v0/v1 wrappers and v2
  batches alike): `\\x82SNAPPY\\x00`, two big-endian ints (version 1, compatible version 1), then blocks of
  at most 32 KiB, each a big-endian length and a raw snappy block. Reading also accepts raw snappy, as
  SnappyInputStream does.
- lz4: KafkaLZ4BlockOutputStream's frame: independent 64 KiB blocks, no block or content checksum, no
  content size. Magic 0 gets the header checksum old clients computed wrongly (KAFKA-3160: over the frame
  magic too); reading ignores that checksum for magic 0 and checks it for magic 1 and 2, like Kafka.
- zstd: a zstd frame (level 3, zstd-jni's default); reading accepts concatenated frames.

Decompression is bounded: output beyond `limit` bytes, like any corrupt input, raises
KafkaError(CORRUPT_MESSAGE), so a small batch cannot expand into gigabytes (a decompression bomb).
"""
from __future__ import annotations

import struct
import zlib

import lz4.block
import snappy
import zstandard

from ..protocol.errors import Errors, KafkaError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")


def codec_id(name: str) -> int:
    """The id of a codec named as in compression.type ("uncompressed" and "none" are both 0)."""
    return 0 if name == "uncompressed" else CODEC_NAMES.index(name)


def compress(codec: int, data, magic: int = 2) -> bytes:
    """`data` (any bytes-like) compressed as Kafka frames it for entries of this magic."""
    if codec == GZIP:
        c = zlib.compressobj(6, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        return _lz4_compress(data, magic)
    if codec == ZSTD:
        return zstandard.ZstdCompressor(level=3).compress(data)
    raise ValueError(f"no compression for codec {codec}")


def decompress(codec: int, data, limit: int, magic: int = 2) -> bytes:
    """Inflate `data`; KafkaError(CORRUPT_MESSAGE) if it is corrupt or would exceed `limit` bytes."""
    try:
        if codec == GZIP:
            return _gzip_decompress(data, limit)
        if codec == SNAPPY:
            return _snappy_decompress(data, limit)
        if codec == LZ4:
            return _lz4_decompress(memoryview(data), limit, magic)
        if codec == ZSTD:
            return _zstd_decompress(memoryview(data), limit)
    except KafkaError:
        raise
    except Exception as e:  # every library's own error for bad input
        raise _corrupt(f"{_name(codec)} payload is corrupt: {e}") from e
    raise _corrupt(f"unknown compression codec {codec}")


def _name(codec: int) -> str:
    return CODEC_NAMES[codec] if 0 <= codec < len(CODEC_NAMES) else str(codec)


def _corrupt(message: str) -> KafkaError:
    return KafkaError(Errors.CORRUPT_MESSAGE, message)


def _too_large(codec: int, limit: int) -> KafkaError:
    return _corrupt(f"{_name(codec)} payload inflates beyond the {limit}-byte decompression limit")


# gzip ------------------------------------------------------------------------------------------------

def _gzip_decompress(data, limit: int) -> bytes:
    out = bytearray()
    rest = bytes(data)
    while True:
        d = zlib.decompressobj(31)
        out += d.decompress(rest, limit + 1 - len(out))
        if len(out) > limit:
            raise _too_large(GZIP, limit)
        if not d.eof:
            raise _corrupt("gzip payload is truncated")
        rest = d.unused_data
        # GZIPInputStream reads further members and ignores trailing bytes that are not one
        if not rest.startswith(b"\x1f\x8b"):
            return bytes(out)


# snappy ----------------------------------------------------------------------------------------------

XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
XERIAL_BLOCK = 32 * 1024


def _xerial_compress(data) -> bytes:
    view = memoryview(data)
    parts = [XERIAL_HEADER]
    for i in range(0, len(view), XERIAL_BLOCK):
        block = snappy.compress(view[i:i + XERIAL_BLOCK])
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data, limit: int) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != XERIAL_HEADER[:8] or len(view) < 16:
        return _raw_snappy(view, limit)
    out = bytearray()
    pos = 16
    while pos < len(view):
        if pos + 4 > len(view):
            raise _corrupt("snappy block length is truncated")
        (n,) = struct.unpack_from(">i", view, pos)
        pos += 4
        if n < 0 or pos + n > len(view):
            raise _corrupt(f"snappy block of {n} bytes overruns the payload")
        out += _raw_snappy(view[pos:pos + n], limit - len(out))
        pos += n
    return bytes(out)


def _raw_snappy(block, limit: int) -> bytes:
    # a raw snappy block starts with its uncompressed length as a varint: check it before inflating
    size = shift = 0
    for i in range(min(5, len(block))):
        b = block[i]
        size |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            break
    else:
        raise _corrupt("snappy block has no valid length")
    if size > limit:
        raise _too_large(SNAPPY, limit)
    return snappy.decompress(block)


# lz4 -------------------------------------------------------------------------------------------------

LZ4_MAGIC = 0x184D2204
LZ4_FLG = 0x60                  # version 01, independent blocks, no checksums, no content size
LZ4_BD = 0x40                   # 64 KiB maximum block size
LZ4_BLOCK = 64 * 1024
LZ4_UNCOMPRESSED = 0x80000000   # high bit of a block length: the block is stored as is


def _xxh32_short(data: bytes) -> int:
    """XXH32 (seed 0) of fewer than 16 bytes: enough for an lz4 frame descriptor checksum."""
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    m = 0xFFFFFFFF

    def rotl(x, r):
        return ((x << r) | (x >> (32 - r))) & m

    n = len(data)
    assert n < 16
    h = (p5 + n) & m
    i = 0
    while i + 4 <= n:
        h = (rotl((h + int.from_bytes(data[i:i + 4], "little") * p3) & m, 17) * p4) & m
        i += 4
    while i < n:
        h = (rotl((h + data[i] * p5) & m, 11) * p1) & m
        i += 1
    h = ((h ^ (h >> 15)) * p2) & m
    h = ((h ^ (h >> 13)) * p3) & m
    return h ^ (h >> 16)


def _lz4_header_checksum(frame_start: bytes, broken: bool) -> int:
    """The HC byte over FLG..end of descriptor; `broken` (magic 0) also covers the 4 frame-magic bytes."""
    return (_xxh32_short(frame_start if broken else frame_start[4:]) >> 8) & 0xFF


def _lz4_compress(data, magic: int) -> bytes:
    view = memoryview(data)
    start = struct.pack("<IBB", LZ4_MAGIC, LZ4_FLG, LZ4_BD)
    parts = [start, bytes([_lz4_header_checksum(start, magic == 0)])]
    for i in range(0, len(view), LZ4_BLOCK):
        chunk = view[i:i + LZ4_BLOCK]
        block = lz4.block.compress(chunk, store_size=False)
        if len(block) >= len(chunk):
            parts.append(struct.pack("<I", len(chunk) | LZ4_UNCOMPRESSED))
            parts.append(bytes(chunk))
        else:
            parts.append(struct.pack("<I", len(block)))
            parts.append(block)
    parts.append(b"\x00\x00\x00\x00")
    return b"".join(parts)


def _lz4_decompress(view: memoryview, limit: int, magic: int) -> bytes:
    if len(view) < 7 or struct.unpack_from("<I", view, 0)[0] != LZ4_MAGIC:
        raise _corrupt("lz4 payload is not an lz4 frame")
    flg, bd = view[4], view[5]
    if flg >> 6 != 1 or flg & 0x03 or bd & 0x8F or not 4 <= (bd >> 4) <= 7:
        raise _corrupt(f"lz4 frame descriptor FLG={flg:#04x} BD={bd:#04x} is not supported")
    if not flg & 0x20:
        raise _corrupt("lz4 frame with dependent blocks is not supported")
    block_checksum, content_size, content_checksum = flg & 0x10, flg & 0x08, flg & 0x04
    max_block = 1 << (8 + 2 * (bd >> 4))
    pos = 6 + (8 if content_size else 0)
    if pos >= len(view):
        raise _corrupt("lz4 frame descriptor is truncated")
    if magic > 0 and view[pos] != _lz4_header_checksum(bytes(view[:pos]), False):
        raise _corrupt("lz4 frame descriptor checksum mismatch")
    pos += 1
    out = bytearray()
    while True:
        if pos + 4 > len(view):
            raise _corrupt("lz4 frame is truncated (no end mark)")
        (n,) = struct.unpack_from("<I", view, pos)
        pos += 4
        if n == 0:
            break
        stored = n & LZ4_UNCOMPRESSED
        n &= ~LZ4_UNCOMPRESSED
        if n > max_block or pos + n > len(view):
            raise _corrupt(f"lz4 block of {n} bytes is invalid or truncated")
        room = limit - len(out)
        if stored:
            if n > room:
                raise _too_large(LZ4, limit)
            out += view[pos:pos + n]
        else:
            if room <= 0:
                raise _too_large(LZ4, limit)
            try:
                out += lz4.block.decompress(view[pos:pos + n], uncompressed_size=min(max_block, room))
            except lz4.block.LZ4BlockError as e:
                # a block that does not fit in the room left is either corrupt or over the limit
                raise (_too_large(LZ4, limit) if room < max_block else _corrupt(f"lz4 block is corrupt: {e}"))
        pos += n + (4 if block_checksum else 0)
    if content_checksum and pos + 4 > len(view):
        raise _corrupt("lz4 content checksum is truncated")
    return bytes(out)


# zstd ------------------------------------------------------------------------------------------------

ZSTD_FEED = 2048   # input fed per step: a zstd block expands at most 128 KiB per 4 bytes, so ≤ 64 MiB a step


def _zstd_decompress(view: memoryview, limit: int) -> bytes:
    out = bytearray()
    pos, end = 0, len(view)
    dctx = zstandard.ZstdDecompressor()
    while pos < end:
        obj = dctx.decompressobj()
        while not obj.eof:
            if pos >= end:
                raise _corrupt("zstd payload is truncated")
            step = view[pos:pos + ZSTD_FEED]
            pos += len(step)
            out += obj.decompress(step)
            if len(out) > limit:
                raise _too_large(ZSTD, limit)
        pos -= len(obj.unused_data)   # the next frame starts in what this one did not use
    return bytes(out)
