"""LogDirMover: moves replicas between this broker's log dirs (Kafka's ReplicaAlterLogDirsManager and Thread).

One greenlet per moving partition copies the partition's current log into its future log (log/manager.py), as
a follower copies from its leader: from the future log's end offset, up to replica.fetch.max.bytes at a time, the
file reads in gevent's thread pool, each chunk appended with Partition.append_replicated (offsets, leader
epochs, producer state and aborted transactions follow the batches). The future log takes the current log's
high watermark (capped by its own end) and log start offset. The partition goes on serving produce and fetch
from its current log meanwhile; when the future log's end offset equals the current one's, the log manager
swaps them and the partition switches to the new log, without yielding in between, so no append falls between.

Kafka's log dir quota (AlterLogDirsReplication, kbroker.quota.replication_quotas): every byte copied is recorded
against replica.alter.log.dirs.io.max.bytes.per.second, and while that rate is over no move copies (each waits a
second, Kafka's replica.fetch.backoff.ms, and looks again). Beyond Kafka, a chunk is also at most the bound, so
a bound below replica.fetch.max.bytes holds over a few seconds rather than only over the rate's whole window.

Truncations of the current log (a follower diverging from its leader, OFFSET_OUT_OF_RANGE) are marked by a
truncation listener and applied to the future log before the next copy (Kafka's markPartitionsForTruncation);
a current log that starts beyond the future's end truncates the future fully. A move resumed after a restart
first truncates the future log where it diverges from the current one, by leader epoch (as Kafka's
ReplicaAlterLogDirsThread does with OffsetForLeaderEpoch against the current replica), else to its high
watermark.
"""
from __future__ import annotations

import logging

import gevent

from ..protocol.errors import KafkaError

log = logging.getLogger("kbroker.replica.log_dir_mover")

RETRY_BACKOFF_S = 1.0   # after an error, and while the quota is over
SHUTDOWN_WAIT_S = 5.0


class _Move:
    """One partition's move: its current log, the future log being filled, the lowest offset the current log
    was truncated to since the last step (None: not truncated), and whether it was told to stop."""

    def __init__(self, tp, partition, future):
        self.tp, self.partition, self.current, self.future = tp, partition, partition.log, future
        self.truncated: int | None = None
        self.stopped = False
        self.greenlet = None

    def on_truncation(self, _, end_offset: int) -> None:
        self.truncated = end_offset if self.truncated is None else min(self.truncated, end_offset)


class LogDirMover:
    def __init__(self, replica_manager, chunk_bytes: int, quota):
        self.replica_manager = replica_manager
        self.chunk_bytes = chunk_bytes   # replica.fetch.max.bytes
        self.quota = quota               # the AlterLogDirsReplication ReplicationQuotaManager
        self._moves: dict = {}           # tp -> _Move

    @property
    def moving(self) -> set:
        return set(self._moves)

    def add(self, tp) -> None:
        """Move the hosted partition into its future log, unless that move runs already."""
        partition = self.replica_manager.partitions.get(tp)
        future = self.replica_manager.log_manager.get_future_log(tp)
        move = self._moves.get(tp)
        if partition is None or future is None or (move is not None and move.future is future
                                                   and move.partition is partition):
            return
        self.remove(tp)
        move = self._moves[tp] = _Move(tp, partition, future)
        move.greenlet = gevent.spawn(self._run, move)

    def remove(self, tp) -> None:
        """Stop moving the partition after the step under way (its future log stays: a later add resumes)."""
        move = self._moves.pop(tp, None)
        if move is not None:
            move.stopped = True

    def shutdown(self) -> None:
        """Stop every move between two steps (a step cut in the middle would leave the future log's producer
        state behind its batches)."""
        moves = list(self._moves.values())
        for tp in list(self._moves):
            self.remove(tp)
        greenlets = [m.greenlet for m in moves]
        gevent.joinall(greenlets, timeout=SHUTDOWN_WAIT_S)
        gevent.killall(greenlets)

    def _run(self, move: _Move) -> None:
        tp, current = move.tp, move.current
        current.truncation_listeners.append(move.on_truncation)
        log.info("moving partition %s-%d from %s to %s from offset %d", tp[0], tp[1], current.parent_dir,
                 move.future.parent_dir, move.future.log_end_offset)
        try:
            self._truncate_divergent(current, move.future)
            while not move.stopped:
                try:
                    if self._step(move):
                        return
                except (OSError, KafkaError) as e:
                    log.warning("moving partition %s-%d: %s; retrying", tp[0], tp[1], e)
                    gevent.sleep(RETRY_BACKOFF_S)
        except Exception:
            log.exception("moving partition %s-%d failed; it stays in %s", tp[0], tp[1], current.parent_dir)
        finally:
            current.truncation_listeners.remove(move.on_truncation)
            if self._moves.get(tp) is move:
                del self._moves[tp]

    @staticmethod
    def _truncate_divergent(current, future) -> None:
        """Truncate the future log to the longest prefix it surely shares with the current log: by leader epoch
        (Partition.truncate_for_leader_epoch's rule), else to its high watermark."""
        epoch = future.leader_epoch_cache.latest_epoch
        target = future.high_watermark
        if epoch is not None:
            current_epoch, end = current.end_offset_for_epoch(epoch)
            if end >= 0:
                target = end if current_epoch == epoch else min(
                    end, future.end_offset_for_epoch(current_epoch)[1])
        target = min(target, current.log_end_offset)
        if target < future.log_end_offset:
            future.truncate_to(target)

    def _step(self, move: _Move) -> bool:
        """Apply a pending truncation, or copy one chunk; swap the logs once the future log caught up. True
        once swapped."""
        lm = self.replica_manager.log_manager
        tp, current, future = move.tp, move.current, move.future
        if lm.get_future_log(tp) is not future or self.replica_manager.partitions.get(tp) is not move.partition:
            move.stopped = True   # the future log was deleted, or the partition stopped or recreated
            return False
        if move.truncated is not None:
            truncated, move.truncated = move.truncated, None
            if truncated < future.log_end_offset:
                future.truncate_to(truncated)
            return False
        start = future.log_end_offset
        if start < current.log_start_offset:
            future.truncate_fully_and_start_at(current.log_start_offset)
            return False
        if start < current.log_end_offset:
            quota = self.quota
            if quota.is_quota_exceeded():
                gevent.sleep(RETRY_BACKOFF_S)
                return False
            chunk = current.read(start, min(self.chunk_bytes, max(quota.bound, 1))).records
            data = gevent.get_hub().threadpool.apply(chunk.read)
            if move.stopped or move.truncated is not None:
                return False   # the current log was truncated under the read: start again
            move.partition.append_replicated(future, data)
            quota.record(len(data))
        future.update_high_watermark(current.high_watermark)
        if future.log_start_offset < current.log_start_offset <= future.high_watermark:
            future.maybe_increment_log_start_offset(current.log_start_offset)
        if future.log_end_offset != current.log_end_offset:
            gevent.sleep(0)
            return False
        latest = future.leader_epoch_cache.latest_epoch
        missing = [e for e in current.leader_epoch_cache.entries if latest is None or e.epoch > latest]
        if missing:   # epochs starting at the end, without a batch yet (a new leader's)
            for e in missing:
                future.leader_epoch_cache.assign(e.epoch, e.start_offset)
            return False
        if move.stopped or move.truncated is not None or current.append_lock.locked():
            return False   # (an append writing off the hub would land in the old log after the swap)
        new, old = lm.replace_current_with_future_log(tp)
        move.partition.replace_log(new)
        log.info("partition %s-%d moved to %s (log end offset %d)", tp[0], tp[1], new.parent_dir,
                 new.log_end_offset)
        lm.write_log_dir_checkpoints(old.parent_dir)
        return True
