"""The data-path requests every client sends the same way: a Fetch of one partition and a Produce of one batch
(kafka-python's message classes, filled in for any version)."""
from __future__ import annotations

from kafka.protocol.consumer import FetchRequest
from kafka.protocol.producer import ProduceRequest


def fetch_request(version: int, topic: str, partition: int, offset: int, partition_max_bytes: int,
                  max_bytes: int | None = None, max_wait_ms: int = 500, min_bytes: int = 1,
                  isolation_level: int = 0, rack_id: str = "") -> FetchRequest:
    """A consumer's Fetch (no session) of one partition at offset; isolation_level 1 is READ_COMMITTED (v4+);
    rack_id the consumer's rack (v11+, KIP-392: the leader may then name a replica to read from instead)."""
    F = FetchRequest
    return F(version=version, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
             max_bytes=partition_max_bytes if max_bytes is None else max_bytes, isolation_level=isolation_level,
             session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic=topic, partitions=[F.FetchTopic.FetchPartition(
                 partition=partition, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                 partition_max_bytes=partition_max_bytes)])], forgotten_topics_data=[], rack_id=rack_id)


def produce_request(version: int, topic: str, partition: int, records, acks: int, timeout_ms: int,
                    transactional_id: str | None = None) -> ProduceRequest:
    """A Produce of one record batch (or message set) to one partition."""
    T = ProduceRequest.TopicProduceData
    return ProduceRequest(version=version, transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms,
                          topic_data=[T(name=topic, partition_data=[T.PartitionProduceData(index=partition,
                                                                                           records=records)])])
