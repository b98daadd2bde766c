"""Incremental fetch sessions (KIP-227) without processes: the broker's session cache (kbroker.replica.fetch_session:
request metadata, epochs, which partitions an incremental response carries, eviction as Kafka 2.8's
FetchSessionCache) and the fetcher's FetchSessionHandler (kbroker.protocol.client.fetch_session)."""
from kbroker.protocol.client import FetchSessionHandler
from kbroker.protocol.errors import Errors
from kbroker.protocol.hotpath import FetchPartitionData
from kbroker.replica.fetch_session import INVALID_SESSION_ID, FetchSessionCache, IncrementalFetchContext, next_epoch

EVICTION_MS = 1000
A, B, C = ("t", 0), ("t", 1), ("t", 2)


def req(tp, offset=0):
    return tp, offset, 1024, -1


def data(tp, hw=0, log_start=0, records=(), error=0):
    return FetchPartitionData(tp[1], error_code=error, high_watermark=hw, log_start_offset=log_start,
                              records=list(records))


def open_session(cache, tps, now=0, privileged=False, hw=0):
    """A full fetch of tps answered with hw for each; the new session id (0: none)."""
    ctx = cache.new_context(0, 0, [req(tp) for tp in tps], [], privileged, now)
    error, session_id, order = ctx.respond({tp: data(tp, hw) for tp in tps}, now)
    assert error == Errors.NONE and order == list(tps)
    return session_id


def test_epochs_count_up_and_wrap_to_one():
    assert next_epoch(0) == 1 and next_epoch(41) == 42
    assert next_epoch(2 ** 31 - 1) == 1
    assert next_epoch(-1) == -1


def test_an_incremental_response_carries_only_partitions_with_news():
    cache = FetchSessionCache(10, EVICTION_MS)
    sid = open_session(cache, [A, B, C], hw=5)
    ctx = cache.new_context(sid, 1, [], [], False, 1)
    assert [r[0] for r in ctx.requests] == [A, B, C]          # every session partition is read
    results = {A: data(A, hw=6), B: data(B, hw=5, records=[b"x"]), C: data(C, hw=5)}
    assert ctx.respond(results, 1) == (Errors.NONE, sid, [A, B])
    # what was sent is remembered; partitions sent move to the end of the session's order (fairness)
    ctx = cache.new_context(sid, 2, [], [], False, 2)
    assert [r[0] for r in ctx.requests] == [C, A, B]
    results = {A: data(A, hw=6, log_start=3), B: data(B, hw=5), C: data(C, hw=7)}
    assert ctx.respond(results, 2) == (Errors.NONE, sid, [C, A])


def test_errors_are_always_sent_and_resend_the_partition_once_gone():
    cache = FetchSessionCache(10, EVICTION_MS)
    sid = open_session(cache, [A], hw=5)
    for epoch in (1, 2):
        ctx = cache.new_context(sid, epoch, [], [], False, epoch)
        assert ctx.respond({A: data(A, hw=-1, error=Errors.NOT_LEADER_OR_FOLLOWER)}, 0)[2] == [A]
    ctx = cache.new_context(sid, 3, [], [], False, 3)
    assert ctx.respond({A: data(A, hw=5)}, 0)[2] == [A]       # same HW as before the error: sent again


def test_added_changed_and_forgotten_partitions_update_the_session():
    cache = FetchSessionCache(10, EVICTION_MS)
    sid = open_session(cache, [A, B])
    ctx = cache.new_context(sid, 1, [req(B, 7), req(C, 3)], [A], False, 1)
    assert ctx.requests == [req(B, 7), req(C, 3)]
    # forgetting every partition closes the session: the request is answered without one
    ctx = cache.new_context(sid, 2, [], [B, C], False, 2)
    assert ctx.requests == [] and ctx.respond({}, 2) == (Errors.NONE, INVALID_SESSION_ID, [])
    assert sid not in cache.sessions


def test_session_errors_and_closing():
    cache = FetchSessionCache(10, EVICTION_MS)
    sid = open_session(cache, [A])
    assert cache.new_context(sid, 2, [], [], False, 0).error == Errors.INVALID_FETCH_SESSION_EPOCH
    assert cache.new_context(sid + 1, 1, [], [], False, 0).error == Errors.FETCH_SESSION_ID_NOT_FOUND
    assert cache.new_context(sid, 1, [], [], False, 0).error == Errors.NONE    # the session survived both
    ctx = cache.new_context(sid, -1, [req(A)], [], False, 0)                   # close, sessionless
    assert ctx.respond({A: data(A)}, 0) == (Errors.NONE, INVALID_SESSION_ID, [A])
    assert cache.new_context(sid, 2, [], [], False, 0).error == Errors.FETCH_SESSION_ID_NOT_FOUND


def test_a_duplicate_request_that_raced_is_answered_invalid_epoch():
    cache = FetchSessionCache(10, EVICTION_MS)
    sid = open_session(cache, [A])
    first = cache.new_context(sid, 1, [], [], False, 0)
    assert isinstance(first, IncrementalFetchContext)
    cache.new_context(sid, 2, [], [], False, 0)                # the next request ran while the first waited
    assert first.respond({A: data(A)}, 0) == (Errors.INVALID_FETCH_SESSION_EPOCH, sid, [])


# ---- eviction -----------------------------------------------------------------------------------------------

def test_no_slots_means_no_sessions():
    assert open_session(FetchSessionCache(0, EVICTION_MS), [A], privileged=True) == INVALID_SESSION_ID


def test_a_full_cache_keeps_recent_consumer_sessions_from_consumers():
    cache = FetchSessionCache(1, EVICTION_MS)
    first = open_session(cache, [A])
    assert open_session(cache, [A, B, C], now=10) == INVALID_SESSION_ID   # more partitions, but too recent
    assert first in cache.sessions


def test_followers_evict_consumers_at_once_but_not_recent_followers():
    cache = FetchSessionCache(1, EVICTION_MS)
    consumer = open_session(cache, [A, B, C])
    follower = open_session(cache, [A], now=10, privileged=True)
    assert follower and consumer not in cache.sessions
    assert open_session(cache, [A, B, C], now=20, privileged=True) == INVALID_SESSION_ID
    assert open_session(cache, [A, B, C], now=20) == INVALID_SESSION_ID


def test_a_session_unused_for_the_eviction_time_is_evicted_by_anyone():
    cache = FetchSessionCache(1, EVICTION_MS)
    follower = open_session(cache, [A, B, C], privileged=True)
    assert open_session(cache, [A], now=EVICTION_MS) == INVALID_SESSION_ID       # not yet stale
    consumer = open_session(cache, [A], now=EVICTION_MS + 1)
    assert consumer and follower not in cache.sessions


def test_old_sessions_in_use_are_evicted_by_larger_ones_only():
    cache = FetchSessionCache(1, EVICTION_MS)
    sid = open_session(cache, [A, B])
    cache.new_context(sid, 1, [], [], False, EVICTION_MS + 1)        # in use, and older than the eviction time
    assert open_session(cache, [A], now=EVICTION_MS + 2) == INVALID_SESSION_ID   # smaller: kept
    bigger = open_session(cache, [A, B, C], now=EVICTION_MS + 3)
    assert bigger and sid not in cache.sessions


# ---- the fetcher's side -------------------------------------------------------------------------------------

def test_handler_sends_everything_first_then_only_changes_and_forgotten_partitions():
    h = FetchSessionHandler()
    assert (h.session_id, h.epoch) == (0, 0)
    send, forget = h.build({A: (0,), B: (0,), C: (0,)})
    assert send == [(A, (0,)), (B, (0,)), (C, (0,))] and forget == []
    assert h.handle_response(0, 77, [A, B, C]) is True
    assert (h.session_id, h.epoch) == (77, 1)
    send, forget = h.build({A: (0,), B: (5,)})
    assert send == [(B, (5,))] and forget == [C]
    assert h.handle_response(0, 77, [B]) is True and h.epoch == 2
    h.epoch = 2 ** 31 - 1
    h.build({A: (0,), B: (5,)})
    assert h.handle_response(0, 77, []) is True and h.epoch == 1


def test_handler_starts_over_after_session_errors_and_odd_responses():
    h = FetchSessionHandler()
    h.build({A: (0,)})
    assert h.handle_response(0, 0, [A]) is True and (h.session_id, h.epoch) == (0, 0)   # no slot: full again
    h.build({A: (0,)})
    assert h.handle_response(0, 5, [A]) is True
    h.build({A: (0,)})
    assert h.handle_response(Errors.INVALID_FETCH_SESSION_EPOCH, 0, []) is False
    assert (h.session_id, h.epoch) == (5, 0)                   # close 5, open a new one
    h.build({A: (0,)})
    assert h.handle_response(0, 6, [A, B]) is False            # a full answer naming what was not asked
    assert (h.session_id, h.epoch) == (0, 0)
    h.build({A: (0,)})
    h.handle_response(0, 7, [A])
    h.build({A: (1,)})
    assert h.handle_response(0, 7, [C]) is False and (h.session_id, h.epoch) == (7, 0)
    h.build({A: (1,)})
    h.handle_response(0, 8, [A])
    h.build({A: (1,)})
    assert h.handle_response(Errors.FETCH_SESSION_ID_NOT_FOUND, 0, []) is False
    assert (h.session_id, h.epoch) == (0, 0)
    h.build({A: (1,)})
    h.handle_response(0, 9, [A])
    h.handle_error()
    assert (h.session_id, h.epoch) == (9, 0)
    assert h.build({A: (1,)}) == ([(A, (1,))], [])             # full again





def quiet(tp, hw=5):
    d = data(tp, hw)
    d.at_end = True
    return d


def test_an_idle_round_reads_only_the_partitions_that_changed():
    cache = FetchSessionCache(10, EVICTION_MS)
    sid = open_session(cache, [A, B, C], privileged=True, hw=5)
    ctx = cache.new_context(sid, 1, [], [], True, 1)
    assert [r[0] for r in ctx.requests] == [A, B, C]          # the first round reads every partition
    assert ctx.respond({A: quiet(A), B: data(B, hw=5, records=[b"x"]), C: quiet(C)}, 1) == (Errors.NONE, sid, [B])
    ctx = cache.new_context(sid, 2, [], [], True, 2)
    assert [r[0] for r in ctx.requests] == [B]                # A and C are quiet: not read
    ctx.respond({B: quiet(B)}, 2)
    ctx = cache.new_context(sid, 3, [], [], True, 3)
    assert ctx.requests == [] and not ctx.news()              # an idle round reads nothing
    assert cache.changed(C) == [sid] and cache.changed(("other", 0)) == []
    assert ctx.news() and [r[0] for r in ctx.more()] == [C]   # the waiting round wakes and reads C
    assert ctx.respond({C: data(C, hw=6, records=[b"y"])}, 3) == (Errors.NONE, sid, [C])
    ctx = cache.new_context(sid, 4, [req(A, 7)], [], True, 4)   # a partition the request names is read
    assert [r[0] for r in ctx.requests] == [A, C]
    cache.changed(A)                                          # changed after the read: read again next round
    ctx.respond({A: quiet(A), C: quiet(C, hw=6)}, 4)
    ctx = cache.new_context(sid, 5, [], [], True, 5)
    assert [r[0] for r in ctx.requests] == [A]


def test_handler_with_the_changed_partitions_named_compares_only_those():
    h = FetchSessionHandler()
    wanted = {A: (0,), B: (0,), C: (0,)}
    assert h.build(wanted, [A, B, C]) == (list(wanted.items()), [])
    h.handle_response(0, 7, [A, B, C])
    wanted[A] = (3,)
    del wanted[C]
    assert h.build(wanted, [A, C]) == ([(A, (3,))], [C])     # B is not looked at
    h.handle_response(0, 7, [])
    assert h.build(wanted, []) == ([], [])


def test_after_a_retention_pass_a_round_reads_the_quiet_partitions_too():
    cache = FetchSessionCache(10, EVICTION_MS)
    sid = open_session(cache, [A, B], privileged=True, hw=5)
    ctx = cache.new_context(sid, 1, [], [], True, 1)
    ctx.respond({A: quiet(A), B: quiet(B)}, 1)
    assert cache.new_context(sid, 2, [], [], True, 2).requests == []
    cache.mark_all()                                          # retention moves log start offsets without marks
    ctx = cache.new_context(sid, 3, [], [], True, 3)
    assert [r[0] for r in ctx.requests] == [A, B]
