"""Fetch (key 1), v0-v12: consumers read from the partitions this broker leads, or from v11 follows (KIP-392).

Reads go up to the high watermark; READ_COMMITTED (v4+) ones up to the last stable offset, with the aborted
transactions (producer id, first offset) overlapping [fetch offset, end of the segment read or the LSO) from
the `.txnindex` files (empty when no data is returned, null for READ_UNCOMMITTED); every v4+ response carries
the last stable offset. The broker filters nothing: consumers drop control batches and aborted records. Data
that needs no conversion is sent straight from the segment files with os.sendfile (the response is built as
pieces by protocol.hotpath). Fetch v0-v1 read magic 0 and v2-v3 magic 1: newer entries are down-converted,
lazily and within the size limits (records.convert); converted entries are kept in the broker's conversion cache
(`down.conversion.cache.bytes`, an LRU keyed by segment file, position and magic), so consumers reading the
same data cost one conversion and get the cached bytes by sendfile, from in-memory files.

The replica manager reads and waits (ReplicaManager.fetch, Kafka's fetchMessages); this module keeps what
KafkaApis keeps: sessions, authorization, down-conversion and metrics. Limits: partition_max_bytes per partition
and, from v3, max_bytes for the whole response; from v3 the first batch of the first partition with data is
returned whole even if larger (so consumers progress), while v0-v2 get at most the limit (a partial message, as
Kafka's old behaviour). The records read are converted after the read, each partition within what the converted
ones before it left of max_bytes. max_wait_ms / min_bytes: the request waits in the fetch purgatory until enough
bytes are readable or the time is up; for an old consumer, until enough converted bytes are (a consumer left
with nothing but markers to read waits for new records as one at the end of the log does).

Errors per partition: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE,
UNSUPPORTED_COMPRESSION_TYPE (a topic with compression.type=zstd fetched below v10, as Kafka),
FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (v9+ current leader epoch).

Incremental fetch sessions (KIP-227, v7+; replica.fetch_session has the rules): session id 0 with epoch 0
opens a session when the cache (max.incremental.fetch.session.cache.slots) has or can make room, epoch -1
fetches without one, and a non-zero id with epoch 0 or -1 closes that session first. An incremental request
names only added or changed partitions (and forgotten ones); the session's partitions are read and waited on,
except the quiet ones (at their end and unchanged since: replica.fetch_session), which join the round when they
change; the response carries only the partitions with records, a changed high watermark or log start offset, or
an error. Top-level FETCH_SESSION_ID_NOT_FOUND and
INVALID_FETCH_SESSION_EPOCH answer requests naming an unknown session or the wrong epoch.

Authorization: a consumer needs Read on each topic, a follower ClusterAction on the cluster; the partitions of
the others answer TOPIC_AUTHORIZATION_FAILED.

Follower fetching (KIP-392, v11+): a consumer may read from a follower of the partition, up to that follower's
high watermark (its LSO for READ_COMMITTED): an offset between its high watermark and log end offset gets no
records, one outside [log start, log end] OFFSET_OUT_OF_RANGE, a current leader epoch older or newer than the
replica's FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH; v0-v10 fetches and replicas not hosted here get
NOT_LEADER_OR_FOLLOWER. With replica.selector.class set (replica.selector), the leader answers a consumer whose
rack_id puts it nearer a follower with no records and that follower's id in preferred_read_replica.

Follower fetches (replica_id >= 0) read up to the log end offset, never converted, and each moves that
follower's state on the leader (ISR, high watermark), which may complete waiting acks=all produces.

Client quotas (consumers only; a follower is never client-throttled): with a consumer_byte_rate, max_bytes is
capped at what the quota allows in its window (bound x (samples - 1) x window). Once read, the request's loop
time is recorded in its request quota, then the response's size (4 bytes + its body, after down-conversion
where Kafka weighs it before) in its byte quota; if either throttles, the bytes are taken back and the answer is
empty (no partitions, error NONE; an incremental fetch keeps its session id, a full one opens no session), with
the throttle in throttle_time_ms.

Metrics (kbroker.metrics), for what the response carries: per topic, fetched partitions, failed ones, bytes
out to consumers (after conversion) and records down-converted (those converted for this fetch, not those
served from the conversion cache); bytes out to followers as replication bytes.
"""
from __future__ import annotations

import os
from dataclasses import replace

from kafka.protocol.consumer import FetchRequest, FetchResponse

from ..common.hub import yield_to_hub
from ..log.segment import EMPTY_SLICE, FileSlice
from ..protocol.errors import Errors, KafkaError
from ..protocol.hotpath import FetchPartitionData, FetchResponseData, fetch_response_size
from ..records.convert import down_convert, magic_for_fetch_version
from ..replica.fetch_session import INVALID_SESSION_ID, FetchContext
from ..replica.manager import FetchParams
from .context import RequestContext

API_KEY = 1
MIN_VERSION, MAX_VERSION = 0, 12
REQUEST, RESPONSE = FetchRequest, FetchResponse

_NOT_HOSTED = (Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_LEADER_OR_FOLLOWER)


def _file_reader(fd: int):
    """read(position, length) -> the bytes of the open file fd (fewer at its end)."""
    def read(position: int, length: int) -> bytes:
        data = os.pread(fd, length, position)
        return data if len(data) == length else FileSlice(fd, position, length).read()
    return read


def _down_converted(replicas, params, tp, piece, fetch_offset: int, magic: int, max_bytes: int, min_one: bool):
    """(pieces, records converted) of the slice read from fetch_offset, converted to magic. When all of it was
    left out (control batches, emptied batches, a compacted batch's records before the fetch offset), the read
    goes on from the offset after it, so an old consumer is not stuck there (Kafka answers an overflow message
    that old consumers fail on)."""
    converted = 0
    while piece.length:
        pieces, records, after = down_convert(
            _file_reader(piece.fd), piece.file_id, piece.position, piece.position + piece.length, magic,
            fetch_offset=fetch_offset, max_bytes=max_bytes, cache=replicas.conversion_cache, pause=yield_to_hub)
        converted += records
        if pieces or after is None:
            return pieces, converted
        data = replicas.read_from_local_log(params, [(tp, after, max_bytes, -1)])[0][tp]
        if data.error_code:
            raise KafkaError(data.error_code)
        piece = data.records[0] if data.records else EMPTY_SLICE
        if piece.length > max_bytes and not min_one:
            break   # only the first partition with records may get a batch larger than its limit (KIP-74)
    return [], converted


def _down_convert(replicas, params, requests, results: dict, magic: int):
    """Convert the records read for a consumer of magic 0 or 1, partition by partition in request order, each
    within what the converted records before it left of max_bytes. (bytes converted, whether a partition
    failed, {tp: records converted})."""
    min_one = params.version > 2
    limit = params.max_bytes
    total, errored, conversions = 0, False, {}
    for tp, fetch_offset, partition_max, _ in requests:
        data = results[tp]
        if data.records:
            try:
                data.records, conversions[tp] = _down_converted(replicas, params, tp, data.records[0], fetch_offset,
                                                                magic, min(partition_max, limit), min_one)
            except KafkaError as e:
                data.records, data.error_code = [], e.code
        errored = errored or bool(data.error_code)
        size = data.records_size if data.records else 0
        if size:
            min_one = False
            limit = max(0, limit - size)
            total += size
    return total, errored, conversions


def _fetch_down_converted(replicas, params: FetchParams, requests, magic: int):
    """The replica manager's fetch for a consumer of magic 0 or 1, its records converted: (results by tp, {tp:
    records converted}). min_bytes counts converted bytes: while what was read converts to fewer (markers and
    emptied batches convert to nothing), the fetch waits on, within max_wait_ms in all, until more is readable
    than it read (answered at once, such a consumer would ask again at once, again and again)."""
    min_bytes = params.min_bytes
    deadline = replicas.clock.monotonic_ms() + params.max_wait_ms
    while True:
        results = replicas.fetch(params, requests)
        read = sum(data.records[0].length for data in results.values() if data.records)
        converted, errored, conversions = _down_convert(replicas, params, requests, results, magic)
        left = deadline - replicas.clock.monotonic_ms()
        if converted >= min_bytes or errored or not read or left <= 0:
            return results, conversions
        params = replace(params, max_wait_ms=left, min_bytes=read + 1)


def _authorized_topics(ctx: RequestContext, follower: int, requests) -> set:
    """Followers need ClusterAction on the cluster, consumers Read on each topic; the others' partitions
    answer TOPIC_AUTHORIZATION_FAILED."""
    topics = {tp[0] for tp, *_ in requests}
    if follower >= 0:
        return topics if ctx.authorize("ClusterAction", "Cluster") else set()
    return ctx.authorized("Read", "Topic", topics)


def _by_topic(order: list, results: dict) -> list[tuple[str, list[FetchPartitionData]]]:
    """The partitions' results in response order, grouped by topic as the response lists them."""
    topics: list = []
    for tp in order:
        if not topics or topics[-1][0] != tp[0]:
            topics.append((tp[0], []))
        topics[-1][1].append(results[tp])
    return topics


def _throttled(ctx: RequestContext, version: int, context, results: dict) -> bool:
    """Record a consumer's fetch in its request and byte quotas; True (the bytes taken back) when either throttles
    it (Kafka's processResponseCallback)."""
    ctx.record_request_time()
    quota = ctx.broker.client_quotas.fetch
    if not quota.enabled:
        return bool(ctx.throttle_ms)
    size = 4 + fetch_response_size(version, [(tp[0], results[tp]) for tp in context.would_send(results)])
    ctx.record_quota(quota, size)
    if ctx.throttle_ms:
        quota.unrecord(ctx.quota_user, ctx.client_id, size)
    return bool(ctx.throttle_ms)


class _Readable:
    """A session round's context (news, more) as the replica manager sees it: only the authorized partitions are
    read (the others' results are the authorization errors), the topics of those joining the round checked as they
    join (allowed grows)."""

    def __init__(self, context, ctx: RequestContext, follower: int, allowed: set):
        self.context, self.ctx, self.follower, self.allowed = context, ctx, follower, allowed
        self.session = getattr(context, "session", None)

    def news(self) -> bool:
        return self.context.news()

    def more(self) -> list:
        added = self.context.more()
        self.allowed |= _authorized_topics(self.ctx, self.follower, added)
        return [r for r in added if r[0][0] in self.allowed]


def handle(request, ctx: RequestContext):
    version = ctx.api_version
    follower = request.replica_id
    replicas = ctx.broker.replica_manager
    requests = [((topic.topic, p.partition), p.fetch_offset, max(0, p.partition_max_bytes),
                 p.current_leader_epoch if version >= 9 else -1)
                for topic in request.topics for p in topic.partitions]
    now = replicas.clock.now_ms()
    if version >= 7:
        forgotten = [(t.topic, p) for t in request.forgotten_topics_data for p in t.partitions]
        context = replicas.fetch_sessions.new_context(request.session_id, request.session_epoch, requests,
                                                      forgotten, follower >= 0, now)
        if follower >= 0 and forgotten:
            replicas.forget_follower_partitions(follower, forgotten)
    else:
        context = FetchContext(requests)
    if context.error:
        return FetchResponseData(0, context.error, INVALID_SESSION_ID, [])
    max_bytes = max(0, request.max_bytes) if version >= 3 else 2 ** 31 - 1
    quota = ctx.broker.client_quotas.fetch
    if follower < 0 and quota.enabled:
        max_bytes = int(min(max_bytes, quota.max_value_in_window(ctx.quota_user, ctx.client_id)))
    params = FetchParams(version, follower, request.max_wait_ms, min(request.min_bytes, max_bytes), max_bytes,
                         request.isolation_level if version >= 4 else 0,
                         request.rack_id or "" if version >= 11 and follower < 0 else None, ctx.listener)
    allowed = _authorized_topics(ctx, follower, context.requests)
    if follower >= 0 and version >= 5 and replicas.rack_aware:   # for the choice of a replica (KIP-392)
        replicas.record_follower_log_starts(follower, [((t.topic, p.partition), p.log_start_offset)
                                                       for t in request.topics if t.topic in allowed
                                                       for p in t.partitions])
    readable = [r for r in context.requests if r[0][0] in allowed]
    magic = magic_for_fetch_version(version)
    if follower < 0 and magic < 2:
        results, conversions = _fetch_down_converted(replicas, params, readable, magic)
    else:
        results, conversions = replicas.fetch(params, readable, _Readable(context, ctx, follower, allowed)), {}
    results.update({r[0]: FetchPartitionData(r[0][1], error_code=Errors.TOPIC_AUTHORIZATION_FAILED)
                    for r in context.requests if r[0][0] not in allowed})
    throttled = follower < 0 and _throttled(ctx, version, context, results)
    metrics = ctx.broker.metrics
    stats, stats_topic = None, None
    for tp, data in results.items():
        if data.error_code in _NOT_HOSTED:
            continue   # no series for partitions not led here (clients may name anything)
        if tp[0] != stats_topic:   # a fetch names a topic's partitions together
            stats, stats_topic = metrics.topic(tp[0]), tp[0]
        stats.fetch_requests += 1
        if data.error_code:
            stats.failed_fetch_requests += 1
        elif not data.records or throttled:
            continue
        elif follower >= 0:
            metrics.replication_bytes_out += data.records_size
        else:
            stats.bytes_out += data.records_size
            stats.fetch_conversions += conversions.get(tp, 0)
    if throttled:
        return FetchResponseData(0, Errors.NONE, context.throttled_session_id(), [])
    error, session_id, order = context.respond(results, replicas.clock.now_ms())
    return FetchResponseData(0, error, session_id, _by_topic(order, results))
