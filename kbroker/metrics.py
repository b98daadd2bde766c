"""Prometheus metrics of one broker, named after Kafka's JMX metrics, served over HTTP when metrics.port is set.

Naming: Kafka's MBean `kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=T` becomes
`kafka_server_brokertopicmetrics_messagesin_total{topic="T"}`: domain, type and name lower-cased and joined
by underscores, MBean keys as labels. Kafka's rates ("...PerSec") are Prometheus counters ending in `_total`
(rate() gives the per-second figure); Kafka's times ("...Ms") are histograms in seconds, Prometheus' base
unit, named `..._seconds` (TotalTimeMs -> `kafka_network_requestmetrics_totaltime_seconds`); Kafka's
rate-and-time timers ("...RateAndTimeMs") are histograms too (their _count is the rate). Kafka's all-topics
series (no topic key) are left to sum() over the topic label.

Request time breakdown (kafka.network:type=RequestMetrics, labels request and version): each request's
network.server.RequestTimes, observed once its answer is sent: RequestQueueTime (frame read -> handling starts),
LocalTime (the handler's own work), RemoteTime (waits for other brokers or for data: an acks=all Produce's
replication, a long-polling Fetch, a controller event; the handler marks them with remote_wait), ThrottleTime
(the throttle the response carries), ResponseQueueTime (response made -> its send starts, after the
connection's earlier answers), ResponseSendTime (the send), TotalTime (read -> sent).

The hub's idle share (LoopIdle) stands for both of Kafka's idle gauges: the one gevent loop is kbroker's network
processors and request handlers at once.

Cost: the hot paths only add to plain attributes of small objects looked up once per topic or request type
(no locks: every update runs on the gevent hub, and greenlets never switch inside one). The registry's
collector turns them into metric families when scraped, and reads the state gauges (purgatory sizes,
under-replicated partitions, per-partition logs, controller state, groups) from the broker's objects then, so
they cost nothing between scrapes; a scrape lets other greenlets run between its families. The endpoint is a
gevent WSGI server: scrapes are served by greenlets, never threads.
"""
from __future__ import annotations

import logging
import time
from bisect import bisect_left
from collections import deque
from contextvars import ContextVar

import gevent
from gevent.pywsgi import WSGIServer
from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from .common.hub import yield_to_hub

log = logging.getLogger("kbroker.metrics")

# Upper bounds in seconds, from a fast request's half millisecond to a long-poll fetch's half minute.
TIME_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# Upper bounds in bytes, powers of 4 from a heartbeat's 64 B to the 100 MiB of socket.request.max.bytes.
BYTE_BUCKETS = tuple(float(4 ** k) for k in range(3, 15))


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


# The request the current greenlet is handling (api.dispatch sets it around the handler), for remote_wait.
current_request: ContextVar = ContextVar("kbroker_request", default=None)


def remote_wait(waitable, timeout: float | None = None):
    """waitable.wait(timeout) (a gevent Event or AsyncResult), the time counted in the current request's RemoteTime:
    where a handler waits for replication, data or the controller, Kafka's parks the request in a purgatory."""
    times = current_request.get()
    if times is None:
        return waitable.wait(timeout)
    started = time.perf_counter()
    try:
        return waitable.wait(timeout)
    finally:
        times.remote += time.perf_counter() - started


# Kafka's RequestMetrics histograms (name suffix, help), in RequestStats.observe's order
_REQUEST_PHASES = (
    ("requestqueuetime", "From the request read to its handling (RequestQueueTimeMs)."),
    ("localtime", "The request's handling, its remote waits excluded (LocalTimeMs)."),
    ("remotetime", ("Waits for other brokers or data: acks=all replication, long-polling fetches, the controller "
                    "(RemoteTimeMs).")),
    ("throttletime", "Throttle time the response carries (ThrottleTimeMs)."),
    ("responsequeuetime", ("From the response made to its send, after the connection's earlier answers "
                           "(ResponseQueueTimeMs).")),
    ("responsesendtime", "Sending the response (ResponseSendTimeMs)."),
    ("totaltime", "From the request read to its response sent (TotalTimeMs)."),
)


class RequestStats:
    """Kafka's RequestMetrics time histograms of one request name and version, and its sizes (RequestBytes)."""
    __slots__ = ("phases", "sizes")

    def __init__(self):
        self.phases = tuple(Histogram() for _ in _REQUEST_PHASES)
        self.sizes = Histogram(BYTE_BUCKETS)

    def observe(self, t) -> None:
        """t: a network.server.RequestTimes, sent. (Histogram.observe inlined: this runs once per request.)"""
        sizes, size = self.sizes, t.size
        sizes.counts[bisect_left(BYTE_BUCKETS, size)] += 1
        sizes.sum += size
        remote = t.remote
        for h, seconds in zip(self.phases, (
                t.dequeued - t.received, max(0.0, t.local_done - t.dequeued - remote),
                t.ready - t.local_done + remote, t.throttle_ms / 1000.0, t.send_start - t.ready,
                t.end - t.send_start, t.end - t.received)):
            h.counts[bisect_left(TIME_BUCKETS, seconds)] += 1
            h.sum += seconds


class Window:
    """Changes of cumulative counts over the last WINDOW seconds (since start, before the first WINDOW), from
    samples taken at scrapes, SAMPLE_EVERY seconds apart at least: Kafka's client-style averages, maxima and ratios
    are over a window of samples too (metrics.num.samples x metrics.sample.window.ms, 2 x 30 s). A peak (a maximum
    the caller tracks, reset when a sample is taken) is kept per sample so the window's maximum can be told."""
    WINDOW = 60.0
    SAMPLE_EVERY = 5.0

    def __init__(self, totals: tuple):
        self._samples = deque([(time.perf_counter(), totals, 0)])   # (time, totals, peak since the previous)

    def advance(self, totals: tuple, peak=0) -> tuple[float, tuple, object, bool]:
        """(seconds covered, each total's change over them, the largest peak within them, whether a sample was
        taken now: the caller then starts a new peak)."""
        now, samples = time.perf_counter(), self._samples
        while len(samples) > 1 and now - samples[1][0] >= self.WINDOW:
            samples.popleft()
        t0, totals0, _ = samples[0]
        largest = max([peak, *(p for _, _, p in list(samples)[1:])])
        taken = now - samples[-1][0] >= self.SAMPLE_EVERY
        if taken:
            samples.append((now, totals, peak))
        return now - t0, tuple(b - a for a, b in zip(totals0, totals)), largest, taken


class LoopIdle:
    """The share of wall time the gevent hub's loop waits for I/O with nothing to run: a prepare watcher of the
    lowest priority (after gevent's own callbacks) stamps the time the loop is about to block, a check watcher of
    the highest (before any I/O callback) adds the wait once it returns and counts the poll (Kafka's `select`).
    Measured over a Window of scrapes. Two watcher calls per loop iteration, where the request quotas' switch
    tracer (quota.client_quotas.LoopTime) would cost every greenlet switch and still only time the greenlets it was
    told to, not the loop's waits."""

    def __init__(self):
        loop = gevent.get_hub().loop
        self.idle, self.polls, self._blocked_at = 0.0, 0, time.perf_counter()
        self._prepare, self._check = loop.prepare(ref=False), loop.check(ref=False)
        self._prepare.priority, self._check.priority = -2, 2     # libev's EV_MINPRI and EV_MAXPRI
        self._prepare.start(self._about_to_block)
        self._check.start(self._woken)
        self._window = Window((0.0, 0))

    def _about_to_block(self) -> None:
        self._blocked_at = time.perf_counter()

    def _woken(self) -> None:
        self.idle += time.perf_counter() - self._blocked_at
        self.polls += 1

    def sample(self) -> tuple[float, float, float]:
        """Over the window: (idle fraction, average wait per poll in s, average work between polls in s)."""
        span, (idle, polls), _, _ = self._window.advance((self.idle, self.polls))
        if span <= 0:
            return 1.0, 0.0, 0.0
        idle = min(idle, span)
        return idle / span, idle / polls if polls else 0.0, (span - idle) / polls if polls else 0.0

    def stop(self) -> None:
        self._prepare.stop()
        self._check.stop()


# Kafka's ControllerState values (the ControllerState gauge), and the states whose events are timed, by the name of
# their timer (Kafka's <State>RateAndTimeMs, two of them keeping older names)
CONTROLLER_STATES = {state: value for value, state in enumerate((
    "Idle", "ControllerChange", "BrokerChange", "TopicChange", "TopicDeletion", "AlterPartitionReassignment",
    "AutoLeaderBalance", "ManualLeaderBalance", "ControlledShutdown", "IsrChange", "LeaderAndIsrResponseReceived",
    "LogDirChange", "ControllerShutdown", "UncleanLeaderElectionEnable", "TopicUncleanLeaderElectionEnable",
    "ListPartitionReassignment", "UpdateMetadataResponseReceived", "UpdateFeatures"))}
CONTROLLER_STATE_TIMERS = {state: {"BrokerChange": "LeaderElectionRateAndTime",
                                   "AlterPartitionReassignment": "PartitionReassignmentRateAndTime"}.get(
                                       state, f"{state}RateAndTime")
                           for state in CONTROLLER_STATES if state not in ("Idle", "UpdateMetadataResponseReceived")}


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


def _min_isr(p) -> int:
    return p.log.config.min_insync_replicas


# Kafka's per-partition gauges: (family, help, its value for a replica.Partition / a log.Log)
_PARTITION_GAUGES = (
    ("kafka_cluster_partition_underreplicated", "1 if led here with an ISR smaller than its replicas (UnderReplicated).",
     lambda p: int(p.is_leader and len(p.isr) < len(p.replicas))),
    ("kafka_cluster_partition_underminisr", "1 if led here with an ISR under min.insync.replicas (UnderMinIsr).",
     lambda p: int(p.is_leader and len(p.isr) < _min_isr(p))),
    ("kafka_cluster_partition_atminisr", "1 if led here with an ISR of exactly min.insync.replicas (AtMinIsr).",
     lambda p: int(p.is_leader and len(p.isr) == _min_isr(p))),
)
_LOG_GAUGES = (
    ("kafka_log_log_size", "Bytes of the partition's log segments (Size).", lambda log_: log_.size),
    ("kafka_log_log_logstartoffset", "The log's first offset (LogStartOffset).", lambda log_: log_.log_start_offset),
    ("kafka_log_log_logendoffset", "The offset the next record appended gets (LogEndOffset).",
     lambda log_: log_.log_end_offset),
    ("kafka_log_log_numlogsegments", "Segments of the log (NumLogSegments).", lambda log_: len(log_.segments)),
)


def _per_partition(table, items: list):
    """One family per entry of the table, over items [((topic, partition), object)]; the hub runs other greenlets
    between families (a broker with thousands of partitions takes a while to scrape)."""
    labels = [[topic, str(index)] for (topic, index), _ in items]
    for name, doc, read in table:
        family = GaugeMetricFamily(name, doc, labels=["topic", "partition"])
        for label, (_, obj) in zip(labels, items):
            family.add_metric(label, read(obj))
        yield family
        yield_to_hub()


class BrokerMetrics:
    """One broker's statistics and its own CollectorRegistry (several brokers may share a process)."""

    def __init__(self, server=None):
        self.server = server     # the KafkaServer whose state the gauges read; None: counters only
        self.topics: dict[str, TopicStats] = {}
        self.requests: dict[tuple[str, int], RequestStats] = {}
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.replication_bytes_out = 0
        self.replication_bytes_in = 0
        self.log_flush = Histogram()
        self.zk_request_latency = Histogram()   # observed by the broker's ZooKeeper client
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self._http: WSGIServer | None = None
        self.loop_idle: LoopIdle | None = None   # measured while served
        self._listener_windows: dict[str, Window] = {}   # request_size_avg|max's, per listener

    # ---- hot paths ----------------------------------------------------------------------------------------
    def topic(self, name: str) -> TopicStats:
        stats = self.topics.get(name)
        if stats is None:
            stats = self.topics[name] = TopicStats()
        return stats

    def remove_topic(self, name: str) -> None:
        """Drop a topic's series (Kafka removes them when the broker hosts no partition of it any more)."""
        self.topics.pop(name, None)

    def request_done(self, times) -> None:
        """A request answered (network.server's request_done sink): its times in its name's RequestStats."""
        stats = self.requests.get((times.name, times.version))
        if stats is None:
            stats = self.requests[(times.name, times.version)] = RequestStats()
        stats.observe(times)

    # ---- HTTP endpoint ------------------------------------------------------------------------------------
    def serve(self, host: str, port: int) -> int:
        """Bind now (OSError if the port is taken) and serve the registry; returns the bound port."""
        self._http = WSGIServer((host, port), make_wsgi_app(self.registry), log=None, error_log=log)
        self._http.init_socket()
        self._http.start()
        self.loop_idle = LoopIdle()
        return self._http.socket.getsockname()[1]

    def stop(self) -> None:
        if self._http is not None:
            self._http.stop(timeout=1)
            self._http = None
        if self.loop_idle is not None:
            self.loop_idle.stop()
            self.loop_idle = None

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
        yield CounterMetricFamily("kafka_server_brokertopicmetrics_replicationbytesin",
                                  "Bytes the followers here fetched from their leaders (ReplicationBytesInPerSec).",
                                  value=self.replication_bytes_in)
        yield from self._request_metrics()
        yield HistogramMetricFamily("kafka_log_logflushstats_logflushtime_seconds",
                                    "Time of each log flush (fsync) (LogFlushRateAndTimeMs).",
                                    buckets=self.log_flush.buckets(), sum_value=self.log_flush.sum)
        yield CounterMetricFamily("kafka_server_replicamanager_isrshrinks", "ISR shrinks written by this leader "
                                  "(IsrShrinksPerSec).", value=self.isr_shrinks)
        yield CounterMetricFamily("kafka_server_replicamanager_isrexpands", "ISR expansions written by this leader "
                                  "(IsrExpandsPerSec).", value=self.isr_expands)
        yield from self._replica_gauges()
        yield from self._partition_gauges()
        yield from self._log_gauges()
        yield from self._controller_gauges()
        yield from self._controller_stats()
        yield from self._zookeeper_metrics()
        yield from self._group_gauges()
        yield from self._group_load_time_gauges()
        yield from self._transaction_gauges()
        yield from self._idle_gauges()
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
            yield from self._selector_metrics(server.socket_server.listener_stats)

    def _selector_metrics(self, listener_stats: dict):
        """Kafka's socket-server-metrics, the network layer's counts (network.server.ListenerStats) per listener,
        and the loop's (LoopIdle) as the one network processor's. Kafka's Selector names them as a client sees
        its connections: on a broker `request` is a response sent, `response` a request read."""
        prefix, labels, processor = "kafka_server_socketservermetrics_", ["listener", "networkProcessor"], "0"
        listeners = sorted(listener_stats.items())
        for name, doc, count in (
                ("request", "Responses sent: Kafka's Selector counts a broker's sends as `request` (request-total).",
                 lambda st: st.sends),
                ("response", ("Requests read: Kafka's Selector counts a broker's receives as `response` "
                              "(response-total)."), lambda st: st.receives),
                ("outgoing_byte", "Bytes of the responses sent (outgoing-byte-total).", lambda st: st.sent_bytes),
                ("incoming_byte", "Bytes of the requests read, size prefixes included (incoming-byte-total).",
                 lambda st: st.received_bytes),
                ("network_io", "Reads of a request and writes of a response (network-io-total).",
                 lambda st: st.receives + st.sends),
                ("successful_authentication", "Connections authenticated by TLS or SASL "
                                              "(successful-authentication).", lambda st: st.auth_ok),
                ("successful_authentication_no_reauth", ("Connections authenticated by a client that cannot "
                                                         "re-authenticate: TLS, or SASL without SaslAuthenticate v1+ "
                                                         "(successful-authentication-no-reauth)."),
                 lambda st: st.auth_no_reauth),
                ("failed_authentication", "TLS handshakes or SASL exchanges that failed (failed-authentication).",
                 lambda st: st.auth_failed)):
            family = CounterMetricFamily(f"{prefix}{name}", doc, labels=labels)
            for listener, st in listeners:
                family.add_metric([listener, processor], count(st))
            yield family
        avg = GaugeMetricFamily(f"{prefix}request_size_avg", "Average size of the responses sent in the last "
                                "minute, NaN without one (request-size-avg).", labels=labels)
        peak = GaugeMetricFamily(f"{prefix}request_size_max", "Largest response sent in the last minute, NaN "
                                 "without one (request-size-max).", labels=labels)
        for listener, st in listeners:
            window = self._listener_windows.get(listener)
            if window is None:
                window = self._listener_windows[listener] = Window((0, 0))
            _, (sends, sent_bytes), largest, taken = window.advance((st.sends, st.sent_bytes), st.send_max)
            if taken:
                st.send_max = 0
            avg.add_metric([listener, processor], sent_bytes / sends if sends else float("nan"))
            peak.add_metric([listener, processor], largest if sends else float("nan"))
        yield avg
        yield peak
        if self.loop_idle is None:
            return
        idle, wait_s, busy_s = self.loop_idle.sample()
        select = CounterMetricFamily(f"{prefix}select", "Times the event loop polled for I/O (select-total).",
                                     labels=["networkProcessor"])
        select.add_metric([processor], self.loop_idle.polls)
        yield select
        for name, doc, value in (
                ("io_wait_ratio", ("Fraction of the last minute the event loop waited for I/O (io-wait-ratio; the "
                                   "idle gauges' value)."), idle),
                ("io_ratio", ("Fraction of the last minute the event loop worked: I/O and request handling, one "
                              "loop (io-ratio)."), 1.0 - idle),
                ("io_wait_time_ns_avg", "Average wait of a poll for I/O in the last minute (io-wait-time-ns-avg).",
                 wait_s * 1e9),
                ("io_time_ns_avg", ("Average work of the event loop between two polls in the last minute "
                                    "(io-time-ns-avg)."), busy_s * 1e9)):
            family = GaugeMetricFamily(f"{prefix}{name}", doc, labels=["networkProcessor"])
            family.add_metric([processor], value)
            yield family

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
        yield gauge("atminisrpartitioncount", "Partitions led here whose ISR is exactly min.insync.replicas: one "
                    "replica more lost and acks=all produces fail (AtMinIsrPartitionCount).",
                    sum(1 for p in led if len(p.isr) == p.log.config.min_insync_replicas))
        yield gauge("offlinereplicacount", "Replicas hosted here whose log dir failed (OfflineReplicaCount).",
                    len(rm.offline_partitions) if rm is not None else 0)
        lags = sorted((tp, state.lag or 0) for fetcher in rm.fetchers.fetchers.values()
                      for tp, state in fetcher.partitions.items()) if rm is not None else []
        max_lag = GaugeMetricFamily("kafka_server_replicafetchermanager_maxlag", "Largest lag, in records, of a "
                                    "partition followed here behind its leader's high watermark as of its last "
                                    "fetch (MaxLag).", labels=["clientId"])
        max_lag.add_metric(["Replica"], max((lag for _, lag in lags), default=0))
        yield max_lag
        lag = GaugeMetricFamily("kafka_server_fetcherlagmetrics_consumerlag", "Lag, in records, of a partition "
                                "followed here behind its leader's high watermark as of its last fetch (ConsumerLag).",
                                labels=["clientId", "topic", "partition"])
        for (topic, index), n in lags:
            lag.add_metric(["Replica", topic, str(index)], n)
        yield lag
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

    def _request_metrics(self):
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                       "Requests answered, by API (Fetch split into FetchConsumer and FetchFollower, "
                                       "as Kafka) and version (RequestsPerSec).", labels=["request", "version"])
        families = [HistogramMetricFamily(f"kafka_network_requestmetrics_{suffix}_seconds", doc,
                                          labels=["request", "version"]) for suffix, doc in _REQUEST_PHASES]
        sizes: dict[str, Histogram] = {}   # RequestBytes is per request, over its versions
        for (name, version), stats in sorted(self.requests.items()):
            labels = [name, str(version)]
            requests.add_metric(labels, stats.phases[-1].count)
            for family, h in zip(families, stats.phases):
                family.add_metric(labels, h.buckets(), h.sum)
            total = sizes.setdefault(name, Histogram(BYTE_BUCKETS))
            total.counts = [a + b for a, b in zip(total.counts, stats.sizes.counts)]
            total.sum += stats.sizes.sum
        yield requests
        yield from families
        request_bytes = HistogramMetricFamily("kafka_network_requestmetrics_requestbytes", "Sizes of the requests "
                                              "read, in bytes, header included (RequestBytes).", labels=["request"])
        for name, h in sizes.items():
            request_bytes.add_metric([name], h.buckets(), h.sum)
        yield request_bytes

    def _partition_gauges(self):
        """Kafka's per-partition kafka.cluster:type=Partition flags (0 where this broker does not lead)."""
        rm = getattr(self.server, "replica_manager", None)
        yield from _per_partition(_PARTITION_GAUGES, sorted(rm.partitions.items()) if rm is not None else [])

    def _log_gauges(self):
        """Kafka's kafka.log:type=Log gauges of every log here (leader or follower), read now."""
        manager = getattr(self.server, "log_manager", None)
        yield from _per_partition(_LOG_GAUGES, sorted(manager.logs.items()) if manager is not None else [])
        yield GaugeMetricFamily("kafka_log_logmanager_offlinelogdirectorycount", "Log dirs that failed "
                                "(OfflineLogDirectoryCount).", value=len(manager.offline_dirs) if manager else 0)

    def _controller_stats(self):
        """Kafka's ControllerStats timers (events of each controller state, a broker change's as
        LeaderElectionRateAndTimeMs), unclean elections, ControllerState and the event queue."""
        controller = getattr(self.server, "controller", None)
        if controller is None:
            return
        for state, timer in CONTROLLER_STATE_TIMERS.items():
            h = controller.event_times[state]
            yield HistogramMetricFamily(f"kafka_controller_controllerstats_{timer.lower()}_seconds", "Controller "
                                        f"events of state {state}, and their time ({timer}Ms).",
                                        buckets=h.buckets(), sum_value=h.sum)
        yield CounterMetricFamily("kafka_controller_controllerstats_uncleanleaderelections", "Leaders elected out of "
                                  "the ISR by this controller (UncleanLeaderElectionsPerSec).",
                                  value=controller.partitions.unclean_elections)
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_controllerstate", "Kafka's ControllerState value "
                                "of the event the controller is processing: 0 Idle, 1 ControllerChange, 2 "
                                "BrokerChange, 3 TopicChange, ... (ControllerState).",
                                value=CONTROLLER_STATES[controller.state])
        yield GaugeMetricFamily("kafka_controller_controllereventmanager_eventqueuesize", "Controller events "
                                "waiting (EventQueueSize).", value=controller.queue.qsize())
        h = controller.event_queue_time
        yield HistogramMetricFamily("kafka_controller_controllereventmanager_eventqueuetime_seconds", "Time "
                                    "controller events waited in the queue (EventQueueTimeMs).",
                                    buckets=h.buckets(), sum_value=h.sum)

    def _zookeeper_metrics(self):
        """Kafka's ZooKeeperClientMetrics latency and SessionExpireListener connection events and state."""
        h = self.zk_request_latency
        yield HistogramMetricFamily("kafka_server_zookeeperclientmetrics_zookeeperrequestlatency_seconds",
                                    "Time of each ZooKeeper request (ZooKeeperRequestLatencyMs).",
                                    buckets=h.buckets(), sum_value=h.sum)
        zk = getattr(self.server, "zk", None)
        if zk is None:
            return
        for event, count in zk.state_events.items():
            yield CounterMetricFamily(f"kafka_server_sessionexpirelistener_zookeeper{event.lower()}",
                                      f"ZooKeeper connection events: {event} (ZooKeeper{event}PerSec).", value=count)
        state = GaugeMetricFamily("kafka_server_sessionexpirelistener_sessionstate", "1 for the ZooKeeper "
                                  "session's state, named as ZooKeeper's client names it (SessionState).",
                                  labels=["state"])
        state.add_metric([zk.session_state], 1)
        yield state

    def _group_gauges(self):
        """Kafka's GroupMetadataManager gauges: the groups coordinated here, by state, and their offsets."""
        coordinator = getattr(self.server, "group_coordinator", None)
        if coordinator is None:
            return
        by_state, offsets = coordinator.manager.group_counts()

        def gauge(name, doc, value):
            return GaugeMetricFamily(f"kafka_coordinator_group_groupmetadatamanager_{name}", doc, value=value)
        yield gauge("numgroups", "Groups coordinated here (NumGroups).", sum(by_state.values()))
        for state in ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty"):
            yield gauge(f"numgroups{state.lower()}", f"Groups coordinated here in state {state} "
                        f"(NumGroups{state}).", by_state.get(state, 0))
        yield gauge("numoffsets", "Committed offsets of the groups coordinated here (NumOffsets).", offsets)

    def _idle_gauges(self):
        """Kafka's two idle gauges, both the hub's idle share (LoopIdle): kbroker's one loop reads requests and
        handles them."""
        if self.loop_idle is None:
            return
        idle = self.loop_idle.sample()[0]
        yield GaugeMetricFamily("kafka_network_socketserver_networkprocessoravgidlepercent", "Fraction (0..1) of "
                                "the last minute the broker's event loop waited for I/O with nothing to run "
                                "(NetworkProcessorAvgIdlePercent).", value=idle)
        yield GaugeMetricFamily("kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent", "Fraction "
                                "(0..1) of the last minute the broker's event loop waited with no request to handle "
                                "(RequestHandlerAvgIdlePercent; the same loop as the network's).", value=idle)

    def _transaction_gauges(self):
        """Kafka's transaction coordinator metrics: TransactionMarkerChannelManager's queue sizes, and
        transaction-coordinator-metrics' partition-load-time (_load_time_gauges)."""
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
        yield from _load_time_gauges("transaction", "__transaction_state", manager)

    def _group_load_time_gauges(self):
        coordinator = getattr(self.server, "group_coordinator", None)
        yield from _load_time_gauges("group", "__consumer_offsets",
                                     coordinator.manager if coordinator is not None else None)

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
            deleting = {t: ctx.replicas_of(t) for t in ctx.topics_to_delete}
            ineligible = {t: [r for r in rs if ctx.replica_state(r).name == "DELETION_INELIGIBLE"]
                          for t, rs in deleting.items()}
        else:
            deleting = ineligible = {}

        def gauge(name, doc, value):
            return GaugeMetricFamily(f"kafka_controller_kafkacontroller_{name}", doc, value=value)
        yield gauge("topicstodeletecount", "Topics marked for deletion; reported by the active controller "
                    "(TopicsToDeleteCount).", len(deleting))
        yield gauge("replicastodeletecount", "Replicas of the topics marked for deletion; reported by the active "
                    "controller (ReplicasToDeleteCount).", sum(len(rs) for rs in deleting.values()))
        yield gauge("topicsineligibletodeletecount", "Topics marked for deletion that wait for offline replicas "
                    "(TopicsIneligibleToDeleteCount).", sum(1 for rs in ineligible.values() if rs))
        yield gauge("replicasineligibletodeletecount", "Offline replicas that topic deletions wait for "
                    "(ReplicasIneligibleToDeleteCount).", sum(len(rs) for rs in ineligible.values()))
        yield gauge("activecontrollercount", "1 on the active controller, else 0 (ActiveControllerCount).",
                    int(active))
        yield gauge("offlinepartitionscount", "Partitions without a live leader; reported by the active "
                    "controller (OfflinePartitionsCount).", offline)
        yield gauge("preferredreplicaimbalancecount", "Partitions led by a replica other than the preferred "
                    "one; reported by the active controller (PreferredReplicaImbalanceCount).", imbalance)
        yield gauge("globaltopiccount", "Topics; reported by the active controller (GlobalTopicCount).", topics)
        yield gauge("globalpartitioncount", "Partitions; reported by the active controller "
                    "(GlobalPartitionCount).", partitions)


def _load_time_gauges(kind: str, topic: str, manager):
    """Kafka's <kind>-coordinator-metrics partition-load-time-max|avg (a client-style metric over a 60 s window; here
    over every load of the coordinator's topic since the broker started, NaN before the first), in ms, from a
    manager's loads, load_ms_total and load_ms_max."""
    loads = manager.loads if manager is not None else 0
    nan = float("nan")
    yield GaugeMetricFamily(f"kafka_server_{kind}_coordinator_metrics_partition_load_time_max",
                            f"Longest load of a {topic} partition, in ms (partition-load-time-max).",
                            value=manager.load_ms_max if loads else nan)
    yield GaugeMetricFamily(f"kafka_server_{kind}_coordinator_metrics_partition_load_time_avg",
                            f"Average load of a {topic} partition, in ms (partition-load-time-avg).",
                            value=manager.load_ms_total / loads if loads else nan)
