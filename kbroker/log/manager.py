"""LogManager: the partition logs in a broker's log dirs (Kafka's LogManager).

Startup, per log dir: the `.kafka_cleanshutdown` marker says whether the last shutdown was clean (it is removed
at once, so a crash during loading counts as unclean); `recovery-point-offset-checkpoint`,
`log-start-offset-checkpoint` and `replication-offset-checkpoint` are read (a malformed one is reported and
ignored, as Kafka resets to 0); every `<topic>-<partition>` directory is loaded as a Log, recovering from its
recovery point after an unclean shutdown, with its high watermark from the checkpoint; directories marked
`-delete` are deleted.

Moving replicas between log dirs (JBOD, Kafka's AlterReplicaLogDirs): a partition may have, besides its current
log, a future log `<topic>-<partition>.<id>-future` in another log dir, which the replica manager's mover
(replica/log_dir_mover.py) fills from the current log. Future logs are loaded at startup like the others (the
move resumes), count in every per-dir checkpoint, flush, retention, failure and shutdown, and
`replace_current_with_future_log` swaps one in: the current log's directory is renamed `-delete` first, then the
future one takes the plain name (both renames without yielding). A crash between the two renames leaves a
complete future log and no current one: loading promotes it (Kafka's opposite order leaves two current logs and
refuses to start). A log dir named in AlterReplicaLogDirs for a partition this broker does not host yet is
remembered (`maybe_update_preferred_log_dir`) and the log is created there when it comes.

Nothing runs on its own: the broker calls, on gevent timers, `cleanup_logs` (log.retention.check.interval.ms),
`flush_dirty_logs` (about every second: it performs the flush after each roll and the flush.ms flushes),
`checkpoint_recovery_points` (log.flush.offset.checkpoint.interval.ms), `checkpoint_log_start_offsets`
(log.flush.start.offset.checkpoint.interval.ms), `checkpoint_high_watermarks`
(replica.high.watermark.checkpoint.interval.ms) and `delete_pending_files` (about every second: segments and
logs whose file.delete.delay.ms has passed). fsync and file deletion go through run_blocking(fn). The two
per-second tasks visit only the logs with such work (Log.on_periodic_work adds a log when it gets some, a
round drops it when it has none left): with 10 000 idle partitions, a scan of every log each second was a
sixth of an idle broker's CPU. Kafka schedules a roll's flush at the roll and deletes each segment on its
own timer: the same, event-driven. The three checkpoints pass over the logs only when something they write
moved since their last pass (Log.high_watermark_moves, Log.changes, and the number of logs): an idle broker's
checkpoints cost nothing per partition.

Retention (`cleanup_logs`) deletes by retention.ms / retention.bytes only the logs whose cleanup.policy includes
`delete` (Log.delete_old_segments); for `compact` logs it only drops segments below the log start offset.
The log cleaner (cleaner.py) compacts the logs whose policy includes `compact`: `start_cleaner(config)` turns
it on with the broker's log.cleaner.* settings and `clean_logs` (every log.cleaner.backoff.ms) runs one round.
Its `cleaner-offset-checkpoint` is read at start-up, follows truncations and deletions, and is written after
each cleaning and at shutdown. A log being cleaned is skipped by retention; the cleaner applies it after.

Log dir failures (Kafka's): an OSError in a dir's files (a log's appends, rolls, flushes, reads, the
checkpoints) is reported to `dir_failure` (a LogDirFailureChannel) and raised as KafkaStorageError. A dir that
cannot be created, is not a usable directory, or whose meta.properties could not be read is offline from the
start, one whose logs fail to load is reported. `handle_log_dir_failure(dir)` (called by the replica manager's
failure handler) takes the dir offline: its logs are closed without writing and forgotten, nothing more is
written there (no checkpoint, no clean shutdown marker, so its logs are recovered at the next start), new logs
go to the live dirs only, and a replica that is not new is not created while a dir is offline (its log may be
there). With no live dir left the broker halts. `offline_dirs`, `live_log_dirs`, `is_log_dir_online(dir)`.
"""
from __future__ import annotations

import logging
import os
import shutil
from typing import Callable, Iterable, Mapping

from ..clock import Clock
from ..common.hub import yield_to_hub
from .checkpoint import (LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
                         OffsetCheckpointFile, fsync_dir)
from .cleaner import CleanerConfig, LogCleaner
from .config import LogConfig
from .dir_failure import LogDirFailureChannel
from .errors import CorruptCheckpoint, KafkaStorageError
from .log import (CLEAN_SHUTDOWN_FILE, DELETE_DIR_SUFFIX, Log, RunBlocking, TopicPartition, log_delete_dir_name,
                  log_dir_name, log_future_dir_name, parse_topic_partition)

logger = logging.getLogger("kbroker.log")

SHUTDOWN_BATCH = 100   # logs flushed and closed by one thread-pool task at shutdown
LOAD_YIELD_EVERY = 50  # logs loaded at start-up between two yields to the hub (its ZooKeeper session's pings)


class LogManager:
    def __init__(self, log_dirs: list[str], default_config: LogConfig, clock: Clock | None = None,
                 run_blocking: RunBlocking | None = None, topic_configs: Mapping[str, LogConfig] | None = None,
                 cleaner_config: CleanerConfig | None = None, initial_offline_dirs: Iterable[str] = (),
                 dir_failure: LogDirFailureChannel | None = None, halt: Callable[[int], None] = os._exit,
                 run_blocking_all: Callable[[list], list] | None = None):
        """Create missing log dirs and load every log in them. topic_configs: the LogConfig of topics with
        overrides (others get default_config). cleaner_config: the log cleaner's settings (default: the
        cleaner is off until start_cleaner). initial_offline_dirs: dirs found unusable before (their
        meta.properties could not be read). dir_failure: where I/O errors are reported (the broker's channel).
        halt(status) ends the process when every log dir has failed, as Kafka halts. run_blocking_all(fns):
        run_blocking of several functions at once, their results in order (default: one after the other)."""
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.default_config = default_config
        self.dir_failure = dir_failure or LogDirFailureChannel()
        self.offline_dirs: set[str] = set()
        self._halt = halt
        self._clock = clock or Clock()
        self._run_blocking: RunBlocking = run_blocking or (lambda fn: fn())
        self._run_blocking_all = run_blocking_all or (lambda fns: [self._run_blocking(fn) for fn in fns])
        self._topic_configs = dict(topic_configs or {})
        self._logs: dict[TopicPartition, Log] = {}
        self._future_logs: dict[TopicPartition, Log] = {}
        self._preferred_dirs: dict[TopicPartition, str] = {}
        self._logs_to_delete: list[tuple[int, Log]] = []
        self._checkpointed: dict[str, dict[TopicPartition, int]] = {}   # path -> the offsets last written there
        self._checkpoint_marks: dict[str, tuple | None] = {}   # checkpoint name -> what its last pass saw (_logs_mark)
        self._with_periodic_work: set[Log] = set()    # may have a flush or deletions due (see _track)
        self._add_periodic_work = self._with_periodic_work.add     # bound once: every log's on_periodic_work
        self._create_and_validate_log_dirs({os.path.abspath(d) for d in initial_offline_dirs})
        self.cleaner = LogCleaner(self.live_log_dirs, cleaner_config or CleanerConfig(enable=False), self._clock,
                                  self._run_blocking, lambda: self._logs)
        for log_dir in self.live_log_dirs:
            try:
                self._load_logs(log_dir)
            except OSError as e:
                # Kafka: the dir goes offline (its failure is handled once the replica manager listens)
                self.dir_failure.maybe_add_offline_log_dir(log_dir, f"Error while loading log dir {log_dir}", e)
        self._promote_orphan_future_logs()

    def _create_and_validate_log_dirs(self, initial_offline: set[str]) -> None:
        """Kafka's createAndValidateLogDirs: a dir that cannot be created or is not a readable directory is
        offline from the start (no failure notification: it never was online); none usable ends the start-up."""
        for log_dir in self.log_dirs:
            try:
                if log_dir in initial_offline:
                    raise OSError(f"Failed to load {log_dir} during broker startup")
                os.makedirs(log_dir, exist_ok=True)
                if not os.path.isdir(log_dir) or not os.access(log_dir, os.R_OK | os.W_OK | os.X_OK):
                    raise OSError(f"{log_dir} is not a readable log directory.")
            except OSError as e:
                self.offline_dirs.add(log_dir)
                self.dir_failure.maybe_add_offline_log_dir(
                    log_dir, f"Failed to create or validate data directory {log_dir}", e)
        if not self.live_log_dirs:
            raise KafkaStorageError(f"none of the specified log dirs from {', '.join(self.log_dirs)} can be "
                                    f"created or validated")

    @property
    def live_log_dirs(self) -> list[str]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def is_log_dir_online(self, log_dir: str) -> bool:
        return os.path.abspath(log_dir) not in self.offline_dirs

    def handle_log_dir_failure(self, log_dir: str) -> list[TopicPartition]:
        """Stop serving the logs in a failed dir (Kafka's LogManager.handleLogDirFailure): the dir goes offline,
        its logs are closed without writing and forgotten, its checkpoints are no longer written. Halts when no
        log dir is left. Returns the partitions whose logs were there."""
        log_dir = os.path.abspath(log_dir)
        if not self.is_log_dir_online(log_dir):
            return []
        logger.warning("stopping serving logs in dir %s", log_dir)
        self.offline_dirs.add(log_dir)
        if not self.live_log_dirs:
            logger.critical("Shutdown broker because all log dirs in %s have failed", ", ".join(self.log_dirs))
            self._halt(1)
        gone = {tp: log for tp, log in self._logs.items() if log.parent_dir == log_dir}
        for tp, log in gone.items():
            del self._logs[tp]
            self.cleaner.forget(log)
            log.close_handlers()
        for tp, log in list(self._future_logs.items()):
            if log.parent_dir == log_dir:
                del self._future_logs[tp]
                log.close_handlers()
        self.cleaner.handle_log_dir_failure(log_dir)
        self._logs_to_delete = [(t, log) for t, log in self._logs_to_delete if log.parent_dir != log_dir]
        logger.warning("logs for partitions %s are offline due to failure on log directory %s",
                       ",".join(log_dir_name(tp) for tp in sorted(gone)), log_dir)
        return sorted(gone)

    def _config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    def _read_checkpoint(self, log_dir: str, name: str) -> dict[TopicPartition, int]:
        try:
            return OffsetCheckpointFile(os.path.join(log_dir, name)).read()
        except CorruptCheckpoint as e:
            logger.warning("error reading %s of log dir %s, ignoring it: %s", name, log_dir, e)
            return {}

    def _load_logs(self, log_dir: str) -> None:
        marker = os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        if clean:
            logger.info("skipping recovery for all logs in %s since the clean shutdown file was found", log_dir)
            os.unlink(marker)
        else:
            logger.info("attempting recovery for all logs in %s since no clean shutdown file was found", log_dir)
        recovery_points = self._read_checkpoint(log_dir, RECOVERY_POINT_CHECKPOINT)
        log_start_offsets = self._read_checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT)
        high_watermarks = self._read_checkpoint(log_dir, REPLICATION_OFFSET_CHECKPOINT)
        for i, name in enumerate(sorted(os.listdir(log_dir))):
            if i % LOAD_YIELD_EVERY == LOAD_YIELD_EVERY - 1:
                yield_to_hub()   # tens of thousands of logs take longer than the ZooKeeper session timeout
            path = os.path.join(log_dir, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                logger.info("deleting %s, a partition directory marked for deletion", path)
                self._run_blocking(lambda: shutil.rmtree(path, ignore_errors=True))
                continue
            try:
                tp = parse_topic_partition(name)
            except ValueError:
                logger.warning("ignoring %s in log dir %s: not a partition directory", name, log_dir)
                continue
            log = Log(path, self._config_for(tp[0]), recovery_points.get(tp, 0), log_start_offsets.get(tp, 0),
                      self._clock, had_clean_shutdown=clean, run_blocking=self._run_blocking,
                      dir_failure=self.dir_failure)
            log.update_high_watermark(high_watermarks.get(tp, log.log_start_offset))
            logs = self._future_logs if log.is_future else self._logs
            if tp in logs:
                raise KafkaStorageError(f"duplicate {'future ' if log.is_future else ''}log directories for "
                                        f"{log_dir_name(tp)} are found in both {logs[tp].dir} and {path}")
            if not log.is_future:
                self.cleaner.attach(log)
            logs[tp] = log
            self._track(log)

    def _promote_orphan_future_logs(self) -> None:
        """A future log without a current one is a finished move cut by a crash between its two renames (the
        current log's directory was renamed `-delete`, and deleted by loading): it becomes the current log.
        Not while a log dir is offline, where the current log may be."""
        orphans = [tp for tp in self._future_logs if tp not in self._logs]
        if not orphans or self.offline_dirs or any(self.dir_failure.has_failed(d) for d in self.log_dirs):
            return
        for tp in orphans:
            log = self._future_logs[tp]
            try:
                log.rename_dir(log_dir_name(tp))
            except OSError as e:
                self.dir_failure.maybe_add_offline_log_dir(log.parent_dir, f"Error while renaming {log.dir}", e)
                continue
            del self._future_logs[tp]
            self.cleaner.attach(log)
            self._logs[tp] = log
            logger.warning("future log of partition %s had no current log (a move interrupted by a crash after "
                           "retiring the current log): %s is now the current log", log_dir_name(tp), log.dir)

    # ---- logs -----------------------------------------------------------------------------------------------------

    @property
    def logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self._logs.get(tp)

    def _next_log_dirs(self) -> list[str]:
        """The live log dirs, those holding the fewest partitions first (counted once per call only with several
        dirs: creating thousands of partitions must not cost the square of their number)."""
        live = self.live_log_dirs
        if len(live) == 1:
            return live
        counts = {d: 0 for d in live}
        for log in (*self._logs.values(), *self._future_logs.values()):
            counts[log.parent_dir] = counts.get(log.parent_dir, 0) + 1
        return sorted(live, key=lambda d: counts[d])

    def get_or_create_log(self, tp: TopicPartition, config: LogConfig | None = None, is_new: bool = True) -> Log:
        """The partition's log, created empty if it has none: in the log dir AlterReplicaLogDirs asked for, else in
        the one holding the fewest partitions. As Kafka's getOrCreateLog: a replica that is not new (is_new false)
        is not created while a log dir is offline, since its log may be there (KafkaStorageError); a dir failing
        the creation is reported and the next one is tried."""
        log = self._logs.get(tp)
        if log is not None:
            return log
        if not is_new and self.offline_dirs:
            raise KafkaStorageError(f"Can not create log for {log_dir_name(tp)} because log directories "
                                    f"{','.join(sorted(self.offline_dirs))} are offline")
        preferred = self._preferred_dirs.get(tp)
        tried = [preferred] if preferred is not None else self._next_log_dirs()
        for parent in tried:
            if self.dir_failure.has_failed(parent):
                continue
            try:
                log = self._new_log(tp, parent, config)
            except OSError as e:
                self._creation_failed(tp, parent, e)
                continue
            return self._add_created(tp, log)
        raise KafkaStorageError(f"No log directories available. Tried {', '.join(tried)}")

    def get_or_create_logs(self, wanted: Mapping) -> dict:
        """{tp: (config or None, is_new)} -> {tp: its log, or the KafkaError refusing it}: get_or_create_log for
        many partitions, the new logs' directories and files made in one run_blocking call, off the hub (a
        LeaderAndIsr of thousands of new partitions blocked the hub for seconds, one file creation after
        another). A log whose creation fails is tried again as get_or_create_log does, in the other dirs."""
        out: dict = {}
        live = [d for d in self._next_log_dirs() if not self.dir_failure.has_failed(d)]
        counts = {d: sum(1 for log in self._logs.values() if log.parent_dir == d) for d in live} \
            if len(live) > 1 else {}
        placed = {}
        for tp, (config, is_new) in wanted.items():
            if tp in self._logs:
                out[tp] = self._logs[tp]
            elif not is_new and self.offline_dirs:
                out[tp] = KafkaStorageError(f"Can not create log for {log_dir_name(tp)} because log directories "
                                            f"{','.join(sorted(self.offline_dirs))} are offline")
            elif not live:
                out[tp] = KafkaStorageError("No log directories available")
            else:
                parent = self._preferred_dirs.get(tp) or (min(live, key=counts.get) if counts else live[0])
                counts[parent] = counts.get(parent, 0) + 1
                placed[tp] = parent

        def create() -> dict:
            made = {}
            for tp, parent in placed.items():
                try:
                    made[tp] = self._new_log(tp, parent, wanted[tp][0])
                except OSError as e:
                    made[tp] = e
            return made
        for tp, made in self._run_blocking(create).items():
            if isinstance(made, OSError):
                self._creation_failed(tp, placed[tp], made)
                try:
                    made = self.get_or_create_log(tp, *wanted[tp])
                except KafkaStorageError as e:
                    made = e
            elif tp in self._logs:   # created meanwhile (the hub ran while this batch was made): keep that one
                made.close_handlers()
                made = self._logs[tp]
            else:
                made = self._add_created(tp, made)
            out[tp] = made
        return out

    def _new_log(self, tp: TopicPartition, parent: str, config: LogConfig | None) -> Log:
        return Log(os.path.join(parent, log_dir_name(tp)), config or self._config_for(tp[0]), 0, 0, self._clock,
                   had_clean_shutdown=True, run_blocking=self._run_blocking, dir_failure=self.dir_failure)

    def _creation_failed(self, tp: TopicPartition, parent: str, error: OSError) -> None:
        self.dir_failure.maybe_add_offline_log_dir(
            parent, f"Error while creating log for {log_dir_name(tp)} in dir {parent}", error)

    def _add_created(self, tp: TopicPartition, log: Log) -> Log:
        self.cleaner.attach(log)
        self._logs[tp] = log
        self._track(log)
        self._preferred_dirs.pop(tp, None)
        logger.info("created log for partition %s in %s", log_dir_name(tp), log.parent_dir)
        return log

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        """New settings for a topic (its overrides changed): its logs and the ones created later."""
        self.update_topic_configs({topic: config})

    def update_topic_configs(self, configs: Mapping[str, LogConfig]) -> None:
        """update_topic_config of many topics. A topic's logs hold the config it had here (_config_for): the logs
        are walked, once, only when a topic's config differs from that (not for every new topic a LeaderAndIsr
        brings)."""
        changed = {t: c for t, c in configs.items() if c != self._config_for(t)}
        self._topic_configs.update(configs)
        if not changed:
            return
        for (t, _), log in (*self._logs.items(), *self._future_logs.items()):
            config = changed.get(t)
            if config is not None:
                log.update_config(config)

    def reconfigure_defaults(self, broker_values: Mapping) -> None:
        """The broker's defaults of topic configs changed (a dynamic broker config): every log takes them, except
        for what its topic overrides (Kafka's DynamicLogConfig.reconfigure)."""
        self.default_config = LogConfig.from_props(broker_values)
        self._topic_configs = {topic: LogConfig.from_props(broker_values, config.overrides())
                               for topic, config in self._topic_configs.items()}
        rebuilt: dict[str, LogConfig] = {}
        for (topic, _), log in (*self._logs.items(), *self._future_logs.items()):
            # A log's own config knows its topic's overrides (also for logs created with an explicit config).
            if topic not in rebuilt:
                rebuilt[topic] = LogConfig.from_props(broker_values, log.config.overrides())
            log.update_config(rebuilt[topic])

    # ---- future logs (replicas moving between log dirs) ---------------------------------------------------------

    @property
    def future_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._future_logs)

    def get_future_log(self, tp: TopicPartition) -> Log | None:
        return self._future_logs.get(tp)

    def maybe_update_preferred_log_dir(self, tp: TopicPartition, log_dir: str) -> None:
        """Remember log_dir for the partition unless its current or future log is there already: a log created
        later (get_or_create_log, get_or_create_future_log) goes there (Kafka's maybeUpdatePreferredLogDir)."""
        if all(log is None or log.parent_dir != log_dir for log in (self._logs.get(tp), self._future_logs.get(tp))):
            self._preferred_dirs[tp] = log_dir

    def get_or_create_future_log(self, tp: TopicPartition) -> Log:
        """The partition's future log, created empty (with the current log's config) in its preferred log dir if
        it has none; ValueError without a preferred dir, or when that is the current log's dir;
        KafkaStorageError when the dir is offline or the creation fails (the dir is reported)."""
        log = self._future_logs.get(tp)
        if log is not None:
            return log
        current = self._logs[tp]
        log_dir = self._preferred_dirs.get(tp)
        if log_dir is None or log_dir == current.parent_dir:
            raise ValueError(f"no log dir to create the future log of {log_dir_name(tp)} in")
        if not self.is_log_dir_online(log_dir) or self.dir_failure.has_failed(log_dir):
            raise KafkaStorageError(f"Can not create the future log of {log_dir_name(tp)} because log directory "
                                    f"{log_dir} is offline")
        try:
            log = Log(os.path.join(log_dir, log_future_dir_name(tp)), current.config, 0, 0, self._clock,
                      had_clean_shutdown=True, run_blocking=self._run_blocking, dir_failure=self.dir_failure)
        except OSError as e:
            message = f"Error while creating the future log of {log_dir_name(tp)} in dir {log_dir}"
            self.dir_failure.maybe_add_offline_log_dir(log_dir, message, e)
            raise KafkaStorageError(f"{message}: {e}") from e
        del self._preferred_dirs[tp]
        self._future_logs[tp] = log
        self._track(log)
        logger.info("created future log for partition %s in %s", log_dir_name(tp), log.dir)
        return log

    def replace_current_with_future_log(self, tp: TopicPartition) -> tuple[Log, Log]:
        """The future log becomes the partition's log: the current log's directory is renamed `-delete` (and
        deleted after file.delete.delay.ms), then the future one takes the plain name (if that fails, the current
        log gets its name back and the OSError is raised). Nothing yields: the caller switches the partition to
        the new log before anything else runs. Returns (new log, old log); write_log_dir_checkpoints of the old
        log's dir should follow."""
        source, dest = self._logs[tp], self._future_logs[tp]
        dest.update_high_watermark(source.high_watermark)
        source.rename_dir(log_delete_dir_name(tp))
        try:
            dest.rename_dir(log_dir_name(tp))
        except OSError:
            source.rename_dir(log_dir_name(tp))
            raise
        del self._future_logs[tp]
        self._logs[tp] = dest
        self.cleaner.forget(source)
        self.cleaner.attach(dest)
        self._logs_to_delete.append((self._clock.monotonic_ms() + source.config.file_delete_delay_ms, source))
        logger.info("the current log of partition %s is replaced by its future log: it moved from %s to %s",
                    log_dir_name(tp), source.parent_dir, dest.parent_dir)
        return dest, source

    def delete_future_log(self, tp: TopicPartition) -> Log | None:
        """Drop the partition's future log (a move cancelled): renamed `-delete`, deleted later."""
        log = self._retire_future_log(tp)
        if log is not None:
            self.write_log_dir_checkpoints(log.parent_dir)
        return log

    def _retire_future_log(self, tp: TopicPartition) -> Log | None:
        log = self._future_logs.pop(tp, None)
        if log is not None:
            log.rename_dir(log_delete_dir_name(tp))
            self._logs_to_delete.append((self._clock.monotonic_ms() + log.config.file_delete_delay_ms, log))
            logger.info("future log of partition %s is renamed to %s and is scheduled for deletion",
                        log_dir_name(tp), log.dir)
        return log

    def write_log_dir_checkpoints(self, log_dir: str) -> None:
        """The recovery point and log start offset checkpoints of one log dir (after a log left it)."""
        self._checkpoint_recovery_points_in(log_dir)
        self._checkpoint_log_start_offsets_in(log_dir)

    def delete_logs(self, tps) -> dict[TopicPartition, Log]:
        """Take the logs out: rename each directory `<topic>-<partition>.<uuid>-delete` now and delete it after
        file.delete.delay.ms; their future logs too. Then, once for all (Kafka 2.8's asyncDelete of a set: a
        topic of thousands of partitions must not rewrite its dir's checkpoints once per partition), the
        checkpoints of the dirs they left. Returns {tp: removed log} of those that had one."""
        removed, dirs = {}, set()
        for tp in tps:
            future = self._retire_future_log(tp)
            if future is not None:
                dirs.add(future.parent_dir)
            log = self._logs.pop(tp, None)
            if log is None:
                continue
            log.rename_dir(log_delete_dir_name(tp))
            dirs.add(log.parent_dir)
            self.cleaner.forget(log)
            self._logs_to_delete.append((self._clock.monotonic_ms() + log.config.file_delete_delay_ms, log))
            logger.info("log for partition %s is renamed to %s and is scheduled for deletion", log_dir_name(tp),
                        log.dir)
            removed[tp] = log
        for log_dir in sorted(dirs):
            self.write_log_dir_checkpoints(log_dir)
        if removed:
            self.cleaner.write_checkpoints(only_changed=True)
            self.delete_pending_files()
        return removed

    # ---- periodic work ----------------------------------------------------------------------------------------

    def delete_pending_files(self, force: bool = False) -> None:
        """Delete the segments and logs whose file.delete.delay.ms has passed (all of them with force)."""
        for log in self._logs_with_periodic_work():
            log.delete_pending_segments(force)
        now = self._clock.monotonic_ms()
        due = [log for t, log in self._logs_to_delete if force or t <= now]
        self._logs_to_delete = [(t, log) for t, log in self._logs_to_delete if not (force or t <= now)]
        for log in due:
            self._run_blocking(log.delete)
            logger.info("deleted log for partition %s in %s", log_dir_name(log.topic_partition), log.dir)

    def cleanup_logs(self) -> int:
        """Retention on every log (by time and size only where cleanup.policy includes delete), except a log the
        cleaner is working on; returns the number of segments deleted."""
        total = 0
        for log in list(self._logs.values()):   # (not items(): 20 000 pairs alive for the pass fed the collector)
            if log.topic_partition in self.cleaner.in_progress or log.dir_failed:
                continue
            try:
                total += log.delete_old_segments()
            except Exception:
                logger.exception("%s error while applying retention", log.name)
        for log in list(self._future_logs.values()):   # below the log start offset the mover copied
            if not log.dir_failed:
                total += log.delete_old_segments()
        return total

    def start_cleaner(self, config: CleanerConfig) -> None:
        """Turn the log cleaner on (or off) with these settings (the broker's log.cleaner.*)."""
        self.cleaner.config = config

    def clean_logs(self) -> int:
        """One round of log compaction (the broker calls it every log.cleaner.backoff.ms): the dirtiest
        compacted logs above their min.cleanable.dirty.ratio, off the hub. Returns how many logs were cleaned."""
        return self.cleaner.clean_logs()

    def _track(self, log: Log) -> None:
        """Have the periodic tasks visit the log now (loading may have left snapshots to fsync) and whenever it
        gets periodic work."""
        log.on_periodic_work = self._add_periodic_work
        self._with_periodic_work.add(log)

    def _logs_with_periodic_work(self) -> list[Log]:
        """The hosted logs that may have a flush or deletions due; forgets the others (and logs no longer
        hosted, or whose dir failed)."""
        out = []
        for log in list(self._with_periodic_work):
            hosted = (self._future_logs if log.is_future else self._logs).get(log.topic_partition)
            if hosted is log and not log.dir_failed and log.has_periodic_work:
                out.append(log)
            else:
                self._with_periodic_work.discard(log)
        return out

    def flush_dirty_logs(self) -> None:
        for log in self._logs_with_periodic_work():
            try:
                log.maybe_flush()
            except Exception:
                logger.exception("%s error while flushing", log.name)

    def _logs_in_dir(self, log_dir: str) -> dict[TopicPartition, Log]:
        """Current and future logs in the dir (a partition's two logs are never in the same dir)."""
        return {tp: log for logs in (self._logs, self._future_logs) for tp, log in logs.items()
                if log.parent_dir == log_dir}

    def _write_checkpoint(self, log_dir: str, name: str, offsets: dict[TopicPartition, int]) -> None:
        """Write a checkpoint file, unless it already holds these offsets (10 000 idle partitions would rewrite
        and fsync the same lines every few seconds); an OSError takes the dir offline (KafkaStorageError)."""
        path = os.path.join(log_dir, name)
        if self._checkpointed.get(path) == offsets:
            return
        self._checkpointed.pop(path, None)
        try:
            self._run_blocking(lambda: OffsetCheckpointFile(path).write(offsets))
            self._checkpointed[path] = offsets
        except OSError as e:
            message = f"Error while writing to checkpoint file {path}"
            self.dir_failure.maybe_add_offline_log_dir(log_dir, message, e)
            raise KafkaStorageError(f"{message}: {e}") from e

    def _checkpoint_recovery_points_in(self, log_dir: str) -> None:
        """Write the recovery points, then drop the producer snapshots recovery no longer needs (as Kafka)."""
        logs = self._logs_in_dir(log_dir)
        self._write_checkpoint(log_dir, RECOVERY_POINT_CHECKPOINT, {tp: log.recovery_point for tp, log in logs.items()})
        for log in logs.values():
            log.delete_snapshots_after_recovery_point_checkpoint()

    def _checkpoint_log_start_offsets_in(self, log_dir: str) -> None:
        # as Kafka, only the logs whose start offset is above their first segment's base offset
        self._write_checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT,
                               {tp: log.log_start_offset for tp, log in self._logs_in_dir(log_dir).items()
                                if log.log_start_offset > log.segments[0].base_offset})

    def _checkpoint_high_watermarks_in(self, log_dir: str, given: Mapping[TopicPartition, int]) -> None:
        self._write_checkpoint(log_dir, REPLICATION_OFFSET_CHECKPOINT,
                               {tp: given.get(tp, log.high_watermark)
                                for tp, log in self._logs_in_dir(log_dir).items()})

    def _checkpoint_live_dirs(self, write: Callable[[str], None]) -> None:
        """write(dir) for every live log dir; a dir failing meanwhile is logged (it went offline) and the others
        are still written."""
        for log_dir in self.live_log_dirs:
            if self.dir_failure.has_failed(log_dir):
                continue
            try:
                write(log_dir)
            except KafkaStorageError as e:
                logger.error("checkpoint in %s failed: %s", log_dir, e)

    def _logs_mark(self, moves: int) -> tuple:
        """What a periodic pass over every log saw: a process-wide count of the moves it follows, and how many
        logs there were (a log gone or a future log taking over change the counts; a new log counts a move)."""
        return moves, len(self._logs), len(self._future_logs)

    def checkpoint_recovery_points(self) -> None:
        """`recovery-point-offset-checkpoint` of every live log dir (then the producer snapshots recovery no longer
        needs go); nothing to do, without a pass over the logs, when no log changed since the last (Log.changes)."""
        self._checkpoint_if_changed(RECOVERY_POINT_CHECKPOINT, self._checkpoint_recovery_points_in)

    def checkpoint_log_start_offsets(self) -> None:
        """`log-start-offset-checkpoint` of every live log dir; skipped as the recovery points are."""
        self._checkpoint_if_changed(LOG_START_OFFSET_CHECKPOINT, self._checkpoint_log_start_offsets_in)

    def _checkpoint_if_changed(self, name: str, write) -> None:
        mark = self._logs_mark(Log.changes)
        if mark != self._checkpoint_marks.get(name):
            self._checkpoint_live_dirs(write)
            self._checkpoint_marks[name] = mark

    def checkpoint_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int] | None = None) -> None:
        """`replication-offset-checkpoint` of every live log dir: the given high watermarks, and each log's own
        for partitions not given. Nothing to do, without a pass over the logs, when no high watermark moved and
        no log came or went since the last (an idle broker's every 5 s)."""
        mark = self._logs_mark(Log.high_watermark_moves)
        if not high_watermarks and mark == self._checkpoint_marks.get(REPLICATION_OFFSET_CHECKPOINT):
            return
        self._checkpoint_live_dirs(lambda d: self._checkpoint_high_watermarks_in(d, high_watermarks or {}))
        self._checkpoint_marks[REPLICATION_OFFSET_CHECKPOINT] = None if high_watermarks else mark

    # ---- shutdown ---------------------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Flush and close every log, write the checkpoints, and mark each log dir cleanly shut down."""
        self.cleaner.shutdown()
        try:
            self.cleaner.write_checkpoints()
        except Exception:
            logger.exception("error writing the cleaner checkpoints")
        for log_dir in self.live_log_dirs:   # an offline dir gets no clean shutdown marker: recovery at restart
            if self.dir_failure.has_failed(log_dir):
                continue
            logs = list(self._logs_in_dir(log_dir).values())
            try:
                # Each log flushed then closed (as Kafka's shutdown, which fsyncs each file), off the hub, batches
                # of SHUTDOWN_BATCH logs at once: one after the other, the fsyncs of thousands of logs took ~20 s.
                self._run_blocking_all([lambda batch=logs[i:i + SHUTDOWN_BATCH]: [
                    step() for log in batch for step in (log.flush, log.close)]
                    for i in range(0, len(logs), SHUTDOWN_BATCH)])
                self._checkpoint_recovery_points_in(log_dir)
                self._checkpoint_log_start_offsets_in(log_dir)
                self._checkpoint_high_watermarks_in(log_dir, {})
            except Exception:
                logger.exception("error while shutting down the logs in %s; not marking it cleanly shut down",
                                 log_dir)
                continue
            self._run_blocking(lambda: _write_clean_shutdown_marker(log_dir))
        for _, log in self._logs_to_delete:
            self._run_blocking(log.delete)
        self._logs_to_delete = []
        self._logs = {}
        self._future_logs = {}


def _write_clean_shutdown_marker(log_dir: str) -> None:
    with open(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE), "w"):
        pass
    fsync_dir(log_dir)
