"""The Brokers page's reading of a broker's Prometheus exposition: the totals it charts and the request time's
percentile between two scrapes (as Prometheus' histogram_quantile interpolates it). The expositions are written
by prometheus_client itself, with kbroker's metric names and buckets (kbroker/metrics.py)."""
from __future__ import annotations

from bisect import bisect_left

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

from kbroker.console.prometheus import parse_metrics, quantile
from kbroker.metrics import TIME_BUCKETS


class Broker:
    """What a broker's endpoint would expose: bytes per topic, and request times per (request, version)."""

    def __init__(self):
        self.bytes_in: dict[str, int] = {}
        self.bytes_out: dict[str, int] = {}
        self.times: dict[tuple[str, int], list[float]] = {}

    def request(self, name: str, seconds: float, version: int = 9, n: int = 1) -> None:
        self.times.setdefault((name, version), []).extend([seconds] * n)

    def collect(self):
        for suffix, values in (("bytesin", self.bytes_in), ("bytesout", self.bytes_out)):
            family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{suffix}", "", labels=["topic"])
            for topic, v in values.items():
                family.add_metric([topic], v)
            yield family
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests", "", labels=["request", "version"])
        times = HistogramMetricFamily("kafka_network_requestmetrics_totaltime_seconds", "",
                                      labels=["request", "version"])
        for (name, version), observed in self.times.items():
            counts = [0] * (len(TIME_BUCKETS) + 1)
            for s in observed:
                counts[bisect_left(TIME_BUCKETS, s)] += 1
            cumulative = [sum(counts[:i + 1]) for i in range(len(counts))]
            bounds = [str(b) for b in TIME_BUCKETS] + ["+Inf"]
            requests.add_metric([name, str(version)], len(observed))
            times.add_metric([name, str(version)], list(zip(bounds, cumulative)), sum(observed))
        yield requests
        yield times

    def scrape(self):
        registry = CollectorRegistry()
        registry.register(self)
        return parse_metrics(generate_latest(registry).decode())


def test_totals_are_summed_over_topics_and_request_types():
    b = Broker()
    b.bytes_in.update(a=100, b=50)
    b.bytes_out["a"] = 7
    b.request("Produce", 0.002, version=9)
    b.request("Produce", 0.002, version=8)
    b.request("Metadata", 0.0001)
    s = b.scrape()
    assert s.totals == {"bytesin": 150, "bytesout": 7, "requests": 3}
    assert sorted(s.buckets) == ["Metadata", "Produce"]
    assert dict(s.buckets["Produce"])[0.0025] == 2          # both versions, cumulative
    assert s.buckets["Produce"][-1] == (float("inf"), 2)


def test_p99_of_the_requests_between_two_scrapes():
    b = Broker()
    b.request("Produce", 0.0001, n=1000)                      # before the first scrape: not counted
    before = b.scrape().buckets["Produce"]
    b.request("Produce", 0.0002, n=98)                        # bucket (0, 0.0005]
    b.request("Produce", 0.2, n=2)                            # bucket (0.1, 0.25]
    after = b.scrape().buckets["Produce"]
    # rank 99 of 100: the first of the 2 slow ones, halfway into (0.1, 0.25].
    assert quantile(0.99, before, after) == pytest.approx(0.175)
    assert quantile(0.5, before, after) == pytest.approx(0.0005 * 50 / 98)


def test_no_percentile_without_requests_or_after_a_restart():
    b = Broker()
    b.request("Produce", 0.01)
    first = b.scrape().buckets["Produce"]
    assert quantile(0.99, first, first) is None               # nothing in between
    restarted = Broker()
    restarted.request("Produce", 0.01)
    b.request("Produce", 0.01)
    assert quantile(0.99, b.scrape().buckets["Produce"], restarted.scrape().buckets["Produce"]) is None
    assert quantile(0.99, [], first) is None                  # no earlier scrape


def test_requests_slower_than_every_bound_give_the_highest_bound():
    b = Broker()
    b.request("Produce", 100.0)
    after = b.scrape().buckets["Produce"]
    assert quantile(0.99, [(bound, 0.0) for bound, _ in after], after) == TIME_BUCKETS[-1]


def test_garbage_is_a_value_error():
    with pytest.raises(ValueError):
        parse_metrics("kafka_server_brokertopicmetrics_bytesin_total{topic=\"a\" 1\n")
