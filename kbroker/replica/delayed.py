"""The replica manager's delayed operations, Kafka's DelayedProduce and DelayedFetch, watched under topic-partitions
in its produce and fetch purgatories: whoever appends to a partition, moves its high watermark or changes its
leadership checks the operations waiting on it (ReplicaManager._complete_delayed).
"""
from __future__ import annotations

import gevent.event

from ..protocol.errors import Errors, KafkaError
from ..purgatory.delayed import DelayedOperation


class DelayedFetch(DelayedOperation):
    """Completes when min_bytes are readable for the fetch, a partition fails or its offset is out of range, or
    max_wait_ms is over. The fetch reads again once `done` is set (ReplicaManager.fetch), on its own greenlet. For
    a follower, what the leader throttle holds back is not readable (Kafka's DelayedFetch.tryComplete)."""

    def __init__(self, params, manager, requests, context=None):
        super().__init__(params.max_wait_ms)
        self.params, self.manager, self.requests = params, manager, requests
        self.context = context   # a fetch session round's: quiet partitions that changed join the check (news)
        self.done = gevent.event.Event()
        self.checked = False   # whether a partition's change (or the purgatory's first check) looked at it

    def try_complete(self) -> bool:
        self.checked = True
        if self.context is not None and self.context.news():
            self.requests = self.requests + self.context.more()
        params = self.params
        follower = params.replica_id
        throttling = follower >= 0 and bool(self.manager.replication_quotas.leader.throttled)
        available = 0
        for tp, fetch_offset, max_bytes, _ in self.requests:
            partition = self.manager.partitions.get(tp)
            if partition is None or not partition.is_leader and params.client_rack is None:
                return self.force_complete()   # (a consumer of Fetch v11+ may wait on a follower: KIP-392)
            log = partition.log
            end = partition.fetchable_end(params.isolation_level, params.replica_id)
            if fetch_offset > log.log_end_offset or fetch_offset < log.log_start_offset:
                return self.force_complete()   # out of range: the read answers it
            # (an offset between the high watermark and the log end waits for the high watermark, as a consumer
            # sent to a follower whose high watermark is behind the leader's does)
            if fetch_offset < end and not (throttling and self.manager.leader_throttled(partition, follower)):
                try:
                    available += log.read(fetch_offset, max_bytes, max_offset=end).records.length
                except KafkaError:   # the log's dir failed: the read answers the error
                    return self.force_complete()
        if available >= params.min_bytes:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.done.set()

    def on_expiration(self) -> None:
        pass


class DelayedProduce(DelayedOperation):
    """acks=-1: completes when every partition's high watermark passed its last offset (all in-sync replicas
    have it), with NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below min.insync.replicas; partitions still
    pending at the timeout get REQUEST_TIMED_OUT."""

    def __init__(self, delay_ms: int, manager, required: dict):
        super().__init__(delay_ms)
        self.manager = manager
        self.pending = dict(required)   # tp -> last offset appended
        self.errors: dict = {}
        self.done = gevent.event.Event()

    def try_complete(self) -> bool:
        for tp, last_offset in list(self.pending.items()):
            partition = self.manager.partitions.get(tp)
            if partition is None or not partition.is_leader:
                self.errors[tp] = (Errors.KAFKA_STORAGE_ERROR if tp in self.manager.offline_partitions
                                   else Errors.NOT_LEADER_OR_FOLLOWER)
            elif partition.high_watermark > last_offset:
                enough = len(partition.isr) >= partition.log.config.min_insync_replicas
                self.errors[tp] = Errors.NONE if enough else Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            else:
                continue
            del self.pending[tp]
        if not self.pending:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        for tp in self.pending:
            self.errors[tp] = Errors.REQUEST_TIMED_OUT
        self.done.set()

    def on_expiration(self) -> None:
        pass
