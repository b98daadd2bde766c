"""The hand-written Produce request decoder, Fetch response encoder and Fetch response decoder agree with
kafka-python's schema codecs (byte for byte, or field for field), in every version kbroker serves."""
import pytest
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.producer import ProduceRequest

from kbroker.protocol.header import MalformedRequest
import os

from kbroker.log.segment import FileSlice
from kbroker.protocol.hotpath import (FetchPartitionData, decode_fetch_response, decode_produce_request,
                                     encode_fetch_response, fetch_response_size, is_file_slice, piece_size)

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
    # What a consumer's quota weighs before the response is built.
    assert fetch_response_size(version, [("orders", p) for p in (p0, p1, p2)]) == sum(piece_size(p) for p in pieces)


@pytest.mark.parametrize("version", range(13))
def test_fetch_response_size_of_many_topics(version):
    topics = [(f"topic-{i}", [FetchPartitionData(p, 0, 9, 9, 0, [(1, 2)] * p or None, -1, [b"x" * 200 * p])
                              for p in range(i)]) for i in range(1, 5)]
    pieces = encode_fetch_response(version, 0, 0, 0, topics)
    assert fetch_response_size(version, [(name, p) for name, ps in topics for p in ps]) == \
        sum(piece_size(p) for p in pieces)


def library_fetch_response_of_two_topics(version):
    """A response with two topics, aborted transactions, a null and an empty partition, by kafka-python."""
    R = FetchResponse
    T = R.FetchableTopicResponse
    P = T.PartitionData

    def part(index, error, records, aborted):
        return P(version=version, partition_index=index, error_code=error, high_watermark=100 + index,
                 last_stable_offset=90 + index, log_start_offset=5 + index,
                 aborted_transactions=None if aborted is None or version < 4 else [
                     P.AbortedTransaction(version=version, producer_id=a, first_offset=b) for a, b in aborted],
                 preferred_read_replica=index if version >= 11 else -1, records=records)
    return R(version=version, throttle_time_ms=7, error_code=0, session_id=12 if version >= 7 else 0, responses=[
        T(version=version, topic="orders", partitions=[part(0, 0, RECORDS_A, [(7, 42), (8, 43)]),
                                                       part(1, 1, None, None), part(2, 0, b"", [])]),
        T(version=version, topic="t2", partitions=[part(3, 0, RECORDS_B, None)])])


@pytest.mark.parametrize("version", range(13))
def test_fetch_response_decodes_like_the_library(version):
    library = library_fetch_response_of_two_topics(version)
    body = memoryview(bytearray(library.encode(version=version)))
    expected = FetchResponse.decode(bytes(body), version=version)
    ours = decode_fetch_response(body, version)
    assert (ours.throttle_time_ms, ours.error_code, ours.session_id) == \
        (expected.throttle_time_ms, expected.error_code, expected.session_id)
    assert [name for name, _ in ours.topics] == [t.topic for t in expected.responses]
    for (_, partitions), t in zip(ours.topics, expected.responses):
        assert len(partitions) == len(t.partitions)
        for p, e in zip(partitions, t.partitions):
            assert (p.partition, p.error_code, p.high_watermark) == (e.partition_index, e.error_code,
                                                                     e.high_watermark)
            if version >= 4:
                assert (p.last_stable_offset, p.aborted_transactions is None) == \
                    (e.last_stable_offset, e.aborted_transactions is None)
                assert [tuple(a) for a in p.aborted_transactions or []] == \
                    [(a.producer_id, a.first_offset) for a in e.aborted_transactions or []]
            if version >= 5:
                assert p.log_start_offset == e.log_start_offset
            if version >= 11:
                assert p.preferred_read_replica == e.preferred_read_replica
            assert (bytes(p.records[0]) if p.records else None) == e.records
            # Records are views into the received frame, not copies.
            assert all(isinstance(r, memoryview) and r.obj is body.obj for r in p.records)


@pytest.mark.parametrize("version", [0, 4, 11, 12])
def test_truncated_fetch_response_is_malformed(version):
    body = bytes(library_fetch_response_of_two_topics(version).encode(version=version))
    for cut in (1, 5, len(body) // 2, len(body) - 3):
        with pytest.raises(MalformedRequest):
            decode_fetch_response(memoryview(body[:-cut]), version)
