"""Typed config entries, as Kafka's ConfigDef: one way to parse and check a config value, shared by the topic
configs (topic_config), the dynamic broker configs (broker_config) and the broker's static settings
(kbroker.config), so a value accepted where it is written parses the same where it is read.

Values parse the way Kafka's ConfigDef parses them: surrounding whitespace ignored, ints 32-bit, longs 64-bit,
booleans true/false in any case, lists comma-separated. A check (validator) gets the parsed value and returns
the reason it is refused, worded as Kafka's validators word it, or None. Hand-written because kbroker has no
JVM ConfigDef to reuse and no Python library speaks its exact rules and messages.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from .admin_errors import InvalidConfigValueError

MAX_INT = 2 ** 31 - 1
MAX_LONG = 2 ** 63 - 1
_RANGES = {"short": (-2 ** 15, 2 ** 15 - 1), "int": (-2 ** 31, MAX_INT), "long": (-2 ** 63, MAX_LONG)}
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DOUBLE = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


@dataclass(frozen=True)
class ConfigKey:
    """One config: its type (short, int, long, double, boolean, string, list, password, class: a Java class
    name, kept as a string), typed default (None: unset), check,
    and, for a topic config, the broker settings it falls back to, highest precedence first, each with the
    factor turning that setting's unit into the topic config's (log.roll.hours -> segment.ms: 3600000)."""
    type: str
    default: Any = None
    check: Callable[[Any], str | None] | None = None
    synonyms: tuple[tuple[str, int], ...] = ()


def at_least(low):
    def check(v):
        if v < low:
            return f"Value must be at least {low}"
    return check


def between(low, high):
    def check(v):
        if not low <= v <= high:
            return f"Value must be no less than {low} and no more than {high}"
    return check


def one_of(*allowed):
    def check(v):
        if v not in allowed:
            return f"String must be one of: {', '.join(allowed)}"
    return check


def all_of(*allowed):
    def check(items):
        for item in items:
            if item not in allowed:
                return f"'{item}' is not one of: {', '.join(allowed)}"
    return check


def rule(test: Callable[[Any], bool], what: str):
    """A check for kbroker's own settings: refused unless test(value), 'Value must be <what>'."""
    def check(v):
        if not test(v):
            return f"Value must be {what}"
    return check


def kafka_classes(*accepted: str, what: str = "a custom Java class"):
    """The check of a setting naming Java classes (a class or a list of them): kbroker runs none, so it is
    refused unless unset or naming only Kafka's own implementation(s), which kbroker does natively."""
    def check(v):
        given = [c for c in (v if isinstance(v, list) else [v]) if c]
        if any(c not in accepted for c in given):
            return f"Value must be unset{' or ' + ' or '.join(accepted) if accepted else ''}: kbroker cannot use {what}"
    return check


def unset(why: str):
    """The check of a setting whose feature kbroker lacks: refused when given a value."""
    def check(v):
        if v:
            return f"Value must be unset: {why}"
    return check


def parse_value(kind: str, raw: str):
    """The typed value of raw, or raise ValueError with the reason."""
    v = raw.strip()
    if kind in _RANGES:
        low, high = _RANGES[kind]
        if not _INTEGER.fullmatch(v) or not low <= int(v) <= high:
            raise ValueError(f"Not a number of type {kind.upper()}")
        return int(v)
    if kind == "double":
        if not _DOUBLE.fullmatch(v):
            raise ValueError("Not a number of type DOUBLE")
        return float(v)
    if kind == "boolean":
        if v.lower() not in ("true", "false"):
            raise ValueError("Expected value to be either true or false")
        return v.lower() == "true"
    if kind == "list":
        items = re.split(r"\s*,\s*", v) if v else []
        while items and items[-1] == "":  # Java's split drops trailing empty strings
            items.pop()
        return items
    return v


def parse_checked(key: ConfigKey, raw: str):
    """raw parsed as key.type and passed through key.check; ValueError with the reason otherwise."""
    value = parse_value(key.type, raw)
    reason = key.check(value) if key.check else None
    if reason:
        raise ValueError(reason)
    return value


def checked_value(name: str, key: ConfigKey, raw: str):
    """parse_checked, refusing with Kafka's ConfigException message naming the config (InvalidConfigValueError)."""
    try:
        return parse_checked(key, raw)
    except ValueError as e:
        raise InvalidConfigValueError(f"Invalid value {raw} for configuration {name}: {e}") from None


def format_value(value) -> str | None:
    """A typed value as Kafka's ConfigDef.convertToString shows it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)
