"""Streaming reads (`spark.readStream.format("kbroker")`): micro-batches of offset ranges, with the offsets in
Spark's checkpoint as Spark's Kafka source writes them, `{"topic": {"0": 42, "1": 17}}` (next offset to read
per partition).

A query starts from `startingOffsets` (default latest) the first time and from its checkpoint afterwards, so a
restarted query reads only records it has not processed. Each trigger asks the leaders for their high
watermarks (the end of committed data; with read_committed, their last stable offsets); `maxOffsetsPerTrigger`
caps a micro-batch, shared among the partitions in proportion to their backlog. Partitions that appear later
(new partitions, new topics matching a pattern) are read from their earliest offset. `trigger(availableNow=True)`
fixes the end at the high watermarks (last stable offsets) seen when the query starts and reads up to them, in
as many micro-batches as the cap requires.
"""
from __future__ import annotations

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from .client import EARLIEST, LATEST, KafkaClient, TopicPartition
from .options import SourceOptions
from .reader import OffsetRange, read_range, report_data_loss, resolve, source_client, subscribed_partitions


def to_json(offsets: dict[TopicPartition, int]) -> dict:
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return out


def from_json(data: dict) -> dict[TopicPartition, int]:
    return {TopicPartition(t, int(p)): int(n) for t, parts in data.items() for p, n in parts.items()}


def rate_limit(start: dict[TopicPartition, int], latest: dict[TopicPartition, int],
               limit: int) -> dict[TopicPartition, int]:
    """Ends that read at most about `limit` records, shared in proportion to each partition's backlog (a
    partition with any backlog gets at least one record)."""
    backlog = {tp: end - start.get(tp, end) for tp, end in latest.items()}
    total = sum(n for n in backlog.values() if n > 0)
    if total <= limit:
        return dict(latest)
    ends = {}
    for tp, end in latest.items():
        n = backlog[tp]
        if n <= 0:
            ends[tp] = end
        else:
            share = limit * n / total
            ends[tp] = min(end, start[tp] + max(int(share), 1))
    return ends


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions):
        self.options = options
        self._client: KafkaClient | None = None
        self._target: dict[TopicPartition, int] | None = None      # availableNow's end

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_client"] = None                                    # pickled to executors without its sockets
        return state

    @property
    def client(self) -> KafkaClient:
        if self._client is None:
            self._client = source_client(self.options)
        return self._client

    def initialOffset(self) -> dict:
        partitions = subscribed_partitions(self.client, self.options.subscription)
        offsets = resolve(self.client, self.options.starting, partitions, True, self.options.by_timestamp_strategy)
        return to_json(offsets)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def _latest(self) -> dict[TopicPartition, int]:
        partitions = subscribed_partitions(self.client, self.options.subscription)
        return self.client.offsets({tp: LATEST for tp in partitions})

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json(start)
        latest = dict(self._target) if self._target is not None else self._latest()
        new = [tp for tp in latest if tp not in begin]
        if new:
            begin.update(self.client.offsets({tp: EARLIEST for tp in new}))
        gone = [tp for tp in begin if tp not in latest]
        if gone:
            report_data_loss(self.options.fail_on_data_loss,
                             f"Partitions {', '.join(map(str, sorted(gone)))} are gone.")
        for tp, end in latest.items():
            if end < begin[tp]:
                report_data_loss(self.options.fail_on_data_loss,
                                 f"{tp}'s offset went back from {begin[tp]} to {end}.")
                latest[tp] = begin[tp]
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin, latest, limit.max_rows)
        return to_json(latest)

    def partitions(self, start: dict, end: dict) -> list[OffsetRange]:
        begin, until = from_json(start), from_json(end)
        new = [tp for tp in until if tp not in begin]
        if new:
            begin.update(self.client.offsets({tp: EARLIEST for tp in new}))
        return [OffsetRange(tp.topic, tp.partition, begin[tp], e) for tp, e in sorted(until.items()) if e > begin[tp]]

    def read(self, partition: InputPartition):
        if not isinstance(partition, OffsetRange):
            return
        with source_client(self.options) as client:
            yield from read_range(client, partition, self.options)

    def commit(self, end: dict) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint, not in Kafka."""

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

