"""The hierarchical timing wheel, driven by a MockClock (plus one real-time wake-up check and a benchmark)."""
import random
import time

import gevent
import pytest

from kbroker.clock import Clock, MockClock
from kbroker.purgatory import Timer, TimerTask

DELAYS = [1, 2, 19, 20, 21, 399, 400, 401, 7_999, 8_000, 8_001, 160_000, 3_600_000]


class Task(TimerTask):
    def __init__(self, delay_ms, fired, name=None):
        super().__init__(delay_ms)
        self.fired = fired
        self.name = name

    def run(self):
        self.fired.append(self.name if self.name is not None else self)


@pytest.mark.parametrize("start_ms", [0, 7, 12_345, 987_654_321])
@pytest.mark.parametrize("idle_ms", [0, 13, 1_000_000])
@pytest.mark.parametrize("delay", DELAYS)
def test_task_fires_at_its_tick_not_before(delay, start_ms, idle_ms):
    clock = MockClock(monotonic_ms=start_ms)
    timer = Timer(clock)
    clock.advance(idle_ms)  # the wheel's own time lags the clock until something expires
    timer.advance_clock(0)
    fired = []
    timer.add(Task(delay, fired))
    assert timer.size == 1
    clock.advance(delay - 1)
    timer.advance_clock(0)
    assert fired == [] and timer.size == 1
    clock.advance(1)
    assert timer.advance_clock(0)
    assert len(fired) == 1 and timer.size == 0
    clock.advance(10 * delay)
    timer.advance_clock(0)
    assert len(fired) == 1


@pytest.mark.parametrize("delay", DELAYS)
def test_task_fires_as_soon_as_clock_passes_expiration_with_uneven_steps(delay):
    rng = random.Random(delay)
    clock = MockClock(monotonic_ms=rng.randrange(10**9))
    timer = Timer(clock)
    fired = []
    expiration = clock.monotonic_ms() + delay
    timer.add(Task(delay, fired))
    while clock.monotonic_ms() < expiration + 5:
        clock.advance(rng.randint(1, max(1, delay // 7)))
        timer.advance_clock(0)
        assert len(fired) == (1 if clock.monotonic_ms() >= expiration else 0)


def test_expiry_order_follows_expiration_even_across_one_big_jump():
    delays = [3, 1, 8_000, 25, 400, 19, 3_600_000, 20, 401, 7_999, 2, 160_001]
    clock = MockClock(monotonic_ms=5)
    timer = Timer(clock)
    fired = []
    for d in delays:
        timer.add(Task(d, fired, name=d))
    clock.advance(4_000_000)
    assert timer.advance_clock(0)
    assert fired == sorted(delays)


def test_expiry_order_when_stepping_one_ms():
    clock = MockClock()
    timer = Timer(clock)
    fired = []
    delays = random.Random(1).sample(range(1, 1_000), 200)
    for d in delays:
        timer.add(Task(d, fired, name=d))
    for _ in range(1_000):
        clock.advance(1)
        timer.advance_clock(0)
        assert fired == sorted(fired)
    assert fired == sorted(delays)


@pytest.mark.parametrize("seed", range(5))
def test_random_adds_cancels_and_advances_match_a_reference(seed):
    rng = random.Random(seed)
    clock = MockClock(monotonic_ms=rng.randrange(10**6))
    timer = Timer(clock)
    fired, pending = [], {}
    for step in range(3_000):
        before = len(fired)
        action = rng.random()
        if action < 0.5:
            delay = rng.choice([rng.randint(0, 25), rng.randint(0, 500), rng.randint(0, 200_000)])
            task = Task(delay, fired, name=step)
            pending[step] = (clock.monotonic_ms() + delay, task)
            timer.add(task)
        elif action < 0.6 and pending:
            name = rng.choice(list(pending))
            pending.pop(name)[1].cancel()
        else:
            clock.advance(rng.choice([1, rng.randint(1, 50), rng.randint(1, 20_000)]))
        timer.advance_clock(0)
        now = clock.monotonic_ms()
        due = sorted((exp, name) for name, (exp, _) in pending.items() if exp <= now)
        assert [pending[name][0] for name in fired[before:]] == [exp for exp, _ in due]
        assert sorted(fired[before:]) == sorted(name for _, name in due)
        for _, name in due:
            del pending[name]
        assert timer.size == len(pending)


def test_cancel_prevents_firing_in_any_wheel_and_after_cascading():
    clock = MockClock()
    timer = Timer(clock)
    fired = []
    tasks = {d: Task(d, fired, name=d) for d in DELAYS}
    for t in tasks.values():
        timer.add(t)
    assert timer.size == len(DELAYS)
    tasks[1].cancel()
    tasks[400].cancel()
    tasks[3_600_000].cancel()
    assert timer.size == len(DELAYS) - 3
    clock.advance(7_990)  # 8_000 and 8_001 now sit in a finer wheel than where they were added
    timer.advance_clock(0)
    tasks[8_001].cancel()
    tasks[8_001].cancel()  # twice is harmless
    clock.advance(4_000_000)
    timer.advance_clock(0)
    assert fired == [d for d in DELAYS if d not in (1, 400, 8_001, 3_600_000)]
    assert timer.size == 0


def test_task_cancelled_by_an_earlier_task_of_the_same_bucket_does_not_run():
    class Canceller(TimerTask):
        def run(self):
            fired.append("canceller")
            victim.cancel()

    clock = MockClock()
    timer = Timer(clock)
    fired = []
    victim = Task(30, fired, name="victim")
    timer.add(Canceller(30))
    timer.add(victim)
    clock.advance(30)
    timer.advance_clock(0)
    assert fired == ["canceller"]


def test_many_tasks_in_one_bucket():
    clock = MockClock()
    timer = Timer(clock)
    fired = []
    for i in range(10_000):
        timer.add(Task(50, fired, name=i))
    clock.advance(49)
    timer.advance_clock(0)  # the [40, 60) overflow bucket expires: its tasks move down a wheel
    assert fired == [] and timer.size == 10_000
    clock.advance(1)
    assert timer.advance_clock(0)
    assert fired == list(range(10_000)) and timer.size == 0


def test_adding_a_task_again_reschedules_it():
    clock = MockClock()
    timer = Timer(clock)
    fired = []
    task = Task(10, fired)
    timer.add(task)
    task.delay_ms = 100
    timer.add(task)
    assert timer.size == 1
    clock.advance(99)
    timer.advance_clock(0)
    assert fired == []
    clock.advance(1)
    timer.advance_clock(0)
    assert fired == [task]


def test_due_task_runs_at_once_and_a_failing_task_does_not_stop_others():
    class Boom(TimerTask):
        def run(self):
            raise RuntimeError("boom")

    clock = MockClock()
    timer = Timer(clock)
    fired = []
    timer.add(Task(0, fired, name="now"))
    assert fired == ["now"] and timer.size == 0
    timer.add(Boom(5))
    timer.add(Task(5, fired, name="after"))
    clock.advance(5)
    timer.advance_clock(0)
    assert fired == ["now", "after"]


def test_advance_clock_zero_never_blocks():
    timer = Timer(MockClock())
    timer.add(Task(1_000, []))
    started = time.monotonic()
    assert not timer.advance_clock(0)
    assert time.monotonic() - started < 0.5


def test_waiting_advance_clock_wakes_up_for_an_earlier_task():
    timer = Timer(Clock())
    fired = []

    def reaper():
        while not fired:
            timer.advance_clock(10_000)

    waiter = gevent.spawn(reaper)
    gevent.sleep(0.01)  # the waiter now waits on an empty timer, for up to 10 s
    timer.add(Task(20, fired))
    waiter.get(timeout=5)
    assert len(fired) == 1


def test_benchmark_add_and_cancel_100k(capsys):
    timer = Timer(Clock())
    rng = random.Random(0)
    tasks = [Task(rng.randint(1, 30_000), []) for _ in range(100_000)]
    started = time.perf_counter()
    for t in tasks:
        timer.add(t)
    added = time.perf_counter()
    for t in tasks:
        t.cancel()
    done = time.perf_counter()
    assert timer.size == 0
    with capsys.disabled():
        print(f"\n[bench] timing wheel, 100k tasks (delays 1..30000 ms): add {added - started:.3f} s, "
              f"cancel {done - added:.3f} s, add+cancel {(done - started) / 100_000 * 1e6:.2f} us/task")
