"""The JVM system properties a Kafka deployment passes to its broker and tools: `-Dkey=value` words of
`KAFKA_OPTS` (kafka-run-class.sh hands it to java), such as `-Djava.security.auth.login.config=/etc/kafka/jaas.conf`,
`-Dzookeeper.sasl.client=false`, `-Dzookeeper.client.secure=true` or `-Dzookeeper.ssl.keyStore.location=...`.

The variable is split as the launch script's shell splits it (quotes group, backslashes escape); words that are
not `-D` options (-Xmx1g, -XX:..., -javaagent:...) are JVM flags and left alone. As `java -Dkey` does, a property
without `=` is the empty string, and a later `-D` of a key wins.
"""
from __future__ import annotations

import os
import shlex


def system_properties(environ=None) -> dict[str, str]:
    """The -D system properties of environ's KAFKA_OPTS (os.environ by default); ValueError for an unbalanced
    quote, naming KAFKA_OPTS."""
    environ = os.environ if environ is None else environ
    try:
        words = shlex.split(environ.get("KAFKA_OPTS", ""))
    except ValueError as e:
        raise ValueError(f"KAFKA_OPTS cannot be split into JVM options: {e}") from None
    props = {}
    for word in words:
        if word.startswith("-D") and len(word) > 2:
            key, _, value = word[2:].partition("=")
            props[key] = value
    return props
