"""AlterConfigs (key 33), v0-v2 (flexible from v2): the legacy whole-set config change, as Kafka 2.8's
ZkAdminManager.alterConfigs does it.

TOPIC (resource type 2): the given entries (null values dropped) replace the topic's whole override set; an
unknown topic -> UNKNOWN_TOPIC_OR_PARTITION, a bad name or value -> INVALID_CONFIG naming the key; then
/config/topics/<T> is written followed by a /config/changes/config_change_ notification with entity_path
"topics/<T>" (Kafka's AdminZkClient.changeTopicConfig); validate_only writes nothing. Any broker serves it.
BROKER (resource type 4): INVALID_REQUEST, dynamic broker configs are not supported yet.
"""
from __future__ import annotations

from kafka.protocol.admin import AlterConfigsRequest, AlterConfigsResponse

from zk import admin as zk_admin
from zk.admin_errors import AdminError, UnknownTopicError
from zk.client import ZkError
from zk.topic_config import validate_topic_config
from ..protocol.errors import Errors

API_KEY = 33
MIN_VERSION, MAX_VERSION = 0, 2
REQUEST, RESPONSE = AlterConfigsRequest, AlterConfigsResponse
Result = RESPONSE.AlterConfigsResourceResponse

TOPIC, BROKER = 2, 4
BROKER_UNSUPPORTED = "dynamic broker configs are not supported yet"


class Refused(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def current_topic_config(zk, topic: str) -> dict[str, str]:
    """The topic's overrides; UnknownTopicError (or InvalidTopicError) when there is no such topic."""
    zk_admin.validate_topic_name(topic)
    if not zk.topic_exists(topic):
        raise UnknownTopicError(f"Topic '{topic}' does not exist.")
    return zk.get_entity_config("topics", topic)


def write_topic_config(zk, topic: str, config: dict[str, str]) -> None:
    """/config/topics/<T>, then the change notification every broker watches."""
    zk.set_or_create_entity_config("topics", topic, config)
    zk.create_config_change_notification(f"topics/{topic}")


def run(resource, change, validate_only: bool, zk) -> tuple[int, str | None]:
    """(error code, message) of one resource: change(current overrides, resource) -> new overrides."""
    try:
        if resource.resource_type == BROKER:
            raise Refused(Errors.INVALID_REQUEST, BROKER_UNSUPPORTED)
        if resource.resource_type != TOPIC:
            raise Refused(Errors.INVALID_REQUEST, f"Unsupported resource type: {resource.resource_type}")
        topic = resource.resource_name
        config = change(current_topic_config(zk, topic), resource)
        validate_topic_config(config)
        if not validate_only:
            write_topic_config(zk, topic, config)
        return Errors.NONE, None
    except Refused as e:
        return e.code, str(e)
    except AdminError as e:
        return Errors(e.code), str(e)
    except ZkError as e:
        return Errors.UNKNOWN_SERVER_ERROR, str(e)


def handle(request, ctx):
    zk = ctx.broker.zk
    validate_only = bool(request.validate_only)

    def replace(_current, resource):
        return {c.name: c.value for c in resource.configs or [] if c.value is not None}

    out = []
    for resource in request.resources or []:
        error, message = run(resource, replace, validate_only, zk)
        out.append(Result(error_code=error, error_message=message, resource_type=resource.resource_type,
                          resource_name=resource.resource_name))
    return RESPONSE(version=ctx.api_version, throttle_time_ms=0, responses=out)
