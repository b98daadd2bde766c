"""Kafka's Sanitizer: user and client-id entity names as znode names (/config/users/<name>,
/config/clients/<name>) and back."""
from __future__ import annotations

import urllib.parse


def sanitize(name: str) -> str:
    """An entity name as a znode name (Kafka's Sanitizer.sanitize, used for users and client ids): Java's
    URLEncoder (UTF-8; letters, digits and `.-_` kept) with `*` as %2A and space as %20."""
    return urllib.parse.quote(name, safe="-._").replace("~", "%7E")


def desanitize(name: str) -> str:
    return urllib.parse.unquote(name)
