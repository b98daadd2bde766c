"""The hand-written Produce request decoder and Fetch response encoder agree byte for byte with
kafka-python's schema codecs, in every version kbroker serves."""
import pytest
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.producer import ProduceRequest

from kbroker.protocol.header import MalformedRequest
import os

from kbroker.log.segment import FileSlice
from kbroker.protocol.hotpath import FetchPartitionData, decode_produce_request, encode_fetch_response, is_file_slice

RECORDS_A = b"\x00" * 70 + b"batch-a"
RECORDS_B = b"\x01" * 61 + b"b"


def produce_body(version):
    R = ProduceRequest
    req = R(version=version, transactional_id="tx-1" if version >= 3 else None, acks=-1, timeout_ms=1500,
            topic_data=[R.TopicProduceData(name="orders", partition_data=[
                R.TopicProduceData.PartitionProduceData(index=0, records=RECORDS_A),
                R.TopicProduceData.PartitionProduceData(index=3, records=None)]),
                R.TopicProduceData(name="t2", partition_data=[
                    R.TopicProduceData.PartitionProduceData(index=1, records=RECORDS_B)])])
    return bytes(req.encode(version=version))


@pytest.mark.parametrize("version", range(10))
def test_produce_request_decodes_like_the_library(version):
    body = memoryview(bytearray(produce_body(version)))
    data = decode_produce_request(body, version)
    assert data.acks == -1 and data.timeout_ms == 1500
    assert data.transactional_id == ("tx-1" if version >= 3 else None)
    assert [t.name for t in data.topics] == ["orders", "t2"]
    p0, p3 = data.topics[0].partitions
    assert (p0.index, bytes(p0.records)) == (0, RECORDS_A) and (p3.index, p3.records) == (3, None)
    assert bytes(data.topics[1].partitions[0].records) == RECORDS_B
    # Records are views into the frame: patching them patches the frame (no copy was made).
    assert isinstance(p0.records, memoryview) and p0.records.obj is body.obj


@pytest.mark.parametrize("version", [0, 3, 9])
def test_truncated_produce_request_is_malformed(version):
    body = produce_body(version)
    for cut in (1, 5, len(body) // 2, len(body) - 3):
        with pytest.raises(MalformedRequest):
            decode_produce_request(memoryview(body[:-cut]), version)


def library_fetch_response(version, partitions):
    R = FetchResponse
    T = R.FetchableTopicResponse
    P = T.PartitionData
    parts = []
    for p, records in partitions:
        parts.append(P(version=version, partition_index=p.partition, error_code=p.error_code,
                       high_watermark=p.high_watermark, last_stable_offset=p.last_stable_offset,
                       log_start_offset=p.log_start_offset,
                       aborted_transactions=None if p.aborted_transactions is None or version < 4 else [
                           P.AbortedTransaction(version=version, producer_id=a, first_offset=b)
                           for a, b in p.aborted_transactions],
                       preferred_read_replica=p.preferred_read_replica, records=records))
    return bytes(R(version=version, throttle_time_ms=7, error_code=0, session_id=0,
                   responses=[T(version=version, topic="orders", partitions=parts)]).encode(version=version))


@pytest.mark.parametrize("version", range(13))
def test_fetch_response_matches_the_library(version, tmp_path):
    log = tmp_path / "segment.log"
    log.write_bytes(b"HEAD" + RECORDS_A + b"TAIL")
    fd = os.open(log, os.O_RDONLY)
    try:
        p0 = FetchPartitionData(0, 0, 100, 90, 5, [(7, 42)], -1, [FileSlice(fd, 4, len(RECORDS_A))])
        p1 = FetchPartitionData(1, 1, -1, -1, -1, None, -1, [])           # OFFSET_OUT_OF_RANGE, no records
        p2 = FetchPartitionData(2, 0, 3, 3, 0, [], -1, [RECORDS_B[:30], RECORDS_B[30:]])
        pieces = encode_fetch_response(version, 7, 0, 0, [("orders", [p0, p1, p2])])
        ours = b"".join(p.read() if is_file_slice(p) else bytes(p) for p in pieces)
    finally:
        os.close(fd)
    expected = library_fetch_response(version, [(p0, RECORDS_A), (p1, b"" if version < 12 else b""),
                                                (p2, RECORDS_B)])
    assert ours == expected
    # The file's bytes are sent as a FileSlice, not copied into the pieces.
    assert any(is_file_slice(p) for p in pieces)
