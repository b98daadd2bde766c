"""Transactional data without a transaction coordinator, for the tests of what reads it: the test plays the
coordinator with an idempotent producer id (init_producer_id), transactional batches (attribute bit 4) sent with
Produce under a transactional id, and WriteTxnMarkers sent to the leader through kbroker's protocol client."""
from __future__ import annotations

import time

from aiokafka.record.default_records import DefaultRecordBatchBuilder

from kbroker.protocol.interbroker import WriteTxnMarkersRequest
from tests.clients._util import raw_request
from tests.integration.test_produce_fetch_bad_input import TIMEOUT, produce_request


def txn_batch(values, pid: int, epoch: int, seq: int) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=1, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=10 ** 7)
    ts = int(time.time() * 1000)
    for i, v in enumerate(values):
        b.append(i, timestamp=ts, key=None, value=v, headers=[])
    return bytes(b.build())


def produce_txn(broker, topic: str, records, partition: int = 0, acks: int = 1,
                transactional_id: str | None = "txn"):
    """The partition response of a Produce v7 (transactional records need a transactional id, as in Kafka)."""
    req = produce_request(topic, partition, records, 7, acks)
    req.transactional_id = transactional_id
    [t] = raw_request(broker.bootstrap, req, TIMEOUT).responses
    [p] = t.partition_responses
    return p


def write_markers(broker, markers, version: int = 0):
    """markers: [(pid, epoch, committed, coordinator epoch, topic, [partitions])] -> [{(topic, p): error}]."""
    M = WriteTxnMarkersRequest.WritableTxnMarker
    req = WriteTxnMarkersRequest(version=version, markers=[
        M(producer_id=pid, producer_epoch=epoch, transaction_result=committed, coordinator_epoch=coord,
          topics=[M.WritableTxnMarkerTopic(name=topic, partition_indexes=parts)])
        for pid, epoch, committed, coord, topic, parts in markers])
    resp = raw_request(broker.bootstrap, req, TIMEOUT)
    return [{(t.name, p.partition_index): p.error_code for t in m.topics for p in t.partitions}
            for m in resp.markers]
