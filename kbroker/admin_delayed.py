"""The admin manager's delayed operations, Kafka's DelayedCreatePartitions and DelayedDeleteTopics: CreateTopics,
CreatePartitions and DeleteTopics answer once the controller's metadata shows their outcome (new partitions with
leaders, topics gone), or at their timeout. Watched under topic names in the admin manager's "topic" purgatory,
which checks them whenever UpdateMetadata names a topic.
"""
from __future__ import annotations

import gevent.event

from .purgatory.delayed import DelayedOperation


class _DelayedTopicOperation(DelayedOperation):
    """Completes when `is_done(topic)` holds for every topic; `pending` holds the others once `done` is set."""

    def __init__(self, delay_ms: int, metadata_cache, topics):
        super().__init__(delay_ms)
        self.cache = metadata_cache
        self.pending = dict(topics) if isinstance(topics, dict) else dict.fromkeys(topics)
        self.done = gevent.event.Event()

    def is_done(self, topic: str) -> bool:
        raise NotImplementedError

    def try_complete(self) -> bool:
        self.pending = {t: v for t, v in self.pending.items() if not self.is_done(t)}
        return False if self.pending else self.force_complete()

    def on_complete(self) -> None:
        self.done.set()

    def on_expiration(self) -> None:
        pass


class DelayedCreatePartitions(_DelayedTopicOperation):
    """topics: name -> the partition count to wait for; done when each of those partitions has a leader."""

    def is_done(self, topic: str) -> bool:
        partitions = self.cache.topic_partitions(topic)
        return (partitions is not None and len(partitions) >= self.pending[topic]
                and all(s.leader >= 0 for s in partitions.values()))


class DelayedDeleteTopics(_DelayedTopicOperation):
    """Done when the metadata cache no longer knows each topic."""

    def is_done(self, topic: str) -> bool:
        return self.cache.topic_partitions(topic) is None
