"""kbroker.metadata_cache.MetadataCache.update: each UpdateMetadata leaves earlier snapshots untouched (readers
hold them without locks), keeps the topics it does not name, and drops a deleted topic with its topic id."""
import uuid

from kbroker.metadata_cache import LEADER_DURING_DELETE, CachedBroker, MetadataCache, PartitionState

BROKERS = [CachedBroker(1, {"PLAINTEXT": ("localhost", 9092, 0)})]


def state(topic, partition, leader=1, epoch=0):
    return PartitionState(topic, partition, leader, epoch, [1], [1])


def test_an_update_leaves_the_topics_it_does_not_name_and_earlier_snapshots_alone():
    cache = MetadataCache(1)
    ids = {"a": uuid.uuid4(), "b": uuid.uuid4()}
    cache.update(1, BROKERS, [state("a", 0), state("a", 1), state("b", 0)], ids)
    before, a_before = cache.partitions, cache.partitions["a"]
    cache.update(1, BROKERS, [state("a", 1, epoch=1), state("c", 0)], {})
    assert a_before[1].leader_epoch == 0 and set(before) == {"a", "b"}
    assert cache.partition("a", 1).leader_epoch == 1 and cache.partition("a", 0).leader_epoch == 0
    assert cache.topics() == ["a", "b", "c"] and cache.topic_ids == ids


def test_a_deleted_topic_goes_with_its_topic_id():
    cache = MetadataCache(1)
    ids = {"a": uuid.uuid4(), "b": uuid.uuid4()}
    cache.update(1, BROKERS, [state("a", 0), state("a", 1), state("b", 0)], ids)
    deleted = cache.update(1, BROKERS, [state("a", 0, LEADER_DURING_DELETE), state("a", 1, LEADER_DURING_DELETE),
                                        state("x", 0, LEADER_DURING_DELETE)], {})
    assert sorted(deleted) == [("a", 0), ("a", 1)]
    assert cache.topics() == ["b"] and cache.topic_ids == {"b": ids["b"]}
