"""The authorization matrix, in the style of Kafka's AuthorizerIntegrationTest: one secured broker for the whole
module (authorizer.class.name=kafka.security.authorizer.AclAuthorizer); each API is refused with its own error
code without ACLs and allowed once the ACLs Kafka requires exist (literal, prefixed and `*` resources), written
to ZooKeeper and applied live through the change notifications; deny beats allow; ACLs of one principal serve
no other; super users pass; the ACL APIs; the inter-broker APIs need ClusterAction.

Principals: alice and bob (SASL_PLAINTEXT, PLAIN) for the matrix, carol for the end-to-end clients, admin
(PLAIN) is the super user; the tools and the other tests use the PLAINTEXT listener as User:ANONYMOUS. The
broker's own inter-broker listener is a PLAINTEXT one on [::1]: a host-restricted ACL gives User:ANONYMOUS
ClusterAction from ::1 only (written as Java prints the address, 0:0:0:0:0:0:0:1), so no client has it.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from click.testing import CliRunner
from confluent_kafka import Consumer, KafkaError, Producer
from kafka.admin import (ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType, KafkaAdminClient,
                         ResourcePattern, ResourceType)
from kafka.protocol.admin import (AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest,
                                  AlterConfigsRequest, AlterPartitionReassignmentsRequest, CreateAclsRequest,
                                  CreatePartitionsRequest, CreateTopicsRequest, DeleteAclsRequest,
                                  DeleteRecordsRequest, DeleteTopicsRequest, DescribeAclsRequest,
                                  DescribeClusterRequest, DescribeConfigsRequest, DescribeLogDirsRequest,
                                  DescribeProducersRequest, DescribeTransactionsRequest, ElectLeadersRequest,
                                  IncrementalAlterConfigsRequest, ListPartitionReassignmentsRequest)
from kafka.protocol.admin import AlterReplicaLogDirsRequest, ListTransactionsRequest
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest
from kafka.protocol.admin.groups import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import (FetchRequest, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest,
                                     ListOffsetsRequest, OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest,
                                     OffsetForLeaderEpochRequest, SyncGroupRequest)
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kafka.protocol.producer import (AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest,
                                     InitProducerIdRequest, ProduceRequest, TxnOffsetCommitRequest)

from admin_cli.main import cli as kadmin
from kbroker.cluster import BrokerProcess, free_port, wait_ready, wait_until
from kbroker.protocol.client import Connection
from kbroker.protocol.client.security import ClientSecurity
from kbroker.protocol.errors import Errors
from kbroker.protocol.interbroker import (ControlledShutdownRequest, LeaderAndIsrRequest, StopReplicaRequest,
                                          UpdateMetadataRequest, WriteTxnMarkersRequest)
from zk import admin as zk_admin
from zk import znodes as z
from zk.client import KafkaZkClient
from tests.conftest import fresh_chroot
from tests.integration.conftest import set_znode_acl

ANON = "User:ANONYMOUS"
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED = (Errors.TOPIC_AUTHORIZATION_FAILED,
                                                          Errors.GROUP_AUTHORIZATION_FAILED,
                                                          Errors.CLUSTER_AUTHORIZATION_FAILED,
                                                          Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
TOPICS = ("t-produce", "t-fetch-1", "t-offsets", "t-epoch", "t-records", "t-partitions", "t-delete", "t-configs",
          "t-alter", "t-commit", "t-offset-fetch", "t-meta", "t-txn", "t-producers", "t-deny", "t-hidden")


@dataclass
class Secured:
    zk: KafkaZkClient
    zk_connect: str
    broker: BrokerProcess
    sasl_port: int
    conns: dict = field(default_factory=dict)

    def client(self, user: str | None = None) -> Connection:
        """A connection as User:<user> (SASL_PLAINTEXT, PLAIN), or as User:ANONYMOUS (PLAINTEXT) when None."""
        if user not in self.conns:
            if user is None:
                self.conns[user] = Connection("127.0.0.1", self.broker.port, "matrix", 15)
            else:
                security = ClientSecurity(protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", username=user,
                                          password=PASSWORDS[user])
                self.conns[user] = Connection("127.0.0.1", self.sasl_port, f"matrix-{user}", 15, security)
        return self.conns[user]

    def send(self, request, user: str | None = None):
        return self.client(user).send(request)

    @property
    def sasl_conf(self) -> dict:
        return {"bootstrap.servers": f"127.0.0.1:{self.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanisms": "PLAIN"}

    def grant(self, rtype: str, name: str, op: str, pattern: str = "LITERAL", permission: str = "Allow",
              principal: str = ANON, host: str = "*") -> None:
        self.zk.update_acls(rtype, name, pattern, lambda acls: acls | {(principal, permission, op, host)})

    def revoke(self, rtype: str, name: str, op: str, pattern: str = "LITERAL", permission: str = "Allow",
               principal: str = ANON, host: str = "*") -> None:
        self.zk.update_acls(rtype, name, pattern, lambda acls: acls - {(principal, permission, op, host)})


def jaas(options: dict[str, str]) -> str:
    return ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            + " ".join(f'{k}="{v}"' for k, v in options.items()) + ";")


@pytest.fixture(scope="module")
def secured(zookeeper, tmp_path_factory):
    connect = fresh_chroot(zookeeper)
    zk = KafkaZkClient(connect, 6000).start()
    # The broker's inter-broker listener ([::1]) is the only place ClusterAction comes from.
    zk.update_acls("Cluster", "kafka-cluster", "LITERAL",
                   lambda acls: acls | {(ANON, "Allow", "ClusterAction", "0:0:0:0:0:0:0:1")})
    port, internal, sasl = free_port(), free_port(), free_port()
    broker = BrokerProcess.create(1, str(tmp_path_factory.mktemp("secured")), connect, {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},INTERNAL://[::1]:{internal},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas(
            {"username": "admin", "password": "admin-secret", **{f"user_{u}": p for u, p in PASSWORDS.items()}}),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1,
        "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
        "offsets.topic.replication.factor": 1, "group.initial.rebalance.delay.ms": 0,
        "zookeeper.session.timeout.ms": 4000}, port=port)
    broker.start()
    s = Secured(zk, connect, broker, sasl)
    try:
        wait_ready([broker], 30)
        admin = zk_admin.AdminZkClient(zk)
        for t in TOPICS:
            admin.create_topic(t, {}, assignment={0: [1]})
        # Leaders elected (seen through the inter-broker listener's LeaderAndIsr and UpdateMetadata).
        wait_until(lambda: _leaders_known(zk, TOPICS), message="the topics' leaders")
        yield s
    finally:
        for c in s.conns.values():
            c.close()
        broker.kill9()
        zk.close()


def _leaders_known(zk, topics) -> bool:
    return all((st := zk.get_partition_state(t, 0)) is not None and st.leader == 1 for t in topics)


def records(transactional: bool = False) -> bytes:
    """One v2 batch of one record; a transactional one from producer 1, epoch 0."""
    pid, epoch, sequence = (1, 0, 0) if transactional else (-1, -1, -1)
    b = DefaultRecordBatchBuilder(2, 0, int(transactional), pid, epoch, sequence, 1 << 20)
    b.append(0, int(time.time() * 1000), None, b"v", [])
    return bytes(b.build())


# ---- requests and where their error code is ----------------------------------------------------------------

def produce(topic: str, txn: str | None = None):
    T = ProduceRequest.TopicProduceData
    return ProduceRequest(version=8, transactional_id=txn, acks=1, timeout_ms=5000, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=records(txn is not None))])])


def fetch(topic: str, replica_id: int = -1):
    FT = FetchRequest.FetchTopic
    return FetchRequest(version=11, replica_id=replica_id, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                        isolation_level=0, session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
                        topics=[FT(topic=topic, partitions=[FT.FetchPartition(
                            partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                            partition_max_bytes=1 << 20)])])


def list_offsets(topic: str):
    T = ListOffsetsRequest.ListOffsetsTopic
    return ListOffsetsRequest(version=5, replica_id=-1, isolation_level=0, topics=[
        T(name=topic, partitions=[T.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)])])


def epoch(topic: str):
    T = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    return OffsetForLeaderEpochRequest(version=3, replica_id=-1, topics=[T(topic=topic, partitions=[
        T.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0)])])


def delete_records(topic: str):
    T = DeleteRecordsRequest.DeleteRecordsTopic
    return DeleteRecordsRequest(version=1, timeout_ms=5000, topics=[
        T(name=topic, partitions=[T.DeleteRecordsPartition(partition_index=0, offset=0)])])


def create_partitions(topic: str):
    T = CreatePartitionsRequest.CreatePartitionsTopic
    return CreatePartitionsRequest(version=1, timeout_ms=5000, validate_only=True,
                                   topics=[T(name=topic, count=2, assignments=None)])


def create_topics(topic: str):
    T = CreateTopicsRequest.CreatableTopic
    return CreateTopicsRequest(version=5, timeout_ms=5000, validate_only=True, topics=[
        T(name=topic, num_partitions=1, replication_factor=1, assignments=[], configs=[])])


def delete_topics(topic: str):
    return DeleteTopicsRequest(version=4, timeout_ms=5000, topic_names=[topic])


def describe_configs(rtype: int, name: str):
    R = DescribeConfigsRequest.DescribeConfigsResource
    return DescribeConfigsRequest(version=1, include_synonyms=False, resources=[
        R(resource_type=rtype, resource_name=name, configuration_keys=None)])


def alter_configs(topic: str):
    R = AlterConfigsRequest.AlterConfigsResource
    return AlterConfigsRequest(version=1, validate_only=True, resources=[R(
        resource_type=2, resource_name=topic, configs=[R.AlterableConfig(name="retention.ms", value="1000")])])


def incremental_alter_broker():
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    return IncrementalAlterConfigsRequest(version=0, validate_only=True, resources=[R(
        resource_type=4, resource_name="1", configs=[R.AlterableConfig(
            name="log.cleaner.backoff.ms", config_operation=0, value="1000")])])


def metadata(topics, auto_create: bool = False):
    T = MetadataRequest.MetadataRequestTopic
    return MetadataRequest(version=9, topics=None if topics is None else [T(name=t) for t in topics],
                           allow_auto_topic_creation=auto_create, include_cluster_authorized_operations=False,
                           include_topic_authorized_operations=False)


def find_coordinator(key: str, key_type: int = 0):
    return FindCoordinatorRequest(version=2, key=key, key_type=key_type)


def join(group: str):
    P = JoinGroupRequest.JoinGroupRequestProtocol
    return JoinGroupRequest(version=5, group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                            member_id="", group_instance_id=None, protocol_type="consumer",
                            protocols=[P(name="range", metadata=b"")])


def heartbeat(group: str):
    return HeartbeatRequest(version=3, group_id=group, generation_id=1, member_id="m", group_instance_id=None)


def sync(group: str):
    return SyncGroupRequest(version=3, group_id=group, generation_id=1, member_id="m", group_instance_id=None,
                            assignments=[])


def leave(group: str):
    return LeaveGroupRequest(version=2, group_id=group, member_id="m")


def offset_commit(group: str, topic: str):
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    return OffsetCommitRequest(version=7, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                               group_instance_id=None, topics=[T(name=topic, partitions=[T.OffsetCommitRequestPartition(
                                   partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                   committed_metadata="")])])


def offset_fetch(group: str, topic: str):
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    return OffsetFetchRequest(version=5, group_id=group, topics=[T(name=topic, partition_indexes=[0])])


def describe_groups(group: str):
    return DescribeGroupsRequest(version=3, groups=[group], include_authorized_operations=True)


def delete_groups(group: str):
    return DeleteGroupsRequest(version=1, groups_names=[group])


def offset_delete(group: str, topic: str):
    T = OffsetDeleteRequest.OffsetDeleteRequestTopic
    return OffsetDeleteRequest(version=0, group_id=group, topics=[
        T(name=topic, partitions=[T.OffsetDeleteRequestPartition(partition_index=0)])])


def init_pid(txn: str | None):
    return InitProducerIdRequest(version=2, transactional_id=txn, transaction_timeout_ms=60000)


def add_partitions(txn: str, topic: str):
    T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    return AddPartitionsToTxnRequest(version=1, v3_and_below_transactional_id=txn, v3_and_below_producer_id=1,
                                     v3_and_below_producer_epoch=0,
                                     v3_and_below_topics=[T(name=topic, partitions=[0])])


def add_offsets(txn: str, group: str):
    return AddOffsetsToTxnRequest(version=1, transactional_id=txn, producer_id=1, producer_epoch=0, group_id=group)


def end_txn(txn: str):
    return EndTxnRequest(version=1, transactional_id=txn, producer_id=1, producer_epoch=0, committed=True)


def txn_offset_commit(txn: str, group: str, topic: str):
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    return TxnOffsetCommitRequest(version=2, transactional_id=txn, group_id=group, producer_id=1, producer_epoch=0,
                                  topics=[T(name=topic, partitions=[T.TxnOffsetCommitRequestPartition(
                                      partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                      committed_metadata="")])])


def acl_filter_fields(name: str | None = None) -> dict:
    return dict(resource_type_filter=1, resource_name_filter=name, pattern_type_filter=1, principal_filter=None,
                host_filter=None, operation=1, permission_type=1)


def describe_scram_credentials():
    return DescribeUserScramCredentialsRequest(version=0, users=None)


def alter_scram_credentials():
    D = AlterUserScramCredentialsRequest.ScramCredentialDeletion
    return AlterUserScramCredentialsRequest(version=0, deletions=[D(name="nobody", mechanism=1)], upsertions=[])


def describe_client_quotas():
    C = DescribeClientQuotasRequest.ComponentData
    return DescribeClientQuotasRequest(version=1, strict=True,
                                       components=[C(entity_type="client-id", match_type=0, match="matrix")])


def alter_client_quotas():
    E = AlterClientQuotasRequest.EntryData
    return AlterClientQuotasRequest(version=1, validate_only=True, entries=[E(
        entity=[E.EntityData(entity_type="client-id", entity_name="matrix")],
        ops=[E.OpData(key="producer_byte_rate", value=1024.0, remove=False)])])


def describe_acls():
    return DescribeAclsRequest(version=1, **acl_filter_fields())


def create_acls():
    C = CreateAclsRequest.AclCreation
    return CreateAclsRequest(version=1, creations=[C(resource_type=2, resource_name="created-by-api",
                                                     resource_pattern_type=3, principal="User:carol", host="*",
                                                     operation=3, permission_type=3)])


def delete_acls():
    return DeleteAclsRequest(version=1, filters=[DeleteAclsRequest.DeleteAclsFilter(**acl_filter_fields("nothing"))])


def elect_leaders():
    T = ElectLeadersRequest.TopicPartitions
    return ElectLeadersRequest(version=1, election_type=0, timeout_ms=5000,
                               topic_partitions=[T(topic="t-epoch", partitions=[0])])


def alter_reassignments():
    T = AlterPartitionReassignmentsRequest.ReassignableTopic
    return AlterPartitionReassignmentsRequest(version=0, timeout_ms=5000, topics=[
        T(name="t-epoch", partitions=[T.ReassignablePartition(partition_index=0, replicas=None)])])


def list_reassignments():
    return ListPartitionReassignmentsRequest(version=0, timeout_ms=5000, topics=None)


def describe_producers(topic: str):
    T = DescribeProducersRequest.TopicRequest
    return DescribeProducersRequest(version=0, topics=[T(name=topic, partition_indexes=[0])])


def describe_transactions(txn: str):
    return DescribeTransactionsRequest(version=0, transactional_ids=[txn])


def alter_replica_log_dirs():
    """A move of t-produce-0 to a path that is not a log dir (LOG_DIR_NOT_FOUND once allowed)."""
    D = AlterReplicaLogDirsRequest.AlterReplicaLogDir
    return AlterReplicaLogDirsRequest(version=1, dirs=[
        D(path="/nowhere", topics=[D.AlterReplicaLogDirTopic(name="t-produce", partitions=[0])])])


def first_partition_error(field_topics: str, field_partitions: str, field_error: str = "error_code"):
    def get(r):
        return getattr(getattr(getattr(r, field_topics)[0], field_partitions)[0], field_error)
    return get


def top_error(r):
    return r.error_code


@dataclass
class Case:
    """One API: the request, where its error code is, the code without ACLs, the ACLs Kafka requires
    (resource type, name, operation, pattern type) and the code once they exist."""
    name: str
    request: object
    error: object
    denied: int
    grants: list
    allowed: int = Errors.NONE


CASES = [
    Case("Produce", lambda: produce("t-produce"), first_partition_error("responses", "partition_responses"),
         TOPIC_DENIED, [("Topic", "t-produce", "Write", "LITERAL")]),
    Case("Produce(transactional)", lambda: produce("t-txn", "tx-produce"),
         first_partition_error("responses", "partition_responses"), TXN_DENIED,
         [("TransactionalId", "tx-produce", "Write", "LITERAL"), ("Topic", "t-txn", "Write", "LITERAL")]),
    Case("Fetch", lambda: fetch("t-fetch-1"), first_partition_error("responses", "partitions"),
         TOPIC_DENIED, [("Topic", "t-fetch", "Read", "PREFIXED")]),
    Case("ListOffsets", lambda: list_offsets("t-offsets"), first_partition_error("topics", "partitions"),
         TOPIC_DENIED, [("Topic", "t-offsets", "Describe", "LITERAL")]),
    Case("OffsetForLeaderEpoch", lambda: epoch("t-epoch"), first_partition_error("topics", "partitions"),
         TOPIC_DENIED, [("Topic", "t-ep", "Describe", "PREFIXED")]),
    Case("DeleteRecords", lambda: delete_records("t-records"), first_partition_error("topics", "partitions"),
         TOPIC_DENIED, [("Topic", "t-records", "Delete", "LITERAL")]),
    Case("CreatePartitions", lambda: create_partitions("t-partitions"), lambda r: r.results[0].error_code,
         TOPIC_DENIED, [("Topic", "t-partitions", "Alter", "LITERAL")]),
    Case("CreateTopics", lambda: create_topics("t-new-1"), lambda r: r.topics[0].error_code,
         TOPIC_DENIED, [("Topic", "t-new-", "Create", "PREFIXED")]),
    Case("DeleteTopics", lambda: delete_topics("t-nonexistent"), lambda r: r.responses[0].error_code,
         TOPIC_DENIED, [("Topic", "t-nonexistent", "Delete", "LITERAL")], Errors.UNKNOWN_TOPIC_OR_PARTITION),
    Case("DescribeConfigs(topic)", lambda: describe_configs(2, "t-configs"), lambda r: r.results[0].error_code,
         TOPIC_DENIED, [("Topic", "*", "DescribeConfigs", "LITERAL")]),
    Case("DescribeConfigs(broker)", lambda: describe_configs(4, "1"), lambda r: r.results[0].error_code,
         CLUSTER_DENIED, [("Cluster", "kafka-cluster", "DescribeConfigs", "LITERAL")]),
    Case("AlterConfigs(topic)", lambda: alter_configs("t-alter"), lambda r: r.responses[0].error_code,
         TOPIC_DENIED, [("Topic", "t-alter", "AlterConfigs", "LITERAL")]),
    Case("IncrementalAlterConfigs(broker)", incremental_alter_broker, lambda r: r.responses[0].error_code,
         CLUSTER_DENIED, [("Cluster", "kafka-cluster", "AlterConfigs", "LITERAL")]),
    Case("Metadata", lambda: metadata(["t-meta"]), lambda r: r.topics[0].error_code,
         TOPIC_DENIED, [("Topic", "t-meta", "Describe", "LITERAL")]),
    Case("FindCoordinator(group)", lambda: find_coordinator("g-find"), top_error,
         GROUP_DENIED, [("Group", "g-find", "Describe", "LITERAL")]),
    Case("JoinGroup", lambda: join("g-join"), top_error, GROUP_DENIED, [("Group", "g-jo", "Read", "PREFIXED")],
         Errors.MEMBER_ID_REQUIRED),
    Case("Heartbeat", lambda: heartbeat("g-member"), top_error, GROUP_DENIED,
         [("Group", "g-member", "Read", "LITERAL")], Errors.UNKNOWN_MEMBER_ID),
    Case("SyncGroup", lambda: sync("g-member"), top_error, GROUP_DENIED, [("Group", "g-member", "Read", "LITERAL")],
         Errors.UNKNOWN_MEMBER_ID),
    Case("LeaveGroup", lambda: leave("g-member"), top_error, GROUP_DENIED, [("Group", "g-member", "Read", "LITERAL")],
         Errors.UNKNOWN_MEMBER_ID),
    Case("OffsetCommit", lambda: offset_commit("g-commit", "t-commit"), first_partition_error("topics", "partitions"),
         GROUP_DENIED, [("Group", "g-commit", "Read", "LITERAL"), ("Topic", "t-commit", "Read", "LITERAL")]),
    Case("OffsetFetch", lambda: offset_fetch("g-offset-fetch", "t-offset-fetch"), top_error, GROUP_DENIED,
         [("Group", "g-offset-fetch", "Describe", "LITERAL"), ("Topic", "t-offset-fetch", "Describe", "LITERAL")]),
    Case("DescribeGroups", lambda: describe_groups("g-describe"), lambda r: r.groups[0].error_code,
         GROUP_DENIED, [("Group", "g-describe", "Describe", "LITERAL")]),
    Case("DeleteGroups", lambda: delete_groups("g-delete"), lambda r: r.results[0].error_code,
         GROUP_DENIED, [("Group", "g-delete", "Delete", "LITERAL")], Errors.GROUP_ID_NOT_FOUND),
    Case("OffsetDelete", lambda: offset_delete("g-offset-delete", "t-commit"), top_error,
         GROUP_DENIED, [("Group", "g-offset-delete", "Delete", "LITERAL")], Errors.GROUP_ID_NOT_FOUND),
    Case("InitProducerId(idempotent, KIP-679)", lambda: init_pid(None), top_error, CLUSTER_DENIED,
         [("Topic", "t-produce", "Write", "LITERAL")]),
    Case("FindCoordinator(transaction)", lambda: find_coordinator("tx-1", 1), top_error,
         TXN_DENIED, [("TransactionalId", "tx-1", "Describe", "LITERAL")]),
    Case("InitProducerId(transactional)", lambda: init_pid("tx-1"), top_error, TXN_DENIED,
         [("TransactionalId", "tx-1", "Write", "LITERAL")]),
    Case("AddPartitionsToTxn", lambda: add_partitions("tx-add", "t-txn"),
         first_partition_error("results_by_topic_v3_and_below", "results_by_partition", "partition_error_code"),
         TXN_DENIED, [("TransactionalId", "tx-add", "Write", "LITERAL"), ("Topic", "t-txn", "Write", "LITERAL")],
         Errors.INVALID_PRODUCER_ID_MAPPING),
    Case("AddOffsetsToTxn", lambda: add_offsets("tx-add", "g-txn"), top_error, TXN_DENIED,
         [("TransactionalId", "tx-add", "Write", "LITERAL"), ("Group", "g-txn", "Read", "LITERAL")],
         Errors.INVALID_PRODUCER_ID_MAPPING),
    Case("EndTxn", lambda: end_txn("tx-add"), top_error, TXN_DENIED,
         [("TransactionalId", "tx-add", "Write", "LITERAL")], Errors.INVALID_PRODUCER_ID_MAPPING),
    Case("TxnOffsetCommit", lambda: txn_offset_commit("tx-add", "g-txn", "t-txn"),
         first_partition_error("topics", "partitions"), TXN_DENIED,
         [("TransactionalId", "tx-add", "Write", "LITERAL"), ("Group", "g-txn", "Read", "LITERAL"),
          ("Topic", "t-txn", "Read", "LITERAL")]),
    Case("DescribeAcls", describe_acls, top_error, CLUSTER_DENIED,
         [("Cluster", "kafka-cluster", "Describe", "LITERAL")]),
    Case("CreateAcls", create_acls, lambda r: r.results[0].error_code, CLUSTER_DENIED,
         [("Cluster", "kafka-cluster", "Alter", "LITERAL")]),
    Case("DeleteAcls", delete_acls, lambda r: r.filter_results[0].error_code, CLUSTER_DENIED,
         [("Cluster", "kafka-cluster", "Alter", "LITERAL")]),
    Case("DescribeUserScramCredentials", describe_scram_credentials, top_error, CLUSTER_DENIED,
         [("Cluster", "kafka-cluster", "Describe", "LITERAL")]),
    Case("AlterUserScramCredentials", alter_scram_credentials, lambda r: r.results[0].error_code, CLUSTER_DENIED,
         [("Cluster", "kafka-cluster", "Alter", "LITERAL")], Errors.RESOURCE_NOT_FOUND),
    Case("DescribeClientQuotas", describe_client_quotas, top_error, CLUSTER_DENIED,
         [("Cluster", "kafka-cluster", "DescribeConfigs", "LITERAL")]),
    Case("AlterClientQuotas", alter_client_quotas, lambda r: r.entries[0].error_code, CLUSTER_DENIED,
         [("Cluster", "kafka-cluster", "AlterConfigs", "LITERAL")]),
    Case("ElectLeaders", elect_leaders, top_error, CLUSTER_DENIED, [("Cluster", "kafka-cluster", "Alter", "LITERAL")]),
    Case("AlterReplicaLogDirs", alter_replica_log_dirs, first_partition_error("results", "partitions"),
         CLUSTER_DENIED, [("Cluster", "kafka-cluster", "Alter", "LITERAL")], Errors.LOG_DIR_NOT_FOUND),
    Case("AlterPartitionReassignments", alter_reassignments, top_error, CLUSTER_DENIED,
         [("Cluster", "kafka-cluster", "Alter", "LITERAL")]),
    Case("ListPartitionReassignments", list_reassignments, top_error, CLUSTER_DENIED,
         [("Cluster", "kafka-cluster", "Describe", "LITERAL")]),
    Case("DescribeProducers", lambda: describe_producers("t-producers"), first_partition_error("topics", "partitions"),
         TOPIC_DENIED, [("Topic", "t-producers", "Read", "LITERAL")]),
    Case("DescribeTransactions", lambda: describe_transactions("tx-describe"),
         lambda r: r.transaction_states[0].error_code, TXN_DENIED,
         [("TransactionalId", "tx-describe", "Describe", "LITERAL")], Errors.TRANSACTIONAL_ID_NOT_FOUND),
]

# Inter-broker APIs: refused to a client without ClusterAction, whatever else it may do.
INTER_BROKER = [
    ("LeaderAndIsr", lambda: LeaderAndIsrRequest(version=5, controller_id=1, controller_epoch=1, broker_epoch=-1,
                                                 type=0, topic_states=[], live_leaders=[]), top_error, CLUSTER_DENIED),
    ("UpdateMetadata", lambda: UpdateMetadataRequest(version=7, controller_id=1, controller_epoch=1, broker_epoch=-1,
                                                     topic_states=[], live_brokers=[]), top_error, CLUSTER_DENIED),
    ("StopReplica", lambda: StopReplicaRequest(version=3, controller_id=1, controller_epoch=1, broker_epoch=-1,
                                               topic_states=[]), top_error, CLUSTER_DENIED),
    ("ControlledShutdown", lambda: ControlledShutdownRequest(version=3, broker_id=1, broker_epoch=-1), top_error,
     CLUSTER_DENIED),
    ("WriteTxnMarkers", lambda: WriteTxnMarkersRequest(version=1, markers=[
        WriteTxnMarkersRequest.WritableTxnMarker(producer_id=1, producer_epoch=0, transaction_result=True,
                                                 coordinator_epoch=0, topics=[
            WriteTxnMarkersRequest.WritableTxnMarker.WritableTxnMarkerTopic(name="t-txn", partition_indexes=[0])])]),
     lambda r: r.markers[0].topics[0].partitions[0].error_code, CLUSTER_DENIED),
    ("Fetch(follower)", lambda: fetch("t-produce", replica_id=1), first_partition_error("responses", "partitions"),
     TOPIC_DENIED),
]


# Until the ACLs arrive, and the coordinators' internal topics exist: ask again.
NOT_YET = (TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED, Errors.COORDINATOR_NOT_AVAILABLE,
           Errors.NOT_COORDINATOR, Errors.COORDINATOR_LOAD_IN_PROGRESS)


def _code(secured, request_fn, error, user: str | None = None) -> int:
    return error(secured.send(request_fn(), user))


def test_the_authorization_matrix(secured):
    """Every API refused to alice with its own code without ACLs, allowed once Kafka's ACLs for her exist
    (applied live from the change notifications), the inter-broker APIs still refused; bob, without ACLs of
    his own, still refused everything; admin, a super user, allowed everything without any."""
    alice = "User:alice"
    problems = []
    for case in CASES:
        code = _code(secured, case.request, case.error, "alice")
        if code != case.denied:
            problems.append(f"{case.name} without ACLs: {Errors(code).name}, expected {Errors(case.denied).name}")
    # Not authorized to Describe: all-topics Metadata leaves the topics out; DescribeLogDirs shows nothing;
    # the cluster's authorized operations are none.
    listed = {t.name for t in secured.send(metadata(None), "alice").topics}
    if listed & set(TOPICS):
        problems.append(f"all-topics Metadata shows unauthorized topics {sorted(listed & set(TOPICS))}")
    if secured.send(DescribeLogDirsRequest(version=1, topics=None), "alice").results:
        problems.append("DescribeLogDirs without Describe on the cluster answered log dirs")
    ops = secured.send(DescribeClusterRequest(version=0, include_cluster_authorized_operations=True), "alice")
    if ops.authorized_operations:
        problems.append(f"DescribeCluster authorized operations without ACLs: {ops.authorized_operations}")
    assert not problems, "\n".join(problems)
    # Each denial is a line of the authorizer log (kafka-authorizer.log, as Kafka's log4j set-up).
    with open(os.path.join(secured.broker.dir, "logs", "kafka-authorizer.log")) as f:
        assert ("Principal = User:alice is Denied Operation = Write from host = 127.0.0.1 on resource = "
                "Topic:LITERAL:t-produce") in f.read()

    for case in CASES:
        for rtype, name, op, pattern in case.grants:
            secured.grant(rtype, name, op, pattern, principal=alice)
    for case in CASES:
        try:
            code = wait_until(lambda c=case: (x := _code(secured, c.request, c.error, "alice")) not in NOT_YET
                              and (x,), timeout=15, message=f"{case.name} to be allowed")[0]
        except TimeoutError:
            code = _code(secured, case.request, case.error, "alice")
        if code != case.allowed:
            problems.append(f"{case.name} with {case.grants}: {Errors(code).name}, expected "
                            f"{Errors(case.allowed).name}")
    listed = {t.name for t in secured.send(metadata(None), "alice").topics}
    if not {"t-meta", "t-produce", "t-offsets"} <= listed or "t-configs" in listed:
        problems.append(f"all-topics Metadata with Describe (direct or implied) lists {sorted(listed)}")
    if not secured.send(DescribeLogDirsRequest(version=1, topics=None), "alice").results:
        problems.append("DescribeLogDirs with Describe on the cluster answered no log dirs")
    ops = secured.send(DescribeClusterRequest(version=0, include_cluster_authorized_operations=True), "alice")
    if set(ops.authorized_operations) != {7, 8, 10, 11}:   # Alter, Describe, DescribeConfigs, AlterConfigs
        problems.append(f"DescribeCluster authorized operations {ops.authorized_operations}")
    for name, request_fn, error, denied in INTER_BROKER:
        code = _code(secured, request_fn, error, "alice")
        if code != denied:
            problems.append(f"{name} from a client without ClusterAction: {Errors(code).name}")
    # Authorized operations are the principal's: on t-meta alice may Describe (literal) and DescribeConfigs (`*`);
    # the super user may do all a topic supports.
    T = MetadataRequest.MetadataRequestTopic
    ops_request = MetadataRequest(version=9, topics=[T(name="t-meta")], allow_auto_topic_creation=False,
                                  include_cluster_authorized_operations=False, include_topic_authorized_operations=True)
    for user, expected in (("alice", {8, 10}), ("admin", {3, 4, 5, 6, 7, 8, 10, 11})):
        got = set(secured.send(ops_request, user).topics[0].authorized_operations)
        if got != expected:
            problems.append(f"Metadata topic authorized operations for {user}: {sorted(got)}")
    # Listings show only what the principal may Describe (ListGroups, ListTransactions).
    groups = {u: {g.group_id for g in secured.send(ListGroupsRequest(version=3), u).groups}
              for u in ("admin", "alice", "bob")}
    txns = {u: {t.transactional_id for t in secured.send(
        ListTransactionsRequest(version=0, state_filters=[], producer_id_filters=[]), u).transaction_states}
        for u in ("admin", "alice", "bob")}
    if not (groups["bob"] == set() and groups["alice"] and groups["alice"] <= groups["admin"]):
        problems.append(f"ListGroups by principal: {groups}")
    if not (txns["bob"] == set() and "tx-1" in txns["alice"] and txns["alice"] <= txns["admin"]):
        problems.append(f"ListTransactions by principal: {txns}")
    # alice's ACLs are hers: bob is refused everything; the super user needs no ACL at all.
    for case in CASES:
        code = _code(secured, case.request, case.error, "bob")
        if code != case.denied:
            problems.append(f"{case.name} as bob: {Errors(code).name}, expected {Errors(case.denied).name}")
        code = _code(secured, case.request, case.error, "admin")
        if code != case.allowed:
            problems.append(f"{case.name} as the super user: {Errors(code).name}, expected "
                            f"{Errors(case.allowed).name}")
    assert not problems, "\n".join(problems)


def _kadmin(*args) -> dict:
    result = CliRunner().invoke(kadmin, [*map(str, args), "-o", "json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _allowed_eventually(secured, request_fn, error, message: str, user: str | None = None) -> int:
    """The request's code once it is no longer refused (the ACLs reach the broker through the notifications)."""
    return wait_until(lambda: (x := _code(secured, request_fn, error, user)) not in NOT_YET and (x,), timeout=15,
                      message=message)[0]


def _coordinator_found(secured, group: str) -> None:
    """Until FindCoordinator finds the group's coordinator (the ACL arrived, __consumer_offsets exists)."""
    wait_until(lambda: _code(secured, lambda: find_coordinator(group), top_error) == Errors.NONE, timeout=15,
               message=f"the coordinator of {group}")


def test_deny_beats_allow_and_revoking_applies_live(secured):
    produce_code = first_partition_error("responses", "partition_responses")
    fetch_code = first_partition_error("responses", "partitions")
    secured.grant("Topic", "t-deny", "All")
    assert _allowed_eventually(secured, lambda: produce("t-deny"), produce_code, "All on t-deny") == Errors.NONE
    secured.grant("Topic", "t-de", "Write", "PREFIXED", permission="Deny", principal="User:*")
    wait_until(lambda: _code(secured, lambda: produce("t-deny"), produce_code) == TOPIC_DENIED,
               timeout=15, message="the prefixed deny to apply")
    assert _code(secured, lambda: fetch("t-deny"), fetch_code) == Errors.NONE      # Read is not denied
    secured.revoke("Topic", "t-de", "Write", "PREFIXED", permission="Deny", principal="User:*")
    assert _allowed_eventually(secured, lambda: produce("t-deny"), produce_code, "the deny's removal") == Errors.NONE
    # The znode goes with its last ACL, as Kafka's.
    assert secured.zk.exists("/kafka-acl-extended/prefixed/Topic/t-de") is None


def test_acls_from_kadmin_and_kafka_acls_sh_bytes_apply_live_and_read_back(secured):
    zk = secured.zk
    # kadmin --zookeeper: Describe on a topic (and on the cluster, to read the ACLs back).
    _kadmin("--zookeeper", secured.zk_connect, "acls", "add", "--allow-principal", ANON, "--operation", "Describe",
            "--topic", "t-hidden")
    _kadmin("--zookeeper", secured.zk_connect, "acls", "add", "--allow-principal", ANON, "--operation", "Describe",
            "--cluster")
    assert zk.get("/kafka-acl/Topic/t-hidden")[0] == (b'{"version":1,"acls":[{"principal":"User:ANONYMOUS",'
                                                       b'"permissionType":"Allow","operation":"Describe","host":"*"}]}')
    assert _allowed_eventually(secured, lambda: metadata(["t-hidden"]), lambda r: r.topics[0].error_code,
                               "kadmin's ACL") == Errors.NONE
    # What kafka-acls.sh (Kafka's AclAuthorizer) writes, byte for byte: a literal group ACL with its
    # "GROUP:<name>" notification, a prefixed transactional-id ACL with its JSON notification.
    zk.create_recursive("/kafka-acl/Group/g-raw", b'{"version":1,"acls":[{"principal":"User:ANONYMOUS",'
                                                  b'"permissionType":"Allow","operation":"Read","host":"*"}]}')
    zk.create_recursive("/kafka-acl-changes/acl_changes_", b"GROUP:g-raw", sequence=True)
    zk.create_recursive("/kafka-acl-extended/prefixed/TransactionalId/raw-",
                        b'{"version":1,"acls":[{"principal":"User:*","permissionType":"Allow",'
                        b'"operation":"Describe","host":"127.0.0.1"}]}')
    zk.create_recursive("/kafka-acl-extended-changes/acl_changes_",
                        b'{"version":1,"resourceType":"TRANSACTIONAL_ID","name":"raw-","patternType":"PREFIXED"}',
                        sequence=True)
    _coordinator_found(secured, "g-raw")   # Read implies Describe
    assert _code(secured, lambda: join("g-raw"), top_error) == Errors.MEMBER_ID_REQUIRED
    assert _allowed_eventually(secured, lambda: find_coordinator("raw-tx", 1), top_error,
                               "the raw prefixed ACL") == Errors.NONE
    # DescribeAcls (kadmin --bootstrap-server) reads them all back.
    listed = _kadmin("--bootstrap-server", secured.broker.bootstrap, "acls", "list", "--resource-pattern-type",
                     "any")["acls"]
    expected = [
        {"resource_type": "Group", "name": "g-raw", "pattern_type": "LITERAL", "principal": ANON, "host": "*",
         "operation": "Read", "permission": "Allow"},
        {"resource_type": "Topic", "name": "t-hidden", "pattern_type": "LITERAL", "principal": ANON, "host": "*",
         "operation": "Describe", "permission": "Allow"},
        {"resource_type": "TransactionalId", "name": "raw-", "pattern_type": "PREFIXED", "principal": "User:*",
         "host": "127.0.0.1", "operation": "Describe", "permission": "Allow"}]
    assert all(e in listed for e in expected), listed
    # MATCH: every pattern that applies to a name.
    matched = _kadmin("--bootstrap-server", secured.broker.bootstrap, "acls", "list", "--transactional-id",
                      "raw-tx-9", "--resource-pattern-type", "match")["acls"]
    assert matched == [expected[2]]


def test_acls_created_through_the_admin_api_land_in_zookeeper_as_kafka_writes_them(secured):
    zk = secured.zk
    zk.update_acls("Cluster", "kafka-cluster", "LITERAL", lambda acls: acls | {(ANON, "Allow", "Alter", "*")})
    admin = KafkaAdminClient(bootstrap_servers=secured.broker.bootstrap, client_id="acl-test")
    try:
        acl = ACL("User:dave", "10.1.2.3", ACLOperation.IDEMPOTENT_WRITE, ACLPermissionType.DENY,
                  ResourcePattern(ResourceType.TOPIC, "api-", ACLResourcePatternType.PREFIXED))

        def created():
            result = admin.create_acls([acl])
            return not result["failed"] and result
        wait_until(created, timeout=15, message="CreateAcls to be allowed (Alter on the cluster)")
    finally:
        admin.close()
    assert zk.get("/kafka-acl-extended/prefixed/Topic/api-")[0] == (
        b'{"version":1,"acls":[{"principal":"User:dave","permissionType":"Deny","operation":"IdempotentWrite",'
        b'"host":"10.1.2.3"}]}')
    notes = [zk.get(f"/kafka-acl-extended-changes/{n}")[0] for n in zk.children("/kafka-acl-extended-changes")]
    assert b'{"version":1,"resourceType":"TOPIC","name":"api-","patternType":"PREFIXED"}' in notes
    # kadmin --bootstrap-server add and remove (CreateAcls, DeleteAcls): a literal ACL and its "TOPIC:" notification.
    added = _kadmin("--bootstrap-server", secured.broker.bootstrap, "acls", "add", "--deny-principal", "User:eve",
                    "--operation", "Read", "--operation", "Write", "--topic", "api-literal")["added"]
    assert len(added) == 2
    assert z_acls(zk, "/kafka-acl/Topic/api-literal") == {("User:eve", "Deny", "Read", "*"),
                                                           ("User:eve", "Deny", "Write", "*")}
    literal_notes = [zk.get(f"/kafka-acl-changes/{n}")[0] for n in zk.children("/kafka-acl-changes")]
    assert b"TOPIC:api-literal" in literal_notes
    removed = _kadmin("--bootstrap-server", secured.broker.bootstrap, "acls", "remove", "--topic",
                      "api-literal")["removed"]
    assert sorted(r["operation"] for r in removed) == ["Read", "Write"]
    assert zk.exists("/kafka-acl/Topic/api-literal") is None


def z_acls(zk, path):
    return z.AclZNode.decode(zk.get(path)[0])


def test_metadata_auto_creation_and_per_topic_errors_need_every_acl(secured):
    secured.grant("Topic", "auto-", "Describe", "PREFIXED")
    meta = lambda: metadata(["auto-1"], auto_create=True)   # noqa: E731
    # Describe alone: the topic is not created (no Create on the cluster or the topic).
    assert _allowed_eventually(secured, lambda: metadata(["auto-0"]), lambda r: r.topics[0].error_code,
                               "Describe on auto-") == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert _code(secured, meta, lambda r: r.topics[0].error_code) == TOPIC_DENIED
    secured.grant("Topic", "auto-1", "Create")
    code = _allowed_eventually(secured, meta, lambda r: r.topics[0].error_code, "Create on auto-1")
    assert code in (Errors.LEADER_NOT_AVAILABLE, Errors.NONE)
    assert secured.zk.topic_exists("auto-1")
    # OffsetCommit and OffsetFetch with the group allowed but not the topic: the topic's partitions are refused.
    secured.grant("Group", "g-split", "Read")
    _coordinator_found(secured, "g-split")
    commit_code = first_partition_error("topics", "partitions")
    code = wait_until(lambda: (x := _code(secured, lambda: offset_commit("g-split", "t-hidden-2"), commit_code))
                      not in (GROUP_DENIED, Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR) and (x,),
                      timeout=15, message="Read on g-split")[0]
    assert code == TOPIC_DENIED
    assert _code(secured, lambda: offset_fetch("g-split", "t-hidden-2"),
                 first_partition_error("topics", "partitions")) == TOPIC_DENIED


def test_confluent_kafka_produces_and_consumes_with_topic_and_group_acls(secured):
    carol = "User:carol"
    zk_admin.AdminZkClient(secured.zk).create_topic("e2e-orders", {}, assignment={0: [1]})
    wait_until(lambda: _leaders_known(secured.zk, ["e2e-orders"]), message="e2e-orders' leader")
    conf = {**secured.sasl_conf, "sasl.username": "carol", "sasl.password": PASSWORDS["carol"]}
    # Without ACLs the write is refused.
    refused = []
    producer = Producer({**conf, "message.timeout.ms": 20000})
    producer.produce("e2e-orders", b"refused", on_delivery=lambda err, msg: refused.append(err))
    producer.flush(20)
    assert [e.code() for e in refused] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    del producer
    # Write on a prefix (implying Describe): an idempotent producer works without IdempotentWrite (KIP-679).
    secured.grant("Topic", "e2e-", "Write", "PREFIXED", principal=carol)
    _allowed_eventually(secured, lambda: metadata(["e2e-orders"]), lambda r: r.topics[0].error_code, "Write on e2e-",
                        "carol")
    delivered = []
    producer = Producer({**conf, "enable.idempotence": True})
    for i in range(5):
        producer.produce("e2e-orders", f"m{i}".encode(), on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(20) == 0 and delivered == [None] * 5
    del producer
    consumer_conf = {**conf, "group.id": "e2e-group", "auto.offset.reset": "earliest", "enable.auto.commit": False}
    # Read on every topic (`*`) but no group ACL: the group is refused.
    secured.grant("Topic", "*", "Read", principal=carol)
    consumer = Consumer(consumer_conf)
    consumer.subscribe(["e2e-orders"])
    try:
        msg = wait_until(lambda: consumer.poll(1.0), timeout=20, message="a group error")
        assert msg.error() is not None and msg.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        consumer.close()
    secured.grant("Group", "e2e-group", "Read", principal=carol)
    consumer = Consumer(consumer_conf)
    consumer.subscribe(["e2e-orders"])
    values = []
    try:
        def consumed():
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
            return len(values) >= 5
        wait_until(consumed, timeout=30, message="the five messages")
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert values == [f"m{i}".encode() for i in range(5)]


def test_acl_apis_answer_security_disabled_without_an_authorizer(cluster1):
    conn = Connection("127.0.0.1", cluster1.brokers[1].port, "no-authorizer", 15)
    try:
        assert conn.send(describe_acls()).error_code == Errors.SECURITY_DISABLED
        assert conn.send(create_acls()).results[0].error_code == Errors.SECURITY_DISABLED
        assert conn.send(delete_acls()).filter_results[0].error_code == Errors.SECURITY_DISABLED
        # Everything else is allowed, and the authorized operations are all the cluster supports.
        ops = conn.send(DescribeClusterRequest(version=0, include_cluster_authorized_operations=True))
        assert set(ops.authorized_operations) == {5, 7, 8, 9, 10, 11, 12}
    finally:
        conn.close()
    result = CliRunner().invoke(kadmin, ["--bootstrap-server", cluster1.bootstrap, "acls", "list"])
    assert result.exit_code == 1 and "(SECURITY_DISABLED)" in result.stderr


def test_acl_changes_zookeeper_refuses_answer_unknown_server_error(cluster_factory):
    """CreateAcls and DeleteAcls whose write ZooKeeper refuses (the resource's ACL znode made read-only) answer
    UNKNOWN_SERVER_ERROR with ZooKeeper's reason, as Kafka's AclAuthorizer does; an invalid creation of the same
    request still answers INVALID_REQUEST, and the ACLs stay as they were. So do a creation and a deletion for a
    resource whose znode path ZooKeeper cannot hold (".."), which closed the connection."""
    c = cluster_factory(1, **{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                              "allow.everyone.if.no.acl.found": "true"})
    held = {("User:x", "Allow", "Read", "*"), ("User:y", "Allow", "Read", "*")}
    c.zk.update_acls("Topic", "locked", "LITERAL", lambda acls: acls | held)
    set_znode_acl(c.zk_connect, "/kafka-acl/Topic/locked", "world:anyone:r")
    C = CreateAclsRequest.AclCreation
    conn = Connection("127.0.0.1", c.brokers[1].port, "zk-refused", 15)
    try:
        created = conn.send(CreateAclsRequest(version=1, creations=[
            C(resource_type=2, resource_name="locked", resource_pattern_type=3, principal="User:z", host="*",
              operation=3, permission_type=3),
            C(resource_type=2, resource_name="locked", resource_pattern_type=3, principal="nobody", host="*",
              operation=3, permission_type=3)])).results
        assert [r.error_code for r in created] == [Errors.UNKNOWN_SERVER_ERROR, Errors.INVALID_REQUEST]
        assert "NoAuth" in created[0].error_message
        F = DeleteAclsRequest.DeleteAclsFilter
        deleted = conn.send(DeleteAclsRequest(version=1, filters=[
            F(resource_type_filter=2, resource_name_filter="locked", pattern_type_filter=3, principal_filter="User:x",
              host_filter=None, operation=1, permission_type=1)])).filter_results
        assert [(r.error_code, r.matching_acls) for r in deleted] == [(Errors.UNKNOWN_SERVER_ERROR, [])]
        assert "NoAuth" in deleted[0].error_message
        (created,) = conn.send(CreateAclsRequest(version=1, creations=[
            C(resource_type=2, resource_name="..", resource_pattern_type=3, principal="User:z", host="*",
              operation=3, permission_type=3)])).results
        assert created.error_code == Errors.UNKNOWN_SERVER_ERROR
        (deleted,) = conn.send(DeleteAclsRequest(version=1, filters=[
            F(resource_type_filter=2, resource_name_filter="..", pattern_type_filter=3, principal_filter=None,
              host_filter=None, operation=1, permission_type=1)])).filter_results
        assert deleted.error_code == Errors.UNKNOWN_SERVER_ERROR
    finally:
        conn.close()
    assert c.zk.get_acls("Topic", "locked", "LITERAL")[0] == held
