"""The machinery of delayed operations (Kafka's DelayedOperation and its purgatory) and the hierarchical timing wheel
that expires them. The delayed operations themselves live beside the service that creates and completes them:
replica/delayed.py (produce, fetch), coordinator/delayed.py (join, sync, heartbeat), admin_delayed.py (topic
creation and deletion)."""
from kbroker.purgatory.delayed import DelayedOperation, DelayedOperationPurgatory
from kbroker.purgatory.timing_wheel import Timer, TimerTask

__all__ = ["DelayedOperation", "DelayedOperationPurgatory", "Timer", "TimerTask"]
