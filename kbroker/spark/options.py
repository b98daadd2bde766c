"""The source and sink options, named and checked as Spark's Kafka connector does, so a job moves over by
changing the format name: the same option names, the same defaults, and errors that name the same problem.

Offsets are Spark's: "earliest" / "latest", or JSON per partition (`{"t":{"0":23,"1":-2}}`, -2 earliest,
-1 latest); timestamps are milliseconds, one for every partition (`startingTimestamp`) or JSON per partition
(`startingOffsetsByTimestamp`); a timestamp option takes precedence over the by-timestamp JSON, which takes
precedence over the offsets option.

Security is the Kafka client's: `kafka.security.protocol`, `kafka.sasl.mechanism`, `kafka.sasl.jaas.config`
(or librdkafka's `kafka.sasl.username`/`kafka.sasl.password`), `kafka.ssl.truststore.*`, `kafka.ssl.keystore.*`,
`kafka.ssl.endpoint.identification.algorithm`, read without the prefix by ClientSecurity.from_properties on the
driver (files are read there; executors get their PEM text).

`kafka.client.rack` is the consumer's client.rack (KIP-392): fetches name it, and a leader with a replica
selector may send them to a replica in that rack, kept for `kafka.metadata.max.age.ms` (ClusterClient).
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ..protocol.client import KafkaError
from ..protocol.client.security import ClientSecurity
from .client import EARLIEST, LATEST, METADATA_MAX_AGE, TopicPartition

# Kafka consumer options Spark refuses, and why (its wording).
_UNSUPPORTED = {
    "auto.offset.reset": "Instead set the source option 'startingOffsets' to 'earliest' or 'latest' to specify "
                         "where to start.",
    "key.deserializer": "Keys are always deserialized as byte arrays. Use DataFrame operations to explicitly "
                        "deserialize the keys.",
    "value.deserializer": "Values are always deserialized as byte arrays. Use DataFrame operations to explicitly "
                          "deserialize the values.",
    "enable.auto.commit": "Offsets are tracked by Spark, not committed to Kafka.",
    "interceptor.classes": "Records are read as byte arrays, so interceptors cannot be used.",
    "key.serializer": "Keys are written as bytes; cast the key column to string or binary.",
    "value.serializer": "Values are written as bytes; cast the value column to string or binary.",
}

_ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}     # kafka.isolation.level (case-sensitive)


class OptionError(ValueError):
    """An option is missing, malformed or contradicts another (Spark raises IllegalArgumentException)."""


@dataclass(frozen=True)
class Subscription:
    """What to read: `subscribe` (topics), `subscribePattern` (a regex matched against whole topic names)
    or `assign` (fixed partitions)."""
    kind: str                                   # "subscribe", "subscribePattern" or "assign"
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    partitions: tuple[TopicPartition, ...] = ()

    def describe(self) -> str:
        if self.kind == "subscribe":
            return f"subscribe={','.join(self.topics)}"
        if self.kind == "subscribePattern":
            return f"subscribePattern={self.pattern}"
        return f"assign={','.join(map(str, self.partitions))}"


@dataclass(frozen=True)
class OffsetSpec:
    """Where a range starts or ends: kind "earliest" / "latest"; "offsets" with JSON offsets per partition
    (-2 earliest, -1 latest); "timestamp" one timestamp for all partitions; "timestamps" per partition."""
    kind: str
    offsets: tuple[tuple[TopicPartition, int], ...] = ()
    timestamp: int | None = None


@dataclass(frozen=True)
class SourceOptions:
    bootstrap: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    by_timestamp_strategy: str                  # "error" or "latest": a start timestamp with no offset after it
    fail_on_data_loss: bool
    include_headers: bool
    min_partitions: int | None
    max_offsets_per_trigger: int | None
    client_id: str
    request_timeout: float
    max_partition_fetch_bytes: int
    isolation_level: int                        # 0 read_uncommitted, 1 read_committed (Kafka's wire values)
    client_rack: str = ""                       # "": fetches name no rack (the leader serves them)
    metadata_max_age: float = METADATA_MAX_AGE  # seconds a replica the leader named is read from
    security: ClientSecurity = ClientSecurity()


@dataclass(frozen=True)
class SinkOptions:
    bootstrap: str
    topic: str | None
    acks: int
    client_id: str
    request_timeout: float
    batch_size: int                             # bytes of records per produced batch (below max.message.bytes)
    idempotent: bool
    security: ClientSecurity = ClientSecurity()


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in options.items()}


def _check_kafka_params(o: dict[str, str]) -> str:
    for name, why in _UNSUPPORTED.items():
        if f"kafka.{name}" in o:
            raise OptionError(f"Kafka option '{name}' is not supported. {why}")
    bootstrap = o.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise OptionError("Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer")
    return bootstrap


def _security(o: dict[str, str]) -> ClientSecurity:
    """The kafka.security.protocol, kafka.sasl.* and kafka.ssl.* options as the client's ClientSecurity."""
    props = {k[len("kafka."):]: v for k, v in o.items()
             if k == "kafka.security.protocol" or k.startswith(("kafka.sasl.", "kafka.ssl."))}
    try:
        return ClientSecurity.from_properties(props)
    except KafkaError as e:
        raise OptionError(f"Kafka security options: {e}") from None


def _bool(o: dict[str, str], name: str, default: bool) -> bool:
    value = o.get(name.lower())
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise OptionError(f"Option '{name}' must be 'true' or 'false', not '{value}'")
    return value.strip().lower() == "true"


def _positive(o: dict[str, str], name: str) -> int | None:
    value = o.get(name.lower())
    if value is None:
        return None
    try:
        n = int(value.strip())
    except ValueError:
        n = 0
    if n <= 0:
        raise OptionError(f"Invalid value '{value}' for option '{name}', must be a positive integer")
    return n


def _json(value: str, name: str):
    try:
        return json.loads(value)
    except json.JSONDecodeError as e:
        raise OptionError(f"Option '{name}' is not valid JSON ({e.msg}): {value}") from None


def _partition_map(value: str, name: str) -> tuple[tuple[TopicPartition, int], ...]:
    """{"topicA":{"0":23,"1":-1}} -> ((TopicPartition('topicA', 0), 23), ...)."""
    data = _json(value, name)
    bad = OptionError(f"Expected e.g. {{\"topicA\":{{\"0\":23,\"1\":-1}},\"topicB\":{{\"0\":-2}}}} for option "
                      f"'{name}', got {value}")
    if not isinstance(data, dict):
        raise bad
    out = []
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise bad
        for p, n in parts.items():
            if not (isinstance(p, str) and p.lstrip("-").isdigit()) or not isinstance(n, int) or isinstance(n, bool):
                raise bad
            out.append((TopicPartition(topic, int(p)), n))
    return tuple(sorted(out))


def _subscription(o: dict[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in o]
    if len(given) != 1:
        names = "'subscribe', 'subscribePattern', 'assign'"
        if not given:
            raise OptionError(f"One of the following options must be specified for Kafka source: {names}. "
                              "See the docs for more details.")
        raise OptionError(f"Only one of the following options can be specified for Kafka source: {names}. "
                          "See the docs for more details.")
    kind = given[0]
    value = o[kind]
    if kind == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise OptionError(f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'")
        return Subscription("subscribe", topics=topics)
    if kind == "subscribepattern":
        if not value.strip():
            raise OptionError("Pattern to subscribe is empty as specified value for option 'subscribePattern' is "
                              f"'{value}'")
        try:
            re.compile(value.strip())
        except re.error as e:
            raise OptionError(f"Option 'subscribePattern' is not a valid regular expression ({e}): {value}") from None
        return Subscription("subscribePattern", pattern=value.strip())
    data = _json(value, "assign")
    if not isinstance(data, dict) or not all(isinstance(ps, list) and all(isinstance(p, int) for p in ps)
                                             for ps in data.values()):
        raise OptionError(f"Expected e.g. {{\"topicA\":[0,1],\"topicB\":[0,1]}} for option 'assign', got {value}")
    partitions = tuple(sorted({TopicPartition(t, p) for t, ps in data.items() for p in ps}))
    if not partitions:
        raise OptionError(f"No topicpartitions to assign as specified value for option 'assign' is '{value}'")
    return Subscription("assign", partitions=partitions)


def _offset_spec(o: dict[str, str], which: str, default: str) -> OffsetSpec:
    """startingOffsets / endingOffsets with their timestamp forms (timestamp first, then by-timestamp JSON)."""
    ts_name, by_ts_name, offsets_name = f"{which}Timestamp", f"{which}OffsetsByTimestamp", f"{which}Offsets"
    if ts_name.lower() in o:
        value = o[ts_name.lower()].strip()
        if not value.lstrip("-").isdigit():
            raise OptionError(f"Option '{ts_name}' must be a timestamp in milliseconds, not '{value}'")
        return OffsetSpec("timestamp", timestamp=int(value))
    if by_ts_name.lower() in o:
        return OffsetSpec("timestamps", offsets=_partition_map(o[by_ts_name.lower()], by_ts_name))
    value = o.get(offsets_name.lower(), default).strip()
    if value.lower() in ("earliest", "latest"):
        return OffsetSpec(value.lower())
    return OffsetSpec("offsets", offsets=_partition_map(value, offsets_name))


def source_options(options: Mapping[str, str], streaming: bool) -> SourceOptions:
    o = _lower(options)
    bootstrap = _check_kafka_params(o)
    subscription = _subscription(o)
    starting = _offset_spec(o, "starting", "latest" if streaming else "earliest")
    ending = _offset_spec(o, "ending", "latest")
    if streaming:
        for name in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"):
            if name in o:
                raise OptionError(f"Ending offset not valid in streaming queries ('{name}' was given)")
    else:
        if starting.kind == "latest":
            raise OptionError("starting offset can't be latest for batch queries on Kafka")
        if ending.kind == "earliest":
            raise OptionError("ending offset can't be earliest for batch queries on Kafka")
        for tp, n in starting.offsets if starting.kind == "offsets" else ():
            if n == LATEST:
                raise OptionError(f"startingOffsets for {tp} can't be latest for batch queries on Kafka")
        for tp, n in ending.offsets if ending.kind == "offsets" else ():
            if n == EARLIEST:
                raise OptionError(f"endingOffsets for {tp} can't be earliest for batch queries on Kafka")
    strategy = o.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(f"Option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', not '{strategy}'")
    timeout_ms = _positive(o, "kafka.request.timeout.ms") or 30000
    isolation = o.get("kafka.isolation.level", "read_uncommitted")
    if isolation not in _ISOLATION_LEVELS:
        raise OptionError(f"Invalid value {isolation} for configuration isolation.level: String must be one of: "
                          "read_committed, read_uncommitted")
    return SourceOptions(
        bootstrap=bootstrap, subscription=subscription, starting=starting, ending=ending,
        by_timestamp_strategy=strategy,
        fail_on_data_loss=_bool(o, "failOnDataLoss", True),
        include_headers=_bool(o, "includeHeaders", False),
        min_partitions=_positive(o, "minPartitions"),
        max_offsets_per_trigger=_positive(o, "maxOffsetsPerTrigger") if streaming else None,
        client_id=o.get("kafka.client.id", "kbroker-spark"),
        request_timeout=timeout_ms / 1000,
        max_partition_fetch_bytes=_positive(o, "kafka.max.partition.fetch.bytes") or 8 * 1024 * 1024,
        isolation_level=_ISOLATION_LEVELS[isolation],
        client_rack=o.get("kafka.client.rack", "").strip(),
        metadata_max_age=(_positive(o, "kafka.metadata.max.age.ms") or METADATA_MAX_AGE * 1000) / 1000,
        security=_security(o),
    )


def sink_options(options: Mapping[str, str]) -> SinkOptions:
    o = _lower(options)
    bootstrap = _check_kafka_params(o)
    acks_text = o.get("kafka.acks", "all").strip().lower()
    acks = {"all": -1, "-1": -1, "1": 1, "0": 0}.get(acks_text)
    if acks is None:
        raise OptionError(f"Kafka option 'acks' must be all, -1, 0 or 1, not '{acks_text}'")
    idempotent = _bool(o, "kafka.enable.idempotence", acks == -1)
    if idempotent and acks != -1:
        raise OptionError("Kafka option 'enable.idempotence' needs acks=all")
    topic = o.get("topic")
    return SinkOptions(
        bootstrap=bootstrap, topic=topic.strip() if topic and topic.strip() else None, acks=acks,
        client_id=o.get("kafka.client.id", "kbroker-spark"),
        request_timeout=(_positive(o, "kafka.request.timeout.ms") or 30000) / 1000,
        batch_size=_positive(o, "kafka.batch.size") or 512 * 1024,
        idempotent=idempotent,
        security=_security(o),
    )
