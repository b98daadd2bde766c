"""Prometheus metrics of one broker, named after Kafka's JMX metrics, served over HTTP when metrics.port is set.

Naming: Kafka's MBean `kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=T` becomes
`kafka_server_brokertopicmetrics_messagesin_total{topic="T"}`: domain, type and name lower-cased and joined
by underscores, MBean keys as labels. Kafka's rates ("...PerSec") are Prometheus counters ending in `_total`
(rate() gives the per-second figure); Kafka's times ("...Ms") are histograms in seconds, Prometheus' base
unit, named `..._seconds` (TotalTimeMs -> `kafka_network_requestmetrics_totaltime_seconds`). Kafka's
all-topics series (no topic key) are left to sum() over the topic label.

Cost: the hot paths only add to plain attributes of small objects looked up once per topic or request type
(no locks: every update runs on the gevent hub, and greenlets never switch inside one). The registry's
collector turns them into metric families when scraped, and reads the state gauges (purgatory sizes,
under-replicated partitions, controller state) from the broker's objects then, so they cost nothing between
scrapes. The endpoint is a gevent WSGI server: scrapes are served by greenlets, never threads.
"""
from __future__ import annotations

import logging
from bisect import bisect_left

from gevent.pywsgi import WSGIServer
from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString

log = logging.getLogger("kbroker.metrics")

# Upper bounds in seconds, from a fast request's half millisecond to a long-poll fetch's half minute.
TIME_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Histogram:
    """Bucket counts and the sum of observations; exposed with cumulative `le` buckets."""
    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds=TIME_BUCKETS):
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)   # the last one is +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def buckets(self) -> list[tuple[str, int]]:
        out, total = [], 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts):
            total += n
            out.append((floatToGoString(bound), total))
        return out


class TopicStats:
    """Kafka's BrokerTopicMetrics of one topic. Produce and fetch counts are per partition, as in Kafka."""
    __slots__ = ("messages_in", "bytes_in", "bytes_out", "produce_requests", "failed_produce_requests",
                 "fetch_requests", "failed_fetch_requests", "produce_conversions", "fetch_conversions")

    def __init__(self):
        for name in self.__slots__:
            setattr(self, name, 0)


# (metric name suffix, TopicStats attribute, help)
_TOPIC_COUNTERS = (
    ("messagesin", "messages_in", "Records appended to the topic's partitions led here (MessagesInPerSec)."),
    ("bytesin", "bytes_in", "Bytes produced to the topic's partitions led here (BytesInPerSec)."),
    ("bytesout", "bytes_out", "Bytes fetched by consumers from the topic, after any down-conversion "
                              "(BytesOutPerSec; follower fetches count in replicationbytesout)."),
    ("totalproducerequests", "produce_requests", "Produce requests per partition of the topic "
                                                 "(TotalProduceRequestsPerSec)."),
    ("failedproducerequests", "failed_produce_requests", "Produce requests per partition that failed "
                                                         "(FailedProduceRequestsPerSec)."),
    ("totalfetchrequests", "fetch_requests", "Fetch requests per partition of the topic (TotalFetchRequestsPerSec)."),
    ("failedfetchrequests", "failed_fetch_requests", "Fetch requests per partition that failed "
                                                     "(FailedFetchRequestsPerSec)."),
    ("producemessageconversions", "produce_conversions", "Produced records converted to the log's message "
                                                         "format (ProduceMessageConversionsPerSec)."),
    ("fetchmessageconversions", "fetch_conversions", "Records of the batches down-converted for old fetch "
                                                     "versions (FetchMessageConversionsPerSec)."),
)


class BrokerMetrics:
    """One broker's statistics and its own CollectorRegistry (several brokers may share a process)."""

    def __init__(self, server=None):
        self.server = server     # the KafkaServer whose state the gauges read; None: counters only
        self.topics: dict[str, TopicStats] = {}
        self.requests: dict[tuple[str, int], Histogram] = {}
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.replication_bytes_out = 0
        self.log_flush = Histogram()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self._http: WSGIServer | None = None

    # ---- hot paths ----------------------------------------------------------------------------------------
    def topic(self, name: str) -> TopicStats:
        stats = self.topics.get(name)
        if stats is None:
            stats = self.topics[name] = TopicStats()
        return stats

    def remove_topic(self, name: str) -> None:
        """Drop a topic's series (Kafka removes them when the broker hosts no partition of it any more)."""
        self.topics.pop(name, None)

    def request_done(self, name: str, version: int, seconds: float) -> None:
        times = self.requests.get((name, version))
        if times is None:
            times = self.requests[(name, version)] = Histogram()
        times.observe(seconds)

    # ---- HTTP endpoint ------------------------------------------------------------------------------------
    def serve(self, host: str, port: int) -> int:
        """Bind now (OSError if the port is taken) and serve the registry; returns the bound port."""
        self._http = WSGIServer((host, port), make_wsgi_app(self.registry), log=None, error_log=log)
        self._http.init_socket()
        self._http.start()
        return self._http.socket.getsockname()[1]

    def stop(self) -> None:
        if self._http is not None:
            self._http.stop(timeout=1)
            self._http = None

    # ---- scrape -------------------------------------------------------------------------------------------
    def collect(self):
        topics = sorted(self.topics.items())
        for suffix, attr, doc in _TOPIC_COUNTERS:
            family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{suffix}", doc, labels=["topic"])
            for name, stats in topics:
                family.add_metric([name], getattr(stats, attr))
            yield family
        yield CounterMetricFamily("kafka_server_brokertopicmetrics_replicationbytesout",
                                  "Bytes fetched by follower replicas (ReplicationBytesOutPerSec).",
                                  value=self.replication_bytes_out)
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                       "Requests handled, by API (Fetch split into FetchConsumer and FetchFollower, "
                                       "as Kafka) and version (RequestsPerSec).", labels=["request", "version"])
        times = HistogramMetricFamily("kafka_network_requestmetrics_totaltime_seconds",
                                      "Time from a request being read to its response being ready, waits in the "
                                      "purgatories included (TotalTimeMs).", labels=["request", "version"])
        for (name, version), h in sorted(self.requests.items()):
            labels = [name, str(version)]
            requests.add_metric(labels, h.count)
            times.add_metric(labels, h.buckets(), h.sum)
        yield requests
        yield times
        yield HistogramMetricFamily("kafka_log_logflushstats_logflushtime_seconds",
                                    "Time of each log flush (fsync) (LogFlushRateAndTimeMs).",
                                    buckets=self.log_flush.buckets(), sum_value=self.log_flush.sum)
        yield CounterMetricFamily("kafka_server_replicamanager_isrshrinks", "ISR shrinks written by this leader "
                                  "(IsrShrinksPerSec).", value=self.isr_shrinks)
        yield CounterMetricFamily("kafka_server_replicamanager_isrexpands", "ISR expansions written by this leader "
                                  "(IsrExpandsPerSec).", value=self.isr_expands)
        yield from self._replica_gauges()
        yield from self._controller_gauges()
        yield from self._transaction_gauges()
        yield from self.server.replication_quotas.metric_families() if self.server else ()
        server = self.server
        if getattr(server, "connection_quotas", None) is not None:   # made by startup
            yield from server.connection_quotas.metric_families()
        if server is not None:
            yield from server.client_quotas.metric_families()
        if server is not None and server.socket_server is not None:
            yield GaugeMetricFamily("kafka_server_socketservermetrics_connection_count", "Open client and "
                                    "broker connections (connection-count).",
                                    value=len(server.socket_server.connections))

    def _replica_gauges(self):
        rm = getattr(self.server, "replica_manager", None)   # None before the server created it
        partitions = list(rm.partitions.values()) if rm is not None else []
        led = [p for p in partitions if p.is_leader]

        def gauge(name, doc, value):
            return GaugeMetricFamily(f"kafka_server_replicamanager_{name}", doc, value=value)
        yield gauge("partitioncount", "Partitions hosted here (PartitionCount).", len(partitions))
        yield gauge("leadercount", "Partitions led here (LeaderCount).", len(led))
        yield gauge("underreplicatedpartitions", "Partitions led here whose ISR is smaller than their replica "
                    "set (UnderReplicatedPartitions).", sum(1 for p in led if len(p.isr) < len(p.replicas)))
        yield gauge("underminisrpartitioncount", "Partitions led here whose ISR is smaller than "
                    "min.insync.replicas (UnderMinIsrPartitionCount).",
                    sum(1 for p in led if len(p.isr) < p.log.config.min_insync_replicas))
        purgatory = GaugeMetricFamily("kafka_server_delayedoperationpurgatory_purgatorysize",
                                      "Requests waiting in the purgatory: acks=all produces, long-polling fetches "
                                      "(PurgatorySize).", labels=["delayedOperation"])
        if rm is not None:
            purgatory.add_metric(["Produce"], rm.produce_purgatory.delayed)
            purgatory.add_metric(["Fetch"], rm.fetch_purgatory.delayed)
        yield purgatory
        if rm is not None:      # kbroker's own: the fetch down-conversion cache (records.convert)
            cache = rm.conversion_cache
            yield GaugeMetricFamily("kbroker_downconversion_cache_bytes", "Bytes held by the down-conversion "
                                    "cache (down.conversion.cache.bytes bounds them).", value=cache.bytes)
            yield CounterMetricFamily("kbroker_downconversion_cache_hits", "Entries old consumers were served "
                                      "from the down-conversion cache.", value=cache.hits)
            yield CounterMetricFamily("kbroker_downconversion_cache_misses", "Entries looked up in the "
                                      "down-conversion cache and not found.", value=cache.misses)

    def _transaction_gauges(self):
        """Kafka's transaction coordinator metrics: TransactionMarkerChannelManager's queue sizes, and
        transaction-coordinator-metrics' partition-load-time (Kafka's client-style metric over a 60 s window;
        here over every `__transaction_state` load since the broker started, NaN before the first)."""
        coordinator = getattr(self.server, "txn_coordinator", None)
        markers = coordinator.markers if coordinator is not None else None
        manager = coordinator.manager if coordinator is not None else None
        prefix = "kafka_coordinator_transaction_transactionmarkerchannelmanager_"
        yield GaugeMetricFamily(f"{prefix}unknowndestinationqueuesize", "Transactions whose markers wait for a "
                                "partition leader to be known (UnknownDestinationQueueSize).",
                                value=len(markers.no_leader) if markers is not None else 0)
        yield GaugeMetricFamily(f"{prefix}logappendretryqueuesize", "Complete* state appends to "
                                "__transaction_state waiting to be retried (LogAppendRetryQueueSize).",
                                value=markers.completion_retries if markers is not None else 0)
        loads = manager.loads if manager is not None else 0
        nan = float("nan")
        yield GaugeMetricFamily("kafka_server_transaction_coordinator_metrics_partition_load_time_max",
                                "Longest load of a __transaction_state partition, in ms (partition-load-time-max).",
                                value=manager.load_ms_max if loads else nan)
        yield GaugeMetricFamily("kafka_server_transaction_coordinator_metrics_partition_load_time_avg",
                                "Average load of a __transaction_state partition, in ms (partition-load-time-avg).",
                                value=manager.load_ms_total / loads if loads else nan)

    def _controller_gauges(self):
        controller = getattr(self.server, "controller", None)
        active = controller is not None and controller.active
        offline = topics = partitions = imbalance = 0
        if active:
            ctx = controller.ctx
            for tp, replicas in ctx.assignments.items():
                state = ctx.partition_states.get(tp)
                if state is None or tp[0] in ctx.topics_to_delete:
                    continue
                if state.leader not in ctx.live_brokers:
                    offline += 1
                elif replicas and state.leader != replicas[0]:
                    imbalance += 1
            topics, partitions = len(ctx.topics()), len(ctx.assignments)

        def gauge(name, doc, value):
            return GaugeMetricFamily(f"kafka_controller_kafkacontroller_{name}", doc, value=value)
        yield gauge("activecontrollercount", "1 on the active controller, else 0 (ActiveControllerCount).",
                    int(active))
        yield gauge("offlinepartitionscount", "Partitions without a live leader; reported by the active "
                    "controller (OfflinePartitionsCount).", offline)
        yield gauge("preferredreplicaimbalancecount", "Partitions led by a replica other than the preferred "
                    "one; reported by the active controller (PreferredReplicaImbalanceCount).", imbalance)
        yield gauge("globaltopiccount", "Topics; reported by the active controller (GlobalTopicCount).", topics)
        yield gauge("globalpartitioncount", "Partitions; reported by the active controller "
                    "(GlobalPartitionCount).", partitions)
