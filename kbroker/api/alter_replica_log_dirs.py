"""AlterReplicaLogDirs (key 34), v0-v2 (flexible from v2): move replicas between this broker's log dirs (JBOD),
as Kafka 2.8's KafkaApis.handleAlterReplicaLogDirsRequest and ReplicaManager.alterReplicaLogDirs.

Each (topic, partition) named under a log dir (absolute path; a partition named under two dirs takes the last)
gets, per partition: NONE when its move into that dir started (a `-future` log there is filled from the current
log, which keeps serving, and swapped in once caught up: see replica/log_dir_mover.py) or when it is there
already; REPLICA_NOT_AVAILABLE when this broker does not host the replica yet, but the dir is remembered and the
log created there when LeaderAndIsr brings the replica; LOG_DIR_NOT_FOUND for a path that is not one of
log.dirs; KAFKA_STORAGE_ERROR for an offline log dir; INVALID_TOPIC_EXCEPTION when the topic name is too long
for the future log's directory name. A move to another dir cancels one under way. Results are grouped by topic.
v1 is v0 (throttling order only); v2 is flexible.
Authorization: needs Alter on the cluster; without it every partition gets CLUSTER_AUTHORIZATION_FAILED.
"""
from __future__ import annotations

import os

from kafka.protocol.admin import AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse

from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 34
MIN_VERSION, MAX_VERSION = 0, 2
REQUEST, RESPONSE = AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse
TopicResult = RESPONSE.AlterReplicaLogDirTopicResult
PartitionResult = TopicResult.AlterReplicaLogDirPartitionResult


def _normalized(path: str) -> str:
    """An absolute path as Java's File.getAbsolutePath compares it (no trailing or doubled separators)."""
    return os.path.normpath(path) if os.path.isabs(path) else path


def handle(request, ctx: RequestContext):
    partition_dirs = {(t.name, p): _normalized(d.path) for d in request.dirs for t in d.topics for p in t.partitions}
    if ctx.authorize("Alter", "Cluster"):
        errors = ctx.broker.replica_manager.alter_replica_log_dirs(partition_dirs)
    else:
        errors = {tp: Errors.CLUSTER_AUTHORIZATION_FAILED for tp in partition_dirs}
    by_topic: dict[str, list] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append(PartitionResult(partition_index=partition, error_code=error))
    return RESPONSE(version=ctx.api_version,
                    results=[TopicResult(topic_name=t, partitions=ps) for t, ps in by_topic.items()])
