"""The controller's channels to brokers, and the batch that turns state changes into requests.

ControllerChannelManager keeps one queue and one sender greenlet per live broker (Kafka's RequestSendThread),
connected to the broker's endpoint on control.plane.listener.name (KIP-291), else on the inter-broker listener
(ControlledShutdown, fetches and markers stay on the inter-broker one, as Kafka): requests to a broker go out
in order, each retried until it is answered or the broker leaves the channel. A response callback, if any, gets
the decoded response; it must only enqueue a controller event.

RequestBatch collects what one controller event decided (Kafka's ControllerBrokerRequestBatch) and sends it
as at most one LeaderAndIsr, one UpdateMetadata and one StopReplica per broker, in the 2.8 versions
(LeaderAndIsr v5, UpdateMetadata v7, StopReplica v3). LeaderAndIsr and UpdateMetadata are encoded by
protocol.controller_requests: each partition state once per batch, shared by every broker's request (the
UpdateMetadata body is encoded once and only its broker epoch differs). Every request is built before any is
queued.
"""
from __future__ import annotations

import logging

import gevent
from gevent.queue import Queue

from ..common.hub import yield_to_hub
from ..metadata_cache import topic_id_to_uuid
from ..protocol import controller_requests as encoded
from ..protocol.client import Connection, KafkaError
from ..protocol.interbroker import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest

log = logging.getLogger("kbroker.controller.channel")
state_change = logging.getLogger("state-change")

LEADER_AND_ISR_VERSION, UPDATE_METADATA_VERSION = encoded.LEADER_AND_ISR_VERSION, encoded.UPDATE_METADATA_VERSION
STOP_REPLICA_VERSION = 3
LEADER_DURING_DELETE = -2
EPOCH_DURING_DELETE = -2
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


class _BrokerChannel:
    def __init__(self, broker_id: int, host: str, port: int, controller_id: int, timeout_s: float, security=None):
        self.broker_id = broker_id
        self.queue: Queue = Queue()
        self.client = Connection(host, port, f"controller-{controller_id}-to-broker-{broker_id}", timeout_s,
                                 security)
        self.greenlet = gevent.spawn(self._run)

    def _run(self):
        backoff = 0.05
        while True:
            request, body, callback = self.queue.get()   # the request carries its version; body: encoded already
            while True:
                try:
                    self.client.submit(request, body)   # (all three controller requests are answered)
                    response = self.client.receive()
                    break
                except KafkaError as e:
                    log.info("request %s to broker %d failed (%s); retrying", request.name, self.broker_id, e)
                    gevent.sleep(backoff)
                    backoff = min(backoff * 2, 1.0)
            backoff = 0.05
            if callback is not None:
                try:
                    callback(self.broker_id, response)
                except Exception:
                    log.exception("response callback failed")

    def stop(self):
        self.greenlet.kill(block=False)
        self.client.close()


class ControllerChannelManager:
    def __init__(self, controller_id: int, listener: str, security=None, timeout_ms: int = 30000):
        """listener: the brokers' listener the requests go to (the control-plane one, else the inter-broker one);
        security: this broker's ClientSecurity for it (None on PLAINTEXT)."""
        self.security = security
        self.controller_id = controller_id
        self.listener = listener
        self.timeout_s = timeout_ms / 1000.0
        self.channels: dict[int, _BrokerChannel] = {}

    def add_broker(self, info) -> None:
        self.remove_broker(info.id)
        ep = info.endpoint(self.listener)
        if ep is None:
            log.error("broker %d has no endpoint on listener %s: no controller requests sent to it", info.id,
                      self.listener)
            return
        self.channels[info.id] = _BrokerChannel(info.id, ep.host, ep.port, self.controller_id, self.timeout_s,
                                                self.security)

    def remove_broker(self, broker_id: int) -> None:
        channel = self.channels.pop(broker_id, None)
        if channel is not None:
            channel.stop()

    def send(self, broker_id: int, request, callback=None, body: bytes | None = None) -> None:
        """Queue a request (body: its encoded body, when encoded already) for a broker."""
        channel = self.channels.get(broker_id)
        if channel is not None:
            channel.queue.put((request, body, callback))

    def shutdown(self) -> None:
        for broker_id in list(self.channels):
            self.remove_broker(broker_id)


class RequestBatch:
    """What one controller event wants sent (Kafka's ControllerBrokerRequestBatch): the controller's one batch,
    filled by its state machines during an event and emptied by send()."""

    def __init__(self, ctx, channels: ControllerChannelManager, stop_replica_callback=None,
                 leader_and_isr_callback=None):
        self.ctx = ctx                    # the ControllerContext
        self.channels = channels
        self.stop_replica_callback = stop_replica_callback
        self.leader_and_isr_callback = leader_and_isr_callback
        self.clear()

    def clear(self) -> None:
        self.leader_and_isr: dict = {}                      # broker -> {(t, p): is_new}
        self.update_metadata_brokers: set = set()
        self.update_metadata_partitions: set = set()
        self.update_metadata_all_partitions: set = set()    # brokers that get every partition
        self.stop_replica: dict = {}                        # broker -> {(t, p): delete}

    def add_leader_and_isr(self, brokers, tp, is_new=False):
        for b in brokers:
            if b in self.ctx.live_brokers:
                self.leader_and_isr.setdefault(b, {})[tp] = is_new
        self.update_metadata_partitions.add(tp)

    def add_update_metadata(self, brokers, partitions=None):
        """Partitions None: every partition (a full update, as for a new broker or a new controller)."""
        brokers = {b for b in brokers if b in self.ctx.live_brokers}
        self.update_metadata_brokers |= brokers
        if partitions is None:
            self.update_metadata_all_partitions |= brokers
        else:
            self.update_metadata_partitions |= set(partitions)

    def add_stop_replica(self, brokers, tp, delete: bool):
        for b in brokers:
            if b in self.ctx.live_brokers:
                self.stop_replica.setdefault(b, {})[tp] = delete

    # ---- building -----------------------------------------------------------------------------------------
    # Every request of a batch is built before any is queued: a channel (and, for the controller's own broker,
    # the LeaderAndIsr handling) starts only once the controller is done, instead of interleaving with it.

    def _leader_and_isr(self, broker_id, partitions, cache: dict):
        """(request, encoded body, become-leader count, partition count). cache: {(tp, is_new): encoded state},
        shared by the brokers of one batch."""
        ctx = self.ctx
        by_topic: dict = {}
        leaders = set()
        leading = 0
        for tp, is_new in sorted(partitions.items()):
            state = ctx.partition_states.get(tp)
            if state is None:
                continue
            leader = LEADER_DURING_DELETE if tp[0] in ctx.topics_being_deleted else state.leader
            leaders.add(leader)
            leading += leader == broker_id
            piece = cache.get((tp, is_new))
            if piece is None:
                piece = cache[(tp, is_new)] = encoded.leader_and_isr_partition(
                    tp[1], state.controller_epoch, leader, state.leader_epoch, state.isr, state.zk_version,
                    ctx.assignments[tp], is_new)
            by_topic.setdefault(tp[0], []).append(piece)
        R = LeaderAndIsrRequest
        live_leaders = []
        for b in sorted(leaders):
            info = ctx.live_brokers.get(b)
            ep = info.endpoint(ctx.inter_broker_listener) if info else None
            if ep is not None:
                live_leaders.append(R.LeaderAndIsrLiveLeader(broker_id=b, host_name=ep.host, port=ep.port))
        request = R(version=LEADER_AND_ISR_VERSION, controller_id=ctx.broker_id, controller_epoch=ctx.epoch,
                    broker_epoch=ctx.live_brokers[broker_id].epoch, type=0, topic_states=[], live_leaders=live_leaders)
        body = encoded.encode(request, encoded.topic_states(
            [(t, topic_id_to_uuid(ctx.topic_ids.get(t)), ps) for t, ps in by_topic.items()]))
        return request, body, leading, sum(len(ps) for ps in by_topic.values())

    def _update_metadata_topic_states(self, partitions) -> bytes:
        """The encoded topic states of an UpdateMetadata; built once per batch and shared by every broker's
        request."""
        ctx = self.ctx
        by_topic: dict = {}
        for tp in sorted(partitions):
            state = ctx.partition_states.get(tp)
            if state is None:
                continue
            replicas = ctx.assignments[tp]
            leader = LEADER_DURING_DELETE if tp[0] in ctx.topics_being_deleted else state.leader
            by_topic.setdefault(tp[0], []).append(encoded.update_metadata_partition(
                tp[1], state.controller_epoch, leader, state.leader_epoch, state.isr, state.zk_version, replicas,
                [r for r in replicas if not ctx.is_replica_online(r, tp)]))
        return encoded.topic_states([(t, topic_id_to_uuid(ctx.topic_ids.get(t)), ps) for t, ps in by_topic.items()])

    def _live_brokers(self) -> list:
        R = UpdateMetadataRequest
        return [R.UpdateMetadataBroker(id=b.id, rack=b.rack, endpoints=[
            R.UpdateMetadataBroker.UpdateMetadataEndpoint(
                port=e.port, host=e.host, listener=e.listener,
                security_protocol=SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0))
            for e in b.endpoints]) for b in sorted(self.ctx.live_brokers.values(), key=lambda b: b.id)]

    def _stop_replica(self, broker_id, partitions):
        ctx = self.ctx
        R = StopReplicaRequest
        by_topic: dict = {}
        for (t, p), delete in sorted(partitions.items()):
            state = ctx.partition_states.get((t, p))
            epoch = EPOCH_DURING_DELETE if t in ctx.topics_being_deleted else (state.leader_epoch if state else -1)
            by_topic.setdefault(t, []).append(R.StopReplicaTopicState.StopReplicaPartitionState(
                partition_index=p, leader_epoch=epoch, delete_partition=delete))
        return R(version=STOP_REPLICA_VERSION, controller_id=ctx.broker_id, controller_epoch=ctx.epoch,
                 broker_epoch=ctx.live_brokers[broker_id].epoch,
                 topic_states=[R.StopReplicaTopicState(topic_name=t, partition_states=ps) for t, ps in by_topic.items()])

    def send(self) -> None:
        ctx = self.ctx
        out = []   # (broker, request, body, callback), queued once all are built
        leader_and_isr_states: dict = {}
        for b, partitions in self.leader_and_isr.items():
            if b in ctx.live_brokers:
                request, body, leading, total = self._leader_and_isr(b, partitions, leader_and_isr_states)
                state_change.info("sending LeaderAndIsr request to broker %d with %d become-leader and %d "
                                  "become-follower partitions (controller epoch %d)", b, leading, total - leading,
                                  ctx.epoch)
                out.append((b, request, body, self.leader_and_isr_callback))
                yield_to_hub()
        sent: dict[int, list[int]] = {}   # partition count -> brokers, for the state-change log
        built: dict[bool, bytes] = {}     # every partition or not -> body (for the first broker's epoch)
        R = UpdateMetadataRequest
        for b in sorted(self.update_metadata_brokers):
            if b in ctx.live_brokers:
                everything = b in self.update_metadata_all_partitions
                partitions = ctx.partition_states if everything else self.update_metadata_partitions
                epoch = ctx.live_brokers[b].epoch
                request = R(version=UPDATE_METADATA_VERSION, controller_id=ctx.broker_id, controller_epoch=ctx.epoch,
                            broker_epoch=epoch, topic_states=[], live_brokers=[])
                if everything not in built:
                    envelope = R(version=UPDATE_METADATA_VERSION, controller_id=ctx.broker_id,
                                 controller_epoch=ctx.epoch, broker_epoch=epoch, topic_states=[],
                                 live_brokers=self._live_brokers())
                    built[everything] = encoded.encode(envelope, self._update_metadata_topic_states(partitions))
                    yield_to_hub()
                sent.setdefault(len(partitions), []).append(b)
                out.append((b, request, encoded.with_broker_epoch(built[everything], epoch), None))
        for count, brokers in sent.items():
            state_change.info("sending UpdateMetadata request to brokers %s for %d partitions", brokers, count)
        for b, partitions in self.stop_replica.items():
            if b in ctx.live_brokers:
                state_change.info("sending StopReplica request to broker %d for %d partitions (%d to delete)", b,
                                  len(partitions), sum(partitions.values()))
                out.append((b, self._stop_replica(b, partitions), None, self.stop_replica_callback))
        self.clear()
        for b, request, body, callback in out:
            self.channels.send(b, request, callback, body)
