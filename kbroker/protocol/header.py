"""Request and response headers, by hand with struct.

Hand-written because the header is read for every request before the body's version is known to be served,
and kafka-python's header decoder copies the whole frame into a BytesIO. Request header v1: api_key,
api_version, correlation_id, nullable client_id (int16 length); v2 adds tagged fields. Response header v0 is
the correlation id; v1 adds an empty tagged-field section.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

_HEAD = struct.Struct(">hhih")
_CORRELATION = struct.Struct(">i")


class CloseConnection(Exception):
    """The connection must be closed without a response (the message says why, for the log)."""


class MalformedRequest(CloseConnection, ValueError):
    """A request that cannot be parsed or is not served: Kafka closes the connection."""


@dataclass
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    size: int  # bytes the header took in the frame


def read_uvarint(buf, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise MalformedRequest("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise MalformedRequest("varint too long")


CONTROLLED_SHUTDOWN_KEY = 7


def parse_request_header_v1(frame: memoryview) -> RequestHeader:
    """The fixed part every request starts with; call skip_tagged_fields for header v2.
    ControlledShutdown v0 alone uses request header v0, without a client id."""
    if len(frame) >= 8 and struct.unpack_from(">hh", frame, 0) == (CONTROLLED_SHUTDOWN_KEY, 0):
        return RequestHeader(CONTROLLED_SHUTDOWN_KEY, 0, struct.unpack_from(">i", frame, 4)[0], None, 8)
    if len(frame) < _HEAD.size:
        raise MalformedRequest("frame shorter than a request header")
    api_key, api_version, correlation_id, n = _HEAD.unpack_from(frame, 0)
    pos = _HEAD.size
    client_id = None
    if n >= 0:
        if pos + n > len(frame):
            raise MalformedRequest("client_id runs past the frame")
        client_id = bytes(frame[pos:pos + n]).decode("utf-8", "replace")
        pos += n
    elif n != -1:
        raise MalformedRequest("negative client_id length")
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def skip_tagged_fields(frame: memoryview, pos: int) -> int:
    count, pos = read_uvarint(frame, pos)
    for _ in range(count):
        _, pos = read_uvarint(frame, pos)
        size, pos = read_uvarint(frame, pos)
        pos += size
        if pos > len(frame):
            raise MalformedRequest("tagged field runs past the frame")
    return pos


def response_header(correlation_id: int, flexible: bool) -> bytes:
    head = _CORRELATION.pack(correlation_id)
    return head + b"\x00" if flexible else head


def request_header(api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                   flexible: bool) -> bytes:
    """The request header a client sends (v1, or v2 when flexible; v0 without a client id for ControlledShutdown
    v0, as parse_request_header_v1 reads it)."""
    if (api_key, api_version) == (CONTROLLED_SHUTDOWN_KEY, 0):
        return struct.pack(">hhi", api_key, api_version, correlation_id)
    cid = client_id.encode() if client_id is not None else None
    out = struct.pack(">hhih", api_key, api_version, correlation_id, -1 if cid is None else len(cid))
    if cid:
        out += cid
    return out + b"\x00" if flexible else out
