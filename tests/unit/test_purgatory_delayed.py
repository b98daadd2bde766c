"""DelayedOperation and DelayedOperationPurgatory, driven by a MockClock (plus a real-time reaper smoke test)."""
import time

import gevent
import gevent.event

from kbroker.clock import Clock, MockClock
from kbroker.purgatory import DelayedOperation, DelayedOperationPurgatory


class Op(DelayedOperation):
    def __init__(self, delay_ms, on_complete_hook=None):
        super().__init__(delay_ms)
        self.ready = False
        self.tries = 0
        self.events = []
        self.on_complete_hook = on_complete_hook

    def try_complete(self):
        self.tries += 1
        return self.force_complete() if self.ready else False

    def on_complete(self):
        self.events.append("complete")
        if self.on_complete_hook:
            self.on_complete_hook()

    def on_expiration(self):
        self.events.append("expire")


def make(purge_interval=1000):
    clock = MockClock()
    return clock, DelayedOperationPurgatory("test", clock, purge_interval=purge_interval)


def test_completes_when_a_watched_key_is_checked_and_try_complete_succeeds():
    clock, p = make()
    op = Op(100)
    assert p.try_complete_else_watch(op, ["a", "b"]) is False
    assert op.tries == 2  # once before watching, once after
    assert (p.watched("a"), p.watched("b"), p.delayed) == (1, 1, 1)
    assert p.check_and_complete("a") == 0 and not op.is_completed
    op.ready = True
    assert p.check_and_complete("c") == 0
    assert p.check_and_complete("a") == 1
    assert op.is_completed and op.events == ["complete"]
    assert (p.watched("a"), p.delayed) == (0, 0)  # completing cancels the timeout
    clock.advance(1_000)
    p.advance_clock(0)
    assert op.events == ["complete"]


def test_checking_many_keys_tries_an_operation_watched_under_all_of_them_once():
    """A LeaderAndIsr for thousands of partitions checks them together: a fetch waiting on all of them is tried
    once, not once per partition (each try reads every partition it waits on)."""
    _, p = make()
    keys = [("t", i) for i in range(1000)]
    waiting, other = Op(100), Op(100)
    p.try_complete_else_watch(waiting, keys)
    p.try_complete_else_watch(other, [("u", 0)])
    waiting.tries = other.tries = 0
    assert p.check_and_complete_all(keys + [("u", 0)]) == 0
    assert (waiting.tries, other.tries) == (1, 1)
    waiting.ready = True
    assert p.check_and_complete_all(keys) == 1
    assert waiting.tries == 2 and waiting.events == ["complete"] and other.tries == 1
    assert [p.watched(k) for k in keys[:3]] == [0, 0, 0] and p.watched(("u", 0)) == 1 and p.delayed == 1
    assert p.check_and_complete_all([("none", 1)]) == 0


def test_completes_immediately_without_watching():
    _, p = make()
    op = Op(100)
    op.ready = True
    assert p.try_complete_else_watch(op, ["a"]) is True
    assert (p.watched("a"), p.delayed, op.events) == (0, 0, ["complete"])


def test_watch_without_a_first_check_then_a_check_completes_and_checks_are_counted():
    """`watch` is for a caller that has just checked itself (the idle fetch): the op is not tried until a key
    is checked, and `checks` tells the caller whether any check came in between."""
    clock, p = make()
    waiting, expiring = Op(100), Op(100)
    before = p.checks
    p.watch(waiting, ["a"])
    p.watch(expiring, ["b"])
    assert (waiting.tries, p.watched("a"), p.delayed, p.checks) == (0, 1, 2, before)
    waiting.ready = True
    assert p.check_and_complete("a") == 1 and p.checks == before + 1
    assert waiting.events == ["complete"] and expiring.tries == 0
    clock.advance(100)
    p.advance_clock(0)
    assert expiring.events == ["complete", "expire"] and expiring.tries == 0


def test_completion_found_by_the_check_after_watching():
    class ReadyOnSecondTry(Op):
        def try_complete(self):
            self.ready = self.tries >= 1
            return super().try_complete()

    _, p = make()
    op = ReadyOnSecondTry(100)
    assert p.try_complete_else_watch(op, ["a"]) is True
    assert op.events == ["complete"] and p.delayed == 0
    assert p.watched("a") == 1  # left for check_and_complete or the purge to drop
    assert p.check_and_complete("a") == 0 and p.watched("a") == 0


def test_completes_once_when_checked_on_two_keys_and_expired_at_the_same_time():
    clock, p = make()
    op = Op(100)
    p.try_complete_else_watch(op, ["a", "b"])
    op.ready = True
    clock.advance(100)
    assert p.check_and_complete("a") == 1
    assert p.check_and_complete("b") == 0
    p.advance_clock(0)
    assert op.events == ["complete"]
    assert (p.watched("a"), p.watched("b"), p.delayed) == (0, 0, 0)


def test_expiry_first_then_checks_complete_nothing_more():
    clock, p = make()
    op = Op(100)
    p.try_complete_else_watch(op, ["a", "b"])
    op.ready = True
    clock.advance(100)
    assert p.advance_clock(0)
    assert p.check_and_complete("a") == 0
    assert p.check_and_complete("b") == 0
    assert op.events == ["complete", "expire"]


def test_completion_that_re_enters_the_purgatory_completes_once():
    clock, p = make()
    op = Op(100, on_complete_hook=lambda: p.check_and_complete("b"))
    p.try_complete_else_watch(op, ["a", "b"])
    op.ready = True
    assert p.check_and_complete("a") == 1
    clock.advance(100)
    p.advance_clock(0)
    assert op.events == ["complete"]
    assert (p.watched("a"), p.watched("b")) == (0, 0)


def test_expiration_calls_on_complete_then_on_expiration_exactly_once():
    clock, p = make()
    op = Op(100)
    p.try_complete_else_watch(op, ["a"])
    clock.advance(99)
    p.advance_clock(0)
    assert op.events == [] and not op.is_completed
    clock.advance(1)
    assert p.advance_clock(0)
    assert op.events == ["complete", "expire"] and op.is_completed
    assert op.force_complete() is False
    op.ready = True
    assert p.check_and_complete("a") == 0
    clock.advance(10_000)
    p.advance_clock(0)
    assert op.events == ["complete", "expire"] and p.delayed == 0


def test_maybe_try_complete_retries_a_trigger_that_arrived_while_busy():
    inside, go = gevent.event.Event(), gevent.event.Event()

    class Yielding(Op):
        def try_complete(self):
            seen = self.ready
            self.tries += 1
            if self.tries == 1:
                inside.set()
                go.wait()  # another greenlet runs while this check is in progress
            return self.force_complete() if seen else False

    op = Yielding(100)
    first = gevent.spawn(op.maybe_try_complete)
    assert inside.wait(timeout=5)  # first is inside try_complete, having seen ready=False
    op.ready = True
    assert op.maybe_try_complete() is False  # busy: the retry is left to the first
    go.set()
    assert first.get(timeout=5) is True
    assert op.events == ["complete"] and op.tries == 2


def test_purge_drops_completed_operations_from_watch_lists():
    _, p = make(purge_interval=10)
    ops = [Op(10_000) for _ in range(100)]
    for op in ops:
        p.try_complete_else_watch(op, ["a", "b"])
    only_b = Op(10_000)
    p.try_complete_else_watch(only_b, ["c"])
    for op in ops[:60]:
        op.force_complete()
    only_b.force_complete()
    assert (p.watched("a"), p.watched("b"), p.watched("c"), p.delayed) == (100, 100, 1, 40)
    p.advance_clock(0)
    assert (p.watched("a"), p.watched("b"), p.watched("c"), p.delayed) == (40, 40, 0, 40)


def test_no_purge_below_the_interval():
    _, p = make(purge_interval=1000)
    ops = [Op(10_000) for _ in range(100)]
    for op in ops:
        p.try_complete_else_watch(op, ["a"])
    for op in ops:
        op.force_complete()
    p.advance_clock(0)
    assert p.watched("a") == 100


def test_reaper_expires_a_50ms_operation_in_real_time():
    p = DelayedOperationPurgatory("smoke", Clock())
    p.start()
    try:
        done = gevent.event.Event()
        op = Op(50, on_complete_hook=done.set)
        started = time.monotonic()
        assert p.try_complete_else_watch(op, ["a"]) is False
        assert done.wait(timeout=5)
        elapsed_ms = (time.monotonic() - started) * 1000
        assert 30 <= elapsed_ms <= 500, elapsed_ms
        assert op.events == ["complete", "expire"]
    finally:
        p.shutdown()


def test_shutdown_stops_the_reaper():
    p = DelayedOperationPurgatory("stopped", Clock())
    p.start()
    p.shutdown()
    op = Op(10)
    p.try_complete_else_watch(op, ["a"])
    gevent.sleep(0.1)
    assert op.events == [] and p.delayed == 1
