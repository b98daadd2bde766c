"""ReplicaManager: the partitions this broker hosts, as the controller ordered, and the data path over them.

Controller orders, fenced as Kafka's ReplicaManager fences them: a request from an older controller epoch is
refused whole (STALE_CONTROLLER_EPOCH), a partition state whose leader epoch is not newer than the applied one
is refused for that partition, a request stamped with an older broker epoch is STALE_BROKER_EPOCH.
LeaderAndIsr creates the partition's log (with its topic config from ZooKeeper) on first sight, off the hub; becoming
follower moves the partition to a replica fetcher for its leader (which first truncates by leader epoch);
becoming leader stops fetching it and starts a leader epoch, whose leader-epoch-checkpoint is written (fsynced)
before the first append in it, not during the request. StopReplica stops fetching and, with delete, removes the log.

Log dirs (JBOD): alter_replica_log_dirs (AlterReplicaLogDirs, Kafka's ReplicaManager.alterReplicaLogDirs) creates
a partition's future log in the log dir asked for and has the log dir mover (log_dir_mover.py) fill it and swap
it in; for a partition not hosted yet it only remembers the dir, where LeaderAndIsr then creates the log. After
each LeaderAndIsr, the partitions with a future log (loaded at startup) resume their moves. StopReplica stops a
move; with delete the future log goes too.

Data path: append_txn_markers (WriteTxnMarkers: control batches, acks=-1, then the on_txn_marker_appended
hook for __consumer_offsets partitions), append_records (Produce; acks=-1 waits in the produce purgatory
until every in-sync replica has the records, or REQUEST_TIMED_OUT), read_from_local_log and fetch (Kafka's
readFromLocalLog and fetchMessages: consumers up to the high watermark or, READ_COMMITTED, the last stable
offset with the aborted transactions; followers up to the log end offset; both long-polling in the fetch
purgatory), offsets by timestamp and delete_records. Follower fetching (KIP-392): a consumer's Fetch v11+ may read
a partition this broker follows, within the same bounds (readable_partition); with replica.selector.class set, the
leader sends a rack-aware consumer to a replica in its rack (selector.py) with preferred_read_replica and no
records. A follower's fetch moves its state on the leader, which
may advance the high watermark and complete waiting produces and fetches. The delayed operations are in
delayed.py. fetch_sessions is the leader's cache of incremental fetch sessions (fetch_session.py) and
conversion_cache the old consumers' down-converted records: the Fetch API uses both.

Log dir failures (Kafka's handleLogDirFailure): the partitions whose logs are in a failed dir go offline
(`offline_partitions`): their fetchers stop, and every request about them (produce, fetch, LeaderAndIsr,
StopReplica...) answers KAFKA_STORAGE_ERROR until the broker restarts; the log manager closes their logs; a
/log_dir_event_notification entry tells the controller, which asks with LeaderAndIsr and moves their leadership.
A move between log dirs whose current or future log is in the failed dir stops (the future log is forgotten).

ISR: a task shrinks the ISR of led partitions every replica.lag.time.max.ms / 2 (check_isrs: the partitions
changed or read by a follower since, or all of them when a follower stopped fetching); expansions happen on follower
fetches. Both write the state znode (zkVersion-checked) and, batched, an /isr_change_notification entry.

Replication throttles (kbroker.quota.replication_quotas, KIP-73): a follower not in the ISR gets no records for a
partition of leader.replication.throttled.replicas while the leader rate is over leader.replication.throttled.rate
(its fetch still moves its state); the bytes of such partitions sent to any follower are recorded. A delayed
follower fetch does not count what it would not be sent. The log dir mover copies within
replica.alter.log.dirs.io.max.bytes.per.second; the fetchers apply the follower throttle.

Metrics (kbroker.metrics): per topic, produce requests, failures, bytes and records in and conversions of the
appends to partitions led here (coordinator appends included, as Kafka); ISR shrinks and expands; the flush
time of every hosted log. A topic's series go when its last partition here is deleted.
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

import gevent
import gevent.lock
import gevent.pool

from zk import znodes as z
from ..common.hub import yield_to_hub
from ..common.internal_topics import GROUP_METADATA_TOPIC, INTERNAL_TOPICS
from ..log.config import LogConfig
from ..log.errors import KafkaStorageError
from ..log.log import log_future_dir_name
from ..log.segment import EMPTY_SLICE
from ..metrics import BrokerMetrics, remote_wait
from ..protocol.errors import Errors, KafkaError
from ..protocol.hotpath import FetchPartitionData
from ..purgatory.delayed import DelayedOperationPurgatory
from ..quota.replication_quotas import ReplicationQuotas
from ..records.convert import ConversionCache
from ..records.validator import RecordValidationError
from .delayed import DelayedFetch, DelayedProduce
from .fetch_session import FetchSessionCache, session_key
from .fetcher import ReplicaFetcherManager
from .log_dir_mover import LogDirMover
from .partition import READ_COMMITTED, FollowerRound, Partition
from .selector import ReplicaView, preferred_read_replica

state_change = logging.getLogger("state-change")
partition_change = logging.getLogger("state-change.partition")   # per partition: state-change.log only (cli)
log = logging.getLogger("kbroker.replica")

ISR_NOTIFICATION_INTERVAL_S = 0.25
LOG_CREATION_BATCH = 100           # new logs made by one thread-pool task
LOG_CREATIONS_IN_FLIGHT = 4        # such tasks at once
MARKER_TIMEOUT_MS = 30000          # Kafka appends markers with request.timeout.ms (default 30 s)


@dataclass(frozen=True, slots=True)
class FetchParams:
    """What one Fetch request asks of the replica manager, as Kafka's FetchParams."""
    version: int           # of the Fetch request: v0-v2 have a hard size limit, v0-v9 cannot read zstd topics
    replica_id: int        # the fetching follower's broker id, -1 for a consumer
    max_wait_ms: int
    min_bytes: int
    max_bytes: int         # for the whole response
    isolation_level: int   # READ_UNCOMMITTED or READ_COMMITTED (consumers only)
    # KIP-392, a consumer's Fetch v11+: its rack_id ("" for none) and the listener it came in on. None (a follower,
    # or Fetch v0-v10): only the leader serves the fetch (Kafka's fetchOnlyFromLeader).
    client_rack: str | None = None
    listener: str = ""


class ReplicaManager:
    def __init__(self, broker_id: int, config, log_manager, zk, clock, metadata_cache,
                 replication_quotas: ReplicationQuotas, metrics: BrokerMetrics | None = None):
        self.broker_id = broker_id
        self.config = config
        self.replication_quotas = replication_quotas
        self.log_manager = log_manager
        self.zk = zk
        self.clock = clock
        self.metadata_cache = metadata_cache  # tells partitions led elsewhere from unknown ones
        self.metrics = metrics or BrokerMetrics()
        self.broker_epoch = -1
        self.controller_epoch = 0
        self.partitions: dict[tuple[str, int], Partition] = {}
        # Partitions whose log is in a failed log dir (Kafka's HostedPartition.Offline): KAFKA_STORAGE_ERROR for
        # every request about them until the broker restarts.
        self.offline_partitions: set[tuple[str, int]] = set()
        self.fetch_purgatory = DelayedOperationPurgatory("Fetch", clock)
        self.produce_purgatory = DelayedOperationPurgatory("Produce", clock)
        self.fetchers = ReplicaFetcherManager(self)
        # Kafka's replicaStateChangeLock: one LeaderAndIsr or StopReplica at a time. A controller whose request
        # timed out resends it on a new connection while the first still runs (10 000 new logs under load):
        # without it both created the same logs at once.
        self.state_change_lock = gevent.lock.RLock()
        self.log_dir_mover = LogDirMover(self, config["replica.fetch.max.bytes"], replication_quotas.alter_log_dirs)
        self.conversion_cache = ConversionCache(config["down.conversion.cache.bytes"])
        self.rack_aware = config["replica.selector.class"] is not None   # RackAwareReplicaSelector (KIP-392)
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"],
                                                config["min.incremental.fetch.session.eviction.ms"])
        self.follower_rounds: dict[int, FollowerRound] = {}   # follower id -> when its last fetch started
        # (producer id, __consumer_offsets partition, committed) after a marker there is replicated: the group
        # coordinator makes or drops the producer's pending transactional offsets (server.py wires it).
        self.on_txn_marker_appended = lambda producer_id, offsets_partition, committed: None
        self._isr_changes: set = set()
        # The ISR check's work list (Kafka's isr-expiration task looks at every partition): the partitions where
        # a follower may have stopped being caught up without its round stalling (changed, read by a follower,
        # newly led); a partition leaves it once all its in-sync followers sit at its end on live rounds.
        self._isr_watch: set = set()
        self._stalled_followers: set[int] = set()   # followers whose rounds were stalled at the last check
        self._tasks: list = []
        # Called with ([(tp, leader epoch)] now led here, [(tp, leader epoch)] now followed, [(tp, epoch or None)]
        # stopped) after each LeaderAndIsr / StopReplica, as Kafka's onLeadershipChange (the group coordinator
        # loads and unloads __consumer_offsets partitions from it). Listeners must not block.
        self.leadership_listeners: list = []
        # Every partition's hooks: bound once here, not a bound method object per partition.
        self._log_flush_observer = self.metrics.log_flush.observe
        self._isr_writer = self.write_isr
        self._on_high_watermark_moved = self._complete_delayed

    def startup(self) -> None:
        self.fetch_purgatory.start()
        self.produce_purgatory.start()
        self._tasks = [gevent.spawn(self._isr_shrink_loop), gevent.spawn(self._isr_notification_loop)]
        # Kafka's LogDirFailureHandler: each failed log dir is handled on its own greenlet, after the request
        # that met the I/O error has its KAFKA_STORAGE_ERROR.
        self.log_manager.dir_failure.set_listener(lambda d: gevent.spawn(self.handle_log_dir_failure, d))

    def shutdown(self) -> None:
        for task in self._tasks:
            task.kill()
        self.log_dir_mover.shutdown()
        self.fetchers.shutdown()
        self.fetch_purgatory.shutdown()
        self.produce_purgatory.shutdown()

    # ---- controller orders --------------------------------------------------------------------------------
    def is_broker_epoch_stale(self, epoch_in_request: int) -> bool:
        # -1: a controller that does not know the epoch (old request versions); Kafka accepts it.
        return epoch_in_request != -1 and epoch_in_request < self.broker_epoch

    def check_controller_epoch(self, controller_id: int, epoch: int, what: str) -> Errors:
        if epoch < self.controller_epoch:
            state_change.warning("ignoring %s from controller %d with epoch %d: the latest controller epoch is %d",
                                 what, controller_id, epoch, self.controller_epoch)
            return Errors.STALE_CONTROLLER_EPOCH
        self.controller_epoch = epoch
        return Errors.NONE

    def log_configs(self, topics) -> dict[str, LogConfig]:
        """The topics' effective log configs: broker defaults with their /config/topics overrides (read together).
        Topics without overrides share the log manager's default config (one object, not one per topic)."""
        return {topic: LogConfig.from_props(self.config.values, overrides) if overrides
                else self.log_manager.default_config
                for topic, overrides in self.zk.get_entity_configs("topics", topics).items()}

    def _leader_endpoint(self, leader: int, live_leaders: dict):
        ep = live_leaders.get(leader)
        if ep is None:
            broker = self.metadata_cache.brokers.get(leader)
            if broker is not None:
                ep = broker.endpoints.get(self.config.inter_broker_listener)
                ep = ep[:2] if ep else None
        return ep

    def become_leader_or_follower(self, controller_id: int, states, topic_ids: dict[str, uuid.UUID | None],
                                  live_leaders: dict[int, tuple[str, int]]):
        """Apply partition states; returns {(topic, partition): error}."""
        with self.state_change_lock:
            return self._become_leader_or_follower(controller_id, states, topic_ids, live_leaders)

    def _become_leader_or_follower(self, controller_id: int, states, topic_ids, live_leaders) -> dict:
        errors = {}
        new = [s for s in states if (s.topic_name, s.partition_index) not in self.partitions
               and (s.topic_name, s.partition_index) not in self.offline_partitions and self.broker_id in s.replicas]
        # Once per request: the configs of all its topics are read together and the logs walked once.
        configs = self.log_configs({s.topic_name for s in new}) if new else {}
        if configs:
            self.log_manager.update_topic_configs(configs)
        wanted = {(s.topic_name, s.partition_index): (configs[s.topic_name], bool(s.is_new)) for s in new}
        new_logs = self._create_logs(wanted)
        leaders, followers = [], []
        for i, s in enumerate(states):
            if i % 100 == 99:
                yield_to_hub()   # thousands of partitions: let ZooKeeper pings and other requests through
            tp = (s.topic_name, s.partition_index)
            current = self.partitions.get(tp)
            topic_id = topic_ids.get(s.topic_name)
            if topic_id is not None and topic_id.int == 0:
                topic_id = None
            if tp in self.offline_partitions:
                state_change.warning("ignoring LeaderAndIsr for %s-%d from controller %d: the local replica is in "
                                     "an offline log directory", tp[0], tp[1], controller_id)
                errors[tp] = Errors.KAFKA_STORAGE_ERROR
                continue
            if self.broker_id not in s.replicas:
                errors[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if current is not None and topic_id and current.topic_id and topic_id != current.topic_id:
                errors[tp] = Errors.INCONSISTENT_TOPIC_ID
                continue
            if current is not None and s.leader_epoch <= current.leader_epoch:
                partition_change.info("ignoring LeaderAndIsr for %s-%d from controller %d: leader epoch %d is "
                                      "not newer than %d", tp[0], tp[1], controller_id, s.leader_epoch,
                                      current.leader_epoch)
                errors[tp] = Errors.STALE_CONTROLLER_EPOCH
                continue
            if current is None:
                partition_log = new_logs.get(tp)
                if partition_log is None:   # (only if a partition's state appears twice in the request)
                    partition_log = self.log_manager.get_or_create_logs({tp: (configs[tp[0]], bool(s.is_new))})[tp]
                if isinstance(partition_log, KafkaError):
                    e = partition_log
                    state_change.error("partition %s-%d: cannot create its log: %s", tp[0], tp[1], e)
                    if e.code == Errors.KAFKA_STORAGE_ERROR:
                        self.offline_partitions.add(tp)
                    errors[tp] = e.code
                    continue
                partition_log.flush_observer = self._log_flush_observer
                current = Partition(tp[0], tp[1], self.broker_id, partition_log, self.clock, self._isr_writer,
                                    self.config["replica.lag.time.max.ms"])
                current.on_high_watermark_moved = self._on_high_watermark_moved
                self.partitions[tp] = current
            errors[tp] = Errors.NONE
            self._make_leader_or_follower(tp, current, s, topic_id, controller_id, live_leaders, errors)
            (leaders if s.leader == self.broker_id else followers).append((tp, s.leader_epoch))
        for tp, error in errors.items():
            if error == Errors.NONE and self.log_manager.get_future_log(tp) is not None:
                self.log_dir_mover.add(tp)
        self.fetchers.shutdown_idle()
        self._complete_delayed(*(tp for tp, _ in leaders + followers))
        self._notify_leadership(leaders, followers, [])
        return errors

    def _create_logs(self, wanted: dict) -> dict:
        """The logs of partitions new here ({tp: (config, is_new)} -> {tp: log or KafkaError}), made off the hub
        in batches, several at once (their file creations, most of the cost, overlap in the thread pool)."""
        items = list(wanted.items())
        batches = [dict(items[i:i + LOG_CREATION_BATCH]) for i in range(0, len(items), LOG_CREATION_BATCH)]
        out: dict = {}
        for made in gevent.pool.Pool(LOG_CREATIONS_IN_FLIGHT).imap_unordered(self.log_manager.get_or_create_logs,
                                                                              batches):
            out.update(made)
        return out

    def _make_leader_or_follower(self, tp, partition: Partition, s, topic_id, controller_id: int,
                                 live_leaders: dict, errors: dict) -> None:
        # Stop fetching first, then take the new state (as Kafka's makeLeaders / makeFollowers).
        self.fetchers.remove_partition(tp)
        try:
            partition.apply_state(s.leader, s.leader_epoch, s.isr, s.replicas, s.zk_version, s.controller_epoch,
                                  topic_id)
        except KafkaError as e:   # the log's dir failed (KafkaStorageError): its failure handler takes it offline
            state_change.error("partition %s-%d: cannot apply leader epoch %d: %s", tp[0], tp[1], s.leader_epoch, e)
            errors[tp] = e.code
            return
        role = "leader" if s.leader == self.broker_id else "follower"
        if role == "follower" and s.leader >= 0:
            endpoint = self._leader_endpoint(s.leader, live_leaders)
            if endpoint is None:
                state_change.warning("partition %s-%d: leader %d has no known endpoint; not fetching yet",
                                     tp[0], tp[1], s.leader)
            else:
                self.fetchers.add_partition(tp, s.leader, endpoint[0], endpoint[1], s.leader_epoch)
        partition_change.info("partition %s-%d: %s (leader %d, leader epoch %d, isr %s) from controller %d",
                              tp[0], tp[1], role, s.leader, s.leader_epoch, list(s.isr), controller_id)

    def _notify_leadership(self, leaders, followers, stopped) -> None:
        if not (leaders or followers or stopped):
            return
        for listener in self.leadership_listeners:
            try:
                listener(leaders, followers, stopped)
            except Exception:
                log.exception("leadership listener %r failed", listener)

    def stop_replicas(self, requested) -> list[Errors]:
        """StopReplica: [(topic, partition, delete, leader epoch)] -> the error of each. The logs to delete go
        in one batch (their dirs' checkpoints are written once, not once per partition)."""
        with self.state_change_lock:
            return self._stop_replicas(requested)

    def _stop_replicas(self, requested) -> list[Errors]:
        errors, stopped, to_delete = [], [], []
        for topic, partition, delete, leader_epoch in requested:
            tp = (topic, partition)
            current = self.partitions.get(tp)
            if tp in self.offline_partitions:
                errors.append(Errors.KAFKA_STORAGE_ERROR)
                continue
            # -2 (EpochDuringDelete) and -1 (no epoch) always apply; otherwise the epoch must not go backwards.
            if current is not None and leader_epoch >= 0 and leader_epoch < current.leader_epoch:
                errors.append(Errors.FENCED_LEADER_EPOCH)
                continue
            self.fetchers.remove_partition(tp)
            self.log_dir_mover.remove(tp)
            removed = self.partitions.pop(tp, None)
            if delete:
                to_delete.append(tp)
            elif removed is not None:
                removed.leader = -1
            partition_change.info("stopped replica %s-%d%s", topic, partition, " and deleted it" if delete else "")
            stopped.append((tp, leader_epoch if leader_epoch >= 0 else None))
            errors.append(Errors.NONE)
        self.fetchers.shutdown_idle()
        if to_delete:
            self.log_manager.delete_logs(to_delete)
            hosted = {t for t, _ in self.partitions}
            for topic in {t for t, _ in to_delete} - hosted:
                self.metrics.remove_topic(topic)
        self._complete_delayed(*(tp for tp, _ in stopped))
        self._notify_leadership([], [], stopped)
        return errors

    def alter_replica_log_dirs(self, partition_dirs: dict) -> dict:
        """{(topic, partition): log dir} -> {(topic, partition): error}: move each hosted replica to the log dir
        (NONE once its move started, or when it is there already; a move to another dir under way is cancelled
        first), remember the dir of a replica not hosted yet (REPLICA_NOT_AVAILABLE), LOG_DIR_NOT_FOUND for a
        dir that is not one of log.dirs, KAFKA_STORAGE_ERROR for an offline one, INVALID_TOPIC_EXCEPTION when the
        future log's directory name would pass 255 bytes."""
        errors = {}
        for tp, log_dir in partition_dirs.items():
            errors[tp] = self._alter_log_dir(tp, log_dir)
            log.info("alter log dir of %s-%d to %s: %s", tp[0], tp[1], log_dir, errors[tp].name)
        return errors

    def _alter_log_dir(self, tp, log_dir: str) -> Errors:
        lm = self.log_manager
        if len(log_future_dir_name(tp).encode()) > 255:
            return Errors.INVALID_TOPIC
        if log_dir not in lm.log_dirs:
            return Errors.LOG_DIR_NOT_FOUND
        if not lm.is_log_dir_online(log_dir) or tp in self.offline_partitions:
            return Errors.KAFKA_STORAGE_ERROR
        future = lm.get_future_log(tp)
        if future is not None and future.parent_dir != log_dir:
            self.log_dir_mover.remove(tp)
            lm.delete_future_log(tp)
        lm.maybe_update_preferred_log_dir(tp, log_dir)
        partition = self.partitions.get(tp)
        if partition is None:
            return Errors.REPLICA_NOT_AVAILABLE
        if partition.log.parent_dir != log_dir:
            try:
                lm.get_or_create_future_log(tp)
            except KafkaStorageError as e:
                log.warning("cannot create the future log of %s-%d in %s: %s", tp[0], tp[1], log_dir, e)
                return Errors.KAFKA_STORAGE_ERROR
            self.log_dir_mover.add(tp)
        return Errors.NONE

    def handle_log_dir_failure(self, log_dir: str) -> None:
        """A log dir failed (Kafka's ReplicaManager.handleLogDirFailure): its partitions go offline (their fetchers
        stop, waiting produces and fetches complete with KAFKA_STORAGE_ERROR), the log manager closes their logs
        (halting the broker if no dir is left), and /log_dir_event_notification tells the controller, which asks
        this broker about its replicas with LeaderAndIsr and moves the leadership of those offline."""
        if not self.log_manager.is_log_dir_online(log_dir):
            return
        log.warning("stopping serving replicas in dir %s", log_dir)
        offline = sorted(tp for tp, p in self.partitions.items() if p.log.parent_dir == log_dir)
        for tp in offline:
            self.fetchers.remove_partition(tp)
            self.partitions.pop(tp).leader = -1
            self.offline_partitions.add(tp)
        self.fetchers.shutdown_idle()
        for topic in {t for t, _ in offline}:
            if not any(t == topic for t, _ in self.partitions):
                self.metrics.remove_topic(topic)
        self._complete_delayed(*offline)
        log.warning("broker %d stopped fetchers for partitions %s because they are in the failed log directory %s",
                    self.broker_id, ",".join(f"{t}-{p}" for t, p in offline), log_dir)
        for tp, future in self.log_manager.future_logs.items():   # moves from or to the failed dir stop
            if tp in offline or future.parent_dir == log_dir:
                self.log_dir_mover.remove(tp)
        self.log_manager.handle_log_dir_failure(log_dir)
        for _ in range(60):
            try:
                self.zk.propagate_log_dir_event(self.broker_id)
                break
            except Exception as e:
                log.warning("writing the log dir event notification failed (%r); retrying", e)
                gevent.sleep(1)
        log.warning("stopped serving replicas in dir %s", log_dir)

    def _complete_delayed(self, *tps) -> None:
        self._fetch_news(*tps)
        self.produce_purgatory.check_and_complete_all(tps)

    def _fetch_news(self, *tps) -> None:
        """Something changed behind tps: followers at their end were so until now, the fetch sessions holding them
        read them again (the rounds waiting wake), and the fetches waiting on them check. A session's waiting round
        is checked once for all of tps, as is a fetch watching many of them: its check reads every partition it
        waits on, so a check per partition of a LeaderAndIsr for 100 000 partitions was quadratic."""
        sessions = set()
        self._isr_watch.update(tps)
        for tp in tps:
            partition = self.partitions.get(tp)
            if partition is not None:
                partition.settle_followers()
            sessions.update(self.fetch_sessions.changed(tp))
        self.fetch_purgatory.check_and_complete_all([*map(session_key, sessions), *tps])

    # ---- ISR ----------------------------------------------------------------------------------------------
    def write_isr(self, partition: Partition, new_isr: list[int]) -> bool:
        """The leader's ISR change in ZooKeeper, conditional on the partition's zkVersion."""
        return self._isr_version(partition, new_isr, self.zk.update_leader_and_isr(
            partition.topic, partition.index, self._isr_state(partition, new_isr)))

    def write_isr_expansions(self, expansions) -> None:
        """The ISR expansions one follower Fetch allowed, [(partition, new ISR)], written together: pipelined
        conditional setData (one ZooKeeper round trip for all, not one per partition: a restarted follower of
        thousands of partitions rejoins their ISRs in a few rounds). An expansion whose partition changed while
        ZooKeeper answered (a LeaderAndIsr, another write) is dropped; the follower's next Fetch tries again."""
        items = [(partition, new_isr, self._isr_state(partition, new_isr)) for partition, new_isr in expansions]
        try:
            versions = self.zk.update_leader_and_isrs([(partition.tp, state) for partition, _, state in items])
        except Exception as e:
            log.warning("writing %d ISR expansions failed (%r); the followers' next fetches try again", len(items), e)
            return
        for partition, new_isr, state in items:
            if (self.partitions.get(partition.tp) is not partition or not partition.is_leader
                    or partition.leader_epoch != state.leader_epoch or partition.zk_version != state.zk_version):
                continue
            if self._isr_version(partition, new_isr, versions.get(partition.tp)):
                partition.isr_written(new_isr, f"expanding ISR with broker {new_isr[-1]}")
                partition.maybe_increment_high_watermark()   # (its hook completes what waits on a moved HW)

    @staticmethod
    def _isr_state(partition: Partition, new_isr: list[int]) -> z.LeaderAndIsr:
        """The state znode's content with new_isr, conditional on the partition's cached zkVersion."""
        return z.LeaderAndIsr(partition.leader, partition.leader_epoch, new_isr, partition.controller_epoch,
                              partition.zk_version)

    def _isr_version(self, partition: Partition, new_isr: list[int], version: int | None) -> bool:
        """Take the zkVersion an ISR write got (None: a conflict, reported and left to the controller)."""
        if version is None:
            state_change.info("partition %s-%d: cached zkVersion %d differs from ZooKeeper's; skipping the ISR "
                              "update to %s (the controller's LeaderAndIsr will follow)", partition.topic,
                              partition.index, partition.zk_version, new_isr)
            return False
        partition.zk_version = version
        if len(new_isr) < len(partition.isr):
            self.metrics.isr_shrinks += 1
        else:
            self.metrics.isr_expands += 1
        self._isr_changes.add(partition.tp)
        return True

    def _isr_shrink_loop(self) -> None:
        interval = self.config["replica.lag.time.max.ms"] / 2000.0
        while True:
            gevent.sleep(interval)
            self.check_isrs()

    def check_isrs(self) -> None:
        """Drop the followers out of sync for replica.lag.time.max.ms from the ISRs led here. A follower quiet at
        a partition's end is caught up as long as its fetches go on (its round), so the check looks only at the
        partitions of its work list, and at every partition when a follower's round newly stalled."""
        now = self.clock.now_ms()
        lag = self.config["replica.lag.time.max.ms"]
        stalled = {f for f, r in self.follower_rounds.items() if now - r.last_ms > lag}
        tps = self.partitions.keys() if stalled - self._stalled_followers else self._isr_watch
        self._stalled_followers = stalled
        tps, self._isr_watch = list(tps), set()
        for i, tp in enumerate(tps):
            if i % 1000 == 999:
                yield_to_hub()   # (100 000 partitions: a pass takes longer than a ZooKeeper ping's due)
            partition = self.partitions.get(tp)
            if partition is None or not partition.is_leader:
                continue
            try:
                if partition.maybe_shrink_isr():
                    self._complete_delayed(tp)
                if not partition.followers_quiet():
                    self._isr_watch.add(tp)
            except Exception:
                self._isr_watch.add(tp)
                log.exception("ISR check of %s-%d failed", tp[0], tp[1])

    def _isr_notification_loop(self) -> None:
        while True:
            gevent.sleep(ISR_NOTIFICATION_INTERVAL_S)
            if self._isr_changes:
                changes, self._isr_changes = self._isr_changes, set()
                try:
                    self.zk.create_isr_change_notification(changes)
                except Exception:
                    log.exception("writing an ISR change notification failed; retrying")
                    self._isr_changes |= changes

    # ---- data path ----------------------------------------------------------------------------------------
    def leader_partition(self, tp) -> Partition:
        """The partition if this broker leads it; else UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER_OR_FOLLOWER."""
        partition = self.partitions.get(tp)
        if (partition is not None and partition.leader == self.broker_id and not partition.log.dir_failed
                and tp not in self.offline_partitions):
            return partition   # the common case first: an idle session's round asks this of every partition
        if tp in self.offline_partitions or partition is not None and partition.log.dir_failed:
            raise KafkaError(Errors.KAFKA_STORAGE_ERROR, f"Partition {tp[0]}-{tp[1]} is in an offline log directory")
        if partition is None:
            if self.metadata_cache.partition(*tp) is not None:
                raise KafkaError(Errors.NOT_LEADER_OR_FOLLOWER, f"this broker does not host {tp[0]}-{tp[1]}")
            raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"unknown partition {tp[0]}-{tp[1]}")
        if not partition.is_leader:
            raise KafkaError(Errors.NOT_LEADER_OR_FOLLOWER, f"broker {self.broker_id} is not the leader of "
                                                            f"{tp[0]}-{tp[1]}")
        return partition

    def readable_partition(self, tp, current_leader_epoch: int) -> Partition:
        """The partition, led or followed here, for a consumer that may read from a follower (Fetch v11+, Kafka's
        getPartitionOrException then localLogWithEpochOrException without requireLeader): its leader epoch checked
        first (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH); NOT_LEADER_OR_FOLLOWER when not hosted here."""
        partition = self.partitions.get(tp)
        if partition is None or partition.log.dir_failed or tp in self.offline_partitions:
            return self.leader_partition(tp)   # raises the error of a partition not hosted or offline
        partition.check_leader_epoch(current_leader_epoch)
        return partition

    def record_follower_log_starts(self, follower: int, log_starts) -> None:
        """The log start offsets a follower's fetch named ([(tp, offset)], Fetch v5+; a session names a partition
        when its offsets changed), kept for the replica choice of KIP-392 (Kafka's Replica.updateFetchState)."""
        for tp, log_start in log_starts:
            partition = self.partitions.get(tp)
            replica = partition.remote.get(follower) if partition is not None else None
            if replica is not None:
                replica.log_start_offset = log_start

    def _preferred_read_replica(self, partition: Partition, params: FetchParams, fetch_offset: int) -> int:
        """Where the leader sends a rack-aware consumer (selector.py), -1 to read here. Replicas count with the
        endpoint of their live broker on the consumer's listener (metadata cache)."""
        brokers = self.metadata_cache.brokers
        now = self.clock.now_ms()

        def view(broker_id: int, leo: int, since_ms: int, log_start: int) -> ReplicaView:
            broker = brokers.get(broker_id)
            if broker is None or params.listener not in broker.endpoints:
                return ReplicaView(broker_id, None, leo, since_ms, False, log_start)
            return ReplicaView(broker_id, broker.rack, leo, since_ms, True, log_start)
        own = partition.log
        leader = view(self.broker_id, own.log_end_offset, 0, own.log_start_offset)
        followers = [view(r, replica.log_end_offset, now - replica.caught_up_ms(), replica.log_start_offset)
                     for r, replica in partition.remote.items()]
        return preferred_read_replica(params.client_rack, leader, followers, fetch_offset)

    def append_records(self, acks: int, timeout_ms: int, entries: dict, produce_version: int | None,
                       internal: bool = False, callback=None) -> dict | None:
        """{tp: (error, base offset, log append time, log start offset, error message, record errors)}.

        internal=True is the coordinators' path (Kafka's internalTopicsAllowed with a coordinator origin): it
        may write internal topics, and produce_version None makes the validator treat the data as a broker
        append. With a callback, the records are appended now and the call returns None; the callback gets the
        results once acks are satisfied (at once if nothing needs waiting, else from its own greenlet)."""
        results = {}
        appended = {}
        for tp, records in entries.items():
            stats = None
            try:
                if tp[0] in INTERNAL_TOPICS and not internal:
                    raise KafkaError(Errors.INVALID_TOPIC, f"Cannot append to internal topic {tp[0]}")
                partition = self.leader_partition(tp)
                stats = self.metrics.topic(tp[0])
                stats.produce_requests += 1
                r = partition.append_as_leader(records, produce_version, acks)
                stats.bytes_in += len(records)
                stats.messages_in += r.record_count
                stats.produce_conversions += r.converted_count
                results[tp] = (Errors.NONE, r.first_offset, r.log_append_time, r.log_start_offset, None, [])
                if r.last_offset >= 0:
                    appended[tp] = r.last_offset
                self._fetch_news(tp)
            except KafkaError as e:
                if stats is not None:
                    stats.failed_produce_requests += 1
                if not isinstance(e, RecordValidationError) and e.code not in (
                        Errors.NOT_LEADER_OR_FOLLOWER, Errors.UNKNOWN_TOPIC_OR_PARTITION):
                    log.info("produce to %s-%d failed: %s: %s", tp[0], tp[1], e.code.name, e)
                partition = self.partitions.get(tp)
                start = partition.log.log_start_offset if partition is not None else -1
                record_errors = e.record_errors if isinstance(e, RecordValidationError) else []
                message = str(e) if produce_version is not None and produce_version >= 8 else None
                results[tp] = (e.code, -1, -1, start, message, record_errors)

        def merge(op):
            for tp, error in op.errors.items():
                if error:
                    start = results[tp][3]
                    results[tp] = (error, -1, -1, start, None, [])
            return results
        if acks == -1 and appended:
            op = DelayedProduce(max(0, timeout_ms), self, appended)
            completed = self.produce_purgatory.try_complete_else_watch(op, list(appended))
            if callback is not None:
                if completed:
                    callback(merge(op))
                else:
                    def wait_then_answer():
                        op.done.wait()
                        try:
                            callback(merge(op))
                        except Exception:
                            log.exception("append callback %r failed", callback)
                    gevent.spawn(wait_then_answer)
                return None
            if not completed:
                remote_wait(op.done)
            merge(op)
        if callback is not None:
            callback(results)
            return None
        return results

    def append_txn_markers(self, markers) -> list[dict]:
        """Write transaction markers; per marker {tp: error}, answered once each marker is replicated to the
        ISR (acks=-1) or failed. markers: [(producer id, epoch, committed, coordinator epoch, [tp])]."""
        results: list[dict] = []
        appended: dict = {}
        for producer_id, epoch, committed, coordinator_epoch, tps in markers:
            errors = {}
            for tp in tps:
                try:
                    if tp not in self.partitions:   # Kafka: no local log -> unknown, even if led elsewhere
                        raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"{tp[0]}-{tp[1]} is not hosted here")
                    partition = self.leader_partition(tp)
                    if partition.records_config.magic < 2:
                        raise KafkaError(Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT,
                                         f"{tp[0]}-{tp[1]} has a message format without transactions")
                    offset = partition.append_txn_marker(producer_id, epoch, committed, coordinator_epoch)
                    appended[tp] = max(offset, appended.get(tp, -1))
                    errors[tp] = Errors.NONE
                    self._fetch_news(tp)
                except KafkaError as e:
                    log.info("transaction marker of producer %d for %s-%d failed: %s: %s", producer_id, tp[0],
                             tp[1], e.code.name, e)
                    errors[tp] = e.code
            results.append(errors)
        if appended:
            op = DelayedProduce(MARKER_TIMEOUT_MS, self, appended)
            if not self.produce_purgatory.try_complete_else_watch(op, list(appended)):
                remote_wait(op.done)
            for errors in results:
                for tp in errors:
                    if op.errors.get(tp):
                        errors[tp] = op.errors[tp]
        for (producer_id, _, committed, _, _), errors in zip(markers, results):
            for tp, error in errors.items():
                if tp[0] == GROUP_METADATA_TOPIC and error == Errors.NONE:
                    try:
                        self.on_txn_marker_appended(producer_id, tp[1], committed)
                    except Exception:
                        log.exception("completing transactional offsets of producer %d on %s-%d failed",
                                      producer_id, tp[0], tp[1])
        return results

    def read_from_local_log(self, params: FetchParams, requests) -> tuple[dict, int, bool]:
        """Kafka's readFromLocalLog: read each partition in request order, within the fetch's limits.

        requests: [(tp, fetch offset, partition max bytes, current leader epoch)]. Returns (results, bytes read,
        whether to answer at once: a partition failed, or a consumer is sent to another replica); results: {tp:
        FetchPartitionData}, the records as a zero-copy file slice, the high watermark, last stable offset and log
        start offset, for a READ_COMMITTED consumer the aborted transactions the records overlap; or the
        partition's error. A partition reads at most min(its max bytes,
        what the previous ones left of params.max_bytes); the first with data gets its first batch whole even if
        larger, unless the fetch has a hard limit (v0-v2). A follower's read moves its state on this leader. A
        consumer's v11+ read (params.client_rack set) may be served by a follower; on the leader, with a replica
        selector, one sent to another replica reads nothing and gets its preferred_read_replica."""
        follower = params.replica_id
        isolation = params.isolation_level
        read_committed = isolation == READ_COMMITTED and follower < 0
        leader_only = params.client_rack is None
        rack_aware = self.rack_aware and bool(params.client_rack)
        zstd_refused = params.version < 10 and follower < 0
        throttling = follower >= 0 and bool(self.replication_quotas.leader.throttled)
        min_one = params.version > 2
        limit = params.max_bytes
        follower_round = self.follower_rounds.get(follower) if follower >= 0 else None
        results, total, errored = {}, 0, False
        expansions = [] if follower >= 0 else None
        for tp, fetch_offset, partition_max, leader_epoch in requests:
            data = FetchPartitionData(tp[1])
            try:
                if leader_only:
                    partition = self.leader_partition(tp)
                    partition.check_leader_epoch(leader_epoch)
                else:
                    partition = self.readable_partition(tp, leader_epoch)
                    if rack_aware and partition.is_leader:
                        data.preferred_read_replica = self._preferred_read_replica(partition, params, fetch_offset)
                        if data.preferred_read_replica >= 0:   # no read: the leader's offsets and the replica
                            log_ = partition.log
                            data.high_watermark, data.log_start_offset = log_.high_watermark, log_.log_start_offset
                            data.last_stable_offset = log_.last_stable_offset
                            results[tp] = data
                            errored = True   # answered at once (Kafka's DelayedFetch finds the leader's data)
                            continue
                if zstd_refused and partition.log.config.compression_type == "zstd":
                    raise KafkaError(Errors.UNSUPPORTED_COMPRESSION_TYPE,
                                     "zstd-compressed topics can only be fetched with Fetch v10 or later")
                piece, data.high_watermark, data.last_stable_offset, data.log_start_offset = partition.read(
                    fetch_offset, min(partition_max, limit), isolation, min_one, follower, follower_round, expansions)
                if follower >= 0:
                    self._isr_watch.add(tp)   # (the ISR check drops it again if the follower sits at the end)
                # Nothing to read until the partition changes (a session may leave it out): a follower also in the
                # ISR with the high watermark there (else its next read may expand the ISR or move the HW).
                data.at_end = not piece.length and fetch_offset == partition.fetchable_end(isolation, follower) and (
                    follower < 0 or fetch_offset == data.high_watermark and follower in partition.isr)
                if piece.length and throttling and self.leader_throttled(partition, follower):
                    piece = EMPTY_SLICE
                if read_committed:
                    upper = min(data.last_stable_offset, partition.log.segment_end_offset(fetch_offset))
                    data.aborted_transactions = partition.aborted_txns(fetch_offset, upper) if piece.length else []
                if piece.length:
                    data.records = [piece]
                    min_one = False
                    limit = max(0, limit - piece.length)
                    total += piece.length
            except KafkaError as e:
                data.error_code = e.code
                errored = True
            results[tp] = data
        if expansions:
            self.write_isr_expansions(expansions)
        return results, total, errored

    def leader_throttled(self, partition: Partition, follower: int) -> bool:
        """Whether a follower's fetch gets no records of the partition now (Kafka's shouldLeaderThrottle): the
        follower is not in the ISR, the partition is leader-throttled here and the leader rate is over."""
        quota = self.replication_quotas.leader
        return quota.is_throttled(partition.tp) and follower not in partition.isr and quota.is_quota_exceeded()

    def delete_records(self, tp, offset: int) -> int:
        """DeleteRecords on a partition led here: the new low watermark (its fetch sessions send it)."""
        low = self.leader_partition(tp).delete_records(offset)
        self._fetch_news(tp)
        return low

    def forget_follower_partitions(self, follower: int, tps) -> None:
        """A follower's session forgot these partitions: its later fetches no longer count as fetches of them."""
        for tp in tps:
            partition = self.partitions.get(tp)
            replica = partition.remote.get(follower) if partition is not None else None
            if replica is not None:
                replica.settle()
                self._isr_watch.add(tp)

    def fetch(self, params: FetchParams, requests, context=None) -> dict:
        """Kafka's fetchMessages: {tp: FetchPartitionData} of read_from_local_log, answered at once when the wait
        is 0, min_bytes were read, a partition failed or nothing was asked; else after waiting in the fetch
        purgatory (DelayedFetch) until min_bytes are readable or max_wait_ms is over, read again. The read after
        the wait runs here, on the fetch's own greenlet, not on the one that completed the wait (a producer's, or
        the purgatory's reaper). What a follower is sent of leader-throttled partitions is recorded against the
        leader rate. context: the fetch session round's (fetch_session.FetchContext), whose quiet partitions were
        not read: one that changes meanwhile joins the wait's check and is read with the others (context.more)."""
        if params.replica_id >= 0:
            follower_round = self.follower_rounds.get(params.replica_id)
            if follower_round is None:
                follower_round = self.follower_rounds[params.replica_id] = FollowerRound()
            follower_round.last_ms = self.clock.now_ms()
        results = self._read_or_wait(params, requests, context)
        quota = self.replication_quotas.leader
        if params.replica_id >= 0 and quota.throttled:
            sent = sum(data.records_size for tp, data in results.items() if data.records and quota.is_throttled(tp))
            if sent:
                quota.record(sent)
        return results

    def _read_or_wait(self, params: FetchParams, requests, context=None) -> dict:
        purgatory = self.fetch_purgatory
        checks = purgatory.checks
        results, size, errored = self.read_from_local_log(params, requests)   # a follower's read may move the HW
        session = getattr(context, "session", None)
        if params.max_wait_ms <= 0 or size >= params.min_bytes or errored or not requests and session is None:
            return results
        op = DelayedFetch(params, self, requests, context)
        keys = [r[0] for r in requests]
        if session is not None:
            keys.append(session_key(session.id))
        if checks == purgatory.checks:   # nothing changed behind any partition while reading
            purgatory.watch(op, keys)
            remote_wait(op.done)
        elif not purgatory.try_complete_else_watch(op, keys):
            remote_wait(op.done)
        if not size and not op.checked:
            # The wait ran out with no partition of the fetch changing: the empty read still holds (an idle
            # session's round reads its partitions once, not twice).
            return results
        requests = op.requests + context.more() if context is not None else requests
        return self.read_from_local_log(params, requests)[0]
