"""Incremental fetch sessions (KIP-227), the broker side, as Kafka 2.8's FetchSession / FetchManager.

A fetch session caches, per partition, what the fetcher asked for (fetch offset, max bytes, current leader
epoch) and what it was last told (high watermark, log start offset). An incremental request (session id X,
epoch = the session's) names only the partitions added or changed since the previous request and the ones
to forget; the others are read from the cache. Its response carries only the partitions that must be sent:
records returned, a high watermark or log start offset different from the one last sent, a preferred read
replica, or an error (an error also resets the cached high watermark, so the partition is sent again once
the error is gone). Partitions sent move to the end of the session's order (fairness under max_bytes).

Request metadata (v7+): id 0, epoch 0 opens a session when a slot is free (the response carries its id and
every partition); epoch -1 is a sessionless full fetch; a non-zero id with epoch 0 or -1 closes that session
first. Unknown ids get FETCH_SESSION_ID_NOT_FOUND, a wrong epoch INVALID_FETCH_SESSION_EPOCH. An incremental
request that forgets every partition closes the session and is answered sessionless. Epochs count 1, 2, ...,
2^31-1 and wrap to 1.

The cache holds max.incremental.fetch.session.cache.slots sessions. When full, a new session may evict: the
least recently used one if unused for min.incremental.fetch.session.eviction.ms; otherwise the smallest
"evictable" one ordered by (privileged, partitions, id), when the newcomer is not smaller by that order.
Followers' sessions are privileged: beyond staleness, a consumer never evicts one, and a follower evicts one
only once it is older than the eviction time; a consumer's session is evictable by anyone once older than
it, by followers at once. Eligibility is judged as of the session's last use, as Kafka's ordered maps do.
"""
from __future__ import annotations

import random

from ..protocol.errors import Errors

INVALID_SESSION_ID = 0
INITIAL_EPOCH, FINAL_EPOCH = 0, -1
_MAX_INT = 2 ** 31 - 1


def session_key(session_id: int) -> tuple:
    """The fetch purgatory key a session's waiting round watches besides its partitions (news of quiet ones)."""
    return "fetch-session", session_id


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: -1 stays -1, 2^31-1 wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_INT else epoch + 1


class CachedPartition:
    __slots__ = ("fetch_offset", "max_bytes", "leader_epoch", "high_watermark", "log_start_offset", "order")

    def __init__(self, fetch_offset: int, max_bytes: int, leader_epoch: int, high_watermark: int = -1,
                 log_start_offset: int = -1, order: int = 0):
        self.fetch_offset, self.max_bytes, self.leader_epoch = fetch_offset, max_bytes, leader_epoch
        self.high_watermark, self.log_start_offset = high_watermark, log_start_offset
        self.order = order   # its place in the session's order (a partition sent moves to the end)

    def must_respond(self, data, update: bool = True) -> bool:
        """Whether the partition's result goes in an incremental response; records what was sent (unless not
        update: the check of a response that may not be sent, as Kafka's getResponseSize)."""
        must = (bool(data.records) and data.records_size > 0) or data.preferred_read_replica >= 0 \
            or bool(data.error_code) or data.high_watermark != self.high_watermark \
            or data.log_start_offset != self.log_start_offset
        if update:
            self.high_watermark = -1 if data.error_code else data.high_watermark
            self.log_start_offset = data.log_start_offset
        return must


class FetchSession:
    """A session's partitions, and those its next round reads (pending: tp -> the mark when it was last marked).
    A partition is left out of the rounds while it is quiet: read at its end (no records possible; a follower in
    the ISR with the high watermark there too), nothing to send, no error, and unchanged since: an append, a high
    watermark, leadership or DeleteRecords move marks it (ReplicaManager._fetch_news), a retention pass marks all
    (mark_all). So an idle round costs O(changed), not O(partitions)."""
    __slots__ = ("id", "privileged", "partitions", "creation_ms", "last_used_ms", "epoch", "cached_size", "pending",
                 "marks", "next_order")

    def __init__(self, session_id: int, privileged: bool, partitions: dict, now: int):
        self.id, self.privileged, self.partitions = session_id, privileged, partitions
        self.creation_ms = self.last_used_ms = now
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.cached_size = len(partitions)
        self.marks = 1
        self.pending = dict.fromkeys(partitions, 1)   # the first incremental round reads every partition
        self.next_order = len(partitions)

    def mark_all(self) -> None:
        self.marks += 1
        self.pending.update(dict.fromkeys(self.partitions, self.marks))

    def request(self, tp) -> tuple:
        c = self.partitions[tp]
        return tp, c.fetch_offset, c.max_bytes, c.leader_epoch

    def requests(self, exclude=()) -> list:
        """[(tp, fetch offset, max bytes, current leader epoch)] of the pending partitions (but exclude), in
        session order."""
        partitions = self.partitions
        tps = [tp for tp in self.pending if tp in partitions and tp not in exclude]
        tps.sort(key=lambda tp: partitions[tp].order)
        return [self.request(tp) for tp in tps]

    def mark(self, tp) -> None:
        """Something changed behind tp: the next round (or the one waiting) reads it."""
        self.marks += 1
        self.pending[tp] = self.marks

    def update(self, requests, forgotten) -> None:
        partitions = self.partitions
        for tp, fetch_offset, max_bytes, leader_epoch in requests:
            cached = partitions.get(tp)
            if cached is None:
                partitions[tp] = CachedPartition(fetch_offset, max_bytes, leader_epoch, order=self.next_order)
                self.next_order += 1
            else:
                cached.fetch_offset, cached.max_bytes, cached.leader_epoch = fetch_offset, max_bytes, leader_epoch
            self.mark(tp)
        for tp in forgotten:
            partitions.pop(tp, None)
            self.pending.pop(tp, None)

    def evictable_key(self) -> tuple:
        return self.privileged, self.cached_size, self.id


class FetchContext:
    """What one Fetch request reads (requests) and, once read, which partitions its response carries."""
    error = Errors.NONE

    def __init__(self, requests):
        self.requests = requests

    def news(self) -> bool:
        """Whether a partition not read yet changed since the read (a session's quiet partition)."""
        return False

    def more(self) -> list:
        """The requests of the partitions news() found, added to self.requests (read again with them)."""
        return []

    def respond(self, results: dict, now: int) -> tuple[Errors, int, list]:
        """(top-level error, session id, [tp] to send in order) for the partitions' results {tp: data}."""
        return Errors.NONE, INVALID_SESSION_ID, [r[0] for r in self.requests]

    def would_send(self, results: dict) -> list:
        """The [tp] respond() would send, in order, changing nothing (the size a consumer's quota weighs before
        the response is made: Kafka's getResponseSize)."""
        return [r[0] for r in self.requests]

    def throttled_session_id(self) -> int:
        """The session id of the empty response to a throttled fetch (Kafka's getThrottledResponse): a full fetch
        opens no session."""
        return INVALID_SESSION_ID


class SessionErrorContext(FetchContext):
    def __init__(self, error: Errors):
        super().__init__([])
        self.error = error

    def respond(self, results, now):
        return self.error, INVALID_SESSION_ID, []

    def would_send(self, results):
        return []


class FullFetchContext(FetchContext):
    """A full fetch that opens a session if the cache has (or can make) room."""

    def __init__(self, cache, requests, privileged: bool):
        super().__init__(requests)
        self.cache, self.privileged = cache, privileged

    def respond(self, results, now):
        order = [r[0] for r in self.requests]

        def partitions():
            cached = {}
            for tp, fetch_offset, max_bytes, leader_epoch in self.requests:
                data = results[tp]
                cached[tp] = CachedPartition(fetch_offset, max_bytes, leader_epoch, data.high_watermark,
                                             data.log_start_offset)
            return cached
        return Errors.NONE, self.cache.maybe_create(now, self.privileged, len(order), partitions), order


class IncrementalFetchContext(FetchContext):
    """An incremental round reads the session's pending partitions only (FetchSession); one that changes while
    it waits wakes it (news) and is read with the others (more)."""

    def __init__(self, session: FetchSession, request_epoch: int):
        super().__init__(session.requests())
        self.session, self.request_epoch = session, request_epoch
        self.seen = session.marks   # marks up to this one are reflected in the reads

    def news(self) -> bool:
        return self.session.marks > self.seen

    def more(self) -> list:
        session = self.session
        self.seen = session.marks
        added = session.requests(exclude={r[0] for r in self.requests})
        self.requests = self.requests + added
        return added

    def respond(self, results, now):
        session = self.session
        if session.epoch != next_epoch(self.request_epoch):
            # Another request of this session was handled while this one waited (a duplicate request).
            return Errors.INVALID_FETCH_SESSION_EPOCH, session.id, []
        partitions, pending, seen = session.partitions, session.pending, self.seen
        order = []
        for request in self.requests:
            tp = request[0]
            cached = partitions.get(tp)
            data = results.get(tp)
            if cached is None or data is None:
                continue
            if cached.must_respond(data):
                order.append(tp)
                partitions[tp] = partitions.pop(tp)
                cached.order = session.next_order
                session.next_order += 1
            elif data.at_end and pending.get(tp, 0) <= seen:
                del pending[tp]   # quiet: left out of the rounds until something changes behind it
                continue
            pending.setdefault(tp, seen)
        return Errors.NONE, session.id, order

    def would_send(self, results):
        partitions = self.session.partitions
        return [r[0] for r in self.requests if r[0] in partitions and r[0] in results
                and partitions[r[0]].must_respond(results[r[0]], update=False)]

    def throttled_session_id(self) -> int:
        return self.session.id


class FetchSessionCache:
    def __init__(self, max_entries: int, eviction_ms: int):
        self.max_entries, self.eviction_ms = max_entries, eviction_ms
        self.sessions: dict[int, FetchSession] = {}

    def new_context(self, session_id: int, epoch: int, requests, forgotten, privileged: bool,
                    now: int) -> FetchContext:
        """The context of a v7+ Fetch request (Kafka's FetchManager.newContext)."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)
            if epoch == FINAL_EPOCH:
                return FetchContext(requests)
            return FullFetchContext(self, requests, privileged)
        session = self.sessions.get(session_id)
        if session is None:
            return SessionErrorContext(Errors.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return SessionErrorContext(Errors.INVALID_FETCH_SESSION_EPOCH)
        session.update(requests, forgotten)
        if not session.partitions:
            self.remove(session_id)
            return FetchContext(requests)
        self.touch(session, now)
        session.epoch = next_epoch(session.epoch)
        return IncrementalFetchContext(session, epoch)

    def remove(self, session_id: int) -> FetchSession | None:
        return self.sessions.pop(session_id, None)

    def mark_all(self) -> None:
        """Every session's next round reads all its partitions (after a retention pass, which moves log start
        offsets without marking the partitions)."""
        for session in self.sessions.values():
            session.mark_all()

    def changed(self, tp) -> list[int]:
        """Something changed behind tp (records appended, high watermark, log start or leadership moved): the
        sessions holding it read it in their next round (or the one waiting). Their ids."""
        marked = []
        for session in self.sessions.values():
            if tp in session.partitions:
                session.mark(tp)
                marked.append(session.id)
        return marked

    def touch(self, session: FetchSession, now: int) -> None:
        session.last_used_ms = now
        session.cached_size = len(session.partitions)

    def maybe_create(self, now: int, privileged: bool, size: int, partitions) -> int:
        """A new session's id (partitions() builds its cache), or 0 when there is no room for it."""
        if len(self.sessions) >= self.max_entries and not self._try_evict(privileged, size, now):
            return INVALID_SESSION_ID
        session_id = INVALID_SESSION_ID
        while session_id == INVALID_SESSION_ID or session_id in self.sessions:
            session_id = random.randint(1, _MAX_INT - 1)
        self.sessions[session_id] = FetchSession(session_id, privileged, partitions(), now)
        return session_id

    def _try_evict(self, privileged: bool, size: int, now: int) -> bool:
        if not self.sessions:
            return False
        stale = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - stale.last_used_ms > self.eviction_ms:
            del self.sessions[stale.id]
            return True
        # Eligibility as of each session's last use (Kafka files sessions in its evictable maps on touch).
        candidates = [s for s in self.sessions.values()
                      if s.last_used_ms - s.creation_ms > self.eviction_ms or (privileged and not s.privileged)]
        if not candidates:
            return False
        victim = min(candidates, key=FetchSession.evictable_key)
        if (privileged, size, 0) < victim.evictable_key():
            return False
        del self.sessions[victim.id]
        return True
