"""The Spark data source's Kafka client: the project's ClusterClient (kbroker.protocol.client) over plain
blocking sockets (Spark's Python workers are ordinary threads), with what the source and sink ask of it:
partitions of topics, offsets by position or by time, fetches (their records stay one memoryview into the
received frame) and produces, each routed to the partition's leader (fetches naming a client rack: to the
replica the leader names, KIP-392) and retried until `timeout`.
"""
from __future__ import annotations

from ..protocol.client import EARLIEST, LATEST, ClusterClient, KafkaError, TopicPartition, error_name
from ..protocol.client.cluster import METADATA_MAX_AGE
from ..protocol.client.security import ClientSecurity

__all__ = ["EARLIEST", "LATEST", "METADATA_MAX_AGE", "KafkaClient", "KafkaError", "TopicPartition"]


class KafkaClient(ClusterClient):
    """Requests routed to leaders through a metadata cache, retried on retriable errors within `timeout`."""

    def __init__(self, bootstrap: str, client_id: str = "kbroker-spark", timeout: float = 30.0,
                 isolation_level: int = 0, security: ClientSecurity | None = None, client_rack: str = "",
                 metadata_max_age: float = METADATA_MAX_AGE):
        super().__init__(bootstrap, client_id, timeout, security, client_rack, metadata_max_age)
        self.isolation_level = isolation_level  # 1 READ_COMMITTED: LATEST is the last stable offset

    def partitions_of(self, topics: list[str]) -> dict[str, list[int]]:
        """Partition ids of each existing topic of `topics` (missing topics are left out)."""
        md = self.retrying("Metadata", lambda deadline: self.metadata(topics, deadline))
        return {t: sorted(md.topics[t].partitions) for t in topics if t in md.topics}

    def all_topics(self) -> list[str]:
        """Every topic but the internal ones (as a consumer's exclude.internal.topics)."""
        md = self.retrying("Metadata", lambda deadline: self.metadata(None, deadline))
        return sorted(t for t, info in md.topics.items() if not info.internal)

    def offsets(self, specs: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """For each partition, the offset for its timestamp: EARLIEST (-2) the log start offset, LATEST (-1)
        the high watermark (read_committed: the last stable offset), otherwise the first offset whose timestamp
        is >= it (-1 when there is none)."""
        out = {}
        for tp, (code, offset) in self.list_offsets(specs, self.isolation_level).items():
            if code:
                raise KafkaError(code, f"ListOffsets {tp}: {error_name(code)}")
            out[tp] = offset
        return out
