"""kbroker.controller.context: partition and replica states are derived from the context (a pure function of it);
the state machines that change it against ZooKeeper are in tests/integration/test_controller_state_machines.py."""
from kbroker.controller.context import ControllerContext, PartitionState, ReplicaState
from zk import znodes as z

S = ReplicaState


def test_states_are_derived_from_the_context():
    ctx = ControllerContext(1, "PLAINTEXT", epoch=2)
    ctx.live_brokers = {b: z.BrokerInfo(b, [z.EndPoint("PLAINTEXT", f"b{b}", 9092)]) for b in (1, 2)}
    ctx.assignments = {("t", 0): [1, 2], ("t", 1): [3, 1], ("t", 2): [1]}
    ctx.partition_states = {("t", 0): z.LeaderAndIsr(1, 3, [1, 2], 1), ("t", 1): z.LeaderAndIsr(3, 3, [3, 1], 1)}
    assert ctx.partition_state(("t", 0)) is PartitionState.ONLINE
    assert ctx.partition_state(("t", 1)) is PartitionState.OFFLINE     # its leader 3 is not live
    assert ctx.partition_state(("t", 2)) is PartitionState.NEW
    assert ctx.partition_state(("u", 0)) is PartitionState.NON_EXISTENT
    assert ctx.replica_state(("t", 1, 3)) is S.OFFLINE
    assert ctx.replica_state(("t", 1, 1)) is S.ONLINE
    assert ctx.replica_state(("t", 2, 1)) is S.NEW
    assert ctx.replica_state(("t", 0, 3)) is S.NON_EXISTENT
    ctx.replica_deletion_states[("t", 0, 2)] = S.DELETION_STARTED
    assert ctx.replica_state(("t", 0, 2)) is S.DELETION_STARTED
    # A replica in a failed log dir of a live broker is offline; a partition it leads is offline.
    ctx.replicas_on_offline_dirs[1] = {("t", 0)}
    assert not ctx.is_replica_online(1, ("t", 0)) and ctx.is_replica_online(1, ("t", 1))
    assert ctx.partition_state(("t", 0)) is PartitionState.OFFLINE
    assert ctx.replica_state(("t", 0, 1)) is S.OFFLINE and ctx.replica_state(("t", 1, 1)) is S.ONLINE
    assert ctx.eligible_leaders_of(("t", 0), {1, 2}) == {2} and ctx.eligible_leaders_of(("t", 1), {1, 2}) == {1, 2}
