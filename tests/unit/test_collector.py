"""kbroker.collector.bulk: the garbage collector paused around bulk state changes, and what they leave alive
frozen out of later collections, whether one piece of work left it or many small ones did."""
import gc

from kbroker import collector


class State:
    """A stand-in for a partition's long-lived state (a tracked object, with a dict)."""

    def __init__(self, i):
        self.i, self.attrs = i, {"i": i}


def test_many_small_pieces_are_frozen_once_together_they_left_enough_alive():
    kept = []
    gc.collect()
    collector._left_alive = 0
    frozen = gc.get_freeze_count()
    try:
        piece = collector.FREEZE_AFTER // 10
        for n in range(30):
            with collector.bulk():
                assert not gc.isenabled()
                kept.extend(State(i) for i in range(piece // 2))   # two tracked objects each
            assert gc.isenabled()
            if gc.get_freeze_count() > frozen:
                break
        assert 5 <= n < 15, n                                  # frozen after ≈ FREEZE_AFTER objects, not per piece
        assert gc.get_freeze_count() - frozen >= len(kept)
    finally:
        gc.unfreeze()


def test_a_piece_leaving_little_alive_freezes_nothing():
    gc.collect()
    collector._left_alive = 0
    frozen = gc.get_freeze_count()
    with collector.bulk():
        kept = [State(i) for i in range(100)]
    assert gc.get_freeze_count() == frozen and len(kept) == 100
