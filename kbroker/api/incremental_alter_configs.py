"""IncrementalAlterConfigs (key 44), v0-v1 (flexible from v1): per-key config changes, as Kafka 2.8's
ZkAdminManager.incrementalAlterConfigs does them.

Each entry's operation — SET 0, DELETE 1, APPEND 2, SUBTRACT 3 (APPEND/SUBTRACT only for LIST configs, else
INVALID_REQUEST; they start from the current value, else the config's default) — is applied to the resource's
current dynamic configs: a topic's overrides (TOPIC) or a broker's /config/brokers/<id> or the cluster's
/config/brokers/<default> (BROKER, name = this broker's id or ""). A key given twice or a null value for anything
but DELETE -> INVALID_REQUEST. The result is validated and written with its change notification exactly as
AlterConfigs does (alter_configs.run: error codes, messages, validate_only).
"""
from __future__ import annotations

from collections import Counter

from kafka.protocol.admin import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

from zk.broker_config import DYNAMIC_BROKER_CONFIGS
from zk.topic_config import TOPIC_CONFIGS
from ..protocol.errors import Errors
from .alter_configs import BROKER, Refused, run

API_KEY = 44
MIN_VERSION, MAX_VERSION = 0, 1
REQUEST, RESPONSE = IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse
Result = RESPONSE.AlterConfigsResourceResponse

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
# The defaults of the LIST configs (what APPEND/SUBTRACT start from without a value)
LIST_DEFAULTS = {"cleanup.policy": "delete", "leader.replication.throttled.replicas": "",
                 "follower.replication.throttled.replicas": "", "log.cleanup.policy": "delete"}


def _items(value: str | None) -> list[str]:
    return [v for v in (value or "").split(",") if v != ""]


def apply(current: dict[str, str], resource) -> dict[str, str]:
    kinds = DYNAMIC_BROKER_CONFIGS if resource.resource_type == BROKER else TOPIC_CONFIGS
    config = dict(current)
    entries = list(resource.configs or [])
    dup = sorted(n for n, k in Counter(e.name for e in entries).items() if k > 1)
    if dup:
        raise Refused(Errors.INVALID_REQUEST, f"Error due to duplicate config keys : {','.join(dup)}")
    for e in entries:
        op, name = e.config_operation, e.name
        if op not in (SET, DELETE, APPEND, SUBTRACT):
            raise Refused(Errors.INVALID_REQUEST, f"Unknown config operation {op} for config key: {name}")
        if op != DELETE and e.value is None:
            raise Refused(Errors.INVALID_REQUEST, f"Null value not supported for : {name}")
        if op == SET:
            config[name] = e.value
        elif op == DELETE:
            config.pop(name, None)
        else:
            if name not in kinds or kinds[name][0] != "list":
                verb = "append" if op == APPEND else "subtract"
                raise Refused(Errors.INVALID_REQUEST, f"Config value {verb} is not allowed for config key: {name}")
            old = _items(config.get(name, LIST_DEFAULTS.get(name, "")))
            given = _items(e.value)
            new = old + [v for v in given if v not in old] if op == APPEND else [v for v in old if v not in given]
            config[name] = ",".join(new)
    return config


def handle(request, ctx):
    validate_only = bool(request.validate_only)
    out = []
    for resource in request.resources or []:
        error, message = run(resource, apply, validate_only, ctx.broker)
        out.append(Result(error_code=error, error_message=message, resource_type=resource.resource_type,
                          resource_name=resource.resource_name))
    return RESPONSE(version=ctx.api_version, throttle_time_ms=0, responses=out)
