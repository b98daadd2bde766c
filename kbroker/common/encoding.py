"""Kafka's non-flexible encoding, as the internal topics' keys and values use it (int16/32/64 big-endian,
int16-length UTF-8 strings and int32-length bytes, -1 for null), and the Java hashing that places a group or a
transactional id on its internal topic's partition (String.hashCode, Utils.abs).

Shared by the `__consumer_offsets` records (kbroker.coordinator.schemas) and the `__transaction_state` ones
(transaction_log), which kadmin reads too.
"""
from __future__ import annotations

import struct

I8, I16, I32, I64 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, in 32-bit arithmetic."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_abs(n: int) -> int:
    """Kafka's Utils.abs: Math.abs, except Integer.MIN_VALUE maps to 0 (not to itself)."""
    return 0 if n == -(1 << 31) else abs(n)


def write_string(out: bytearray, s: str | None) -> None:
    if s is None:
        out += I16.pack(-1)
        return
    b = s.encode("utf-8")
    if len(b) > 0x7FFF:
        raise ValueError(f"string of {len(b)} bytes is longer than 32767")
    out += I16.pack(len(b))
    out += b


def write_bytes(out: bytearray, b: bytes | None) -> None:
    if b is None:
        out += I32.pack(-1)
        return
    out += I32.pack(len(b))
    out += b


class Reader:
    """Reads the fields of one key or value in order; ValueError when a field runs past the end."""
    __slots__ = ("buf", "pos")

    def __init__(self, buf):
        self.buf = memoryview(buf)
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise ValueError(f"record field runs past the end ({self.pos}+{n} > {len(self.buf)})")
        v = self.buf[self.pos:self.pos + n]
        self.pos += n
        return v

    def i8(self) -> int:
        return I8.unpack(self._take(1))[0]

    def i16(self) -> int:
        return I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return I32.unpack(self._take(4))[0]

    def i64(self) -> int:
        return I64.unpack(self._take(8))[0]

    def string(self, nullable: bool = False) -> str | None:
        n = self.i16()
        if n < 0:
            if nullable:
                return None
            raise ValueError("null in a non-nullable string field")
        return bytes(self._take(n)).decode("utf-8")

    def bytes_(self) -> bytes:
        n = self.i32()
        if n < 0:
            raise ValueError("null in a non-nullable bytes field")
        return bytes(self._take(n))
