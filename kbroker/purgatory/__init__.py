"""Delayed operations (produce, fetch, join, ...) and the hierarchical timing wheel that expires them."""
from kbroker.purgatory.delayed import DelayedOperation, DelayedOperationPurgatory
from kbroker.purgatory.timing_wheel import Timer, TimerTask

__all__ = ["DelayedOperation", "DelayedOperationPurgatory", "Timer", "TimerTask"]
