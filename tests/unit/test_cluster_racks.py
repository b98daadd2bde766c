"""kbroker.cluster.rack_of: the racks `kbroker cluster up --racks N` gives its brokers (its --help says the same)."""
from kbroker.cluster import rack_of


def test_brokers_take_the_racks_in_turn():
    assert [rack_of(n, 3) for n in range(1, 8)] == ["rack-1", "rack-2", "rack-3", "rack-1", "rack-2", "rack-3",
                                                    "rack-1"]
    assert {rack_of(n, 1) for n in range(1, 10)} == {"rack-1"}
