"""kbroker.protocol.header: the hand-written request/response header codec, checked against kafka-python's."""
import struct

import pytest

from kafka.protocol.api_header import RequestHeader as LibRequestHeader
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from kbroker.protocol.header import (MalformedRequest, parse_request_header_v1, read_uvarint, request_header,
                                     response_header, skip_tagged_fields)


def parse(data: bytes):
    return parse_request_header_v1(memoryview(data))


# ---- request header v1 -------------------------------------------------------------------------------------

def test_parse_v1_with_client_id():
    data = struct.pack(">hhih", 3, 9, 123456, 3) + b"abc" + b"BODY"
    h = parse(data)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id, h.size) == (3, 9, 123456, "abc", 13)
    assert data[h.size:] == b"BODY"


def test_parse_v1_with_null_client_id():
    data = struct.pack(">hhih", 18, 0, -7, -1) + b"BODY"
    h = parse(data)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id, h.size) == (18, 0, -7, None, 10)


def test_parse_v1_with_empty_client_id_is_not_null():
    h = parse(struct.pack(">hhih", 18, 0, 1, 0))
    assert h.client_id == "" and h.size == 10


def test_parse_v1_utf8_client_id_length_is_in_bytes():
    cid = "prod-ñ-日本".encode()
    h = parse(struct.pack(">hhih", 3, 1, 1, len(cid)) + cid + b"\x00\x00\x00\x00")
    assert h.client_id == "prod-ñ-日本" and h.size == 10 + len(cid)


def test_parse_reads_only_the_frame_it_is_given():
    """The header of a frame that is a slice of a larger buffer: the length check is against the slice."""
    buf = struct.pack(">hhih", 3, 1, 1, 5) + b"ab" + b"cdefgh"
    with pytest.raises(MalformedRequest):
        parse_request_header_v1(memoryview(buf)[:12])


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x03\x00\x01\x00\x00\x00\x07\xff"],
                         ids=["empty", "1-byte", "9-bytes"])
def test_short_frame_is_malformed(data):
    with pytest.raises(MalformedRequest, match="shorter than a request header"):
        parse(data)


@pytest.mark.parametrize("declared, present", [(50, 5), (1, 0), (32767, 100)])
def test_client_id_running_past_the_frame_is_malformed(declared, present):
    with pytest.raises(MalformedRequest, match="client_id runs past the frame"):
        parse(struct.pack(">hhih", 18, 0, 1, declared) + b"x" * present)


def test_client_id_exactly_filling_the_frame_is_fine():
    h = parse(struct.pack(">hhih", 18, 0, 1, 4) + b"abcd")
    assert h.client_id == "abcd" and h.size == 14


@pytest.mark.parametrize("length", [-5, -2, -32768])
def test_negative_client_id_length_other_than_minus_one_is_malformed(length):
    with pytest.raises(MalformedRequest, match="negative client_id length"):
        parse(struct.pack(">hhih", 18, 0, 1, length) + b"x" * 20)


# ---- tagged fields (header v2) -----------------------------------------------------------------------------

def test_skip_empty_tagged_fields():
    data = b"\x00rest"
    assert skip_tagged_fields(memoryview(data), 0) == 1


def test_skip_tagged_fields_with_values():
    # 2 fields: tag 0 with 3 bytes, tag 5 with 200 bytes (size as a 2-byte varint), then the body
    data = b"HDR" + b"\x02" + b"\x00\x03abc" + b"\x05\xc8\x01" + b"z" * 200 + b"BODY"
    pos = skip_tagged_fields(memoryview(data), 3)
    assert data[pos:] == b"BODY"


def test_skip_tagged_fields_large_tag_number():
    data = b"\x01" + b"\xff\xff\x03" + b"\x01" + b"q" + b"BODY"  # tag 65535 as a 3-byte varint
    assert data[skip_tagged_fields(memoryview(data), 0):] == b"BODY"


@pytest.mark.parametrize("data", [
    b"",                      # no count at all
    b"\x01",                  # count 1, no field
    b"\x01\x00",              # field without size
    b"\x01\x00\x05abc",       # value runs past the frame
    b"\x02\x00\x00",          # second field missing
    b"\x80",                  # count varint cut
], ids=["no-count", "no-field", "no-size", "value-past-frame", "second-missing", "count-cut"])
def test_truncated_tagged_fields_are_malformed(data):
    with pytest.raises(MalformedRequest):
        skip_tagged_fields(memoryview(data), 0)


def test_uvarint():
    assert read_uvarint(b"\x00", 0) == (0, 1)
    assert read_uvarint(b"\x7f", 0) == (127, 1)
    assert read_uvarint(b"\x80\x01", 0) == (128, 2)
    assert read_uvarint(b"\xff\xff\xff\xff\x0f", 0) == (2 ** 32 - 1, 5)
    with pytest.raises(MalformedRequest, match="too long"):
        read_uvarint(b"\xff" * 6 + b"\x00", 0)


# ---- against kafka-python ----------------------------------------------------------------------------------

@pytest.mark.parametrize("client_id", [None, "", "kafka-python-3.0.12", "ñ日本"])
@pytest.mark.parametrize("flexible", [False, True])
@pytest.mark.parametrize("api_key, api_version, correlation_id", [(3, 1, 7), (18, 3, -1), (0, 9, 2 ** 31 - 1)])
def test_request_header_bytes_match_kafka_python(client_id, flexible, api_key, api_version, correlation_id):
    lib = LibRequestHeader(request_api_key=api_key, request_api_version=api_version,
                           correlation_id=correlation_id, client_id=client_id).encode(flexible=flexible)
    ours = request_header(api_key, api_version, correlation_id, client_id, flexible)
    assert ours == bytes(lib)
    # and it parses back
    h = parse(ours + b"BODY")
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == \
        (api_key, api_version, correlation_id, client_id)
    end = skip_tagged_fields(memoryview(ours + b"BODY"), h.size) if flexible else h.size
    assert end == len(ours)


@pytest.mark.parametrize("request_obj", [
    MetadataRequest(version=1, topics=["a", "b"]),
    MetadataRequest(version=9, topics=None, allow_auto_topic_creation=False,
                    include_cluster_authorized_operations=False, include_topic_authorized_operations=False),
    ApiVersionsRequest(version=3, client_software_name="kafka-python", client_software_version="3.0.12"),
], ids=["metadata-v1", "metadata-v9-flexible", "api-versions-v3-flexible"])
def test_parse_frames_encoded_by_kafka_python(request_obj):
    request_obj.with_header(correlation_id=99, client_id="lib-client")
    frame = bytes(request_obj.encode(header=True, framed=True))[4:]
    h = parse(frame)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == \
        (request_obj.API_KEY, request_obj.API_VERSION, 99, "lib-client")
    flexible = request_obj.flexible_version_q(request_obj.API_VERSION)
    pos = skip_tagged_fields(memoryview(frame), h.size) if flexible else h.size
    assert frame[pos:] == bytes(request_obj.encode(version=request_obj.API_VERSION))


def test_response_header():
    assert response_header(7, False) == b"\x00\x00\x00\x07"
    assert response_header(-2, True) == b"\xff\xff\xff\xfe\x00"
