"""AlterConfigs (key 33), v0-v2 (flexible from v2): the legacy whole-set config change, as Kafka 2.8's
ZkAdminManager.alterConfigs does it.

The given entries replace the resource's whole set of dynamic configs; a null value -> INVALID_REQUEST.
- TOPIC (2): unknown topic -> UNKNOWN_TOPIC_OR_PARTITION, an unknown config name -> INVALID_CONFIG; then
  /config/topics/<T> and a /config/changes notification "topics/<T>" (AdminZkClient.changeTopicConfig).
- BROKER (4): the name is this broker's id (per-broker configs, /config/brokers/<id>) or "" (the cluster
  defaults, /config/brokers/<default>); another id -> INVALID_REQUEST, as the client must send it to that
  broker. Names must be dynamic broker configs (zk.broker_config); thread counts may change to between half and
  double their current value (Kafka's DynamicThreadPool / LogCleaner checks). Then the znode and a notification
  "brokers/<id|<default>>" (AdminZkClient.changeBrokerConfig); every broker concerned applies it live.
A value that does not parse or is out of range, or a broker config that cannot change dynamically, is Kafka's
ConfigException: INVALID_REQUEST with "Invalid config value for resource ConfigResource(type=.., name='..'): ..."
naming the key. validate_only checks everything and writes nothing. Any broker serves TOPIC resources.
"""
from __future__ import annotations

from kafka.protocol.admin import AlterConfigsRequest, AlterConfigsResponse

from zk import admin as zk_admin
from zk import broker_config as zk_broker_config
from zk.admin_errors import AdminError, InvalidConfigValueError, UnknownTopicError
from zk.broker_config import THREAD_COUNTS, validate_broker_config
from zk.client import ZkError
from zk.topic_config import validate_topic_config
from ..protocol.errors import Errors

API_KEY = 33
MIN_VERSION, MAX_VERSION = 0, 2
REQUEST, RESPONSE = AlterConfigsRequest, AlterConfigsResponse
Result = RESPONSE.AlterConfigsResourceResponse

TOPIC, BROKER = 2, 4
RESOURCE_TYPE_NAMES = {2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER"}


class Refused(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def current_topic_config(zk, topic: str) -> dict[str, str]:
    """The topic's overrides; UnknownTopicError (or InvalidTopicError) when there is no such topic."""
    zk_admin.validate_topic_name(topic)
    if not zk.topic_exists(topic):
        raise UnknownTopicError(f"The topic '{topic}' does not exist.")
    return zk.get_entity_config("topics", topic)


def write_topic_config(zk, topic: str, config: dict[str, str]) -> None:
    """/config/topics/<T>, then the change notification every broker watches."""
    zk.set_or_create_entity_config("topics", topic, config)
    zk.create_config_change_notification(f"topics/{topic}")


def target_broker(name: str, own_id: int) -> int | None:
    """The broker a BROKER resource names: None for the cluster defaults (""), else this broker's id."""
    if not name:
        return None
    try:
        broker_id = int(name)
    except ValueError:
        raise Refused(Errors.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None
    if broker_id != own_id:
        raise Refused(Errors.INVALID_REQUEST, f"Unexpected broker id, expected {own_id}, but received {name}")
    return broker_id


def check_thread_counts(config, new: dict, per_broker: bool) -> None:
    """Kafka refuses to resize a thread pool (or the cleaner) below half or above double its current size."""
    for name in THREAD_COUNTS:
        if name not in new:
            continue
        if not per_broker and name in config.dynamic_broker:
            continue  # this broker's own value wins over the new default
        value, current = new[name], config[name]
        if value == current:
            continue
        if name == "log.cleaner.threads":
            what = "Log cleaner threads"
            if value < 1:
                raise InvalidConfigValueError(f"{what} should be at least 1")
            if value < current // 2:
                raise InvalidConfigValueError(f"{what} cannot be reduced to less than half the current value "
                                              f"{current}")
            if value > current * 2:
                raise InvalidConfigValueError(f"{what} cannot be increased to more than double the current value "
                                              f"{current}")
            continue
        what = f"Dynamic thread count update validation failed for {name}={value}"
        if value < current // 2:
            raise InvalidConfigValueError(f"{what}, value should be at least half the current value {current}")
        if value > current * 2:
            raise InvalidConfigValueError(f"{what}, value should not be greater than double the current value "
                                          f"{current}")


def _alter_topic(resource, change, validate_only, zk) -> None:
    topic = resource.resource_name
    config = change(current_topic_config(zk, topic), resource)
    validate_topic_config(config)
    if not validate_only:
        write_topic_config(zk, topic, config)


def _alter_broker(resource, change, validate_only, broker) -> None:
    broker_id = target_broker(resource.resource_name, broker.config.broker_id)
    config = change(zk_broker_config.describe_broker_config(broker.zk, broker_id), resource)
    check_thread_counts(broker.config, validate_broker_config(config), broker_id is not None)
    if not validate_only:
        zk_broker_config.write_broker_config(broker.zk, broker_id, config)


def run(resource, change, validate_only: bool, broker) -> tuple[int, str | None]:
    """(error code, message) of one resource: change(current configs, resource) -> new configs."""
    kind = resource.resource_type
    try:
        if kind == TOPIC:
            _alter_topic(resource, change, validate_only, broker.zk)
        elif kind == BROKER:
            _alter_broker(resource, change, validate_only, broker)
        else:
            raise Refused(Errors.INVALID_REQUEST, "AlterConfigs is only supported for topics and brokers, but "
                                                  f"resource type is {RESOURCE_TYPE_NAMES.get(kind, kind)}")
        return Errors.NONE, None
    except Refused as e:
        return e.code, str(e)
    except InvalidConfigValueError as e:
        return Errors.INVALID_REQUEST, (f"Invalid config value for resource ConfigResource(type="
                                        f"{RESOURCE_TYPE_NAMES.get(kind, kind)}, name='{resource.resource_name}'): {e}")
    except AdminError as e:
        return Errors(e.code), str(e)
    except ZkError as e:
        return Errors.UNKNOWN_SERVER_ERROR, str(e)


def handle(request, ctx):
    validate_only = bool(request.validate_only)

    def replace(_current, resource):
        entries = list(resource.configs or [])
        nulls = [c.name for c in entries if c.value is None]
        if nulls:
            raise Refused(Errors.INVALID_REQUEST, f"Null value not supported for : {','.join(nulls)}")
        return {c.name: c.value for c in entries}

    out = []
    for resource in request.resources or []:
        error, message = run(resource, replace, validate_only, ctx.broker)
        out.append(Result(error_code=error, error_message=message, resource_type=resource.resource_type,
                          resource_name=resource.resource_name))
    return RESPONSE(version=ctx.api_version, throttle_time_ms=0, responses=out)
