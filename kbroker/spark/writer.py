"""Batch writes (`df.write.format("kbroker").mode("append")`), with the columns of Spark's Kafka sink: `value`
(string or binary, required), `key` (string or binary), `topic` (string; the `topic` option, when given,
applies to every row, as in Spark), `partition` (int; otherwise Kafka's default partitioner: murmur2 of the
key, or one partition per batch for records without a key) and `headers` (array<struct<key string,
value binary>>). Other columns are ignored.

Each Spark task is one idempotent producer (InitProducerId, then sequence numbers per partition), acks=all
unless `kafka.acks` says otherwise. It sends one v2 batch per partition at a time and returns only when every
batch it sent is acknowledged; a retriable error resends the same batch, which the broker deduplicates. So a
task that succeeds has all its rows acknowledged, and a task that fails raises, for Spark to retry it. Kafka
has no way to take back records: rows a failed attempt had written may be written again by the retry, which
is the at-least-once guarantee of Spark's Kafka sink.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass

import pyarrow as pa
from aiokafka.record._crecords import DefaultRecordBatchBuilder
from kafka.partitioner.default import murmur2
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from .arrow import HEADER_TYPE
from ..protocol.errors import Errors
from .client import KafkaClient, KafkaError, TopicPartition
from .options import OptionError, SinkOptions

_CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@dataclass
class WriteResult(WriterCommitMessage):
    records: int


def check_schema(schema: StructType, options: SinkOptions) -> None:
    """Spark's checks of a DataFrame written to Kafka."""
    fields = {f.name: f.dataType for f in schema.fields}
    if "value" not in fields:
        raise OptionError("Required attribute 'value' not found")
    if options.topic is None and "topic" not in fields:
        raise OptionError("topic option required when no 'topic' attribute is present. Use the topic option for "
                          "setting a topic.")
    for name, allowed, text in (("topic", (StringType,), "a string"),
                                ("key", (StringType, BinaryType), "a string or binary"),
                                ("value", (StringType, BinaryType), "a string or binary"),
                                ("partition", (IntegerType,), "an int")):
        if name in fields and not isinstance(fields[name], allowed):
            raise OptionError(f"{name} attribute type must be {text}")
    if "headers" in fields and fields["headers"] != ArrayType(HEADER_TYPE):
        raise OptionError("headers attribute type must be array<struct<key:string,value:binary>>")


def _as_binary(column: pa.Array) -> list:
    return (column.cast(pa.binary()) if pa.types.is_string(column.type) else column).to_pylist()


class _Producer:
    """One task's producer: open batches per partition, each sent and acknowledged before the next one."""

    def __init__(self, options: SinkOptions, codec: int):
        self.options = options
        self.codec = codec
        self.client = KafkaClient(options.bootstrap, options.client_id, options.request_timeout,
                                  security=options.security)
        self.producer_id, self.epoch = self.client.init_producer_id() if options.idempotent else (-1, -1)
        self.sequences: dict[TopicPartition, int] = {}
        self.open: dict[TopicPartition, list] = {}
        self.partition_counts: dict[str, int] = {}
        self.sticky: dict[str, int] = {}
        self.by_key: dict[tuple[str, bytes], int] = {}     # murmur2 partition of recent keys (keys repeat)
        self.tps: dict[tuple[str, int], TopicPartition] = {}
        self.written = 0

    def partitions(self, topic: str) -> int:
        n = self.partition_counts.get(topic)
        if n is None:
            n = len(self.client.partitions_of([topic]).get(topic, []))
            if n == 0:
                raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {topic} not present in metadata.")
            self.partition_counts[topic] = n
        return n

    def choose(self, topic: str, key: bytes | None) -> int:
        if key is not None:
            p = self.by_key.get((topic, key))
            if p is None:
                if len(self.by_key) > 100_000:
                    self.by_key.clear()
                p = self.by_key[(topic, key)] = (murmur2(key) & 0x7FFFFFFF) % self.partitions(topic)
            return p
        if topic not in self.sticky:
            self.sticky[topic] = random.randrange(self.partitions(topic))
        return self.sticky[topic]

    def topic_partition(self, topic: str, partition: int) -> TopicPartition:
        tp = self.tps.get((topic, partition))
        if tp is None:
            if not 0 <= partition < self.partitions(topic):
                raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"Partition {partition} of topic {topic} does not exist.")
            tp = self.tps[(topic, partition)] = TopicPartition(topic, partition)
        return tp

    def _open(self, tp: TopicPartition) -> list:
        """[builder, records in it] of tp's open batch."""
        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=self.codec, is_transactional=0, producer_id=self.producer_id,
            producer_epoch=self.epoch, base_sequence=self.sequences.get(tp, 0) if self.producer_id >= 0 else -1,
            batch_size=self.options.batch_size)
        entry = self.open[tp] = [builder, 0]
        return entry

    def append(self, tp: TopicPartition, timestamp: int, key, value, headers) -> None:
        entry = self.open.get(tp) or self._open(tp)
        if entry[0].append(entry[1], timestamp=timestamp, key=key, value=value, headers=headers) is None:
            self.send(tp)                                # the batch is full: send it, start the next one
            entry = self._open(tp)
            entry[0].append(0, timestamp=timestamp, key=key, value=value, headers=headers)
        entry[1] += 1

    def send(self, tp: TopicPartition) -> None:
        builder, n = self.open.pop(tp)
        if not n:
            return
        self.client.produce(tp, bytes(builder.build()), self.options.acks, int(self.options.request_timeout * 1000))
        self.sequences[tp] = (self.sequences.get(tp, 0) + n) & 0x7FFFFFFF
        self.written += n
        if self.sticky.get(tp.topic) == tp.partition:
            del self.sticky[tp.topic]            # the next keyless batch goes elsewhere (Kafka's sticky partitioner)

    def flush(self) -> None:
        for tp in list(self.open):
            self.send(tp)

    def close(self) -> None:
        self.client.close()


class Writer(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType, compression: str):
        check_schema(schema, options)
        if compression not in _CODECS:
            raise OptionError(f"Kafka option 'compression.type' must be one of {', '.join(_CODECS)}, "
                              f"not '{compression}'")
        self.options = options
        self.codec = _CODECS[compression]

    def write(self, iterator) -> WriteResult:
        producer = _Producer(self.options, self.codec)
        try:
            for batch in iterator:
                self._write_batch(producer, batch)
            producer.flush()
            return WriteResult(producer.written)
        finally:
            producer.close()

    def _write_batch(self, producer: _Producer, batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        names = batch.schema.names
        values = _as_binary(batch.column("value"))
        keys = _as_binary(batch.column("key")) if "key" in names else [None] * n
        if self.options.topic is not None:
            topics = [self.options.topic] * n
        else:
            topics = batch.column("topic").to_pylist()
            if None in topics:
                raise OptionError("Null topic present in the data. Use the topic option for setting a topic.")
        partitions = batch.column("partition").to_pylist() if "partition" in names else [None] * n
        headers = batch.column("headers").to_pylist() if "headers" in names else None
        now = int(time.time() * 1000)
        for i in range(n):
            topic, key, partition = topics[i], keys[i], partitions[i]
            if partition is None:
                partition = producer.choose(topic, key)
            h = [(e["key"], e["value"]) for e in headers[i]] if headers is not None and headers[i] else []
            producer.append(producer.topic_partition(topic, partition), now, key, values[i], h)
