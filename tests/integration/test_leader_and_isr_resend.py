"""A controller whose LeaderAndIsr timed out (a broker creating 10 000 logs on a loaded machine takes longer than
the controller's 30 s) resends it on a new connection while the broker still applies the first. The broker applies
them one after the other, as Kafka's replicaStateChangeLock does: each new log is created once, and the resent
request finds every partition at its leader epoch already."""
from __future__ import annotations

import threading

from kbroker.protocol.client import Connection
from kbroker.protocol.interbroker import LeaderAndIsrRequest

PARTITIONS = 400   # four of the broker's log-creation batches in flight at once


def leader_and_isr(broker_id: int, controller_epoch: int, topic: str, host: str, port: int) -> LeaderAndIsrRequest:
    R = LeaderAndIsrRequest
    return R(version=4, controller_id=broker_id, controller_epoch=controller_epoch, broker_epoch=-1,
             topic_states=[R.LeaderAndIsrTopicState(topic_name=topic, partition_states=[
                 R.LeaderAndIsrPartitionState(partition_index=p, controller_epoch=controller_epoch, leader=broker_id,
                                              leader_epoch=0, isr=[broker_id], zk_version=0, replicas=[broker_id],
                                              adding_replicas=[], removing_replicas=[], is_new=True)
                 for p in range(PARTITIONS)])],
             live_leaders=[R.LeaderAndIsrLiveLeader(broker_id=broker_id, host_name=host, port=port)])


def test_a_resent_leader_and_isr_waits_for_the_first_and_creates_no_log_twice(cluster_factory):
    c = cluster_factory(1)
    b = c.brokers[1]
    controller_epoch, _ = c.zk.get_controller_epoch()
    request = leader_and_isr(b.id, controller_epoch, "resent", b.host, b.port)
    answers: list = []

    def send(name: str) -> None:
        conn = Connection(b.host, b.port, name, timeout=60)
        try:
            answers.append(conn.send(request))
        finally:
            conn.close()
    senders = [threading.Thread(target=send, args=(f"controller-{i}",)) for i in range(2)]
    for t in senders:
        t.start()
    for t in senders:
        t.join(90)
    assert len(answers) == 2
    codes = sorted({p.error_code for p in answers[0].partition_errors} | {-1}) + \
        sorted({p.error_code for p in answers[1].partition_errors} | {-1})
    # One applied every partition (NONE); the other found each at its leader epoch (STALE_CONTROLLER_EPOCH, as
    # Kafka answers a leader epoch that is not newer).
    assert sorted(codes) == [-1, -1, 0, 11], codes
    text = open(b.log_path, errors="replace").read()
    assert "rebuilding the indexes" not in text
    created = [line for line in text.splitlines() if "created log for partition resent-" in line]
    assert len(created) == PARTITIONS
