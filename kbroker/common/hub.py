"""Yielding to the gevent hub from a long loop (LeaderAndIsr over tens of thousands of partitions, log loading,
the controller's request building, loading a coordinator partition, a metrics scrape, down-converting a fetch).

gevent.sleep(0) runs only the greenlets already ready to run: the loop's I/O and timers wait until it turns, so a
long loop of sleep(0)s can hold a broker's ZooKeeper pings past the session timeout (a broker applying a LeaderAndIsr
for 40 000 partitions lost its 18 s session that way). A positive sleep waits for the next loop iteration, which
polls I/O and runs the timers."""
from __future__ import annotations

import time

YIELD_SECONDS = 0.0001


def yield_to_hub() -> None:
    """Let the hub run one loop iteration (cooperative where time is monkey-patched, as in the broker; elsewhere a
    0.1 ms pause)."""
    time.sleep(YIELD_SECONDS)
