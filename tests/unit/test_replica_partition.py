"""kbroker.replica.partition.Partition on a real Log in tmp_path and a MockClock, no processes, no ZooKeeper:
the ISR writer is a recorder that accepts (or, for a zkVersion conflict, refuses) each new ISR.

Covers the leader's bookkeeping of follower positions, the high watermark (the smallest log end offset among
the ISR and the replicas caught up within replica.lag.time.max.ms), ISR expansion (a follower reaching the high
watermark and the current leader epoch) and shrinking (a follower not caught up for longer than the lag, where
"caught up" follows Kafka 2.8's rule for followers always one fetch behind a busy leader), min.insync.replicas
for acks=all, and the follower side (append, high watermark capped by its own log end offset)."""
import dataclasses
import gc
import weakref

import pytest

from kbroker.clock import MockClock
from kbroker.log.checkpoint import EpochEntry, LeaderEpochCheckpointFile
from kbroker.log.config import LogConfig
from kbroker.log.manager import LogManager
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.replica.partition import FollowerRound, Partition

from .test_log_batches import fill, v2_batch
from .test_log_partition_log import make_log

LAG = 10_000                       # replica.lag.time.max.ms
PRODUCE_V = 8


class IsrWriter:
    """Stands in for the replica manager's zkVersion-checked state znode write."""

    def __init__(self):
        self.writes: list[list[int]] = []
        self.accept = True

    def __call__(self, partition, new_isr) -> bool:
        self.writes.append(list(new_isr))
        return self.accept


def make_partition(tmp_path, isr=(1, 2, 3), replicas=(1, 2, 3), leader=1, min_isr=1, epoch=5, prefill=0):
    clock = MockClock()
    log = make_log(tmp_path, clock, name="orders-0", min_insync_replicas=min_isr)
    if prefill:
        fill(log, 1, count=prefill)
    writer = IsrWriter()
    p = Partition("orders", 0, 1, log, clock, writer, LAG)
    p.apply_state(leader, epoch, list(isr), list(replicas), zk_version=0, controller_epoch=1, topic_id=None)
    return p, clock, writer


def produce(p, count, acks=-1):
    """A client's v2 batch of `count` records, appended as leader; the AppendResult."""
    return p.append_as_leader(v2_batch(0, count), PRODUCE_V, acks)


# ---- becoming leader or follower -------------------------------------------------------------------------

def test_becoming_leader_starts_an_epoch_at_the_log_end_and_tracks_every_follower(tmp_path):
    p, clock, _ = make_partition(tmp_path, isr=(1, 2), replicas=(1, 2, 3), prefill=4)
    assert p.is_leader and p.leader_epoch_start_offset == 4
    assert p.log.leader_epoch_cache.latest_epoch == 5
    assert set(p.remote) == {2, 3}
    assert p.remote[2].last_caught_up_ms == clock.now_ms()   # in the ISR: caught up as of now
    assert p.remote[3].last_caught_up_ms == 0                # not in the ISR
    assert p.remote[2].log_end_offset == -1


def test_a_new_leader_epoch_is_checkpointed_before_the_first_append_in_it(tmp_path):
    """Becoming leader writes no leader-epoch checkpoint (a LeaderAndIsr making thousands of leaders would wait
    for as many fsyncs): the first append in the epoch writes it first (an fsync in the thread pool, the hub runs
    the ISR check meanwhile, which must see the new leadership's followers caught up), a restart reads it back."""
    p, clock, writer = make_partition(tmp_path, leader=2, prefill=3)
    cache = p.log.leader_epoch_cache
    write = cache._run_blocking
    seen = []

    def write_meanwhile_the_isr_check(fn):
        seen.append((p.maybe_shrink_isr(), p.log.log_end_offset))
        return write(fn)
    cache._run_blocking = write_meanwhile_the_isr_check
    p.apply_state(1, 6, [1, 2, 3], [1, 2, 3], zk_version=1, controller_epoch=1, topic_id=None)
    assert seen == [] and cache.latest_entry == EpochEntry(6, 3)
    assert EpochEntry(6, 3) not in LeaderEpochCheckpointFile(cache.checkpoint.path).read()
    produce(p, 2, acks=1)
    assert seen == [(False, 3)] and writer.writes == []   # written before the records, followers in sync
    assert LeaderEpochCheckpointFile(cache.checkpoint.path).read()[-1] == EpochEntry(6, 3)
    produce(p, 2, acks=1)
    assert len(seen) == 1


def test_a_new_leader_epoch_without_appends_is_checkpointed_at_close(tmp_path):
    p, _, _ = make_partition(tmp_path, prefill=3)
    path = p.log.leader_epoch_cache.checkpoint.path
    p.log.close()
    assert LeaderEpochCheckpointFile(path).read() == [EpochEntry(5, 3)]


def test_becoming_follower_forgets_the_followers(tmp_path):
    p, _, writer = make_partition(tmp_path)
    p.apply_state(2, 6, [1, 2, 3], [1, 2, 3], zk_version=1, controller_epoch=1, topic_id=None)
    assert not p.is_leader and p.remote == {}
    assert p.maybe_shrink_isr() is False and p.maybe_increment_high_watermark() is False
    assert writer.writes == []
    with pytest.raises(KafkaError) as e:
        produce(p, 1)
    assert e.value.code is Errors.NOT_LEADER_OR_FOLLOWER


# ---- follower positions and the high watermark -------------------------------------------------------------

def test_high_watermark_is_the_smallest_log_end_offset_in_the_isr(tmp_path):
    p, _, _ = make_partition(tmp_path)
    assert produce(p, 5).last_offset == 4
    assert (p.log.log_end_offset, p.high_watermark) == (5, 0)      # followers have fetched nothing yet
    assert p.update_follower_fetch_state(2, 5, 5) is False          # broker 3 still at nothing
    assert p.remote[2].log_end_offset == 5
    assert p.update_follower_fetch_state(3, 3, 5) is True
    assert p.high_watermark == 3
    assert p.update_follower_fetch_state(3, 3, 5) is False          # no progress, no move
    assert p.update_follower_fetch_state(3, 5, 5) is True
    assert p.high_watermark == 5


def test_a_single_replica_isr_advances_on_append(tmp_path):
    p, _, _ = make_partition(tmp_path, isr=(1,), replicas=(1,))
    produce(p, 3)
    assert p.high_watermark == 3


def test_follower_fetch_through_read_updates_its_position(tmp_path):
    p, _, _ = make_partition(tmp_path, isr=(1, 2), replicas=(1, 2))
    produce(p, 4)
    info, hw, _, log_start = p.read(0, 1 << 20, 0, True, follower=2)
    assert hw == 0 and log_start == 0                       # what the follower saw before its offset counted
    assert p.remote[2].log_end_offset == 0
    _, hw, _, _ = p.read(4, 1 << 20, 0, True, follower=2)
    assert hw == 4 and p.high_watermark == 4 and p.remote[2].log_end_offset == 4


def test_consumer_reads_stop_at_the_high_watermark_followers_at_the_log_end(tmp_path):
    p, _, _ = make_partition(tmp_path, isr=(1, 2), replicas=(1, 2))
    produce(p, 4)
    p.update_follower_fetch_state(2, 2, 4)
    assert p.high_watermark == 2
    consumer, hw, _, _ = p.read(0, 1 << 20, 0, True)
    follower, _, _, _ = p.read(2, 1 << 20, 0, True, follower=2)
    assert hw == 2 and consumer.length == 0         # the only batch (offsets 0-3) ends beyond 2
    assert follower.length > 0


def test_an_unknown_follower_is_ignored(tmp_path):
    p, _, writer = make_partition(tmp_path, isr=(1, 2), replicas=(1, 2))
    produce(p, 2)
    assert p.update_follower_fetch_state(7, 2, 2) is False
    assert 7 not in p.remote and p.isr == [1, 2] and writer.writes == []


def test_a_caught_up_replica_outside_the_isr_holds_the_high_watermark_back(tmp_path):
    # Kafka 2.8: the high watermark waits for replicas caught up within the lag, ISR members or not.
    p, clock, writer = make_partition(tmp_path, isr=(1, 2), replicas=(1, 2, 3))
    writer.accept = False                                   # the expansion loses a zkVersion race
    produce(p, 6)
    p.update_follower_fetch_state(3, 6, 6)                  # 3 caught up, but stays outside the ISR
    assert writer.writes == [[1, 2, 3]] and p.isr == [1, 2]
    produce(p, 4)                                           # log end 10
    p.update_follower_fetch_state(2, 10, 10)
    assert p.high_watermark == 6                            # held at 3's position
    clock.advance(LAG + 1)                                  # 3 no longer counts
    p.update_follower_fetch_state(2, 10, 10)
    assert p.high_watermark == 10


def test_an_idle_in_sync_follower_fetching_at_the_end_stays_in_sync(tmp_path):
    # A fetch session re-reads idle partitions every round: the follower's caught-up time must still move.
    p, clock, _ = make_partition(tmp_path, isr=(1, 2), replicas=(1, 2))
    produce(p, 3)
    assert p.update_follower_fetch_state(2, 3, 3) is True and p.high_watermark == 3
    for _ in range(3):
        clock.advance(LAG // 2)
        assert p.update_follower_fetch_state(2, 3, 3) is False
    assert p.maybe_shrink_isr() is False and p.isr == [1, 2]
    clock.advance(LAG + 1)                                  # then it stops fetching
    assert p.maybe_shrink_isr() is True and p.isr == [1]


def test_a_follower_at_the_end_stays_in_sync_through_its_rounds_without_reading_the_partition(tmp_path):
    # A session's quiet partition is not read: the follower's fetches (its round) count as fetches at the end,
    # until the partition changes (settle_followers) or the follower stops fetching.
    p, clock, _ = make_partition(tmp_path, isr=(1, 2), replicas=(1, 2))
    produce(p, 3)
    fetches = FollowerRound(clock.now_ms())
    assert p.update_follower_fetch_state(2, 3, 3, fetches) is True
    for _ in range(3):
        clock.advance(LAG // 2)
        fetches.last_ms = clock.now_ms()                    # a fetch of follower 2 that did not read this partition
        assert p.maybe_shrink_isr() is False
    p.settle_followers()                                    # an append comes: caught up as of its last round
    produce(p, 2)
    assert p.remote[2].last_caught_up_ms == clock.now_ms() and p.remote[2].idle_round is None
    clock.advance(LAG // 2)
    fetches.last_ms = clock.now_ms()                        # rounds no longer count: it is behind now
    p.update_follower_fetch_state(2, 3, 5, fetches)         # one fetch behind: caught up as of its last fetch
    clock.advance(LAG // 2 + 1)
    assert p.maybe_shrink_isr() is True and p.isr == [1]


# ---- ISR expansion -------------------------------------------------------------------------------------------

def test_isr_expands_when_a_follower_reaches_the_high_watermark(tmp_path):
    p, _, writer = make_partition(tmp_path, isr=(1, 2), replicas=(1, 2, 3))
    produce(p, 5)
    p.update_follower_fetch_state(2, 5, 5)
    assert p.high_watermark == 5
    p.update_follower_fetch_state(3, 4, 5)                  # below the high watermark: not yet
    assert writer.writes == [] and p.isr == [1, 2]
    p.update_follower_fetch_state(3, 5, 5)
    assert writer.writes == [[1, 2, 3]] and p.isr == [1, 2, 3]


def test_isr_expansion_waits_for_the_current_leader_epoch(tmp_path):
    # The new leader's epoch starts at offset 10; a follower between the high watermark and 10 has not yet
    # caught up with anything this leader wrote, so it stays out.
    p, _, writer = make_partition(tmp_path, isr=(1, 2), replicas=(1, 2, 3), prefill=10)
    p.log.update_high_watermark(5)
    assert p.leader_epoch_start_offset == 10
    p.update_follower_fetch_state(3, 7, 10)
    assert writer.writes == [] and p.isr == [1, 2]
    p.update_follower_fetch_state(3, 10, 10)
    assert writer.writes == [[1, 2, 3]] and p.isr == [1, 2, 3]


def test_a_refused_isr_write_leaves_the_isr_as_it_was(tmp_path):
    p, _, writer = make_partition(tmp_path, isr=(1, 2), replicas=(1, 2, 3))
    writer.accept = False
    p.update_follower_fetch_state(3, 0, 0)
    assert writer.writes == [[1, 2, 3]] and p.isr == [1, 2]
    writer.accept = True
    p.update_follower_fetch_state(3, 0, 0)                  # the next fetch tries again
    assert p.isr == [1, 2, 3]


# ---- ISR shrinking on the fake clock --------------------------------------------------------------------------

def test_isr_shrinks_a_follower_not_caught_up_for_longer_than_the_lag(tmp_path):
    p, clock, writer = make_partition(tmp_path)
    produce(p, 5)
    clock.advance(4_000)
    p.update_follower_fetch_state(2, 5, 5)                  # 2 caught up at t0 + 4 s; 3 never fetched
    assert p.high_watermark == 0
    clock.advance(LAG - 4_000)                              # exactly the lag since t0: still in sync
    assert p.maybe_shrink_isr() is False
    clock.advance(1)
    assert p.maybe_shrink_isr() is True
    assert writer.writes == [[1, 2]] and p.isr == [1, 2]
    assert p.high_watermark == 5                            # no longer waiting for 3
    clock.advance(4_000)                                    # 2's turn: 4 s + lag + 1 since it caught up
    assert p.maybe_shrink_isr() is True
    assert p.isr == [1]


def test_a_follower_one_fetch_behind_a_busy_leader_stays_in_sync(tmp_path):
    # Each fetch asks for what the leader had at the previous fetch: caught up as of that fetch (Kafka 2.8).
    p, clock, writer = make_partition(tmp_path, isr=(1, 2), replicas=(1, 2))
    fetched = 0
    for _ in range(10):
        produce(p, 3)
        clock.advance(LAG // 2)
        leo = p.log.log_end_offset
        p.update_follower_fetch_state(2, fetched, leo)
        fetched = leo                                       # the next fetch asks for what the leader has now
        assert p.maybe_shrink_isr() is False
    assert writer.writes == [] and p.isr == [1, 2]


def test_a_stuck_follower_is_shrunk_even_while_it_keeps_fetching(tmp_path):
    p, clock, writer = make_partition(tmp_path, isr=(1, 2), replicas=(1, 2))
    produce(p, 3)
    for _ in range(3):                                      # fetching offset 0 forever, the leader at 3
        clock.advance(LAG // 2)
        p.update_follower_fetch_state(2, 0, 3)
    assert p.maybe_shrink_isr() is True
    assert p.isr == [1] and writer.writes == [[1]]
    assert p.high_watermark == 3                            # the leader alone


def test_a_refused_shrink_keeps_the_isr(tmp_path):
    p, clock, writer = make_partition(tmp_path, isr=(1, 2), replicas=(1, 2))
    writer.accept = False
    clock.advance(LAG + 1)
    assert p.maybe_shrink_isr() is False
    assert writer.writes == [[1]] and p.isr == [1, 2]


def test_shrink_then_expand_again_after_catching_up(tmp_path):
    p, clock, writer = make_partition(tmp_path, isr=(1, 2), replicas=(1, 2))
    produce(p, 2)
    clock.advance(LAG + 1)
    assert p.maybe_shrink_isr() and p.isr == [1]
    produce(p, 2)                                           # the leader alone: high watermark 4
    assert p.high_watermark == 4
    p.update_follower_fetch_state(2, 4, 4)
    assert p.isr == [1, 2] and writer.writes == [[1], [1, 2]]
    clock.advance(LAG)
    assert p.maybe_shrink_isr() is False                    # caught up when it rejoined


# ---- min.insync.replicas ----------------------------------------------------------------------------------------

def test_acks_all_needs_min_insync_replicas(tmp_path):
    p, _, _ = make_partition(tmp_path, isr=(1,), replicas=(1, 2, 3), min_isr=2)
    with pytest.raises(KafkaError) as e:
        produce(p, 1, acks=-1)
    assert e.value.code is Errors.NOT_ENOUGH_REPLICAS
    assert p.log.log_end_offset == 0                         # refused before anything was written
    assert produce(p, 1, acks=1).first_offset == 0            # acks=1 and acks=0 do not care
    assert produce(p, 1, acks=0).first_offset == 1


def test_acks_all_is_accepted_again_once_the_isr_is_large_enough(tmp_path):
    p, _, _ = make_partition(tmp_path, isr=(1,), replicas=(1, 2), min_isr=2)
    p.update_follower_fetch_state(2, 0, 0)                  # caught up at the high watermark: joins the ISR
    assert p.isr == [1, 2]
    result = produce(p, 2, acks=-1)
    assert (result.first_offset, result.last_offset, result.record_count) == (0, 1, 2)
    assert result.log_append_time == -1                       # CreateTime topic
    assert p.high_watermark == 0                              # acks=all waits for broker 2's next fetch
    p.update_follower_fetch_state(2, 2, 2)
    assert p.high_watermark == 2


def test_min_insync_replicas_follows_a_config_change(tmp_path):
    p, _, _ = make_partition(tmp_path, isr=(1, 2), replicas=(1, 2, 3), min_isr=2)
    produce(p, 1)
    p.log.config = dataclasses.replace(p.log.config, min_insync_replicas=3)
    with pytest.raises(KafkaError) as e:
        produce(p, 1)
    assert e.value.code is Errors.NOT_ENOUGH_REPLICAS


# ---- the follower side -------------------------------------------------------------------------------------------

def test_follower_appends_keep_offsets_and_cap_the_high_watermark(tmp_path):
    p, _, _ = make_partition(tmp_path, leader=2)
    assert not p.is_leader
    p.append_as_follower(v2_batch(0, 3, epoch=5) + v2_batch(3, 2, epoch=5), leader_hw=9)
    assert p.log.log_end_offset == 5
    assert p.high_watermark == 5                             # the leader's 9, capped by this log's end
    p.append_as_follower(v2_batch(3, 2, epoch=5) + v2_batch(5, 1, epoch=5), leader_hw=4)
    assert p.log.log_end_offset == 6                         # the entry it already had is skipped
    assert p.high_watermark == 4


def test_follower_refuses_corrupt_data_from_the_leader(tmp_path):
    p, _, _ = make_partition(tmp_path, leader=2)
    data = bytearray(v2_batch(0, 3))
    data[-1] ^= 0xFF
    with pytest.raises(KafkaError) as e:
        p.append_as_follower(bytes(data), leader_hw=3)
    assert e.value.code is Errors.CORRUPT_MESSAGE
    assert p.log.log_end_offset == 0



def test_a_deleted_log_is_freed_although_frozen(tmp_path):
    # Brokers gc.freeze what they host after a big LeaderAndIsr. A frozen object in a reference cycle is never
    # collected: a deleted log (with its partition, segments and indexes) must go by reference counting alone.
    lm = LogManager([str(tmp_path)], LogConfig(), MockClock())
    log = lm.get_or_create_log(("orders", 0))
    p = Partition("orders", 0, 1, log, MockClock(), IsrWriter(), LAG)
    p.apply_state(1, 5, [1], [1], zk_version=0, controller_epoch=1, topic_id=None)   # a leader-epoch entry
    produce(p, 3, acks=1)
    assert p.read(0, 1 << 20, 1, True, -1)[0].length > 0      # read_committed: through first_unstable_offset
    refs = [weakref.ref(log), weakref.ref(p)]
    gc.freeze()
    try:
        lm.delete_logs([("orders", 0)])
        lm.delete_pending_files(force=True)
        del log, p
        gc.collect()
        assert [r() for r in refs] == [None, None]
    finally:
        gc.unfreeze()
