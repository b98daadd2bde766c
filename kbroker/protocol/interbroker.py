"""Inter-broker (controller <-> broker) Kafka APIs that kafka-python does not ship.

kafka-python 3.x only defines the client-facing APIs (and WriteTxnMarkers in the
1-2 range of newer Kafka, without 2.8's v0).  A broker also has to speak the
ZooKeeper-era control plane of Apache Kafka 2.8:

=====================  =======  ==========  =========
API                    key      versions    flexible
=====================  =======  ==========  =========
LeaderAndIsr           4        0-5         4+
StopReplica            5        0-3         2+
UpdateMetadata         6        0-7         6+
ControlledShutdown     7        0-3         3+
AlterIsr               56       0           0+
WriteTxnMarkers        27       0-1         1+
=====================  =======  ==========  =========

Rather than hand-writing encoders, we describe these messages in the same
Kafka-style JSON schema format kafka-python uses for its own messages (the files
live in :mod:`kbroker.protocol.schemas`) and let kafka-python's schema engine
build the classes via ``ApiMessage``'s ``load_json=`` class keyword.  The
resulting classes behave exactly like kafka-python's built-in messages
(``encode(version=...)``, ``decode(data, version=...)``, ``Cls[version]``,
nested data classes as attributes, snake_case field names).

A few adjustments are made on top of the plain schema classes:

* ``LeaderAndIsrRequest`` has a v5 field called ``Type``.  Its snake_case slot
  ``type`` would shadow kafka-python's ``ApiMessage.type`` class property
  ('request'/'response'), which kafka-python uses to pick the header class and
  to decide whether to register a class as a response.  We keep the Kafka name
  (``msg.type`` is the int8 field) while ``LeaderAndIsrRequest.type`` (on the
  class) still returns ``'request'``.
* For structs declared in ``commonStructs`` (e.g. ``LeaderAndIsrPartitionState``,
  used both for the v0-1 "ungrouped" list and inside v2+ topic states)
  kafka-python would generate one data class per use site.  We make every use
  site share a single class, as Kafka's own generator does, so
  ``LeaderAndIsrRequest.LeaderAndIsrPartitionState`` works everywhere and
  decoded objects compare equal to hand-built ones.
* ``ControlledShutdownRequest`` v0 is sent with request header v0 (no client
  id), which kafka-python's ``RequestHeader`` no longer supports.

Importing this module registers the six response classes in kafka-python's
``ResponseClassRegistry`` under their own API keys only; no other key is
touched.
"""

from __future__ import annotations

import struct
import weakref

from kafka.protocol.api_header import RequestHeader, ResponseClassRegistry
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.data_container import DataContainer
from kafka.protocol.schemas import StructField

import kbroker.protocol.schemas as _schemas

__all__ = [
    'LeaderAndIsrRequest', 'LeaderAndIsrResponse',
    'UpdateMetadataRequest', 'UpdateMetadataResponse',
    'StopReplicaRequest', 'StopReplicaResponse',
    'ControlledShutdownRequest', 'ControlledShutdownResponse',
    'AlterIsrRequest', 'AlterIsrResponse',
    'WriteTxnMarkersRequest', 'WriteTxnMarkersResponse',
    'INTER_BROKER_REQUESTS', 'INTER_BROKER_RESPONSES',
]


# ---------------------------------------------------------------------------
# helpers applied to the generated classes
# ---------------------------------------------------------------------------

class _FieldSlotWithClassValue:
    """Descriptor: instance access -> the message field slot; class access -> a constant.

    Used where a schema field's snake_case name collides with an ApiMessage
    class property (``type``).
    """

    def __init__(self, slot, class_value):
        self._slot = slot
        self._class_value = class_value

    def __get__(self, obj, owner=None):
        if obj is None:
            return self._class_value
        # Raises AttributeError when unset, so DataContainer.__getattr__ then
        # supplies the schema default, just like for a plain slot.
        return self._slot.__get__(obj, owner)

    def __set__(self, obj, value):
        self._slot.__set__(obj, value)

    def __delete__(self, obj):
        self._slot.__delete__(obj)


def _share_common_struct_classes(msg_cls):
    """Give every use site of a ``commonStructs`` entry one shared data class.

    kafka-python creates a separate data class per use site, and validates a
    data class's ``version=`` against the versions of that *use site* (e.g.
    ``UngroupedPartitionStates`` is 0-1 only).  The shared class is instead
    built from the common struct definition itself (valid for all versions).
    Encoding and decoding still go through the per-site field definitions;
    only the class used to build / return values changes.
    """
    common = {s['name']: s for s in msg_cls.json.get('commonStructs', ())}
    if not common:
        return
    shared = {}

    def class_for(type_name):
        if type_name not in shared:
            spec = common[type_name]
            struct_field = StructField({'name': type_name, 'type': type_name,
                                        'versions': spec.get('versions', '0+'),
                                        'fields': spec['fields']})
            if any(f.is_struct() or f.is_struct_array() for f in struct_field._fields):
                raise NotImplementedError('nested structs inside common struct %s' % type_name)
            data_cls = type(type_name, (DataContainer,), {
                '_struct': struct_field,
                '__module__': msg_cls.__module__,
                '__qualname__': '%s.%s' % (msg_cls.__qualname__, type_name),
            })
            struct_field.set_data_class(data_cls)
            shared[type_name] = data_cls
        return shared[type_name]

    def visit(owner_cls, struct_field):
        for field in struct_field._fields:
            if not (field.is_struct() or field.is_struct_array()):
                continue
            inner = field.array_of if field.is_struct_array() else field
            if field.type_str in common:
                data_cls = class_for(field.type_str)
                inner._data_class = data_cls
                setattr(owner_cls, field.type_str, data_cls)
            else:
                visit(inner.data_class, inner)

    visit(msg_cls, msg_cls._struct)


# ---------------------------------------------------------------------------
# LeaderAndIsr (key 4)
# ---------------------------------------------------------------------------

class LeaderAndIsrRequest(ApiMessage, load_json=_schemas):
    """Controller -> broker: leadership and ISR of the partitions the broker hosts.

    v5 ``type``: 0 = incremental, 1 = full (KIP-516).
    """
    TYPE_INCREMENTAL = 0
    TYPE_FULL = 1

    # The ``type`` field slot hides ApiMessage.type while the class is being
    # created (ApiMessage.__init_subclass__ calls is_request()); decide from
    # the schema instead.
    @classmethod
    def is_request(cls):
        return cls._json['type'] == 'request'


LeaderAndIsrRequest.type = _FieldSlotWithClassValue(
    LeaderAndIsrRequest.__dict__['type'], LeaderAndIsrRequest.json['type'])
# (assigning through the class would call the slot's __set__ on the class;
# make sure we really replaced the class attribute)
assert isinstance(LeaderAndIsrRequest.__dict__['type'], _FieldSlotWithClassValue)


class LeaderAndIsrResponse(ApiMessage, load_json=_schemas):
    """Broker -> controller: per-partition result of a LeaderAndIsr request."""


# ---------------------------------------------------------------------------
# StopReplica (key 5)
# ---------------------------------------------------------------------------

class StopReplicaRequest(ApiMessage, load_json=_schemas):
    """Controller -> broker: stop fetching (and optionally delete) replicas."""


class StopReplicaResponse(ApiMessage, load_json=_schemas):
    """Broker -> controller: per-partition result of a StopReplica request."""


# ---------------------------------------------------------------------------
# UpdateMetadata (key 6)
# ---------------------------------------------------------------------------

class UpdateMetadataRequest(ApiMessage, load_json=_schemas):
    """Controller -> every broker: live brokers and partition state for the metadata cache."""


class UpdateMetadataResponse(ApiMessage, load_json=_schemas):
    """Broker -> controller: acknowledgement of an UpdateMetadata request."""


# ---------------------------------------------------------------------------
# ControlledShutdown (key 7)
# ---------------------------------------------------------------------------

_HEADER_V0 = struct.Struct('>hhi')  # api_key, api_version, correlation_id


class ControlledShutdownRequest(ApiMessage, load_json=_schemas):
    """Broker -> controller: request to move leadership away before shutting down.

    Version 0 uses request header v0 (api key, api version, correlation id;
    no client id).  kafka-python's RequestHeader only knows v1+, so the header
    is encoded / parsed here for v0.
    """

    def encode_header(self, flexible=False):
        if self.API_VERSION == 0:
            hdr = self._header
            return _HEADER_V0.pack(hdr.request_api_key, hdr.request_api_version, hdr.correlation_id)
        return super().encode_header(flexible=flexible)

    @classmethod
    def parse_header(cls, data, version=None):
        version = cls._class_version if version is None else version
        if version == 0:
            raw = data.read(_HEADER_V0.size)
            if len(raw) != _HEADER_V0.size:
                raise ValueError('Truncated v0 request header')
            api_key, api_version, correlation_id = _HEADER_V0.unpack(raw)
            return RequestHeader(request_api_key=api_key, request_api_version=api_version,
                                 correlation_id=correlation_id, client_id=None)
        return super().parse_header(data, version=version)


class ControlledShutdownResponse(ApiMessage, load_json=_schemas):
    """Controller -> broker: partitions the broker still leads."""


# ---------------------------------------------------------------------------
# AlterIsr (key 56)
# ---------------------------------------------------------------------------

class AlterIsrRequest(ApiMessage, load_json=_schemas):
    """Partition leader -> controller: proposed ISR changes (KIP-497)."""


class AlterIsrResponse(ApiMessage, load_json=_schemas):
    """Controller -> partition leader: outcome of each proposed ISR change."""


# ---------------------------------------------------------------------------
# WriteTxnMarkers (key 27)
# ---------------------------------------------------------------------------

class WriteTxnMarkersRequest(ApiMessage, load_json=_schemas):
    """Transaction coordinator -> partition leaders: write COMMIT/ABORT control batches (KIP-98)."""


class WriteTxnMarkersResponse(ApiMessage, load_json=_schemas):
    """Partition leader -> transaction coordinator: per-partition outcome of each marker."""


# ---------------------------------------------------------------------------

INTER_BROKER_REQUESTS = {
    cls.API_KEY: cls for cls in (
        LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest,
        ControlledShutdownRequest, AlterIsrRequest, WriteTxnMarkersRequest)
}
INTER_BROKER_RESPONSES = {
    cls.API_KEY: cls for cls in (
        LeaderAndIsrResponse, StopReplicaResponse, UpdateMetadataResponse,
        ControlledShutdownResponse, AlterIsrResponse, WriteTxnMarkersResponse)
}

for _cls in (*INTER_BROKER_REQUESTS.values(), *INTER_BROKER_RESPONSES.values()):
    _share_common_struct_classes(_cls)

# Responses registered themselves on class creation; make sure the registry
# maps our keys to the response classes (never to a request class).
for _key, _cls in INTER_BROKER_RESPONSES.items():
    if ResponseClassRegistry._response_class_registry.get(_key) != _cls:
        ResponseClassRegistry.register_response_class(weakref.proxy(_cls))
del _key, _cls
