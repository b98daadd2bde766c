"""No acknowledged write is lost: an acks=all producer runs while brokers are killed, stopped, paused past
their ZooKeeper session and restarted; afterwards every acknowledged record is at its acknowledged offset, and
the three replicas' logs agree entry for entry. Run on a plaintext cluster and on a secured one (the
`kbroker cluster up --security sasl_ssl` preset: SASL_SSL for clients, the controller channel and the replica
fetchers, SCRAM-SHA-512, the authorizer on; the clients log in as the admin)."""
from __future__ import annotations

import os
import signal
import time

import pytest
from click.testing import CliRunner

from admin_cli.main import cli as kadmin
from tests.chaos.harness import AckedProducer, ChaosRun, HistoryReader, kafka_python_security, read_all, verify
from tests.integration.conftest import SESSION_TIMEOUT_MS, wait_until

TOPIC = "chaos"
PARTITIONS = 3


def leader_of(c, partition: int) -> int:
    state = c.zk.get_partition_state(TOPIC, partition)
    return state.leader if state else -1


def all_in_sync(c) -> bool:
    for p in range(PARTITIONS):
        state = c.zk.get_partition_state(TOPIC, p)
        if state is None or sorted(state.isr) != [1, 2, 3] or state.leader < 0:
            return False
    return True


@pytest.mark.parametrize("security", [None, "sasl_ssl"], ids=["plaintext", "sasl_ssl"])
def test_acks_all_survives_kills_stops_pauses_and_restarts(cluster_factory, security):
    c = cluster_factory(3, security, **{"replica.lag.time.max.ms": 6000, "unclean.leader.election.enable": "false"})
    result = CliRunner().invoke(kadmin, ["--zookeeper", c.zk_connect, "create-topic", TOPIC, "--partitions",
                                         str(PARTITIONS), "--replication-factor", "3",
                                         "--config", "min.insync.replicas=2"])
    assert result.exit_code == 0, result.output
    wait_until(lambda: all_in_sync(c), message="topic online")

    login = kafka_python_security(c.client_properties, c.security.admin_password if c.security else None)
    producer = AckedProducer(c.bootstrap, TOPIC, PARTITIONS, c.librdkafka_config).start()
    reader = HistoryReader(c.bootstrap, TOPIC, PARTITIONS, **login).start()
    run = ChaosRun(f"kills/stops/pauses {security or 'plaintext'}")
    time.sleep(2)

    def restart(b):
        b.start()
        c.wait_ready([b.id])

    # 1. kill -9 the leader of partition 0, then bring it back.
    victim = c.brokers[leader_of(c, 0)]
    run.fault("kill -9 of a leader")
    victim.kill9()
    time.sleep(SESSION_TIMEOUT_MS / 1000 + 2)
    restart(victim)
    wait_until(lambda: all_in_sync(c), timeout=40, message="ISR restored after kill -9")
    # 2. SIGTERM (controlled shutdown) of another broker.
    stopped = c.brokers[leader_of(c, 1)]
    run.fault("controlled shutdown")
    assert stopped.terminate() == 0
    time.sleep(1)
    restart(stopped)
    wait_until(lambda: all_in_sync(c), timeout=40, message="ISR restored after controlled shutdown")
    # 3. SIGSTOP a broker past its session timeout, then let it go on.
    paused = c.brokers[leader_of(c, 2)]
    run.fault("pause past session timeout")
    paused.proc.send_signal(signal.SIGSTOP)
    time.sleep(SESSION_TIMEOUT_MS / 1000 + 3)
    paused.proc.send_signal(signal.SIGCONT)
    wait_until(lambda: all_in_sync(c), timeout=40, message="ISR restored after a pause")
    time.sleep(2)

    producer.stop()
    reader.stop()
    assert len(producer.acked) > 500, "the producer made too little progress to mean anything"
    final = read_all(c.bootstrap, TOPIC, PARTITIONS, **login)
    for b in c.brokers.values():
        assert b.terminate() == 0
    lost = verify(producer, final, [reader], [os.path.join(b.dir, "data") for b in c.brokers.values()])
    run.finish(producer, lost)
