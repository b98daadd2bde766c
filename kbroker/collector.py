"""Python's cyclic garbage collector around bulk state changes (thousands of partitions at once).

A full collection walks every tracked object that is not frozen: with 10 000 partitions a broker holds
hundreds of thousands (logs, segments, partition states, metadata), and each full pass cost 0.2-0.9 s on a busy
2-core box, several times during one LeaderAndIsr or controller event. `bulk()` pauses the collector for such
a piece of work; when it left many new objects alive, one young pass drops the cyclic garbage among them and
gc.freeze moves the survivors out of every later collection (they live as long as the partitions do).
Freezing is O(1); what it freezes is only reclaimed by reference counting from then on, which is why the
broker's long-lived objects must not form reference cycles (see the weak references of Log and Partition).
"""
from __future__ import annotations

import contextlib
import gc

FREEZE_AFTER = 20_000   # tracked objects a piece of work left alive: frozen rather than walked again and again
_depth = 0              # bulk() blocks running (greenlets interleave): the collector resumes after the last
_was_enabled = True


@contextlib.contextmanager
def bulk():
    global _depth, _was_enabled
    if _depth == 0:
        _was_enabled = gc.isenabled()
        gc.disable()
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        # While paused, every object allocated and still alive stays in the youngest generation.
        if gc.get_count()[0] >= FREEZE_AFTER:
            gc.collect(0)
            gc.freeze()
        if _depth == 0 and _was_enabled:
            gc.enable()
