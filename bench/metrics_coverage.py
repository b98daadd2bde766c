"""How much of Kafka 2.8's documented monitoring a dashboard finds on a kbroker broker: the MBeans of the broker
table ("6.8 Monitoring", docs/ops.html) and of the "Common monitoring metrics" table (the network selector's
metrics, which a broker reports as kafka.server:type=socket-server-metrics), each with its Prometheus name under
kbroker.metrics' naming rule (a "-rate"/"-total" pair is one counter; a metric with keys such as topic or
user counts once its family is there).

1. Start ZooKeeper and one broker with metrics.port (the launcher of the other benches).
2. Produce and fetch a few batches, so that per-topic and per-request series exist.
3. Scrape /metrics and print "N of M (P %)", then the missing MBeans.
4. In this process: the ns one request's accounting costs the hot path (its RequestTimes, the six clock reads, the
   handler's context variable, the seven histograms), best of 5 rounds.

The consumer's own records-lag-max (a client metric in the broker table) is left out.

  .venv/bin/python -m bench.metrics_coverage
"""
from __future__ import annotations

import os
import sys
import time
import urllib.request

if __package__ in (None, ""):          # `python bench/metrics_coverage.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import (
    BenchCluster,
    Connection,
    RawProducer,
    bench_parser,
    build_v2_batch,
    fetch_all,
    free_port,
    log,
    print_table,
)

# (Kafka 2.8's MBean as docs/ops.html names it, its Prometheus metric family)
BROKER_TABLE = (
    ("kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec", "kafka_server_brokertopicmetrics_messagesin"),
    ("kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec", "kafka_server_brokertopicmetrics_bytesin"),
    ("kafka.server:type=BrokerTopicMetrics,name=ReplicationBytesInPerSec",
     "kafka_server_brokertopicmetrics_replicationbytesin"),
    ("kafka.network:type=RequestMetrics,name=RequestsPerSec,request=*,version=*",
     "kafka_network_requestmetrics_requests"),
    ("kafka.network:type=RequestMetrics,name=ErrorsPerSec,request=*,error=*", "kafka_network_requestmetrics_errors"),
    ("kafka.network:type=RequestMetrics,name=RequestBytes,request=*", "kafka_network_requestmetrics_requestbytes"),
    ("kafka.network:type=RequestMetrics,name=TemporaryMemoryBytes,request=*",
     "kafka_network_requestmetrics_temporarymemorybytes"),
    ("kafka.network:type=RequestMetrics,name=MessageConversionsTimeMs,request=*",
     "kafka_network_requestmetrics_messageconversionstime_seconds"),
    ("kafka.server:type=BrokerTopicMetrics,name=ProduceMessageConversionsPerSec,topic=*",
     "kafka_server_brokertopicmetrics_producemessageconversions"),
    ("kafka.server:type=BrokerTopicMetrics,name=FetchMessageConversionsPerSec,topic=*",
     "kafka_server_brokertopicmetrics_fetchmessageconversions"),
    ("kafka.network:type=RequestChannel,name=RequestQueueSize", "kafka_network_requestchannel_requestqueuesize"),
    ("kafka.server:type=BrokerTopicMetrics,name=BytesOutPerSec", "kafka_server_brokertopicmetrics_bytesout"),
    ("kafka.server:type=BrokerTopicMetrics,name=ReplicationBytesOutPerSec",
     "kafka_server_brokertopicmetrics_replicationbytesout"),
    ("kafka.server:type=BrokerTopicMetrics,name=NoKeyCompactedTopicRecordsPerSec",
     "kafka_server_brokertopicmetrics_nokeycompactedtopicrecords"),
    ("kafka.server:type=BrokerTopicMetrics,name=InvalidMagicNumberRecordsPerSec",
     "kafka_server_brokertopicmetrics_invalidmagicnumberrecords"),
    ("kafka.server:type=BrokerTopicMetrics,name=InvalidMessageCrcRecordsPerSec",
     "kafka_server_brokertopicmetrics_invalidmessagecrcrecords"),
    ("kafka.server:type=BrokerTopicMetrics,name=InvalidOffsetOrSequenceRecordsPerSec",
     "kafka_server_brokertopicmetrics_invalidoffsetorsequencerecords"),
    ("kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs", "kafka_log_logflushstats_logflushtime_seconds"),
    ("kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions",
     "kafka_server_replicamanager_underreplicatedpartitions"),
    ("kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount",
     "kafka_server_replicamanager_underminisrpartitioncount"),
    ("kafka.server:type=ReplicaManager,name=AtMinIsrPartitionCount",
     "kafka_server_replicamanager_atminisrpartitioncount"),
    ("kafka.log:type=LogManager,name=OfflineLogDirectoryCount", "kafka_log_logmanager_offlinelogdirectorycount"),
    ("kafka.controller:type=KafkaController,name=ActiveControllerCount",
     "kafka_controller_kafkacontroller_activecontrollercount"),
    ("kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs",
     "kafka_controller_controllerstats_leaderelectionrateandtime_seconds"),
    ("kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec",
     "kafka_controller_controllerstats_uncleanleaderelections"),
    ("kafka.controller:type=KafkaController,name=TopicsToDeleteCount",
     "kafka_controller_kafkacontroller_topicstodeletecount"),
    ("kafka.controller:type=KafkaController,name=ReplicasToDeleteCount",
     "kafka_controller_kafkacontroller_replicastodeletecount"),
    ("kafka.controller:type=KafkaController,name=TopicsIneligibleToDeleteCount",
     "kafka_controller_kafkacontroller_topicsineligibletodeletecount"),
    ("kafka.controller:type=KafkaController,name=ReplicasIneligibleToDeleteCount",
     "kafka_controller_kafkacontroller_replicasineligibletodeletecount"),
    ("kafka.server:type=ReplicaManager,name=PartitionCount", "kafka_server_replicamanager_partitioncount"),
    ("kafka.server:type=ReplicaManager,name=LeaderCount", "kafka_server_replicamanager_leadercount"),
    ("kafka.server:type=ReplicaManager,name=IsrShrinksPerSec", "kafka_server_replicamanager_isrshrinks"),
    ("kafka.server:type=ReplicaManager,name=IsrExpandsPerSec", "kafka_server_replicamanager_isrexpands"),
    ("kafka.server:type=ReplicaFetcherManager,name=MaxLag,clientId=Replica",
     "kafka_server_replicafetchermanager_maxlag"),
    ("kafka.server:type=FetcherLagMetrics,name=ConsumerLag,clientId=*,topic=*,partition=*",
     "kafka_server_fetcherlagmetrics_consumerlag"),
    ("kafka.server:type=DelayedOperationPurgatory,name=PurgatorySize,delayedOperation=Produce",
     "kafka_server_delayedoperationpurgatory_purgatorysize"),
    ("kafka.server:type=DelayedOperationPurgatory,name=PurgatorySize,delayedOperation=Fetch",
     "kafka_server_delayedoperationpurgatory_purgatorysize"),
    ("kafka.network:type=RequestMetrics,name=TotalTimeMs,request=*", "kafka_network_requestmetrics_totaltime_seconds"),
    ("kafka.network:type=RequestMetrics,name=RequestQueueTimeMs,request=*",
     "kafka_network_requestmetrics_requestqueuetime_seconds"),
    ("kafka.network:type=RequestMetrics,name=LocalTimeMs,request=*", "kafka_network_requestmetrics_localtime_seconds"),
    ("kafka.network:type=RequestMetrics,name=RemoteTimeMs,request=*",
     "kafka_network_requestmetrics_remotetime_seconds"),
    ("kafka.network:type=RequestMetrics,name=ResponseQueueTimeMs,request=*",
     "kafka_network_requestmetrics_responsequeuetime_seconds"),
    ("kafka.network:type=RequestMetrics,name=ResponseSendTimeMs,request=*",
     "kafka_network_requestmetrics_responsesendtime_seconds"),
    ("kafka.network:type=SocketServer,name=NetworkProcessorAvgIdlePercent",
     "kafka_network_socketserver_networkprocessoravgidlepercent"),
    ("kafka.server:type=socket-server-metrics,listener=*,networkProcessor=*,name=expired-connections-killed-count",
     "kafka_server_socketservermetrics_expired_connections_killed_count"),
    ("kafka.network:type=SocketServer,name=ExpiredConnectionsKilledCount",
     "kafka_network_socketserver_expiredconnectionskilledcount"),
    ("kafka.server:type=KafkaRequestHandlerPool,name=RequestHandlerAvgIdlePercent",
     "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent"),
    ("kafka.server:type=Produce,user=*,client-id=* (byte-rate, throttle-time)", "kafka_server_produce_byte_rate"),
    ("kafka.server:type=Fetch,user=*,client-id=* (byte-rate, throttle-time)", "kafka_server_fetch_byte_rate"),
    ("kafka.server:type=Request,user=*,client-id=* (request-time, throttle-time)",
     "kafka_server_request_request_time"),
    ("kafka.server:type=Request (exempt-request-time)", "kafka_server_request_exempt_request_time"),
    ("kafka.server:type=ZooKeeperClientMetrics,name=ZooKeeperRequestLatencyMs",
     "kafka_server_zookeeperclientmetrics_zookeeperrequestlatency_seconds"),
    ("kafka.server:type=SessionExpireListener,name=SessionState", "kafka_server_sessionexpirelistener_sessionstate"),
    ("kafka.server:type=group-coordinator-metrics,name=partition-load-time-max",
     "kafka_server_group_coordinator_metrics_partition_load_time_max"),
    ("kafka.server:type=group-coordinator-metrics,name=partition-load-time-avg",
     "kafka_server_group_coordinator_metrics_partition_load_time_avg"),
    ("kafka.server:type=transaction-coordinator-metrics,name=partition-load-time-max",
     "kafka_server_transaction_coordinator_metrics_partition_load_time_max"),
    ("kafka.server:type=transaction-coordinator-metrics,name=partition-load-time-avg",
     "kafka_server_transaction_coordinator_metrics_partition_load_time_avg"),
    # (the docs say kafka.server:type=GroupMetadataManager; Kafka registers them under kafka.coordinator.group)
    ("kafka.coordinator.group:type=GroupMetadataManager,name=NumOffsets",
     "kafka_coordinator_group_groupmetadatamanager_numoffsets"),
    ("kafka.coordinator.group:type=GroupMetadataManager,name=NumGroups",
     "kafka_coordinator_group_groupmetadatamanager_numgroups"),
    *((f"kafka.coordinator.group:type=GroupMetadataManager,name=NumGroups{state}",
       f"kafka_coordinator_group_groupmetadatamanager_numgroups{state.lower()}")
      for state in ("PreparingRebalance", "CompletingRebalance", "Empty", "Stable", "Dead")),
    ("kafka.server:type=ReplicaManager,name=ReassigningPartitions",
     "kafka_server_replicamanager_reassigningpartitions"),
    ("kafka.server:type=BrokerTopicMetrics,name=ReassignmentBytesOutPerSec",
     "kafka_server_brokertopicmetrics_reassignmentbytesout"),
    ("kafka.server:type=BrokerTopicMetrics,name=ReassignmentBytesInPerSec",
     "kafka_server_brokertopicmetrics_reassignmentbytesin"),
    ("kafka.log:type=Log,name=Size,topic=*,partition=*", "kafka_log_log_size"),
    ("kafka.log:type=Log,name=NumLogSegments,topic=*,partition=*", "kafka_log_log_numlogsegments"),
    ("kafka.log:type=Log,name=LogStartOffset,topic=*,partition=*", "kafka_log_log_logstartoffset"),
    ("kafka.log:type=Log,name=LogEndOffset,topic=*,partition=*", "kafka_log_log_logendoffset"),
)

# The "Common monitoring metrics" (Kafka's Selector), as a broker's kafka.server:type=socket-server-metrics
_SELECTOR_COUNTERS = ("connection-close", "connection-creation", "network-io", "outgoing-byte", "request",
                      "incoming-byte", "response", "select", "successful-authentication", "failed-authentication",
                      "successful-reauthentication", "failed-reauthentication")
_SELECTOR_GAUGES = ("request-size-avg", "request-size-max", "io-wait-time-ns-avg", "io-wait-ratio", "io-time-ns-avg",
                    "io-ratio", "connection-count", "reauthentication-latency-max", "reauthentication-latency-avg")
COMMON_TABLE = (
    *((f"kafka.server:type=socket-server-metrics {name}-rate, {name}-total",
       f"kafka_server_socketservermetrics_{name.replace('-', '_')}") for name in _SELECTOR_COUNTERS),
    # a "-total" alone is a counter too
    ("kafka.server:type=socket-server-metrics successful-authentication-no-reauth-total",
     "kafka_server_socketservermetrics_successful_authentication_no_reauth"),
    *((f"kafka.server:type=socket-server-metrics {name}", f"kafka_server_socketservermetrics_{name.replace('-', '_')}")
      for name in _SELECTOR_GAUGES),
)


def families(text: str) -> set[str]:
    """The metric families named on the scrape's # TYPE lines (a counter's as the table names it: without
    _total)."""
    out = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            out.add(name.removesuffix("_total") if kind == "counter" else name)
    return out


def request_accounting_ns(calls: int = 200_000) -> float:
    """ns per request of what the network and dispatch add for the request time breakdown, best of 5 rounds."""
    from kbroker.metrics import BrokerMetrics, current_request
    from kbroker.network.server import RequestTimes
    metrics, clock = BrokerMetrics(), time.perf_counter
    best = float("inf")
    for _ in range(5):
        t0 = clock()
        for _ in range(calls):
            t = RequestTimes(clock())
            t.dequeued = clock()
            token = current_request.set(t)
            t.local_done = clock()
            current_request.reset(token)
            t.name, t.version, t.throttle_ms = "Produce", 8, 0
            t.ready = clock()
            t.send_start = clock()
            t.end = clock()
            metrics.request_done(t)
        best = min(best, (clock() - t0) / calls * 1e9)
    return best


def coverage(present: set[str], table) -> tuple[int, list[str]]:
    missing = [mbean for mbean, name in table if name not in present]
    return len(table) - len(missing), missing


def main() -> None:
    parser = bench_parser("metrics_coverage", __doc__)
    args = parser.parse_args()
    port = free_port()
    with BenchCluster(args.tmp_dir, args.keep, args.broker_prop, settings={"metrics.port": str(port)}) as cluster:
        cluster.create_topic("coverage", 1)
        producer = RawProducer(cluster.port, "coverage", 1, build_v2_batch(100, 100), 100, connections=1, depth=1)
        producer.fill(10)
        conn = Connection("127.0.0.1", cluster.port, "bench-coverage", 10.0)
        fetch_all(conn, 11, "coverage", 0, 1000, 1024 * 1024, 1024 * 1024)
        conn.close()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            present = families(r.read().decode())
        log(f"{len(present)} metric families scraped")
    rows, all_missing = [], []
    for title, table in (("broker table", BROKER_TABLE), ("common monitoring metrics", COMMON_TABLE)):
        n, missing = coverage(present, table)
        rows.append([title, n, len(table), f"{100 * n / len(table):.0f} %"])
        all_missing += missing
    n, m = sum(r[1] for r in rows), sum(r[2] for r in rows)
    rows.append(["both", n, m, f"{100 * n / m:.0f} %"])
    print_table("Kafka 2.8's documented monitoring MBeans found on the broker's /metrics",
                ["table", "present", "documented", "coverage"], rows)
    print(f"\n{n} of {m} ({100 * n / m:.0f} %)")
    print("\nmissing:")
    for mbean in all_missing:
        print(f"  {mbean}")
    print(f"\nrequest time breakdown: {request_accounting_ns():.0f} ns of accounting per request "
          f"(load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
