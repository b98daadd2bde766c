"""IncrementalAlterConfigs (key 44), v0-v1 (flexible from v1): per-key config changes, as Kafka 2.8's
ZkAdminManager.incrementalAlterConfigs does them.

TOPIC (resource type 2): each entry's operation — SET 0, DELETE 1, APPEND 2, SUBTRACT 3 (APPEND/SUBTRACT only
for LIST configs, else INVALID_REQUEST; they start from the override, else the config's default) — is applied
to the topic's current overrides; a key given twice, an unknown operation or a null value for anything but
DELETE -> INVALID_REQUEST; the result is validated (INVALID_CONFIG naming the key) and written to
/config/topics/<T> followed by a /config/changes notification unless validate_only. Unknown topic ->
UNKNOWN_TOPIC_OR_PARTITION. BROKER (resource type 4): INVALID_REQUEST, dynamic broker configs are not
supported yet.
"""
from __future__ import annotations

from collections import Counter

from kafka.protocol.admin import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

from zk.topic_config import TOPIC_CONFIGS
from ..protocol.errors import Errors
from .alter_configs import Refused, run

API_KEY = 44
MIN_VERSION, MAX_VERSION = 0, 1
REQUEST, RESPONSE = IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse
Result = RESPONSE.AlterConfigsResourceResponse

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
# LogConfig's defaults of the LIST topic configs (what APPEND/SUBTRACT start from without an override)
LIST_DEFAULTS = {"cleanup.policy": "delete", "leader.replication.throttled.replicas": "",
                 "follower.replication.throttled.replicas": ""}


def _items(value: str | None) -> list[str]:
    return [v for v in (value or "").split(",") if v != ""]


def apply(current: dict[str, str], resource) -> dict[str, str]:
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
            if name in TOPIC_CONFIGS and TOPIC_CONFIGS[name][0] != "list" or name not in TOPIC_CONFIGS:
                verb = "append" if op == APPEND else "subtract"
                raise Refused(Errors.INVALID_REQUEST, f"Config value {verb} is not allowed for config key: {name}")
            old = _items(config.get(name, LIST_DEFAULTS.get(name, "")))
            given = _items(e.value)
            new = old + [v for v in given if v not in old] if op == APPEND else [v for v in old if v not in given]
            config[name] = ",".join(new)
    return config


def handle(request, ctx):
    zk = ctx.broker.zk
    validate_only = bool(request.validate_only)
    out = []
    for resource in request.resources or []:
        error, message = run(resource, apply, validate_only, zk)
        out.append(Result(error_code=error, error_message=message, resource_type=resource.resource_type,
                          resource_name=resource.resource_name))
    return RESPONSE(version=ctx.api_version, throttle_time_ms=0, responses=out)
