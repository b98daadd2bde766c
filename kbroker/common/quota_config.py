"""Kafka 2.8's client quota configs (QuotaConfigs, DynamicConfig.Client/User/Ip): THE table of the keys a quota
entity may hold, with their types and checks, for the writers (AlterClientQuotas, kadmin quotas) and the
brokers' quota managers alike; the entities of the client-quota APIs; and how a value travels between the
strings ZooKeeper holds and the doubles the APIs carry.

An entity (Kafka's ClientQuotaEntity) is a user, a client id, a (user, client id) pair or an IP; each part names
one entity or, as None, the default one (`<default>` in ZooKeeper). User and client-id entities take the four
client quota keys, IP entities connection_creation_rate. An unset key means unlimited (the defaults below are
Kafka's: Long.MAX_VALUE, Int.MAX_VALUE). Where the znodes live is zk/ (znodes.QuotaEntityZNode, admin).

Beyond 2.8: every quota value must be finite and at least 0. 2.8 checks only connection_creation_rate (and
answers UNKNOWN_SERVER_ERROR); it stores a negative request_percentage, which then throttles every request.
"""
from __future__ import annotations

import ipaddress
import math
import socket
from decimal import Decimal

from .admin_errors import InvalidConfigError, InvalidRequestError
from .config_def import MAX_INT, MAX_LONG, ConfigKey, at_least, checked_value, parse_value

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)          # ClientQuotaEntity's types, in the order entities are shown
EXACT, DEFAULT, ANY = 0, 1, 2                 # DescribeClientQuotas match types (ANY: any name, default included)

# user and client-id entities (QuotaConfigs.buildUserClientQuotaConfigDef)
CLIENT_QUOTA_CONFIGS: dict[str, ConfigKey] = {
    "producer_byte_rate": ConfigKey("long", MAX_LONG, at_least(0)),
    "consumer_byte_rate": ConfigKey("long", MAX_LONG, at_least(0)),
    "request_percentage": ConfigKey("double", float(MAX_INT), at_least(0)),
    "controller_mutation_rate": ConfigKey("double", float(MAX_INT), at_least(0)),
}
# ip entities (QuotaConfigs.ipConfigs)
IP_QUOTA_CONFIGS: dict[str, ConfigKey] = {
    "connection_creation_rate": ConfigKey("int", MAX_INT, at_least(0)),
}
_EPSILON = 1e-6     # how far from an integer AlterClientQuotas lets a LONG or INT value be
_BOUNDS = {"long": (-MAX_LONG - 1, MAX_LONG), "int": (-MAX_INT - 1, MAX_INT)}

# ((entity type, name or None for the default entity), ...), one part per type, in ENTITY_TYPES order
QuotaEntity = tuple[tuple[str, "str | None"], ...]


def quota_entity(parts) -> QuotaEntity:
    """An entity from its (type, name) parts, checked as Kafka's ZkAdminManager.parseAndSanitizeQuotaEntity
    checks one: InvalidRequestError for no part, an unknown type, an empty name, or an IP with a user or client
    id; beyond 2.8 (whose request map keeps the last), also for a type given twice."""
    parts = list(parts)
    if not parts:
        raise InvalidRequestError("Invalid empty client quota entity")
    seen: dict[str, str | None] = {}
    for entity_type, name in parts:
        if entity_type not in ENTITY_TYPES:
            raise InvalidRequestError(f"Unhandled client quota entity type: {entity_type}")
        if entity_type in seen:
            raise InvalidRequestError(f"Invalid client quota entity, duplicate entity entry {entity_type}")
        if name == "":
            raise InvalidRequestError(f"Empty {entity_type} not supported")
        seen[entity_type] = name
    if IP in seen and len(seen) > 1:
        raise InvalidRequestError("Invalid quota entity combination, IP entity should not be used with "
                                  "user/client ID entity.")
    return tuple((t, seen[t]) for t in ENTITY_TYPES if t in seen)


def quota_keys(entity: QuotaEntity) -> dict[str, ConfigKey]:
    """The quota keys an entity takes."""
    return IP_QUOTA_CONFIGS if entity[0][0] == IP else CLIENT_QUOTA_CONFIGS


def describe_entity(entity: QuotaEntity) -> str:
    """An entity as kafka-configs.sh names it: "user-principal 'alice', the default client-id"."""
    words = {USER: "user-principal", CLIENT_ID: "client-id", IP: "ip"}
    return ", ".join(f"{words[t]} '{n}'" if n is not None else f"the default {words[t]}" for t, n in entity)


def validate_quota_config(config: dict[str, str], keys: dict[str, ConfigKey], others=()) -> dict:
    """A quota entity's whole config as written to ZooKeeper (DynamicConfig.validate): every name one of `keys`
    (or of `others`, a named user's SCRAM credentials, not checked here), every value parsing as its type and
    passing its check. InvalidConfigError naming the unknown keys, InvalidConfigValueError the bad value;
    returns the typed quota values."""
    unknown = sorted(k for k in config if k not in keys and k not in others)
    if unknown:
        raise InvalidConfigError(f"Unknown Dynamic Configuration: Set({', '.join(unknown)}).")
    return {k: checked_value(k, keys[k], v) for k, v in config.items() if k in keys}


def quota_values(config: dict, keys: dict[str, ConfigKey]) -> tuple[dict[str, float], list[str]]:
    """The quota keys of a stored config as the numbers DescribeClientQuotas answers, and the reasons the values
    that do not parse (a znode written by hand) are left out; other keys (SCRAM credentials) are ignored."""
    values, bad = {}, []
    for name, raw in config.items():
        if name in keys:
            try:
                values[name] = float(parse_value(keys[name].type, str(raw)))
            except ValueError as e:
                bad.append(f"invalid value {raw!r} for {name}: {e}")
    return values, bad


def stored_value(name: str, key: ConfigKey, value: float) -> str:
    """An AlterClientQuotas value as the text written to ZooKeeper (ZkAdminManager.alterClientQuotas): a DOUBLE
    key's by Java's Double.toString ("200.0"), a LONG or INT key's as the integer it is within 1e-6 of
    (saturating at the type's bounds, as Java's conversion does). InvalidRequestError otherwise, and beyond 2.8
    for a value that is not finite or fails the key's check (negative)."""
    if not math.isfinite(value):
        raise InvalidRequestError(f"Invalid value {java_double(value)} for configuration {name}: "
                                  "Value must be a finite number")
    if key.type == "double":
        text, typed = java_double(value), value
    else:
        low, high = _BOUNDS[key.type]
        typed = max(low, min(high, int(value + _EPSILON)))
        if abs(float(typed) - value) > _EPSILON:
            raise InvalidRequestError(f"Configuration {name} must be a {key.type.upper()} value")
        text = str(typed)
    reason = key.check(typed) if key.check else None
    if reason:
        raise InvalidRequestError(f"Invalid value {text} for configuration {name}: {reason}")
    return text


def java_double(value: float) -> str:
    """Java's Double.toString: decimal from 10^-3 up to 10^7 ("0.001", "200.0"), otherwise computerized
    scientific notation ("1.0E7", "2.5E-4"); the shortest digits that read back (JDK 19+; older JDKs print more
    digits for some values above 2^53)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)          # Python's repr is decimal in this range, with ".0" when integral
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{len(digits) - 1 + exponent}"


def quota_number(name: str, value: float) -> int | float:
    """A quota value as its key's type holds it: an integer for LONG and INT keys, the double otherwise."""
    key = CLIENT_QUOTA_CONFIGS.get(name) or IP_QUOTA_CONFIGS.get(name)
    return int(value) if key is not None and key.type != "double" and value.is_integer() else value


def format_quota(name: str, value: float) -> str:
    """A quota value for people: integer keys as integers, DOUBLE keys as Java shows them ("200.0")."""
    number = quota_number(name, value)
    return str(number) if isinstance(number, int) else java_double(number)


def valid_ip_entity(name: str | None) -> bool:
    """Kafka's DynamicConfig.Ip.isValidIpEntity: the default entity, an IP address, or a host name that resolves
    (InetAddress.getByName)."""
    if name is None:
        return True
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(name, None)
        return True
    except (OSError, UnicodeError, ValueError):
        return False


def entity_order(entity: QuotaEntity) -> tuple:
    """A sort key: by types in ENTITY_TYPES order, the default entity before named ones, then by name."""
    return tuple((ENTITY_TYPES.index(t) if t in ENTITY_TYPES else len(ENTITY_TYPES), t, n is not None, n or "")
                 for t, n in entity)
