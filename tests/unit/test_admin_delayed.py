"""The admin manager's DelayedCreatePartitions and DelayedDeleteTopics: complete when UpdateMetadata shows the
outcome (checked under the topic's key), or at their timeout with the topics still pending."""
from kbroker.admin_delayed import DelayedCreatePartitions, DelayedDeleteTopics
from kbroker.clock import MockClock
from kbroker.metadata_cache import LEADER_DURING_DELETE, MetadataCache, PartitionState
from kbroker.purgatory import DelayedOperationPurgatory


def states(topic, leaders):
    return [PartitionState(topic, p, leader, 0, [1], [1]) for p, leader in enumerate(leaders)]


def setup():
    clock = MockClock()
    return clock, DelayedOperationPurgatory("topic", clock), MetadataCache(1)


def test_create_completes_once_every_new_partition_has_a_leader():
    clock, purgatory, cache = setup()
    op = DelayedCreatePartitions(1000, cache, {"a": 2, "b": 1})
    assert not purgatory.try_complete_else_watch(op, ["a", "b"])
    cache.update(1, [], states("a", [1, -1]) + states("b", [1]), {})
    purgatory.check_and_complete("a")
    assert not op.done.is_set() and op.pending == {"a": 2}
    cache.update(1, [], states("a", [1, 1]), {})
    assert purgatory.check_and_complete("a") == 1
    assert op.done.is_set() and op.pending == {}


def test_create_times_out_with_the_leaderless_topics_pending():
    clock, purgatory, cache = setup()
    cache.update(1, [], states("a", [1]), {})
    op = DelayedCreatePartitions(1000, cache, {"a": 2, "b": 1})
    assert not purgatory.try_complete_else_watch(op, ["a", "b"])
    clock.advance(1000)
    purgatory.advance_clock(0)
    assert op.done.is_set() and op.pending == {"a": 2, "b": 1}


def test_delete_completes_when_the_topics_leave_the_cache():
    clock, purgatory, cache = setup()
    cache.update(1, [], states("a", [1]) + states("b", [1]), {})
    op = DelayedDeleteTopics(1000, cache, ["a", "b"])
    assert not purgatory.try_complete_else_watch(op, ["a", "b"])
    cache.update(1, [], states("a", [LEADER_DURING_DELETE]), {})
    purgatory.check_and_complete("a")
    assert op.pending == {"b": None}
    cache.update(1, [], states("b", [LEADER_DURING_DELETE]), {})
    purgatory.check_and_complete("b")
    assert op.done.is_set() and not op.pending


def test_already_done_completes_at_once():
    _, purgatory, cache = setup()
    assert purgatory.try_complete_else_watch(DelayedDeleteTopics(1000, cache, ["gone"]), ["gone"])
