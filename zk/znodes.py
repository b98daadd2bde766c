"""Kafka 2.8's ZooKeeper layout: every znode kind kbroker reads or writes, with its path and JSON codec.

One small definition per znode kind, as Kafka's ZkData.scala, so the whole layout reads in one file and what
`zkCli.sh get` shows can be checked against it. JSON is compact (no spaces), as Kafka's Json.encodeAsBytes
writes it. Formats are the 2.8 ones: broker znode v5, topic znode v3 (with topic_id), partition state v1,
/controller v1, /cluster/id with the string version "1".
"""
from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass, field


_ENCODER = json.JSONEncoder(separators=(",", ":"))   # json.dumps with arguments builds an encoder per call


def _dump(obj) -> bytes:
    return _ENCODER.encode(obj).encode()


def _load(data: bytes | None):
    if not data:
        return None
    return json.loads(data.decode())


def now_ms() -> str:
    """Timestamps in znodes are strings of epoch milliseconds."""
    return str(int(time.time() * 1000))


def new_base64_uuid() -> str:
    """Kafka's Uuid.toString: url-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


# Persistent paths created with null data at every broker start (ZkData.PersistentZkPaths).
PERSISTENT_PATHS = (
    "/consumers",
    "/brokers/ids",
    "/brokers/topics",
    "/config/changes",
    "/admin/delete_topics",
    "/brokers/seqid",
    "/isr_change_notification",
    "/latest_producer_id_block",
    "/log_dir_event_notification",
    "/config/topics",
    "/config/clients",
    "/config/users",
    "/config/brokers",
    "/config/ips",
)


class ClusterIdZNode:
    path = "/cluster/id"

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        return _dump({"version": "1", "id": cluster_id})

    @staticmethod
    def decode(data: bytes) -> str:
        return _load(data)["id"]


class ControllerZNode:
    path = "/controller"

    @staticmethod
    def encode(broker_id: int, timestamp: str | None = None) -> bytes:
        return _dump({"version": 1, "brokerid": broker_id, "timestamp": timestamp or now_ms()})

    @staticmethod
    def decode(data: bytes | None) -> int | None:
        obj = _load(data)
        return None if obj is None else int(obj["brokerid"])


class ControllerEpochZNode:
    """A plain decimal string; its zkVersion is the fencing token of every controller write."""
    path = "/controller_epoch"
    initial = 0

    @staticmethod
    def encode(epoch: int) -> bytes:
        return str(epoch).encode()

    @staticmethod
    def decode(data: bytes) -> int:
        return int(data.decode())


@dataclass(frozen=True)
class EndPoint:
    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def url(self) -> str:
        return f"{self.listener}://{self.host}:{self.port}"


@dataclass
class BrokerInfo:
    """What /brokers/ids/<id> holds; epoch is the znode's czxid (set when read)."""
    id: int
    endpoints: list[EndPoint]
    rack: str | None = None
    jmx_port: int = -1
    timestamp: str = ""
    epoch: int = -1

    def endpoint(self, listener: str) -> EndPoint | None:
        return next((e for e in self.endpoints if e.listener == listener), None)


class BrokerIdZNode:
    version = 5

    @staticmethod
    def path(broker_id: int) -> str:
        return f"/brokers/ids/{broker_id}"

    @staticmethod
    def encode(info: BrokerInfo) -> bytes:
        plain = next((e for e in info.endpoints if e.security_protocol == "PLAINTEXT"), None)
        obj = {
            "version": BrokerIdZNode.version,
            "host": plain.host if plain else None,
            "port": plain.port if plain else -1,
            "endpoints": [e.url() for e in info.endpoints],
            "jmx_port": info.jmx_port,
            "timestamp": info.timestamp or now_ms(),
            "listener_security_protocol_map": {e.listener: e.security_protocol for e in info.endpoints},
            "features": {},
        }
        if info.rack is not None:
            obj["rack"] = info.rack
        return _dump(obj)

    @staticmethod
    def decode(broker_id: int, data: bytes, czxid: int = -1) -> BrokerInfo:
        obj = _load(data)
        protocols = obj.get("listener_security_protocol_map") or {}
        endpoints = []
        for url in obj.get("endpoints", []):
            listener, rest = url.split("://", 1)
            host, port = rest.rsplit(":", 1)
            endpoints.append(EndPoint(listener, host.strip("[]"), int(port), protocols.get(listener, listener)))
        return BrokerInfo(broker_id, endpoints, obj.get("rack"), obj.get("jmx_port", -1),
                          obj.get("timestamp", ""), czxid)


class BrokerSeqIdZNode:
    path = "/brokers/seqid"


@dataclass
class TopicAssignment:
    """/brokers/topics/<T>: partition → replica list, plus reassignment state and the topic id."""
    partitions: dict[int, list[int]]
    topic_id: str | None = None
    adding_replicas: dict[int, list[int]] = field(default_factory=dict)
    removing_replicas: dict[int, list[int]] = field(default_factory=dict)


class TopicZNode:
    version = 3

    @staticmethod
    def path(topic: str) -> str:
        return f"/brokers/topics/{topic}"

    @staticmethod
    def encode(a: TopicAssignment) -> bytes:
        def by_partition(m):
            return {str(p): list(r) for p, r in sorted(m.items())}
        obj = {
            "version": TopicZNode.version,
            "partitions": by_partition(a.partitions),
            "adding_replicas": by_partition(a.adding_replicas),
            "removing_replicas": by_partition(a.removing_replicas),
        }
        if a.topic_id is not None:
            obj["topic_id"] = a.topic_id
        return _dump(obj)

    @staticmethod
    def decode(data: bytes) -> TopicAssignment:
        obj = _load(data) or {}

        def by_partition(m):
            return {int(p): list(r) for p, r in (m or {}).items()}
        return TopicAssignment(by_partition(obj.get("partitions")), obj.get("topic_id"),
                               by_partition(obj.get("adding_replicas")), by_partition(obj.get("removing_replicas")))


class TopicPartitionsZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"/brokers/topics/{topic}/partitions"


class TopicPartitionZNode:
    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"/brokers/topics/{topic}/partitions/{partition}"


@dataclass
class LeaderAndIsr:
    """The partition state znode; zk_version (the znode's version) is Kafka's partitionEpoch."""
    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    zk_version: int = 0

    NO_LEADER = -1
    LEADER_DURING_DELETE = -2


class TopicPartitionStateZNode:
    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"/brokers/topics/{topic}/partitions/{partition}/state"

    @staticmethod
    def encode(s: LeaderAndIsr) -> bytes:
        # _dump's bytes for {"controller_epoch", "leader", "version": 1, "leader_epoch", "isr"}, formatted directly:
        # the controller writes thousands at a time.
        return (f'{{"controller_epoch":{int(s.controller_epoch)},"leader":{int(s.leader)},"version":1,'
                f'"leader_epoch":{int(s.leader_epoch)},"isr":[{",".join(str(int(r)) for r in s.isr)}]}}').encode()

    @staticmethod
    def decode(data: bytes, zk_version: int = 0) -> LeaderAndIsr:
        obj = _load(data)
        return LeaderAndIsr(obj["leader"], obj["leader_epoch"], list(obj["isr"]), obj["controller_epoch"],
                            zk_version)


def _java_hash(s: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as an unsigned 32-bit value."""
    h, units = 0, s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def java_properties_order(keys) -> list[str]:
    """The order a java.util.Properties holding `keys`, put in this order, iterates them on JDK 9+ (Kafka 2.8's
    JSON of a config is its Properties' order): a ConcurrentHashMap of 16 bins doubled at 3/4 full, keys by
    bin (spread hash), in insertion order within one, a resize splitting each bin as ConcurrentHashMap.transfer
    does (the nodes before the last run of one side reversed). Python's dict order is Kafka's insertion order
    for a config read, changed and written back (the keys read first, new ones after)."""
    def spread(k: str) -> int:
        h = _java_hash(k)
        return (h ^ (h >> 16)) & 0x7FFFFFFF
    n, bins = 16, [[] for _ in range(16)]
    for count, key in enumerate(keys, 1):
        bins[spread(key) & (n - 1)].append(key)
        if count >= n - (n >> 2):
            grown = [[] for _ in range(2 * n)]
            for i, b in enumerate(bins):
                bits = [spread(k) & n for k in b]
                last = len(b) - 1
                while last > 0 and bits[last - 1] == bits[-1]:
                    last -= 1
                sides = ([], [])
                if b:
                    sides[bits[-1] != 0].extend(b[last:])
                for k, bit in zip(b[:last], bits[:last]):
                    sides[bit != 0].insert(0, k)
                grown[i], grown[i + n] = sides
            n, bins = 2 * n, grown
    return [k for b in bins for k in b]


class ConfigEntityZNode:
    """/config/<type>/<name> = {"version":1,"config":{...}}; values are strings. Users and clients are named
    by kbroker.common.sanitizer.sanitize(name)."""

    @staticmethod
    def path(entity_type: str, name: str) -> str:
        return f"/config/{entity_type}/{name}"

    @staticmethod
    def encode(config: dict[str, str]) -> bytes:
        """Keys in the order Kafka writes them (java_properties_order of the dict's order)."""
        return _dump({"version": 1, "config": {k: str(config[k]) for k in java_properties_order(config)}})

    @staticmethod
    def decode(data: bytes | None) -> dict[str, str]:
        """The config ({} for null data); ValueError for data that is not such JSON (a znode written by hand)."""
        try:
            obj = _load(data)
            config = (obj.get("config") if isinstance(obj, dict) else obj) or {}
        except ValueError:      # not JSON, or not UTF-8
            config = None
        if isinstance(config, dict):
            return dict(config)
        raise ValueError(f"not a config znode's JSON: {bytes(data[:100])!r}")


class QuotaEntityZNode:
    """A client quota entity's config znode, in ConfigEntityZNode's JSON, where Kafka's AdminZkClient keeps it:
    /config/users/<u>, /config/users/<u>/clients/<c>, /config/clients/<c>, /config/ips/<ip>. Names are znode
    names: users and client ids sanitized (kbroker.common.sanitizer), the default entity `<default>`. Parents made
    on the way (/config/users/<u>, its clients/) hold null data. The entity path (after /config/) is what the
    change notification names."""
    roots = {"user": "users", "client-id": "clients", "ip": "ips"}    # entity type -> /config/<root>

    @staticmethod
    def entity_path(user: str | None = None, client_id: str | None = None, ip: str | None = None) -> str:
        """users/<u>, users/<u>/clients/<c>, clients/<c> or ips/<ip>, from znode names."""
        if user is not None:
            return f"users/{user}" if client_id is None else f"users/{user}/clients/{client_id}"
        return f"clients/{client_id}" if client_id is not None else f"ips/{ip}"

    @staticmethod
    def path(entity_path: str) -> str:
        return f"/config/{entity_path}"


class ConfigChangeNotificationZNode:
    """Persistent sequential /config/changes/config_change_<seq>, written after the entity config."""
    prefix = "/config/changes/config_change_"

    @staticmethod
    def encode(entity_path: str) -> bytes:
        return _dump({"version": 2, "entity_path": entity_path})

    @staticmethod
    def decode(data: bytes) -> str:
        obj = _load(data)
        if obj.get("version") == 1:
            return f"{obj['entity_type']}/{obj['entity_name']}"
        return obj["entity_path"]


class DeleteTopicsZNode:
    path = "/admin/delete_topics"


class DeleteTopicsTopicZNode:
    """A marker with null data; the controller deletes it when the topic is gone."""

    @staticmethod
    def path(topic: str) -> str:
        return f"/admin/delete_topics/{topic}"


class ReassignPartitionsZNode:
    path = "/admin/reassign_partitions"

    @staticmethod
    def encode(assignment: dict[tuple[str, int], list[int]]) -> bytes:
        return _dump({"version": 1, "partitions": [
            {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(assignment.items())]})

    @staticmethod
    def decode(data: bytes) -> dict[tuple[str, int], list[int]]:
        obj = _load(data) or {}
        return {(e["topic"], int(e["partition"])): list(e["replicas"]) for e in obj.get("partitions", [])}


class _PartitionListZNode:
    """{"version":1,"partitions":[{"topic":T,"partition":P},...]}, shared by two znode kinds."""

    @staticmethod
    def encode(partitions) -> bytes:
        return _dump({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in sorted(partitions)]})

    @staticmethod
    def decode(data: bytes) -> set[tuple[str, int]]:
        obj = _load(data) or {}
        return {(e["topic"], int(e["partition"])) for e in obj.get("partitions", [])}


class PreferredReplicaElectionZNode(_PartitionListZNode):
    path = "/admin/preferred_replica_election"


class IsrChangeNotificationZNode(_PartitionListZNode):
    path = "/isr_change_notification"
    prefix = "/isr_change_notification/isr_change_"


class LogDirEventNotificationZNode:
    """/log_dir_event_notification/log_dir_event_<seq>: a broker had a log dir fail; the controller asks it about
    its replicas and deletes the notification."""
    path = "/log_dir_event_notification"
    prefix = "/log_dir_event_notification/log_dir_event_"
    LOG_DIR_FAILURE_EVENT = 1

    @staticmethod
    def encode(broker_id: int) -> bytes:
        return _dump({"version": 1, "broker": broker_id, "event": LogDirEventNotificationZNode.LOG_DIR_FAILURE_EVENT})

    @staticmethod
    def decode(data: bytes | None) -> int | None:
        obj = _load(data)
        return None if obj is None else int(obj["broker"])


class ProducerIdBlockZNode:
    path = "/latest_producer_id_block"
    block_size = 1000

    @staticmethod
    def encode(broker: int, start: int, end: int) -> bytes:
        return _dump({"version": 1, "broker": broker, "block_start": str(start), "block_end": str(end)})

    @staticmethod
    def decode(data: bytes | None) -> tuple[int, int, int] | None:
        obj = _load(data)
        if obj is None:
            return None
        return int(obj["broker"]), int(obj["block_start"]), int(obj["block_end"])


class FeatureZNode:
    """Written by the controller at failover: features enabled (IBP ≥ 2.7), none finalized."""
    path = "/feature"

    @staticmethod
    def encode() -> bytes:
        return _dump({"version": 1, "status": 1, "features": {}})


class ConsumerOffsetZNode:
    """Old (v0) consumer offsets: /consumers/<group>/offsets/<topic>/<partition> = decimal string."""

    @staticmethod
    def path(group: str, topic: str, partition: int) -> str:
        return f"/consumers/{group}/offsets/{topic}/{partition}"

    @staticmethod
    def encode(offset: int) -> bytes:
        return str(offset).encode()

    @staticmethod
    def decode(data: bytes) -> int:
        return int(data.decode())


# ---- ACLs (AclAuthorizer's ZkAclStore / ZkAclChangeStore) ------------------------------------------------------
# Resource types are Kafka's Pascal-case names ("Topic", "Group", "Cluster", "TransactionalId", "DelegationToken");
# pattern types "LITERAL" / "PREFIXED"; an ACL is the 4-tuple (principal, permissionType, operation, host) of
# Pascal-case names ("User:alice", "Allow", "IdempotentWrite", "*").
ACL_RESOURCE_TYPES = ("Topic", "Group", "Cluster", "TransactionalId", "DelegationToken")


def _enum_name(pascal: str) -> str:
    """Java's enum constant of a Pascal-case name: "TransactionalId" -> "TRANSACTIONAL_ID"."""
    return "".join("_" + c if c.isupper() and i else c for i, c in enumerate(pascal)).upper()


def _pascal_name(enum: str) -> str:
    """"TRANSACTIONAL_ID" (or any case) -> "TransactionalId"; None if not a resource type."""
    key = enum.replace("_", "").upper()
    return next((t for t in ACL_RESOURCE_TYPES if t.upper() == key), None)


class AclZNode:
    """/kafka-acl/<Type>/<name> (LITERAL) or /kafka-acl-extended/prefixed/<Type>/<name> (PREFIXED) =
    {"version":1,"acls":[{"principal":...,"permissionType":...,"operation":...,"host":...}]}
    (ResourceZNode, AclEntry.toJsonCompatibleMap); the node goes when its last ACL does."""
    roots = {"LITERAL": "/kafka-acl", "PREFIXED": "/kafka-acl-extended/prefixed"}

    @staticmethod
    def type_path(pattern_type: str, resource_type: str) -> str:
        return f"{AclZNode.roots[pattern_type]}/{resource_type}"

    @staticmethod
    def path(pattern_type: str, resource_type: str, name: str) -> str:
        return f"{AclZNode.roots[pattern_type]}/{resource_type}/{name}"

    @staticmethod
    def encode(acls) -> bytes:
        return _dump({"version": 1, "acls": [{"principal": p, "permissionType": perm, "operation": op, "host": h}
                                             for p, perm, op, h in sorted(acls)]})

    @staticmethod
    def decode(data: bytes | None) -> set[tuple[str, str, str, str]]:
        obj = _load(data)
        if not obj:
            return set()
        if obj.get("version") != 1:
            raise ValueError(f"unsupported ACL znode version {obj.get('version')!r}")
        return {(a["principal"], a["permissionType"], a["operation"], a["host"]) for a in obj.get("acls") or []}


class LiteralAclChangeZNode:
    """/kafka-acl-changes/acl_changes_<seq> = "<RESOURCE_TYPE>:<name>" (LiteralAclChangeStore: the Java enum's
    name, e.g. "TOPIC:orders"; any case is read)."""
    path = "/kafka-acl-changes"
    prefix = "/kafka-acl-changes/acl_changes_"

    @staticmethod
    def encode(resource_type: str, name: str) -> bytes:
        return f"{_enum_name(resource_type)}:{name}".encode()

    @staticmethod
    def decode(data: bytes) -> tuple[str, str, str] | None:
        kind, sep, name = data.decode().partition(":")
        rtype = _pascal_name(kind)
        return (rtype, name, "LITERAL") if sep and rtype else None


class ExtendedAclChangeZNode:
    """/kafka-acl-extended-changes/acl_changes_<seq> =
    {"version":1,"resourceType":"TOPIC","name":"orders","patternType":"PREFIXED"} (ExtendedAclChangeEvent)."""
    path = "/kafka-acl-extended-changes"
    prefix = "/kafka-acl-extended-changes/acl_changes_"

    @staticmethod
    def encode(resource_type: str, name: str, pattern_type: str) -> bytes:
        return _dump({"version": 1, "resourceType": _enum_name(resource_type), "name": name,
                      "patternType": pattern_type})

    @staticmethod
    def decode(data: bytes) -> tuple[str, str, str] | None:
        obj = _load(data) or {}
        rtype = _pascal_name(str(obj.get("resourceType", "")))
        pattern = str(obj.get("patternType", "")).upper()
        if obj.get("version") != 1 or rtype is None or pattern not in AclZNode.roots or "name" not in obj:
            return None
        return rtype, obj["name"], pattern


ACL_CHANGE_ZNODES = (LiteralAclChangeZNode, ExtendedAclChangeZNode)
