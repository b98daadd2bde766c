"""Dynamic topic configs: a change written the way Kafka's tools write it (/config/topics/<T>, then a
/config/changes notification) takes effect on the running broker, without a restart."""
import glob
import os
import time

from click.testing import CliRunner
from confluent_kafka import Producer

from admin_cli.main import cli as kadmin
from tests.integration.conftest import wait_until


def produce_hour_old(c, topic: str, records: int):
    """Produce records of 200 bytes stamped an hour ago to partition 0 of topic, one batch each; returns a
    function listing the segment files of broker 1's replica."""
    hour_ago = int(time.time() * 1000) - 3_600_000
    p = Producer({"bootstrap.servers": c.bootstrap, "linger.ms": 0})
    for _ in range(records):
        p.produce(topic, value=b"v" * 200, partition=0, timestamp=hour_ago)
        p.flush(10)
    return lambda: sorted(glob.glob(os.path.join(c.brokers[1].dir, "data", f"{topic}-0", "*.log")))


def test_retention_change_deletes_old_segments_without_restart(cluster_factory):
    c = cluster_factory(1, **{"log.retention.check.interval.ms": 300, "log.segment.delete.delay.ms": 0})
    result = CliRunner().invoke(kadmin, ["--zookeeper", c.zk_connect, "create-topic", "dyn", "--partitions", "1",
                                         "--replication-factor", "1", "--config", "segment.bytes=2000"])
    assert result.exit_code == 0, result.output
    wait_until(lambda: c.zk.get_partition_state("dyn", 0), message="leader")
    segments = produce_hour_old(c, "dyn", 60)
    before = segments()
    assert len(before) > 3
    time.sleep(1)
    assert segments() == before  # the default retention (7 days) keeps hour-old records

    # kafka-configs.sh --alter, as ZooKeeper sees it: the entity config, then the change notification.
    c.zk.set_or_create_entity_config("topics", "dyn", {"segment.bytes": "2000", "retention.ms": "60000"})
    c.zk.create_config_change_notification("topics/dyn")
    wait_until(lambda: len(segments()) == 1, timeout=15, message="old segments deleted by the new retention.ms")
    assert "applied config change of topic dyn" in c.brokers[1].log()
    assert c.brokers[1].alive()
