"""Replica fetchers: followers copy their leaders' logs with the Fetch API (replica_id = this broker's id).

One greenlet per source broker (Kafka's ReplicaFetcherThread, num.replica.fetchers = 1). A partition added
to a fetcher first truncates: it asks the leader, with OffsetForLeaderEpoch, where its own latest leader epoch
ends in the leader's log, and truncates everything after that (no divergent suffix survives a leader
change). Then it fetches from its log end offset (Fetch v11: long-polling with replica.fetch.wait.max.ms and
replica.fetch.min.bytes), checks each entry's CRC, appends with the leader's offsets and takes the leader's
high watermark (capped by its own log end offset). Fetch responses are decoded by protocol.hotpath, so the
records appended are slices of the received frame, never copied. Fetches go through an incremental fetch
session (protocol.client.fetch_session): after the first full request, a request names only the partitions
whose fetch offset, log start offset or leader epoch moved, or which joined or left the round (backing off,
truncating, moved to another leader), and the response names only the partitions with news. OFFSET_OUT_OF_RANGE (the leader's log moved
under it, as after an unclean election or DeleteRecords) truncates to where the leader's log is. Errors and
lost connections back off replica.fetch.backoff.ms and retry; leadership changes come from the controller.

Follower throttle (KIP-73, kbroker.quota.replication_quotas): while the follower rate is over
follower.replication.throttled.rate, a partition of follower.replication.throttled.replicas that is behind the
leader's high watermark as of its last fetch (lag > 0, or not fetched yet) is left out of the fetch (and so of the
session until it returns); what arrives for such partitions is recorded against the rate. A follower caught up
with the high watermark is never left out, so an in-sync replica is not throttled out of the ISR.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import gevent
import gevent.event
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest

from ..log.log import Log
from ..protocol.client import Connection, FetchSessionHandler
from ..protocol.errors import Errors, KafkaError
from ..protocol.hotpath import decode_fetch_response

log = logging.getLogger("kbroker.replica.fetcher")

FETCH_VERSION = 11
OFFSET_FOR_LEADER_EPOCH_VERSION = 3
LIST_OFFSETS_VERSION = 5


@dataclass(slots=True)
class FetchState:
    leader_epoch: int
    failed_until: float = 0.0
    lag: int | None = None   # the leader's high watermark minus our log end offset after the last fetch


class ReplicaFetcher:
    def __init__(self, manager, leader_id: int, host: str, port: int):
        self.manager = manager
        self.leader_id = leader_id
        cfg = manager.config
        self.broker_id = manager.broker_id
        self.client = Connection(host, port, f"broker-{self.broker_id}-fetcher-{leader_id}",
                                 cfg["replica.socket.timeout.ms"] / 1000.0, cfg.inter_broker_security)
        self.partitions: dict[tuple[str, int], FetchState] = {}
        self.truncating: set = set()   # partitions added that have not truncated yet (all of them start so)
        # What the next fetch asks of each partition, kept between rounds: a round looks again only at the
        # partitions that may have moved (stale: added, answered, failed, truncated), so an idle round is O(changed).
        # It looks at all while the follower throttle is over its rate and in the round after, and every
        # replica.lag.time.max.ms / 2 if some log's start offset or segments changed meanwhile (Log.changes:
        # retention, a moved log dir), which no answer marks.
        self.wanted: dict = {}
        self.stale: set = set()
        self.full_every = cfg["replica.lag.time.max.ms"] / 2000.0
        self.next_full = 0.0
        self.full_mark: int | None = None   # Log.changes at the last full look
        self.throttled = False              # whether the last round was throttled
        self.session = FetchSessionHandler()
        self.backoff = cfg["replica.fetch.backoff.ms"] / 1000.0
        self.wakeup = gevent.event.Event()
        self.greenlet = gevent.spawn(self._run)

    def add(self, tp, leader_epoch: int) -> None:
        self.partitions[tp] = FetchState(leader_epoch)
        self.truncating.add(tp)
        self.stale.add(tp)
        self.wakeup.set()

    def remove(self, tp) -> None:
        self.partitions.pop(tp, None)
        self.truncating.discard(tp)
        self.stale.add(tp)

    def shutdown(self) -> None:
        self.greenlet.kill()
        self.client.close()

    # ---- loop ---------------------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            if not self.partitions:
                self.wakeup.clear()
                self.wakeup.wait()
                continue
            try:
                self._truncate_pending()
                if not self._fetch_once():
                    gevent.sleep(self.backoff)
            except KafkaError as e:   # from the client: the connection is closed, the next round reopens it
                log.info("fetcher %d -> broker %d: %s; retrying in %gs", self.broker_id, self.leader_id, e,
                         self.backoff)
                gevent.sleep(self.backoff)
            except gevent.GreenletExit:
                raise
            except Exception:
                log.exception("fetcher %d -> broker %d failed; retrying", self.broker_id, self.leader_id)
                gevent.sleep(self.backoff)

    def _partition(self, tp):
        """The local follower partition, or None if it left this fetcher meanwhile."""
        state = self.partitions.get(tp)
        partition = self.manager.partitions.get(tp)
        if state is None or partition is None or partition.leader != self.leader_id:
            return None
        return partition

    # ---- truncation ---------------------------------------------------------------------------------------
    def _truncate_pending(self) -> None:
        pending = list(self.truncating)
        if not pending:
            return
        R = OffsetForLeaderEpochRequest
        by_topic: dict = {}
        for tp in pending:
            partition = self._partition(tp)
            if partition is None:
                continue
            latest = partition.log.leader_epoch_cache.latest_epoch
            by_topic.setdefault(tp[0], []).append(R.OffsetForLeaderTopic.OffsetForLeaderPartition(
                partition=tp[1], current_leader_epoch=self.partitions[tp].leader_epoch,
                leader_epoch=-1 if latest is None else latest))
        if not by_topic:
            return
        request = R(version=OFFSET_FOR_LEADER_EPOCH_VERSION, replica_id=self.broker_id, topics=[
            R.OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in by_topic.items()])
        response = self.client.send(request)
        for t in response.topics:
            for p in t.partitions:
                tp = (t.topic, p.partition)
                partition = self._partition(tp)
                if partition is None:
                    continue
                if p.error_code:
                    self._fail(tp, Errors(p.error_code))
                    continue
                partition.truncate_for_leader_epoch(p.leader_epoch, p.end_offset)
                self.truncating.discard(tp)
                self.stale.add(tp)

    # ---- fetching -----------------------------------------------------------------------------------------
    def _fetch_once(self) -> bool:
        """One fetch round; False if there was nothing to fetch."""
        cfg = self.manager.config
        now = gevent.get_hub().loop.now()
        max_bytes = cfg["replica.fetch.max.bytes"]
        quota = self.manager.replication_quotas.follower
        throttling = bool(quota.throttled) and quota.is_quota_exceeded()
        wanted, stale = self.wanted, self.stale
        if throttling or self.throttled or now >= self.next_full and self.full_mark != Log.changes:
            self.next_full, self.full_mark = now + self.full_every, Log.changes
            stale = self.partitions.keys() | wanted.keys()
        self.throttled = throttling
        self.stale = set()
        looked = list(stale)
        for tp in looked:
            state = self.partitions.get(tp)
            partition = self._partition(tp)
            wanted.pop(tp, None)
            if partition is None or tp in self.truncating:
                continue
            if state.failed_until > now:
                self.stale.add(tp)   # looked at again each round until its backoff is over
                continue
            if throttling and state.lag != 0 and quota.is_throttled(tp):
                continue   # Kafka's shouldFollowerThrottle
            log_ = partition.log
            wanted[tp] = (log_.log_end_offset, log_.log_start_offset, max_bytes, state.leader_epoch)
        if not wanted:
            return False
        session = self.session
        send, forget = session.build(wanted, looked)
        R = FetchRequest
        by_topic: dict = {}
        for tp, (fetch_offset, log_start, partition_max, leader_epoch) in send:
            by_topic.setdefault(tp[0], []).append(R.FetchTopic.FetchPartition(
                partition=tp[1], current_leader_epoch=leader_epoch, fetch_offset=fetch_offset,
                log_start_offset=log_start, partition_max_bytes=partition_max))
        forgotten: dict = {}
        for topic, index in forget:
            forgotten.setdefault(topic, []).append(index)
        request = R(version=FETCH_VERSION, replica_id=self.broker_id, max_wait_ms=cfg["replica.fetch.wait.max.ms"],
                    min_bytes=cfg["replica.fetch.min.bytes"], max_bytes=cfg["replica.fetch.response.max.bytes"],
                    isolation_level=0, session_id=session.session_id, session_epoch=session.epoch,
                    topics=[R.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
                    forgotten_topics_data=[R.ForgottenTopic(topic=t, partitions=ps) for t, ps in forgotten.items()],
                    rack_id="")
        try:
            response = decode_fetch_response(self.client.send(request, decode=False), FETCH_VERSION)
        except Exception:
            session.handle_error()
            raise
        if not session.handle_response(response.error_code, response.session_id,
                                       [(topic, p.partition) for topic, ps in response.topics for p in ps]):
            log.info("fetcher %d -> broker %d: fetch session %d failed (%s); the next fetch is full",
                     self.broker_id, self.leader_id, request.session_id, Errors(response.error_code).name)
            return True
        for topic, partitions in response.topics:
            for p in partitions:
                tp = (topic, p.partition)
                self.stale.add(tp)
                partition = self._partition(tp)
                if partition is None:
                    continue
                if p.error_code == Errors.OFFSET_OUT_OF_RANGE:
                    self._handle_out_of_range(tp, partition)
                elif p.error_code:
                    self._fail(tp, Errors(p.error_code))
                else:
                    records = p.records[0] if p.records else b""
                    try:
                        partition.append_as_follower(records, p.high_watermark)
                    except KafkaError as e:
                        log.error("fetcher %d: cannot append data of %s-%d from broker %d: %s", self.broker_id,
                                  tp[0], tp[1], self.leader_id, e)
                        self._fail(tp, e.code)
                        continue
                    state = self.partitions.get(tp)   # gone if the append yielded to a StopReplica
                    if state is not None:
                        state.lag = max(0, p.high_watermark - partition.log.log_end_offset)
                    if records:
                        self.manager.metrics.replication_bytes_in += len(records)
                        if quota.throttled and quota.is_throttled(tp):
                            quota.record(len(records))
        return True

    def _fail(self, tp, error: Errors) -> None:
        # The leader not knowing the partition yet, or no longer leading it, is routine during leader changes.
        level = logging.DEBUG if error in (Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_LEADER_OR_FOLLOWER,
                                           Errors.FENCED_LEADER_EPOCH, Errors.UNKNOWN_LEADER_EPOCH) else logging.INFO
        log.log(level, "fetcher %d: %s-%d from broker %d: %s; backing off", self.broker_id, tp[0], tp[1],
                self.leader_id, error.name)
        state = self.partitions.get(tp)
        if state is not None:
            state.failed_until = gevent.get_hub().loop.now() + self.backoff

    def _leader_offset(self, tp, timestamp: int) -> int:
        R = ListOffsetsRequest
        request = R(version=LIST_OFFSETS_VERSION, replica_id=self.broker_id, isolation_level=0, topics=[
            R.ListOffsetsTopic(name=tp[0], partitions=[R.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=tp[1], current_leader_epoch=self.partitions[tp].leader_epoch,
                timestamp=timestamp)])])
        response = self.client.send(request)
        p = response.topics[0].partitions[0]
        if p.error_code:
            raise KafkaError(Errors(p.error_code), "ListOffsets from the leader failed")
        return p.offset

    def _handle_out_of_range(self, tp, partition) -> None:
        """Kafka's handleOutOfRange: truncate to the leader's end when ahead, else restart at its start."""
        try:
            leader_end = self._leader_offset(tp, -1)
            if leader_end < partition.log.log_end_offset:
                partition.truncate_to(leader_end, reason="the leader's log end offset is below ours")
            else:
                partition.truncate_fully_and_start_at(self._leader_offset(tp, -2))
        except KafkaError as e:
            self._fail(tp, e.code)


class ReplicaFetcherManager:
    """The fetchers of this broker, one per leader broker."""

    def __init__(self, manager):
        self.manager = manager
        self.fetchers: dict[int, ReplicaFetcher] = {}

    def add_partition(self, tp, leader_id: int, host: str, port: int, leader_epoch: int) -> None:
        self.remove_partition(tp)
        fetcher = self.fetchers.get(leader_id)
        if fetcher is not None and (fetcher.client.host, fetcher.client.port) != (host, port):
            del self.fetchers[leader_id]
            fetcher.shutdown()
            fetcher = None
        if fetcher is None:
            fetcher = self.fetchers[leader_id] = ReplicaFetcher(self.manager, leader_id, host, port)
        fetcher.add(tp, leader_epoch)

    def remove_partition(self, tp) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove(tp)

    def shutdown_idle(self) -> None:
        for leader_id, fetcher in list(self.fetchers.items()):
            if not fetcher.partitions and self.fetchers.get(leader_id) is fetcher:
                # Out of the table first: shutdown() yields, and another request may look at it meanwhile.
                del self.fetchers[leader_id]
                fetcher.shutdown()

    def shutdown(self) -> None:
        for fetcher in self.fetchers.values():
            fetcher.shutdown()
        self.fetchers.clear()
