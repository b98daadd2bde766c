"""CoordinatorPartitions: which partitions of a coordinator's internal topic (`__consumer_offsets`,
`__transaction_state`) this broker leads and has loaded, shared by the group and transaction state managers
(Kafka's CoordinatorLoader scheduling, as GroupMetadataManager and TransactionStateManager both do it).

Becoming leader of partition P schedules a load of P (its keys answer COORDINATOR_LOAD_IN_PROGRESS meanwhile);
losing leadership schedules an unload. Loads and unloads run in order on one greenlet (Kafka's single-thread
scheduler); a load is skipped when a newer leader epoch has been seen for P or the broker no longer leads P at
that epoch. Subclasses supply partition_for(key), _do_load(partition, epoch, callback) reading the log, and
_do_unload(partition, epoch, callback) dropping P's cached state.
"""
from __future__ import annotations

import logging
from typing import Callable

import gevent
import gevent.queue

from ..common.hub import yield_to_hub
from ..protocol.errors import Errors, KafkaError
from ..records.entries import CorruptEntry, iter_entries

log = logging.getLogger("kbroker.coordinator")


def existing_partition_count(zk, topic: str, default: int) -> int:
    """The existing topic's partition count, else `default` (the configured count, as Kafka at startup)."""
    try:
        assignment = zk.get_topic_assignment(topic) if zk is not None else None
    except Exception:
        log.exception("reading the %s assignment failed; using the configured partition count", topic)
        assignment = None
    if assignment is not None and assignment.partitions:
        return len(assignment.partitions)
    return default


class CoordinatorPartitions:
    topic = ""

    def __init__(self, replica_manager, clock, partition_count: int):
        self.replica_manager = replica_manager
        self.clock = clock
        self.partition_count = partition_count
        self.loading_partitions: set[int] = set()
        self.owned_partitions: set[int] = set()
        self.epoch_for_partition: dict[int, int] = {}
        self._jobs: gevent.queue.Queue = gevent.queue.Queue()
        self._worker: gevent.Greenlet | None = None
        self._shutting_down = False

    def startup(self, partition_count: int) -> None:
        self.partition_count = partition_count
        self._worker = gevent.spawn(self._run_jobs)
        self._worker.name = f"{self.topic}-loader"

    def shutdown(self) -> None:
        self._shutting_down = True
        if self._worker is not None:
            self._worker.kill()
            self._worker = None

    def partition_for(self, key: str) -> int:
        raise NotImplementedError

    def is_local(self, key: str) -> bool:
        return self.partition_for(key) in self.owned_partitions

    def is_loading_key(self, key: str) -> bool:
        return self.partition_for(key) in self.loading_partitions

    @property
    def is_loading(self) -> bool:
        return bool(self.loading_partitions)

    def _maybe_update_epoch(self, partition: int, epoch: int | None) -> bool:
        current = self.epoch_for_partition.get(partition)
        if current is None:
            if epoch is not None:
                self.epoch_for_partition[partition] = epoch
        elif epoch is not None and epoch > current:
            self.epoch_for_partition[partition] = epoch
        return epoch is None or self.epoch_for_partition.get(partition) == epoch

    def schedule_load(self, partition: int, epoch: int, callback: Callable) -> None:
        log.info("Scheduling loading of %s-%d for epoch %d", self.topic, partition, epoch)
        # Loading from now on (Kafka marks it when the job starts; marking it here closes the window in
        # which the partition's keys would get NOT_COORDINATOR from the new leader).
        if partition not in self.owned_partitions:
            self.loading_partitions.add(partition)
        self._jobs.put((self._load, partition, epoch, callback))

    def schedule_unload(self, partition: int, epoch: int | None, callback: Callable) -> None:
        log.info("Scheduling unloading of %s-%d", self.topic, partition)
        self._jobs.put((self._unload, partition, epoch, callback))

    def _run_jobs(self) -> None:
        while True:
            fn, *args = self._jobs.get()
            try:
                fn(*args)
            except Exception:
                log.exception("%s job %s%r failed", self.topic, fn.__name__, tuple(args[:2]))

    def _load(self, partition: int, epoch: int, callback: Callable) -> None:
        tp = (self.topic, partition)
        p = self.replica_manager.partitions.get(tp)
        if not self._maybe_update_epoch(partition, epoch) or p is None or not p.is_leader or \
                p.leader_epoch != epoch:
            log.info("Not loading %s-%d in epoch %d: newer epoch %s or no longer the leader", tp[0], partition,
                     epoch, self.epoch_for_partition.get(partition))
            if partition not in self.owned_partitions:
                self.loading_partitions.discard(partition)
            return
        if partition in self.owned_partitions:
            log.info("Already loaded %s-%d", tp[0], partition)
            return
        self.loading_partitions.add(partition)
        start = self.clock.monotonic_ms()
        try:
            self._do_load(p, epoch, callback)
            log.info("Finished loading %s-%d in %d milliseconds for epoch %d", tp[0], partition,
                     self.clock.monotonic_ms() - start, epoch)
        except Exception:
            log.exception("Error loading %s-%d", tp[0], partition)
        finally:
            self.owned_partitions.add(partition)
            self.loading_partitions.discard(partition)

    def _unload(self, partition: int, epoch: int | None, callback: Callable) -> None:
        if not self._maybe_update_epoch(partition, epoch):
            log.info("Not unloading %s-%d in epoch %s since current epoch is %s", self.topic, partition, epoch,
                     self.epoch_for_partition.get(partition))
            return
        self.owned_partitions.discard(partition)
        self.loading_partitions.discard(partition)
        self._do_unload(partition, epoch, callback)

    def _do_load(self, partition, epoch: int, callback: Callable) -> None:
        raise NotImplementedError

    def _do_unload(self, partition: int, epoch: int | None, callback: Callable) -> None:
        raise NotImplementedError

    def read_log(self, partition, epoch: int, buffer_size: int):
        """Yield (view, entry) for every batch of the partition's log, log start to log end, in chunks of
        buffer_size; stops early when leadership changes (see still_leader) or the manager shuts down."""
        log_ = partition.log
        offset = log_.log_start_offset
        while offset < log_.log_end_offset and not self._shutting_down:
            if not self.still_leader(partition, epoch):
                log.info("Stopped loading %s-%d: leadership changed", partition.topic, partition.index)
                return
            data = log_.read(offset, buffer_size, min_one_message=True).records.read()
            if not data:
                break
            view = memoryview(data)
            try:
                entries = list(iter_entries(view))
            except CorruptEntry as e:
                raise KafkaError(Errors.CORRUPT_MESSAGE, f"corrupt entry in {partition.topic}-{partition.index} "
                                                         f"at offset {offset}: {e}") from None
            progressed = False
            for entry in entries:
                if entry.last_offset < offset:
                    continue
                yield view, entry
                offset = entry.last_offset + 1
                progressed = True
            if not progressed:
                break
            yield_to_hub()   # let requests run between chunks of a long log

    def still_leader(self, partition, epoch: int) -> bool:
        return not self._shutting_down and partition.is_leader and partition.leader_epoch == epoch
