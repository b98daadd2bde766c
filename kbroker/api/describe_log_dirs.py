"""DescribeLogDirs (key 35), v0-v2 (flexible from v2): this broker's log dirs and the partitions in each, as
Kafka 2.8's ReplicaManager.describeLogDirs.

Null topics describes every log of the broker; otherwise only the listed (topic, partition) pairs, and a pair
the broker has no log for (unknown topic or partition, or a replica held elsewhere) is simply absent. Per
partition: its size (bytes of its segment files), the offset lag and is_future_key. The offset lag of a current
log is max(high watermark - log end offset, 0), which is 0 here as the high watermark never passes the log end; a
log the broker keeps but no longer hosts (a replica stopped without deletion) answers -1, "not available". A
replica moving between log dirs (AlterReplicaLogDirs) is also listed in the dir it moves to, with is_future_key
true and, as lag, the current log's end offset minus the future log's (-1 when the partition is not hosted).
Each log dir is its absolute path; one with no logs is listed with no topics. An offline log dir (an I/O error
took it offline, or it was unusable at start-up, or it is no longer a directory) is KAFKA_STORAGE_ERROR with no
topics.
Kafka 2.8 also lists, when topics are requested, every other topic of a dir with an empty partition list; that
was a bug (KAFKA-16807) and clients ignore such entries, so only topics with matching partitions are listed.
v1 is v0 (throttling order only); v2 is flexible. kafka-python's classes go up to v5 (top-level error code,
volume sizes), which Kafka 2.8 does not serve.
Authorization: needs Describe on the cluster; without it the answer lists no log dirs (as Kafka).
"""
from __future__ import annotations

import os

from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse

from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 35
MIN_VERSION, MAX_VERSION = 0, 2
REQUEST, RESPONSE = DescribeLogDirsRequest, DescribeLogDirsResponse
Result = RESPONSE.DescribeLogDirsResult
Topic = Result.DescribeLogDirsTopic
Partition = Topic.DescribeLogDirsPartition

LAG_NOT_AVAILABLE = -1


def handle(request, ctx: RequestContext):
    broker = ctx.broker
    hosted = broker.replica_manager.partitions
    wanted = None
    if not ctx.authorize("Describe", "Cluster"):
        return RESPONSE(version=ctx.api_version, results=[])
    if request.topics is not None:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    by_dir: dict[str, dict[str, list]] = {}
    for tp, log in sorted(broker.log_manager.logs.items()):
        if wanted is None or tp in wanted:
            lag = 0 if tp in hosted else LAG_NOT_AVAILABLE
            by_dir.setdefault(log.parent_dir, {}).setdefault(tp[0], []).append(
                Partition(partition_index=tp[1], partition_size=log.size, offset_lag=lag, is_future_key=False))
    for tp, log in sorted(broker.log_manager.future_logs.items()):
        if wanted is None or tp in wanted:
            lag = hosted[tp].log.log_end_offset - log.log_end_offset if tp in hosted else LAG_NOT_AVAILABLE
            by_dir.setdefault(log.parent_dir, {}).setdefault(tp[0], []).append(
                Partition(partition_index=tp[1], partition_size=log.size, offset_lag=lag, is_future_key=True))
    results = []
    for log_dir in broker.log_manager.log_dirs:
        if not broker.log_manager.is_log_dir_online(log_dir) or not os.path.isdir(log_dir):
            results.append(Result(error_code=Errors.KAFKA_STORAGE_ERROR, log_dir=log_dir, topics=[]))
            continue
        topics = by_dir.get(log_dir, {})
        results.append(Result(error_code=Errors.NONE, log_dir=log_dir,
                              topics=[Topic(name=t, partitions=ps) for t, ps in topics.items()]))
    return RESPONSE(version=ctx.api_version, results=results)
