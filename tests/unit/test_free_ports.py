"""kbroker.cluster.free_port: the ports tests and the dev cluster give brokers before the brokers bind them."""
from kbroker import cluster


def test_a_port_handed_out_and_not_bound_yet_is_not_handed_out_again(monkeypatch):
    # A test picks a metrics port, starts broker 1 (which binds it a moment later), then picks ports for the
    # next broker: the unbound port was still free and could be picked twice (a broker then failed to start
    # with "Address already in use"). Over a small range (64 ports) every pick must differ.
    monkeypatch.setattr(cluster, "_candidate_ports", lambda: range(30000, 30064))
    monkeypatch.setattr(cluster, "_port_slice", lambda: (0, 1))
    base = cluster.free_port_range(8)
    picked = [*range(base, base + 8), *(cluster.free_port() for _ in range(24))]
    assert len(set(picked)) == len(picked)
