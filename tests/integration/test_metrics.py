"""The Prometheus endpoint (metrics.port) and the state-change and request logs, as a user of a 3-broker
cluster sees them: scrape after real clients produced, fetched and consumed in a group, then after followers
died (the leader's ISR gauges, the controller's election timer, the ZooKeeper client's latency)."""
from __future__ import annotations

import glob
import math
import os
import re
import urllib.request

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from admin_cli.main import cli as kadmin
from tests.conftest import free_port
from tests.integration.conftest import wait_until

TOPIC = "m"


def scrape(broker) -> dict:
    """{(sample name, frozenset of labels): value} from the broker's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics", timeout=5) as r:
        assert r.status == 200
        text = r.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples, name, **labels) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def by_label(samples, name, label, **match) -> dict:
    """{label value: sample value} of the samples of `name` whose other labels match."""
    out = {}
    for (n, labels), v in samples.items():
        d = dict(labels)
        if n == name and label in d and all(d.get(k) == w for k, w in match.items()):
            out[d[label]] = v
    return out


def consume_all(bootstrap, n, **kwargs) -> list:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             consumer_timeout_ms=3000, **kwargs)
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    out = []
    for r in consumer:
        out.append(r.value)
        if len(out) == n:
            break
    consumer.close()
    return out


def total(everyone: dict, name, **labels) -> float:
    return sum(value(s, name, **labels) for s in everyone.values())


def text(path) -> str:
    with open(path, errors="replace") as f:
        return f.read()


@pytest.fixture
def cluster(cluster_factory):
    c = cluster_factory()
    for i in (1, 2, 3):
        port = free_port()
        b = c.add(i, start=False, **{"metrics.port": port, "replica.lag.time.max.ms": 1000})
        b.metrics_port = port
        # Broker 1 also writes Kafka's request log.
        b.start(*(["--logger", "kafka.request.logger=DEBUG"] if i == 1 else []))
    c.wait_ready([1, 2, 3])
    return c


def test_metrics_and_logs_after_traffic_and_a_dead_follower(cluster):
    c = cluster
    leader, logs = c.brokers[1], {i: os.path.join(b.dir, "logs") for i, b in c.brokers.items()}
    result = CliRunner().invoke(kadmin, ["--zookeeper", c.zk_connect, "create-topic", TOPIC, "--replica-assignment",
                                         "1:2:3", "--config", "flush.messages=1", "--config", "min.insync.replicas=2"])
    assert result.exit_code == 0, result.output
    wait_until(lambda: (s := c.zk.get_partition_state(TOPIC, 0)) and sorted(s.isr) == [1, 2, 3], message="online")

    # Produce 50 records (librdkafka, v2 batches), read them back with a current kafka-python consumer.
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(50):
        p.produce(TOPIC, value=b"v%03d" % i, partition=0)
    assert p.flush(20) == 0
    assert len(consume_all(c.bootstrap, 50)) == 50
    segment = glob.glob(os.path.join(leader.dir, "data", f"{TOPIC}-0", "*.log"))[0]
    log_bytes = os.path.getsize(segment)

    s = scrape(leader)
    assert value(s, "kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == 50
    assert value(s, "kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC) == log_bytes
    assert value(s, "kafka_server_brokertopicmetrics_bytesout_total", topic=TOPIC) == log_bytes
    assert value(s, "kafka_server_brokertopicmetrics_fetchmessageconversions_total", topic=TOPIC) == 0
    assert value(s, "kafka_server_brokertopicmetrics_replicationbytesout_total") >= 2 * log_bytes
    for follower in (2, 3):
        wait_until(lambda f=follower: value(scrape(c.brokers[f]),
                                            "kafka_server_brokertopicmetrics_replicationbytesin_total") >= log_bytes,
                   timeout=10, message=f"broker {follower} replicated the records")
    produce_counts = by_label(s, "kafka_network_requestmetrics_requests_total", "version", request="Produce")
    assert produce_counts and all(int(v) >= 3 for v in produce_counts)   # v2 batches need Produce v3+
    for v, n in produce_counts.items():
        assert n >= 1
        assert value(s, "kafka_network_requestmetrics_totaltime_seconds_count", request="Produce", version=v) == n
        assert value(s, "kafka_network_requestmetrics_totaltime_seconds_bucket", request="Produce", version=v,
                     le="+Inf") == n
    assert by_label(s, "kafka_network_requestmetrics_requests_total", "version", request="FetchConsumer")
    assert by_label(s, "kafka_network_requestmetrics_requests_total", "version", request="FetchFollower")
    # Kafka's time breakdown: every phase counts each answered request once, as TotalTime does; acks=all produces
    # waited for the followers and followers' fetches long-polled: remote time.
    for request in ("Produce", "FetchConsumer", "FetchFollower"):
        for v, n in by_label(s, "kafka_network_requestmetrics_totaltime_seconds_count", "version",
                             request=request).items():
            for phase in ("requestqueuetime", "localtime", "remotetime", "throttletime", "responsequeuetime",
                          "responsesendtime"):
                assert value(s, f"kafka_network_requestmetrics_{phase}_seconds_count", request=request,
                             version=v) == n, (request, v, phase)
    for request in ("Produce", "FetchFollower"):
        assert sum(by_label(s, "kafka_network_requestmetrics_remotetime_seconds_sum", "version",
                            request=request).values()) > 0, request
    assert sum(by_label(s, "kafka_network_requestmetrics_throttletime_seconds_sum", "version").values()) == 0
    for idle in ("kafka_network_socketserver_networkprocessoravgidlepercent",
                 "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent"):
        assert 0 < value(s, idle) <= 1   # a broker handling a few requests waits most of the time
    # Kafka's per-partition log gauges, on the leader and (once replicated) on the followers
    for i, b in c.brokers.items():
        wait_until(lambda b=b: value(scrape(b), "kafka_log_log_logendoffset", topic=TOPIC, partition="0") == 50,
                   timeout=10, message=f"broker {i} has the 50 records")
    partition = {"topic": TOPIC, "partition": "0"}
    assert value(s, "kafka_log_log_logendoffset", **partition) == 50
    assert value(s, "kafka_log_log_logstartoffset", **partition) == 0
    assert value(s, "kafka_log_log_size", **partition) == log_bytes
    assert value(s, "kafka_log_log_numlogsegments", **partition) == 1
    assert value(s, "kafka_log_logmanager_offlinelogdirectorycount") == 0
    assert value(scrape(c.brokers[2]), "kafka_server_replicafetchermanager_maxlag", clientId="Replica") == 0
    assert value(s, "kafka_log_logflushstats_logflushtime_seconds_count") >= 1   # flush.messages=1
    wait_until(lambda: value(scrape(leader), "kafka_server_replicamanager_underreplicatedpartitions") == 0,
               timeout=10, message="no under-replicated partition")
    assert value(s, "kafka_server_replicamanager_leadercount") >= 1
    assert value(s, "kafka_server_delayedoperationpurgatory_purgatorysize", delayedOperation="Produce") == 0
    everyone = {i: scrape(b) for i, b in c.brokers.items()}
    assert sum(value(x, "kafka_controller_kafkacontroller_activecontrollercount") for x in everyone.values()) == 1
    controller = c.zk.get_controller_id()
    assert value(everyone[controller], "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(everyone[controller], "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(everyone[controller], "kafka_controller_kafkacontroller_globaltopiccount") >= 1
    assert value(everyone[controller], "kafka_controller_controllerstats_uncleanleaderelections_total") == 0
    # Every broker's ZooKeeper client is connected and has timed its requests.
    for i, x in everyone.items():
        assert value(x, "kafka_server_sessionexpirelistener_sessionstate", state="CONNECTED") == 1, i
        assert value(x, "kafka_server_sessionexpirelistener_zookeepersyncconnects_total") == 1, i
        assert value(x, "kafka_server_sessionexpirelistener_zookeeperexpires_total") == 0, i
        assert value(x, "kafka_server_zookeeperclientmetrics_zookeeperrequestlatency_seconds_count") > 0, i

    # A consumer group: stable while its member consumes, Empty (its offsets kept) once it left.
    group_series = "kafka_coordinator_group_groupmetadatamanager_"
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "dashboards", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    got = []
    while len(got) < 50:
        msg = consumer.poll(10)
        assert msg is not None and not msg.error(), msg and msg.error()
        got.append(msg)
    consumer.commit(asynchronous=False)
    everyone = {i: scrape(b) for i, b in c.brokers.items()}
    assert total(everyone, group_series + "numgroupsstable") == 1
    assert total(everyone, group_series + "numgroups") == 1
    assert total(everyone, group_series + "numoffsets") == 1
    # The coordinator's waits are remote time, as in Kafka's purgatories: the rebalance (JoinGroup), the leader's
    # assignment (SyncGroup), the offsets append's replication (OffsetCommit).
    for request in ("JoinGroup", "SyncGroup", "OffsetCommit"):
        remote = sum(sum(by_label(x, "kafka_network_requestmetrics_remotetime_seconds_sum", "version",
                                  request=request).values()) for x in everyone.values())
        assert remote > 0, request
        if request == "JoinGroup":      # the first join waits out group.initial.rebalance.delay.ms (3 s): remote
            assert remote >= 2.5, remote
    for i, x in everyone.items():   # 50 __consumer_offsets partitions over 3 brokers: each loaded some
        assert 0 <= x[("kafka_server_group_coordinator_metrics_partition_load_time_avg", frozenset())] \
            <= x[("kafka_server_group_coordinator_metrics_partition_load_time_max", frozenset())] < 30_000, i
    consumer.close()
    everyone = {i: scrape(b) for i, b in c.brokers.items()}
    assert total(everyone, group_series + "numgroupsstable") == 0
    assert total(everyone, group_series + "numgroupsempty") == 1
    assert total(everyone, group_series + "numoffsets") == 1

    # The request log counts the same Produce requests, with their versions.
    request_log = text(os.path.join(logs[1], "kafka-request.log"))
    for v, n in produce_counts.items():
        pattern = rf"Completed request: Produce v{v} correlation_id=\d+ client_id=rdkafka from [\d.]+:\d+ on PLAINTEXT "
        assert len(re.findall(pattern, request_log)) == n

    # An 0.10 client: its produce (magic 1) is converted up to the log's v2, its fetch (v2) down to magic 1.
    old = KafkaProducer(bootstrap_servers=leader.bootstrap, api_version=(0, 10), acks="all")
    for i in range(10):
        old.send(TOPIC, value=b"old%d" % i, partition=0)
    old.flush(20)
    old.close()
    assert len(consume_all(leader.bootstrap, 60, api_version=(0, 10))) == 60
    s = scrape(leader)
    assert value(s, "kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == 60
    assert value(s, "kafka_server_brokertopicmetrics_producemessageconversions_total", topic=TOPIC) == 10
    assert value(s, "kafka_server_brokertopicmetrics_fetchmessageconversions_total", topic=TOPIC) == 60
    # a second old consumer is served from the conversion cache: nothing converted again
    hits = value(s, "kbroker_downconversion_cache_hits_total")
    assert len(consume_all(leader.bootstrap, 60, api_version=(0, 10))) == 60
    s = scrape(leader)
    assert value(s, "kafka_server_brokertopicmetrics_fetchmessageconversions_total", topic=TOPIC) == 60
    assert value(s, "kbroker_downconversion_cache_hits_total") > hits
    assert 0 < value(s, "kbroker_downconversion_cache_bytes") <= 64 * 1024 * 1024
    assert by_label(s, "kafka_network_requestmetrics_requests_total", "version", request="Produce").get("2")
    assert by_label(s, "kafka_network_requestmetrics_requests_total", "version", request="FetchConsumer").get("2")

    # Kafka's socket-server-metrics of the listener: 20 produce requests of 1000-byte records (acks=1, one request
    # each) are 20 more requests read (`response`, as Kafka's Selector names a broker's receives) and answers sent
    # (`request`), at least their records' bytes in, and 20 more Produce sizes in RequestBytes.
    net, plain = "kafka_server_socketservermetrics_", {"listener": "PLAINTEXT", "networkProcessor": "0"}
    before = scrape(leader)
    producer = KafkaProducer(bootstrap_servers=leader.bootstrap, acks=1, linger_ms=0)
    for i in range(20):
        producer.send(TOPIC, value=b"%04d" % i * 250, partition=0).get(10)
    producer.close()
    after = scrape(leader)
    grew = lambda name, **labels: value(after, name, **labels) - value(before, name, **labels)  # noqa: E731
    assert grew(f"{net}response_total", **plain) >= 20
    assert grew(f"{net}request_total", **plain) >= 20
    assert grew(f"{net}network_io_total", **plain) >= 40
    assert grew(f"{net}incoming_byte_total", **plain) >= 20 * 1000
    assert grew(f"{net}outgoing_byte_total", **plain) > 0
    assert value(after, f"{net}request_size_max", **plain) >= value(after, f"{net}request_size_avg", **plain) > 0
    assert grew("kafka_network_requestmetrics_requestbytes_count", request="Produce") >= 20
    assert grew("kafka_network_requestmetrics_requestbytes_sum", request="Produce") >= 20 * 1000
    assert value(after, f"{net}successful_authentication_total", **plain) == 0   # Kafka counts none on PLAINTEXT
    assert value(after, f"{net}failed_authentication_total", **plain) == 0
    assert value(after, f"{net}select_total", networkProcessor="0") > 0
    wait_ratio = value(after, f"{net}io_wait_ratio", networkProcessor="0")
    assert 0 < wait_ratio <= 1
    assert math.isclose(wait_ratio + value(after, f"{net}io_ratio", networkProcessor="0"), 1.0)
    assert value(after, f"{net}io_wait_time_ns_avg", networkProcessor="0") > 0

    # A follower (not the controller) dies: the leader shrinks the ISR within replica.lag.time.max.ms, down to
    # min.insync.replicas; the controller times the broker change as Kafka's LeaderElectionRateAndTimeMs.
    assert value(s, "kafka_cluster_partition_underreplicated", **partition) == 0
    assert value(s, "kafka_server_replicamanager_atminisrpartitioncount") == 0
    victim, survivor = (3, 2) if controller != 3 else (2, 3)
    elections = "kafka_controller_controllerstats_leaderelectionrateandtime_seconds_count"
    broker_changes = value(scrape(c.brokers[controller]), elections)
    zk_requests = value(scrape(leader), "kafka_server_zookeeperclientmetrics_zookeeperrequestlatency_seconds_count")
    c.brokers[victim].kill9()
    # (this partition's shrink: the leader's other partitions, __consumer_offsets', shrink in the same pass)
    wait_until(lambda: value(s := scrape(leader), "kafka_cluster_partition_underreplicated", **partition) == 1
               and value(s, "kafka_server_replicamanager_underreplicatedpartitions") >= 1
               and value(s, "kafka_server_replicamanager_isrshrinks_total") >= 1, timeout=10,
               message="under-replicated partition and an ISR shrink")
    s = scrape(leader)
    assert value(s, "kafka_cluster_partition_underreplicated", **partition) == 1
    assert value(s, "kafka_cluster_partition_atminisr", **partition) == 1
    assert value(s, "kafka_cluster_partition_underminisr", **partition) == 0
    assert value(s, "kafka_server_replicamanager_atminisrpartitioncount") >= 1
    # the shrink was written to the partition's state znode: one more ZooKeeper request timed
    assert value(s, "kafka_server_zookeeperclientmetrics_zookeeperrequestlatency_seconds_count") > zk_requests
    wait_until(lambda: value(scrape(c.brokers[controller]), elections) > broker_changes, timeout=10,
               message="the controller timed the broker change")

    # The state-change log of each broker has its own file: the leader's LeaderAndIsr handling and ISR shrink,
    # the controller's election and the requests it sent.
    leader_log = text(os.path.join(logs[1], "state-change.log"))
    assert re.search(rf"handling LeaderAndIsr request v\d+ correlation id \d+ from controller {controller}", leader_log)
    assert f"partition {TOPIC}-0: leader (leader 1" in leader_log
    # a line per partition stays in that file (Kafka's additivity=false); the request's line goes to stderr too
    assert f"partition {TOPIC}-0: leader (leader 1" not in c.brokers[1].log()
    assert re.search(rf"handling LeaderAndIsr request v\d+ correlation id \d+ from controller {controller}",
                     c.brokers[1].log())
    assert f"partition {TOPIC}-0: shrinking ISR, out of sync: [{victim}]" in leader_log
    controller_log = text(os.path.join(logs[controller], "state-change.log"))
    assert f"broker {controller} elected controller" in controller_log
    assert "sending LeaderAndIsr request to broker 1 with 1 become-leader" in controller_log
    assert not os.path.exists(os.path.join(logs[2], "kafka-request.log"))   # request log off by default

    # The other follower dies too: under min.insync.replicas.
    c.brokers[survivor].kill9()
    wait_until(lambda: value(scrape(leader), "kafka_cluster_partition_underminisr", **partition) == 1, timeout=10,
               message="under min ISR")
    s = scrape(leader)
    assert value(s, "kafka_cluster_partition_atminisr", **partition) == 0
    assert value(s, "kafka_server_replicamanager_underminisrpartitioncount") >= 1

    # A broker whose metrics.port is taken refuses to start (before registering), naming the setting.
    clash = c.add(4, start=False, **{"metrics.port": leader.metrics_port})
    clash.start()
    assert clash.proc.wait(30) == 1
    assert "cannot bind metrics.port" in clash.log()
    assert 4 not in c.zk.get_broker_ids()


def test_transaction_coordinator_metrics_after_a_transactional_producer(cluster):
    """Kafka's transaction coordinator series: partition-load-time once `__transaction_state` was loaded (NaN
    before), and empty marker queues once a confluent-kafka transaction committed."""
    c = cluster
    load_max = "kafka_server_transaction_coordinator_metrics_partition_load_time_max"
    load_avg = "kafka_server_transaction_coordinator_metrics_partition_load_time_avg"
    queues = ("kafka_coordinator_transaction_transactionmarkerchannelmanager_unknowndestinationqueuesize",
              "kafka_coordinator_transaction_transactionmarkerchannelmanager_logappendretryqueuesize")
    before = scrape(c.brokers[1])
    assert math.isnan(before[(load_max, frozenset())]) and math.isnan(before[(load_avg, frozenset())])
    assert all(before[(q, frozenset())] == 0 for q in queues)

    result = CliRunner().invoke(kadmin, ["--zookeeper", c.zk_connect, "create-topic", "tm", "--partitions", "3",
                                         "--replication-factor", "3"])
    assert result.exit_code == 0, result.output
    p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": "tx-metrics", "acks": "all"})
    p.init_transactions(60)
    for _ in range(3):
        p.begin_transaction()
        for i in range(30):
            p.produce("tm", value=b"t%d" % i, partition=i % 3)
        p.commit_transaction(30)

    everyone = {i: scrape(b) for i, b in c.brokers.items()}
    for i, s in everyone.items():
        # 50 partitions over 3 brokers: every broker leads and so has loaded some of them.
        assert 0 <= s[(load_avg, frozenset())] <= s[(load_max, frozenset())] < 30_000, i
        for q in queues:
            assert s[(q, frozenset())] == 0, (i, q)
    end_txn = [by_label(s, "kafka_network_requestmetrics_requests_total", "version", request="EndTxn")
               for s in everyone.values()]
    assert sum(sum(v.values()) for v in end_txn) >= 3
