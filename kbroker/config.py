"""Broker configuration: Kafka's property names, from server.properties, KAFKA_* variables and overrides.

Precedence, lowest first: defaults, the properties file, the images' environment variables (Confluent's
cp-kafka KAFKA_LOG_DIRS -> log.dirs, `__` -> `_`, `___` -> `-`; Bitnami's KAFKA_CFG_LOG_DIRS -> log.dirs), then
`--override k=v`. Invalid values of known keys are refused with a message naming the key (ConfigError), before
anything is written; unknown keys are kept and named by one warning (Kafka 2.8 keeps them silently), or refused in
strict mode.

SETTINGS holds every Kafka 2.8 broker setting (the 218 documented and the 15 internal KRaft ones) with Kafka's
type, default and checks, and kbroker's own few (metrics.port, ...). A value asking for what kbroker cannot do
(a Java class of the user's, a JCA provider, KRaft, delegation tokens) is refused by its check, naming the key and
why; JVM-only tuning (thread pools, buffers, metrics sampling) is accepted with no effect (README: Kafka 2.8
settings).

The table is one design with the topic configs': typed common.config_def.ConfigKey entries parsed and checked
by the same code. The settings that may change live are common.broker_config's entries (kadmin validates them
without the broker), merged in here; the topic configs' broker synonyms (common.topic_config) name entries of
this table.
"""
from __future__ import annotations

import os
import ssl
from dataclasses import dataclass

from .common.broker_config import (DYNAMIC_BROKER_CONFIGS, LISTENER_PREFIX, LISTENER_SSL_CONFIGS, THREAD_COUNTS,
                                   dynamic_broker_key, is_password, listener_config_base, per_broker_only)
from .common.config_def import (MAX_INT, MAX_LONG, ConfigKey, at_least, between, kafka_classes, one_of,
                                parse_checked, rule, unset)
from .common.keystores import (KeyMaterial, KeystoreError, ensure_compatible, load_key_store, load_trust_store,
                               pem_certificates, pem_key_material)
from .common.jaas import JaasError, read_jaas_file
from .common.jvm_options import system_properties
from .common.password_encoder import CIPHERS, KEY_FACTORIES, PasswordEncoder, PasswordEncoderError
from .common.topic_config import valid_api_version
from .protocol.client.security import ClientSecurity, handshake_error, load_cert_chain
from .protocol.errors import KafkaError
from .replica.selector import RACK_AWARE_REPLICA_SELECTOR

# The ACL authorizer's class names Kafka 2.8 accepts (kbroker.security.authorizer implements it).
AUTHORIZER_CLASS_NAMES = ("kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer")


class ConfigError(ValueError):
    pass


_MB = 1024 * 1024
# name -> ConfigKey (type, default, check): the static settings, then the dynamic ones (kbroker.common.broker_config)
SETTINGS: dict[str, ConfigKey] = {
    # identity and ZooKeeper
    "broker.id": ConfigKey("int", -1, at_least(-1)),
    "broker.id.generation.enable": ConfigKey("boolean", True),
    "reserved.broker.max.id": ConfigKey("int", 1000, at_least(0)),
    "broker.rack": ConfigKey("string"),
    "zookeeper.connect": ConfigKey("string"),
    "zookeeper.session.timeout.ms": ConfigKey("int", 18000, at_least(1)),
    "zookeeper.connection.timeout.ms": ConfigKey("int"),
    "zookeeper.max.in.flight.requests": ConfigKey("int", 10, at_least(1)),
    "zookeeper.set.acl": ConfigKey("boolean", False),
    # TLS to ZooKeeper (KIP-515); each falls back to its -D system property in KAFKA_OPTS, then to the default
    "zookeeper.ssl.client.enable": ConfigKey("boolean", False),
    "zookeeper.clientCnxnSocket": ConfigKey("string"),
    "zookeeper.ssl.keystore.location": ConfigKey("string"),
    "zookeeper.ssl.keystore.password": ConfigKey("password"),
    "zookeeper.ssl.keystore.type": ConfigKey("string"),
    "zookeeper.ssl.truststore.location": ConfigKey("string"),
    "zookeeper.ssl.truststore.password": ConfigKey("password"),
    "zookeeper.ssl.truststore.type": ConfigKey("string"),
    "zookeeper.ssl.protocol": ConfigKey("string", "TLSv1.2"),
    "zookeeper.ssl.enabled.protocols": ConfigKey("list"),
    "zookeeper.ssl.cipher.suites": ConfigKey("list"),
    "zookeeper.ssl.endpoint.identification.algorithm": ConfigKey("string", "HTTPS"),
    "zookeeper.ssl.crl.enable": ConfigKey("boolean", False),
    "zookeeper.ssl.ocsp.enable": ConfigKey("boolean", False),
    # network
    "listeners": ConfigKey("list"),                 # unset: PLAINTEXT://<host.name>:<port>, as Kafka 2.8
    "advertised.listeners": ConfigKey("list"),
    "listener.security.protocol.map": ConfigKey(
        "list", ["PLAINTEXT:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT", "SASL_SSL:SASL_SSL"]),
    "inter.broker.listener.name": ConfigKey("string"),
    "control.plane.listener.name": ConfigKey("string"),          # KIP-291
    "security.inter.broker.protocol": ConfigKey("string", "PLAINTEXT", one_of("PLAINTEXT", "SSL",
                                                                                "SASL_PLAINTEXT", "SASL_SSL")),
    "socket.request.max.bytes": ConfigKey("int", 100 * _MB, at_least(1)),
    "socket.send.buffer.bytes": ConfigKey("int", 100 * 1024),
    "socket.receive.buffer.bytes": ConfigKey("int", 100 * 1024),
    "connections.max.idle.ms": ConfigKey("long", 600000),   # a negative value: idle connections stay open
    "queued.max.requests": ConfigKey("int", 500, at_least(1)),
    # TLS (JKS, PKCS12, JCEKS or PEM stores); each may be given per listener as listener.name.<listener>.<key>
    "ssl.keystore.type": ConfigKey("string", "JKS"),
    "ssl.keystore.location": ConfigKey("string"),
    "ssl.keystore.password": ConfigKey("password"),
    "ssl.keystore.key": ConfigKey("password"),
    "ssl.keystore.certificate.chain": ConfigKey("password"),
    "ssl.key.password": ConfigKey("password"),
    "ssl.truststore.type": ConfigKey("string", "JKS"),
    "ssl.truststore.location": ConfigKey("string"),
    "ssl.truststore.password": ConfigKey("password"),
    "ssl.truststore.certificates": ConfigKey("password"),
    "ssl.client.auth": ConfigKey("string", "none", one_of("required", "requested", "none")),
    "ssl.principal.mapping.rules": ConfigKey("string", "DEFAULT"),
    "ssl.protocol": ConfigKey("string", "TLSv1.3"),
    "ssl.enabled.protocols": ConfigKey("list", ["TLSv1.2", "TLSv1.3"]),
    "ssl.cipher.suites": ConfigKey("list", []),
    "ssl.endpoint.identification.algorithm": ConfigKey("string", "https"),
    # SASL; sasl.jaas.config is given per listener and mechanism: listener.name.<l>.<mechanism>.sasl.jaas.config
    "sasl.enabled.mechanisms": ConfigKey("list", ["GSSAPI"]),
    "sasl.mechanism.inter.broker.protocol": ConfigKey("string", "GSSAPI"),
    "sasl.jaas.config": ConfigKey("password"),
    "connection.failed.authentication.delay.ms": ConfigKey("int", 100, at_least(0)),
    "connections.max.reauth.ms": ConfigKey("long", 0, at_least(0)),
    # authorization (kafka.security.authorizer.AclAuthorizer's settings)
    "authorizer.class.name": ConfigKey("string", "", rule(lambda v: v in ("", *AUTHORIZER_CLASS_NAMES),
                                                          "the class name of Kafka's ACL authorizer, "
                                                          "kafka.security.authorizer.AclAuthorizer (the only "
                                                          "authorizer kbroker implements)")),
    "super.users": ConfigKey("string"),
    "allow.everyone.if.no.acl.found": ConfigKey("boolean", False),
    # Prometheus endpoint (kbroker's own settings): -1 turns it off, 0 binds any free port
    "metrics.port": ConfigKey("int", -1, rule(lambda v: -1 <= v <= 65535,
                                                   "a port, 0 (any free port) or -1 (off)")),
    "metrics.host": ConfigKey("string", "0.0.0.0"),
    # versions
    "inter.broker.protocol.version": ConfigKey("string", "2.8-IV1", valid_api_version),
    "log.message.format.version": ConfigKey("string", "2.8-IV1", valid_api_version),
    # logs
    "log.dirs": ConfigKey("list"),
    "log.dir": ConfigKey("string", "/tmp/kafka-logs"),
    "num.partitions": ConfigKey("int", 1, at_least(1)),
    "default.replication.factor": ConfigKey("int", 1, at_least(1)),
    "log.roll.hours": ConfigKey("int", 168, at_least(1)),
    "log.roll.jitter.hours": ConfigKey("int", 0, at_least(0)),
    "log.retention.minutes": ConfigKey("int"),
    "log.retention.hours": ConfigKey("int", 168),
    "log.retention.check.interval.ms": ConfigKey("long", 300000, at_least(1)),
    "log.flush.scheduler.interval.ms": ConfigKey("long", MAX_LONG),
    "log.flush.offset.checkpoint.interval.ms": ConfigKey("int", 60000, at_least(0)),
    "log.flush.start.offset.checkpoint.interval.ms": ConfigKey("int", 60000, at_least(0)),
    "log.cleaner.enable": ConfigKey("boolean", True),
    "auto.create.topics.enable": ConfigKey("boolean", True),
    "delete.topic.enable": ConfigKey("boolean", True),
    # replication and controller
    "auto.leader.rebalance.enable": ConfigKey("boolean", True),
    "leader.imbalance.check.interval.seconds": ConfigKey("long", 300, at_least(1)),
    "leader.imbalance.per.broker.percentage": ConfigKey("int", 10),
    "controlled.shutdown.enable": ConfigKey("boolean", True),
    "controlled.shutdown.max.retries": ConfigKey("int", 3),
    "controlled.shutdown.retry.backoff.ms": ConfigKey("long", 5000),
    "controller.socket.timeout.ms": ConfigKey("int", 30000),
    "request.timeout.ms": ConfigKey("int", 30000, at_least(0)),
    "replica.lag.time.max.ms": ConfigKey("long", 30000),
    "replica.fetch.max.bytes": ConfigKey("int", _MB, at_least(0)),
    "replica.fetch.response.max.bytes": ConfigKey("int", 10 * _MB, at_least(0)),
    "replica.fetch.wait.max.ms": ConfigKey("int", 500),
    "replica.fetch.min.bytes": ConfigKey("int", 1),
    "replica.fetch.backoff.ms": ConfigKey("int", 1000, at_least(0)),
    "replica.socket.timeout.ms": ConfigKey("int", 30000),
    "replica.high.watermark.checkpoint.interval.ms": ConfigKey("long", 5000),
    "replica.selector.class": ConfigKey("string", None, rule(   # KIP-392: None, the leader only
        lambda v: v is None or v == RACK_AWARE_REPLICA_SELECTOR,
        f"{RACK_AWARE_REPLICA_SELECTOR} or unset (kbroker cannot load another Java class)")),
    "fetch.max.bytes": ConfigKey("int", 55 * _MB, at_least(1024)),
    "max.incremental.fetch.session.cache.slots": ConfigKey("int", 1000, at_least(0)),
    # how the replication throttles sample their rates (kbroker.quota.replication_quotas)
    "replication.quota.window.num": ConfigKey("int", 11, at_least(1)),
    "replication.quota.window.size.seconds": ConfigKey("int", 1, at_least(1)),
    "alter.log.dirs.replication.quota.window.num": ConfigKey("int", 11, at_least(1)),
    "alter.log.dirs.replication.quota.window.size.seconds": ConfigKey("int", 1, at_least(1)),
    "min.incremental.fetch.session.eviction.ms": ConfigKey("int", 120000, at_least(0)),
    # kbroker's own: memory for down-converted entries shared by old consumers (records.convert); 0 turns it off
    "down.conversion.cache.bytes": ConfigKey("long", 64 * _MB, at_least(0)),
    # groups, offsets, transactions
    "group.initial.rebalance.delay.ms": ConfigKey("int", 3000),
    "group.min.session.timeout.ms": ConfigKey("int", 6000),
    "group.max.session.timeout.ms": ConfigKey("int", 1800000),
    "group.max.size": ConfigKey("int", MAX_INT, at_least(1)),
    "offsets.topic.replication.factor": ConfigKey("short", 3, at_least(1)),
    "offsets.topic.num.partitions": ConfigKey("int", 50, at_least(1)),
    "offsets.topic.segment.bytes": ConfigKey("int", 100 * _MB, at_least(1)),
    "offsets.retention.minutes": ConfigKey("int", 10080, at_least(1)),
    "offsets.retention.check.interval.ms": ConfigKey("long", 600000, at_least(1)),
    "offsets.commit.timeout.ms": ConfigKey("int", 5000, at_least(1)),
    "offsets.commit.required.acks": ConfigKey("short", -1, rule(lambda v: v in (-1, 0, 1), "one of -1, 0, 1")),
    "offsets.topic.compression.codec": ConfigKey("int", 0, rule(lambda v: v in (0, 1, 2, 3, 4),
                                                             "a codec id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd")),
    "offsets.load.buffer.size": ConfigKey("int", 5 * _MB, at_least(1)),
    "offset.metadata.max.bytes": ConfigKey("int", 4096),
    "transaction.state.log.replication.factor": ConfigKey("short", 3, at_least(1)),
    "transaction.state.log.min.isr": ConfigKey("int", 2, at_least(1)),
    "transaction.state.log.num.partitions": ConfigKey("int", 50, at_least(1)),
    "transaction.state.log.segment.bytes": ConfigKey("int", 100 * _MB, at_least(1)),
    "transaction.state.log.load.buffer.size": ConfigKey("int", 5 * _MB, at_least(1)),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": ConfigKey("int", 10000, at_least(1)),
    "transaction.remove.expired.transaction.cleanup.interval.ms": ConfigKey("int", 3600000, at_least(1)),
    "transactional.id.expiration.ms": ConfigKey("int", 604800000),
    "transaction.max.timeout.ms": ConfigKey("int", 900000),
    "producer.id.expiration.ms": ConfigKey("int", 86400000),
    # client quotas (kbroker.quota.client_quotas) and the connection creation rates (quota.connection_quotas):
    # sampled windows, and the deprecated static default of every client id without a quota of its own (MAX_LONG:
    # none)
    "quota.window.num": ConfigKey("int", 11, at_least(1)),
    "quota.window.size.seconds": ConfigKey("int", 1, at_least(1)),
    "controller.quota.window.num": ConfigKey("int", 11, at_least(1)),
    "controller.quota.window.size.seconds": ConfigKey("int", 1, at_least(1)),
    "quota.producer.default": ConfigKey("long", MAX_LONG, at_least(1)),
    "quota.consumer.default": ConfigKey("long", MAX_LONG, at_least(1)),
    # The rest of Kafka 2.8's settings: accepted with Kafka's types, defaults and checks. Those asking for something
    # kbroker cannot do (a Java class of the user's, a JCA provider, a feature kbroker lacks) are refused unless
    # unset or Kafka's own; JVM-only tuning is accepted with no effect (README: Kafka 2.8 settings).
    "host.name": ConfigKey("string", ""),
    "port": ConfigKey("int", 9092),
    "advertised.host.name": ConfigKey("string"),
    "advertised.port": ConfigKey("int"),
    "principal.builder.class": ConfigKey("class", None, kafka_classes(
        "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder")),
    "create.topic.policy.class.name": ConfigKey("class", None, kafka_classes()),
    "alter.config.policy.class.name": ConfigKey("class", None, kafka_classes()),
    "client.quota.callback.class": ConfigKey("class", None, kafka_classes()),
    "kafka.metrics.reporters": ConfigKey("list", [], kafka_classes(what="a Yammer metrics reporter (metrics are "
                                                                     "served to Prometheus on metrics.port)")),
    "kafka.metrics.polling.interval.secs": ConfigKey("int", 10, at_least(1)),
    "metrics.num.samples": ConfigKey("int", 2, at_least(1)),
    "metrics.recording.level": ConfigKey("string", "INFO", one_of("INFO", "DEBUG", "TRACE")),
    "metrics.sample.window.ms": ConfigKey("long", 30000, at_least(1)),
    "sasl.client.callback.handler.class": ConfigKey("class", None, kafka_classes()),
    "sasl.server.callback.handler.class": ConfigKey("class", None, kafka_classes()),
    "sasl.login.callback.handler.class": ConfigKey("class", None, kafka_classes()),
    "sasl.login.class": ConfigKey("class", None, kafka_classes()),
    "sasl.server.max.receive.size": ConfigKey("int", 512 * 1024),
    "sasl.kerberos.kinit.cmd": ConfigKey("string", "/usr/bin/kinit"),
    "sasl.kerberos.min.time.before.relogin": ConfigKey("long", 60000),
    "sasl.kerberos.principal.to.local.rules": ConfigKey("list", ["DEFAULT"]),
    "sasl.kerberos.service.name": ConfigKey("string"),
    "sasl.kerberos.ticket.renew.jitter": ConfigKey("double", 0.05),
    "sasl.kerberos.ticket.renew.window.factor": ConfigKey("double", 0.8),
    "sasl.login.refresh.buffer.seconds": ConfigKey("short", 300, between(0, 3600)),
    "sasl.login.refresh.min.period.seconds": ConfigKey("short", 60, between(0, 900)),
    "sasl.login.refresh.window.factor": ConfigKey("double", 0.8, between(0.5, 1.0)),
    "sasl.login.refresh.window.jitter": ConfigKey("double", 0.05, between(0.0, 0.25)),
    "security.providers": ConfigKey("string", None, unset("kbroker's TLS is OpenSSL (Python's ssl); it loads no "
                                                          "JCA security providers")),
    "ssl.provider": ConfigKey("string", None, kafka_classes("SunJSSE", what="a JCA security provider (its TLS is "
                                                                            "OpenSSL)")),
    "ssl.engine.factory.class": ConfigKey("class", None, kafka_classes(
        "org.apache.kafka.common.security.ssl.DefaultSslEngineFactory")),
    "ssl.keymanager.algorithm": ConfigKey("string", "SunX509", kafka_classes(
        "SunX509", "NewSunX509", "PKIX", what="another JCA key manager (its TLS is OpenSSL)")),
    "ssl.trustmanager.algorithm": ConfigKey("string", "PKIX", kafka_classes(
        "PKIX", "SunPKIX", "X509", "X.509", what="another JCA trust manager (its TLS is OpenSSL)")),
    "ssl.secure.random.implementation": ConfigKey("string", None, kafka_classes(
        "SHA1PRNG", "NativePRNG", "NativePRNGBlocking", "NativePRNGNonBlocking", "DRBG", "Windows-PRNG",
        what="another SecureRandom algorithm than the JDK's (OpenSSL seeds itself from the OS)")),
    "socket.connection.setup.timeout.ms": ConfigKey("long", 10000),
    "socket.connection.setup.timeout.max.ms": ConfigKey("long", 30000),
    "replica.socket.receive.buffer.bytes": ConfigKey("int", 64 * 1024),
    "queued.max.request.bytes": ConfigKey("long", -1),
    "num.replica.alter.log.dirs.threads": ConfigKey("int"),
    "fetch.purgatory.purge.interval.requests": ConfigKey("int", 1000),
    "producer.purgatory.purge.interval.requests": ConfigKey("int", 1000),
    "delete.records.purgatory.purge.interval.requests": ConfigKey("int", 1),
    "zookeeper.sync.time.ms": ConfigKey("int", 2000),
    "delegation.token.master.key": ConfigKey("password", None, unset("kbroker has no delegation tokens")),
    "delegation.token.secret.key": ConfigKey("password", None, unset("kbroker has no delegation tokens")),
    "delegation.token.expiry.check.interval.ms": ConfigKey("long", 3600000, at_least(1)),
    "delegation.token.expiry.time.ms": ConfigKey("long", 86400000, at_least(1)),
    "delegation.token.max.lifetime.ms": ConfigKey("long", 604800000, at_least(1)),
    # encrypt the passwords of dynamic per-broker configs in ZooKeeper (a listener's stores; common.password_encoder)
    "password.encoder.secret": ConfigKey("password"),
    "password.encoder.old.secret": ConfigKey("password"),
    "password.encoder.cipher.algorithm": ConfigKey("string", "AES/CBC/PKCS5Padding", rule(
        lambda v: v in CIPHERS, f"one of {', '.join(CIPHERS)} (the ciphers kbroker encodes passwords with)")),
    "password.encoder.keyfactory.algorithm": ConfigKey("string", None, rule(
        lambda v: v is None or v in KEY_FACTORIES, f"one of {', '.join(KEY_FACTORIES)}")),
    "password.encoder.iterations": ConfigKey("int", 4096, at_least(1024)),
    "password.encoder.key.length": ConfigKey("int", 128, at_least(8)),
}
# Kafka 2.8's internal KRaft settings (KIP-500 early access): ZooKeeper mode ignores them; process.roles asks for
# KRaft mode, which kbroker does not run.
KRAFT_SETTINGS: dict[str, ConfigKey] = {
    "process.roles": ConfigKey("list", [], unset("kbroker runs in ZooKeeper mode only (KRaft is not supported)")),
    "node.id": ConfigKey("int", -1),
    "controller.listener.names": ConfigKey("string"),
    "controller.quorum.voters": ConfigKey("list", []),
    "controller.quorum.election.timeout.ms": ConfigKey("int", 1000),
    "controller.quorum.fetch.timeout.ms": ConfigKey("int", 2000),
    "controller.quorum.election.backoff.max.ms": ConfigKey("int", 1000),
    "controller.quorum.append.linger.ms": ConfigKey("int", 25),
    "controller.quorum.request.timeout.ms": ConfigKey("int", 2000),
    "controller.quorum.retry.backoff.ms": ConfigKey("int", 20),
    "metadata.log.dir": ConfigKey("string"),
    "broker.heartbeat.interval.ms": ConfigKey("int", 2000),
    "broker.session.timeout.ms": ConfigKey("int", 9000),
    "initial.broker.registration.timeout.ms": ConfigKey("int", 60000),
    "sasl.mechanism.controller.protocol": ConfigKey("string", "GSSAPI"),
}
SETTINGS.update(KRAFT_SETTINGS)
SETTINGS.update(DYNAMIC_BROKER_CONFIGS)

# KAFKA_* variables of the JVM launch scripts and of Confluent's cp-kafka image, not broker settings (the image's
# exclusions; KAFKA_JMX_PORT, KAFKA_JMX_HOSTNAME and KAFKA_CUB_ZK_TIMEOUT, which cp-kafka leaks as jmx.port,
# jmx.hostname and cub.zk.timeout, too).
NON_CONFIG_ENV = {"KAFKA_HEAP_OPTS", "KAFKA_OPTS", "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_LOG4J_OPTS",
                  "KAFKA_JMX_OPTS", "KAFKA_JMX_PORT", "KAFKA_JMX_HOSTNAME", "KAFKA_GC_LOG_OPTS", "KAFKA_DEBUG",
                  "KAFKA_VERSION", "KAFKA_HOME", "KAFKA_LOG4J_ROOT_LOGLEVEL", "KAFKA_LOG4J_LOGGERS",
                  "KAFKA_TOOLS_LOG4J_LOGLEVEL", "KAFKA_CUB_ZK_TIMEOUT"}
# cp-kafka's SSL convention (its configure script): with an SSL:// or SASL_SSL:// advertised listener, files in
# its secrets directory name the stores and hold their passwords. These variables are that, not settings.
CP_SECRETS_ENV = {"KAFKA_SSL_KEYSTORE_FILENAME", "KAFKA_SSL_KEYSTORE_CREDENTIALS", "KAFKA_SSL_KEY_CREDENTIALS",
                  "KAFKA_SSL_TRUSTSTORE_FILENAME", "KAFKA_SSL_TRUSTSTORE_CREDENTIALS"}
CP_SECRETS_DIR = "/etc/kafka/secrets"
SECRETS_DIR_ENV = "KBROKER_SECRETS_DIR"   # where that directory is (the image's /etc/kafka/secrets by default)
# Variables the images map to a mixed-case key rather than by their rule.
_SPECIAL_ENV = {"KAFKA_ZOOKEEPER_CLIENT_CNXN_SOCKET": "zookeeper.clientCnxnSocket",      # cp-kafka
                "KAFKA_CFG_ZOOKEEPER_CLIENTCNXNSOCKET": "zookeeper.clientCnxnSocket"}    # Bitnami
BITNAMI_PREFIX = "KAFKA_CFG_"
STRICT_ENV = "KBROKER_STRICT_CONFIG"   # true: unknown keys are refused, as `kbroker start --strict-config`
# Set by the kbroker image: with no properties file of the user's, the settings each image starts from.
IMAGE_ENV = "KBROKER_IMAGE"
# Kafka 2.8's config/server.properties, which Bitnami's image edits in place from its KAFKA_CFG_* variables
SHIPPED_SERVER_PROPERTIES = {
    "broker.id": "0", "num.network.threads": "3", "num.io.threads": "8", "socket.send.buffer.bytes": "102400",
    "socket.receive.buffer.bytes": "102400", "socket.request.max.bytes": "104857600", "num.partitions": "1",
    "num.recovery.threads.per.data.dir": "1", "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
    "log.retention.hours": "168", "log.segment.bytes": "1073741824", "log.retention.check.interval.ms": "300000",
    "zookeeper.connect": "localhost:2181", "zookeeper.connection.timeout.ms": "18000",
    "group.initial.rebalance.delay.ms": "0"}


# The login module a static JAAS section names for each SASL mechanism kbroker serves.
_LOGIN_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                  "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                  "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}


def _jaas_quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def env_to_key(name: str) -> str:
    """KAFKA_LOG_DIRS -> log.dirs; `___` -> `-`, `__` -> `_`, `_` -> `.` (Confluent's convention); Bitnami's
    KAFKA_CFG_LOG_DIRS -> log.dirs (lower case, every `_` -> `.`)."""
    if name in _SPECIAL_ENV:
        return _SPECIAL_ENV[name]
    if name.startswith(BITNAMI_PREFIX):
        return name[len(BITNAMI_PREFIX):].lower().replace("_", ".")
    s = name[len("KAFKA_"):].lower()
    return s.replace("___", "\0").replace("__", "\1").replace("_", ".").replace("\0", "-").replace("\1", "_")


def bitnami_style(environ) -> bool:
    """Whether an environment follows Bitnami's convention (any KAFKA_CFG_* variable) rather than Confluent's."""
    return any(name.startswith(BITNAMI_PREFIX) for name in environ)


def image_defaults(environ) -> dict[str, str]:
    """What the image whose convention environ follows configures before its variables: cp-kafka only its data
    directory; Bitnami Kafka's shipped server.properties with its own data directory."""
    if bitnami_style(environ):
        return {**SHIPPED_SERVER_PROPERTIES, "log.dirs": "/bitnami/kafka/data"}
    return {"log.dirs": "/var/lib/kafka/data"}


def env_properties(environ) -> dict[str, str]:
    """The broker settings an image's environment gives. Bitnami's convention when any KAFKA_CFG_* variable is set
    (only those are settings, and its KAFKA_BROKER_ID: its other KAFKA_* variables configure the image), else
    Confluent's: every KAFKA_* variable but the launch scripts' and image's own (NON_CONFIG_ENV, KAFKA_LOG4J_*)."""
    bitnami = bitnami_style(environ)
    props = {env_to_key(name): value for name, value in environ.items()
             if (name.startswith(BITNAMI_PREFIX) if bitnami else
                 name.startswith("KAFKA_") and name not in NON_CONFIG_ENV and name not in CP_SECRETS_ENV
                 and not name.startswith("KAFKA_LOG4J_"))}
    if bitnami and "KAFKA_BROKER_ID" in environ:    # Bitnami's own variable for it, under KAFKA_CFG_BROKER_ID
        props.setdefault("broker.id", environ["KAFKA_BROKER_ID"])
    if not bitnami:
        props.update(cp_kafka_secrets(environ))
    return props


def cp_kafka_secrets(environ) -> dict[str, str]:
    """The store settings of cp-kafka's SSL convention, as its configure script sets them when an advertised
    listener is SSL:// or SASL_SSL://: KAFKA_SSL_KEYSTORE_FILENAME names the key store in the secrets directory
    (/etc/kafka/secrets; $KBROKER_SECRETS_DIR), the files KAFKA_SSL_KEYSTORE_CREDENTIALS and
    KAFKA_SSL_KEY_CREDENTIALS there hold its passwords; with ssl.client.auth required or requested,
    KAFKA_SSL_TRUSTSTORE_FILENAME and KAFKA_SSL_TRUSTSTORE_CREDENTIALS the trust store's. A file the variables name
    that does not exist is refused (ConfigError naming the variable), as the image refuses it."""
    if "SSL://" not in environ.get("KAFKA_ADVERTISED_LISTENERS", "") or not environ.get(
            "KAFKA_SSL_KEYSTORE_FILENAME"):
        return {}
    directory = environ.get(SECRETS_DIR_ENV) or CP_SECRETS_DIR

    def secret(variable: str, read: bool) -> str:
        name = environ.get(variable)
        if not name:
            raise ConfigError(f"{variable} must be set (Confluent's image requires it with an SSL listener)")
        path = os.path.join(directory, name)
        if not os.path.exists(path):
            raise ConfigError(f"{variable}: {path} does not exist")
        if not read:
            return path
        try:
            with open(path, encoding="utf-8") as f:
                return f.read().rstrip("\n")        # as the image's $(cat file)
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"{variable}: {path} cannot be read: {getattr(e, 'strerror', None) or e}") from None
    props = {"ssl.keystore.location": secret("KAFKA_SSL_KEYSTORE_FILENAME", False),
             "ssl.key.password": secret("KAFKA_SSL_KEY_CREDENTIALS", True),
             "ssl.keystore.password": secret("KAFKA_SSL_KEYSTORE_CREDENTIALS", True)}
    if any(mode in environ.get("KAFKA_SSL_CLIENT_AUTH", "") for mode in ("required", "requested")):
        props["ssl.truststore.location"] = secret("KAFKA_SSL_TRUSTSTORE_FILENAME", False)
        props["ssl.truststore.password"] = secret("KAFKA_SSL_TRUSTSTORE_CREDENTIALS", True)
    return props


def env_listeners(environ) -> str | None:
    """The listeners an image's environment sets: its listeners variable, else (cp-kafka) the advertised listeners
    bound on every interface; None when it sets neither."""
    props = env_properties(environ)
    if "listeners" in props:
        return props["listeners"]
    if not bitnami_style(environ) and "KAFKA_ADVERTISED_LISTENERS" in environ:
        return ",".join(_any_host(entry) for entry in environ["KAFKA_ADVERTISED_LISTENERS"].split(","))
    return None


def _any_host(listener: str) -> str:
    """NAME://host:port -> NAME://0.0.0.0:port (cp-kafka's default listeners from its advertised ones)."""
    name, sep, rest = listener.strip().partition("://")
    return f"{name}{sep}0.0.0.0:{rest.rpartition(':')[2]}" if sep else listener.strip()


def jmx_port(environ) -> int:
    """The JMX port the launch script (JMX_PORT) or cp-kafka (KAFKA_JMX_PORT) is given, recorded in the broker's
    znode as Kafka records it (-1: none); kbroker serves no JMX (its metrics are on metrics.port)."""
    for name in ("KAFKA_JMX_PORT", "JMX_PORT"):
        raw = environ.get(name, "").strip()
        if raw:
            if not raw.isdigit() or int(raw) > 65535:
                raise ConfigError(f"Invalid value {raw!r} for environment variable {name}: not a port")
            return int(raw)
    return -1


def read_properties(path: str) -> dict[str, str]:
    """Java .properties subset: key=value or key: value, # and ! comments, trailing-backslash continuations."""
    out: dict[str, str] = {}

    def take(line: str) -> None:
        line = line.strip()
        if not line:
            return
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            raise ConfigError(f"{path}: cannot parse line: {line!r}")
        out[line[:cut].strip()] = line[cut + 1:].strip()

    with open(path, encoding="utf-8") as f:
        pending = ""
        for raw in f:
            line = raw.rstrip("\n").rstrip("\r")
            if not pending and line.lstrip().startswith(("#", "!")):
                continue
            if line.endswith("\\"):
                pending += line[:-1].lstrip()
                continue
            take(pending + line.lstrip())
            pending = ""
        take(pending)  # a continuation on the last line still counts, as in Java's Properties
    return out


def setting_of(key: str) -> str | None:
    """The setting a name sets: itself, or the one a listener's override names (listener.name.<l>.<setting> or
    listener.name.<l>.<mechanism>.<setting>); None for a name kbroker does not know."""
    if key in SETTINGS:
        return key
    base = listener_config_base(key)
    if base is not None and base not in SETTINGS:
        base = base.partition(".")[2]
    return base if base in SETTINGS else None


def _convert(key: str, raw: str):
    """The typed value of one setting, or of a listener's override of it, by common.config_def's parsing and
    checks; ConfigError naming it otherwise."""
    try:
        return parse_checked(SETTINGS[setting_of(key)], raw)
    except ValueError as e:
        raise ConfigError(f"Invalid value {raw.strip()!r} for configuration {key}: {e}") from None


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True)
class ListenerStores:
    """A TLS listener's stores, read at load or on a dynamic change: its key and certificate chain, the
    certificates it trusts (None: the system's), and the files read with their modification times."""
    keys: KeyMaterial
    trusted_pem: str | None
    files: tuple[tuple[str, int], ...] = ()

    def modified(self) -> bool:
        """Whether a file read was modified (or removed) since."""
        for path, mtime in self.files:
            try:
                if os.stat(path).st_mtime_ns != mtime:
                    return True
            except OSError:
                return True
        return False


def _tls_contexts(stores: ListenerStores, client_auth: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server and a client TLS context from a listener's stores, both presenting its keystore and trusting its
    truststore (the system's CAs without one), the client checking no host name: what Kafka's start-up check of
    the inter-broker listener shakes hands between. ssl.SSLError when OpenSSL refuses the material."""
    server, client = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.check_hostname = False
    for ctx, purpose in ((server, ssl.Purpose.CLIENT_AUTH), (client, ssl.Purpose.SERVER_AUTH)):
        load_cert_chain(ctx, stores.keys.chain_pem, stores.keys.key_pem)
        if stores.trusted_pem:
            ctx.load_verify_locations(cadata=stores.trusted_pem)
        else:
            ctx.load_default_certs(purpose)
    server.verify_mode = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL}.get(client_auth,
                                                                                            ssl.CERT_NONE)
    return server, client


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int
    security_protocol: str


def parse_listeners(key: str, entries: list[str], protocol_map: dict[str, str]) -> list[Listener]:
    out = []
    for entry in entries:
        if "://" not in entry:
            raise ConfigError(f"Invalid value {entry!r} for configuration {key}: expected NAME://host:port")
        name, rest = entry.split("://", 1)
        host, _, port = rest.rpartition(":")
        if not port.isdigit() or int(port) > 65535:
            raise ConfigError(f"Invalid value {entry!r} for configuration {key}: bad port")
        name = name.upper()
        if name not in protocol_map:
            raise ConfigError(f"Invalid value {entry!r} for configuration {key}: listener {name} is not in "
                              f"listener.security.protocol.map")
        if protocol_map[name] not in SECURITY_PROTOCOLS:
            raise ConfigError(f"Invalid value {entry!r} for configuration {key}: security protocol "
                              f"{protocol_map[name]} is not one of {', '.join(SECURITY_PROTOCOLS)}")
        if any(l.name == name for l in out):
            raise ConfigError(f"Invalid value for configuration {key}: listener {name} appears twice")
        out.append(Listener(name, host.strip("[]"), int(port), protocol_map[name]))
    return out


class LiveClientSecurity:
    """The ClientSecurity of the inter-broker (or control-plane) client, replaced when its listener's stores are
    read again (a rotated key store): its holders (replica fetchers, the controller's channels, the transaction
    marker sender) read it at each connection, so their next connections present the new stores and those open
    keep theirs."""

    def __init__(self, listener: str, current: ClientSecurity):
        self.listener, self.current = listener, current

    def __getattr__(self, name: str):
        return getattr(self.current, name)


class BrokerConfig:
    """Validated broker settings; read with cfg["log.segment.bytes"]."""

    def __init__(self, props: dict[str, str], strict: bool = False, jmx_port: int = -1,
                 jaas_file: str | None = None):
        """jaas_file: the JAAS file of -Djava.security.auth.login.config in KAFKA_OPTS (its KafkaServer sections
        log the listeners in when no sasl.jaas.config does)."""
        self.jaas_file = jaas_file
        # listener.name.<listener>.[<mechanism>.]<key>: per-listener overrides, kept as given (listener_value),
        # those of a broker setting checked as that setting
        self.listener_overrides = {k: v for k, v in props.items() if k.startswith(LISTENER_PREFIX)}
        for key, raw in self.listener_overrides.items():
            if setting_of(key):
                _convert(key, raw)
        self.static_listener_overrides = dict(self.listener_overrides)
        props = {k: v for k, v in props.items() if k not in self.listener_overrides}
        # keys Kafka does not know: kept (plugins read theirs), named by one warning at start; refused when strict
        self.unknown = sorted([k for k in props if k not in SETTINGS] +
                              [k for k in self.listener_overrides if not setting_of(k)])
        if self.unknown and strict:
            raise ConfigError(f"Unknown configuration {self.unknown[0]!r}" +
                              (f" (and {len(self.unknown) - 1} more: {', '.join(self.unknown[1:])})"
                               if len(self.unknown) > 1 else ""))
        self.originals = dict(props)
        self.values = {k: s.default if k not in props else _convert(k, props[k]) for k, s in SETTINGS.items()}
        self.jmx_port = jmx_port
        if self.values["listeners"] is None:    # Kafka 2.8's deprecated host.name and port
            self.values["listeners"] = [f"PLAINTEXT://{self.values['host.name']}:{self.values['port']}"]
        if self.values["advertised.listeners"] is None and \
                {"advertised.host.name", "advertised.port"} & props.keys():
            host = self.values["advertised.host.name"] or self.values["host.name"]
            port = self.values["advertised.port"] or self.values["port"]
            self.values["advertised.listeners"] = [f"PLAINTEXT://{host}:{port}"]
        if not self.values["zookeeper.connect"]:
            raise ConfigError("Missing required configuration zookeeper.connect")
        protocol_map = {}
        for pair in self.values["listener.security.protocol.map"]:
            name, _, proto = pair.partition(":")
            protocol_map[name.strip().upper()] = proto.strip().upper()
        self.listeners = parse_listeners("listeners", self.values["listeners"], protocol_map)
        if not self.listeners:
            raise ConfigError("Invalid value for configuration listeners: no listener")
        advertised = self.values["advertised.listeners"]
        self.advertised_listeners = (parse_listeners("advertised.listeners", advertised, protocol_map)
                                     if advertised else list(self.listeners))
        names = {l.name for l in self.listeners}
        for l in self.advertised_listeners:
            if l.name not in names:
                raise ConfigError(f"Invalid value for configuration advertised.listeners: {l.name} is not in "
                                  f"listeners")
        if self.values["inter.broker.listener.name"] and "security.inter.broker.protocol" in props:
            raise ConfigError("Only one of inter.broker.listener.name and security.inter.broker.protocol should be "
                              "set.")
        self.inter_broker_listener = (self.values["inter.broker.listener.name"] or
                                      self.values["security.inter.broker.protocol"]).upper()
        if self.inter_broker_listener not in {l.name for l in self.advertised_listeners}:
            raise ConfigError(f"Invalid value {self.inter_broker_listener!r} for configuration "
                              f"inter.broker.listener.name: not an advertised listener")
        self.control_plane_listener = self._control_plane_listener(protocol_map)
        self.tls_stores: dict[str, ListenerStores] = {}   # per TLS listener name
        for listener in self.listeners:
            self._check_security(listener)
        self.log_dirs = self.values["log.dirs"] or [self.values["log.dir"]]
        self.static_values = dict(self.values)
        self.dynamic_default: dict[str, str] = {}   # the entries of /config/brokers/<default> in effect
        self.dynamic_broker: dict[str, str] = {}    # the entries of /config/brokers/<id> in effect

    def apply_dynamic(self, default: dict[str, str], per_broker: dict[str, str],
                      running: bool = False) -> tuple[set[str], list[str]]:
        """Layer the dynamic configs over the static values in place (this broker's own over the cluster
        default over server.properties), as Kafka's DynamicBrokerConfig does. An entry that is not a dynamic
        setting or does not convert is left out, as Kafka drops invalid dynamic configs; on a running broker a
        thread count that would fall below half or rise above double its current value keeps its current
        value (the check AlterConfigs makes, for changes written straight to ZooKeeper). Passwords are decoded
        with password.encoder.secret (one that does not decode is left out, as Kafka); a listener's stores only
        count from this broker's own entity, and TLS listeners whose stores change are read again into
        tls_stores (_reload_stores). Returns (the names whose effective value changed, a message per entry left
        out)."""
        problems: list[str] = []

        def usable(layer: dict[str, str], where: str, per_broker: bool) -> dict[str, str]:
            out = {}
            for key, raw in layer.items():
                if dynamic_broker_key(key) is None:
                    if setting_of(key):    # a custom config (unknown to Kafka) is kept there for plugins
                        problems.append(f"{key} in {where} cannot be updated dynamically; ignored")
                    continue
                if per_broker_only(key) and not per_broker:
                    problems.append(f"{key} in {where}: a per-broker config at the cluster level; ignored")
                    continue
                if is_password(key):
                    try:
                        raw = self.decode_password(raw)
                    except PasswordEncoderError as e:
                        problems.append(f"dynamic password config {key} in {where} could not be decoded ({e}); "
                                        f"ignored")
                        continue
                try:
                    _convert(key, raw)
                except ConfigError as e:
                    problems.append(f"{e} (in {where}); ignored")
                    continue
                out[key] = raw
            return out

        new_default = usable(default, "/config/brokers/<default>", False)
        new_broker = usable(per_broker, f"/config/brokers/{self.broker_id}", True)
        if running:
            for key in THREAD_COUNTS:
                raw = new_broker.get(key, new_default.get(key))
                value = self.static_values[key] if raw is None else _convert(key, raw)
                current = self.values[key]
                if value != current and not (max(1, current // 2) <= value <= current * 2):
                    problems.append(f"{key}={value} ignored: a running broker's thread count changes to between "
                                    f"half and double its current value {current}")
                    for new, old in ((new_default, self.dynamic_default), (new_broker, self.dynamic_broker)):
                        new.pop(key, None)
                        if key in old:
                            new[key] = old[key]
        self.dynamic_default, self.dynamic_broker = new_default, new_broker
        effective, listener = dict(self.static_values), dict(self.static_listener_overrides)
        for key, raw in {**self.dynamic_default, **self.dynamic_broker}.items():
            if key in DYNAMIC_BROKER_CONFIGS:
                effective[key] = _convert(key, raw)
            else:
                listener[key] = raw
        self._reload_stores(listener, problems, running)
        # an entry whose stores were refused is not in effect: not shown as a dynamic value either
        self.dynamic_broker = {k: v for k, v in self.dynamic_broker.items()
                               if not per_broker_only(k) or listener.get(k) == v}
        changed = {k for k, v in effective.items() if self.values.get(k) != v}
        changed |= {k for k in listener.keys() | self.listener_overrides.keys()
                    if listener.get(k) != self.listener_overrides.get(k)}
        self.values.update(effective)
        self.listener_overrides = listener
        return changed, problems

    def _changed_stores(self, listener: dict[str, str]) -> list[Listener]:
        """The TLS listeners whose store settings differ between the current overrides and listener, or whose
        store files were modified since they were read (Kafka's SslFactory reloads those on an AlterConfigs that
        names them again)."""
        def store_keys(overrides: dict[str, str], name: str) -> dict[str, str]:
            prefix = f"{LISTENER_PREFIX}{name.lower()}."
            return {k: v for k, v in overrides.items() if k.startswith(prefix) and
                    listener_config_base(k) in LISTENER_SSL_CONFIGS}
        return [tl for tl in self.listeners if tl.security_protocol in ("SSL", "SASL_SSL") and
                (store_keys(listener, tl.name) != store_keys(self.listener_overrides, tl.name) or
                 self.tls_stores[tl.name].modified())]

    def _replacement_stores(self, tl: Listener, listener: dict[str, str]) -> ListenerStores:
        """The stores the overrides (listener) give a running TLS listener, checked as Kafka's
        SslFactory.validateReconfiguration checks them: they load; the key store's certificate has the current
        one's subject DN and at least its subject alternative names; no truststore is added to a listener without
        one; on the inter-broker listener a client from them can shake hands with a server from them. ConfigError
        with the reason otherwise."""
        old = self.tls_stores[tl.name]
        try:
            stores = self._read_stores(tl.name, tl.security_protocol, listener)
            server, client = _tls_contexts(stores, self.listener_value(tl.name, "ssl.client.auth"))
            ensure_compatible(stores.keys, old.keys)
        except (KeystoreError, ssl.SSLError) as e:
            raise ConfigError(str(e)) from None
        if old.trusted_pem is None and stores.trusted_pem is not None:
            raise ConfigError("Cannot add SSL truststore to an existing listener for which no truststore was "
                              "configured.")
        error = handshake_error(server, client) if tl.name == self.inter_broker_listener else None
        if error:
            raise ConfigError(f"A client SSLEngine created with the provided settings can't connect to a server "
                              f"SSLEngine created with those settings. ({error})")
        return stores

    def _reload_stores(self, listener: dict[str, str], problems: list[str], running: bool) -> None:
        """Read the stores of the TLS listeners whose store settings the new overrides (listener) change into
        tls_stores: on a running broker checked as AlterConfigs checks them (_replacement_stores; Kafka checks a
        change from ZooKeeper too), at start-up only loaded (Kafka starts with the dynamic stores as they are).
        One refused (written to ZooKeeper directly, or its file gone since) keeps its current stores and
        settings, in listener too. The inter-broker and control-plane clients of a listener take its new stores."""
        for tl in self._changed_stores(listener):
            try:
                if running:
                    stores = self._replacement_stores(tl, listener)
                else:
                    stores = self._read_stores(tl.name, tl.security_protocol, listener)
                    _tls_contexts(stores, self.listener_value(tl.name, "ssl.client.auth"))
            except (ConfigError, KeystoreError, ssl.SSLError) as e:
                problems.append(f"the new stores of listener {tl.name} are refused ({e}); it keeps its current ones")
                prefix = f"{LISTENER_PREFIX}{tl.name.lower()}."
                for key in [k for k in listener if k.startswith(prefix) and listener_config_base(k) in
                            LISTENER_SSL_CONFIGS]:
                    del listener[key]
                listener.update({k: v for k, v in self.listener_overrides.items() if k.startswith(prefix) and
                                 listener_config_base(k) in LISTENER_SSL_CONFIGS})
                continue
            self.tls_stores[tl.name] = stores
            for client in (getattr(self, "_inter_broker_security", None), getattr(self, "_control_plane_security",
                                                                                  None)):
                if client is not None and client.listener == tl.name:
                    try:
                        client.current = self._inter_broker_client(tl.name)
                    except ConfigError as e:
                        problems.append(f"the inter-broker client of listener {tl.name} keeps its stores: {e}")

    def tls_update_error(self, per_broker: dict[str, str]) -> str | None:
        """Why this broker's new dynamic config (passwords decoded) cannot replace the stores of a TLS listener it
        changes (_replacement_stores), as "listener <name>: <reason>"; None when each may be replaced."""
        listener = dict(self.static_listener_overrides)
        listener.update({k: v for k, v in {**self.dynamic_default, **per_broker}.items()
                         if k not in DYNAMIC_BROKER_CONFIGS and dynamic_broker_key(k) is not None})
        for tl in self._changed_stores(listener):
            try:
                self._replacement_stores(tl, listener)
            except ConfigError as e:
                return f"listener {tl.name}: {e}"
        return None

    @property
    def password_encoder(self) -> PasswordEncoder | None:
        """The encoder of dynamic password configs (password.encoder.*); None without password.encoder.secret."""
        v = self.values
        if not v["password.encoder.secret"]:
            return None
        return PasswordEncoder(v["password.encoder.secret"], v["password.encoder.keyfactory.algorithm"],
                               v["password.encoder.cipher.algorithm"], v["password.encoder.key.length"],
                               v["password.encoder.iterations"])

    def encode_password(self, value: str) -> str:
        """A dynamic password config's value as written to ZooKeeper; PasswordEncoderError without a secret."""
        if self.password_encoder is None:
            raise PasswordEncoderError("Password encoder secret not configured")
        return self.password_encoder.encode(value)

    def decode_password(self, value: str) -> str:
        """The password of a value read from ZooKeeper; PasswordEncoderError when it cannot be decoded."""
        if self.password_encoder is None:
            raise PasswordEncoderError("Password encoder secret not configured")
        return self.password_encoder.decode(value)

    def __getitem__(self, key: str):
        return self.values[key]

    def _control_plane_listener(self, protocol_map: dict[str, str]) -> str | None:
        """control.plane.listener.name (KIP-291), upper-cased, checked as Kafka's KafkaConfig checks it: in the
        protocol map, advertised, and not the inter-broker listener. None when not set."""
        name = self.values["control.plane.listener.name"]
        if name is None:
            return None
        name = name.upper()
        if name not in protocol_map:
            raise ConfigError(f"Listener with {name} defined in control.plane.listener.name not found in "
                              f"listener.security.protocol.map.")
        advertised = [l.name for l in self.advertised_listeners]
        if name not in advertised:
            raise ConfigError(f"control.plane.listener.name must be a listener name defined in advertised.listeners. "
                              f"The valid options based on currently configured listeners are {','.join(advertised)}")
        if name == self.inter_broker_listener:
            raise ConfigError(f"control.plane.listener.name, when defined, should have a different value from the "
                              f"inter broker listener name. Currently they both have the value {name}")
        return name

    def _check_security(self, listener: Listener) -> None:
        """What Kafka checks at start-up for a secured listener: SASL mechanisms we serve (and the inter-broker
        one enabled on the inter-broker listener), TLS stores that load (read here, once) and, on the inter-broker
        listener, trust each other."""
        name, protocol = listener.name, listener.security_protocol
        if protocol.startswith("SASL_"):
            enabled = self.sasl_mechanisms(name)
            unsupported = [m for m in enabled if m not in SASL_MECHANISMS]
            if unsupported or not enabled:
                raise ConfigError(f"Invalid value {','.join(enabled)!r} for configuration sasl.enabled.mechanisms "
                                  f"of listener {name}: supported mechanisms are {', '.join(SASL_MECHANISMS)}")
            if name == self.inter_broker_listener and \
                    self.values["sasl.mechanism.inter.broker.protocol"] not in enabled:
                raise ConfigError("sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms "
                                  "when SASL is used for inter-broker communication")
        if protocol in ("SSL", "SASL_SSL"):
            try:
                stores = self._read_stores(name, protocol)
                server, client = _tls_contexts(stores, self.listener_value(name, "ssl.client.auth"))
            except KeystoreError as e:
                raise ConfigError(f"Listener {name} ({protocol}): {e}") from None
            except ssl.SSLError as e:   # e.g. a key OpenSSL's security level refuses (RSA below 2048 bits)
                raise ConfigError(f"Listener {name} ({protocol}): its stores do not load into TLS: {e}") from None
            self.tls_stores[name] = stores
            error = handshake_error(server, client) if name == self.inter_broker_listener else None
            if error:   # Kafka's check of the inter-broker listener (SslFactory, keystore verifiable by truststore)
                raise ConfigError(f"Listener {name} ({protocol}), the inter-broker listener: a client made from its "
                                  f"settings cannot complete a TLS handshake with a server made from them ({error}); "
                                  f"its truststore must hold the CA of its keystore's certificate")

    def _read_stores(self, name: str, protocol: str, overrides: dict[str, str] | None = None) -> ListenerStores:
        """A TLS listener's keystore (ssl.keystore.location with its type and passwords, or the PEM text of
        ssl.keystore.key + ssl.keystore.certificate.chain) and truststore (ssl.truststore.location, or
        ssl.truststore.certificates), as Kafka's DefaultSslEngineFactory takes them; with the listener overrides
        given (a dynamic update's) instead of the current ones."""
        def value(key: str):
            return self.listener_value(name, key, overrides=overrides)
        if value("ssl.keystore.key") or value("ssl.keystore.certificate.chain"):
            if str(value("ssl.keystore.type")).upper() != "PEM":
                raise ConfigError(f"Listener {name} ({protocol}): SSL private key can be specified only for PEM, "
                                  f"but key store type is {value('ssl.keystore.type')}.")
            keys = pem_key_material(value("ssl.keystore.key") or "", value("ssl.keystore.certificate.chain") or "",
                                    value("ssl.key.password"), "ssl.keystore.key")
        elif value("ssl.keystore.location"):
            keys = load_key_store(value("ssl.keystore.location"), value("ssl.keystore.type"),
                                  value("ssl.keystore.password"), value("ssl.key.password"))
        else:
            raise ConfigError(f"Listener {name} ({protocol}) needs a keystore: ssl.keystore.location, or "
                              f"ssl.keystore.key and ssl.keystore.certificate.chain")
        if value("ssl.truststore.certificates"):
            trusted = pem_certificates(value("ssl.truststore.certificates"), "ssl.truststore.certificates")
        elif value("ssl.truststore.location"):
            trusted = load_trust_store(value("ssl.truststore.location"), value("ssl.truststore.type"),
                                       value("ssl.truststore.password"))
        else:
            trusted = None
        files = [value(k) for k, inline in (("ssl.keystore.location", "ssl.keystore.key"),
                                             ("ssl.truststore.location", "ssl.truststore.certificates"))
                 if value(k) and not value(inline)]
        return ListenerStores(keys, trusted, tuple((f, os.stat(f).st_mtime_ns) for f in files))

    @property
    def inter_broker_security(self) -> ClientSecurity | None:
        """The ClientSecurity of this broker's connections to the others (None on PLAINTEXT), built once;
        ConfigError when the inter-broker listener's settings do not make a client."""
        if not hasattr(self, "_inter_broker_security"):
            self._inter_broker_security = self._live_client(self.inter_broker_listener)
        return self._inter_broker_security

    @property
    def controller_listener(self) -> tuple[str, ClientSecurity | None]:
        """(listener, ClientSecurity) of the controller's requests to brokers: the control-plane listener when set
        (KIP-291: the client side built as for the inter-broker one), else the inter-broker listener."""
        name = self.control_plane_listener
        if name is None:
            return self.inter_broker_listener, self.inter_broker_security
        if not hasattr(self, "_control_plane_security"):
            self._control_plane_security = self._live_client(name)
        return name, self._control_plane_security

    def _live_client(self, name: str) -> LiveClientSecurity | None:
        security = self._inter_broker_client(name)
        return None if security is None else LiveClientSecurity(name, security)

    def _inter_broker_client(self, name: str) -> ClientSecurity | None:
        """The client side of the inter-broker listener, as Kafka's inter-broker client builds it (controller
        channel, replica fetchers, transaction marker sender, controlled shutdown): the listener's protocol; the
        SASL mechanism sasl.mechanism.inter.broker.protocol with the username/password options of that listener's
        JAAS line for the mechanism (listener.name.<l>.<mech>.sasl.jaas.config, else sasl.jaas.config); TLS
        trusting the listener's truststore and presenting its keystore (for ssl.client.auth; both as read at
        load), checking host names per ssl.endpoint.identification.algorithm. The principal it logs in as needs
        ClusterAction on the cluster once ACLs are on (super.users grants it). name: the inter-broker or the
        control-plane listener."""
        protocol = next(listener.security_protocol for listener in self.advertised_listeners
                        if listener.name == name)
        if protocol == "PLAINTEXT":
            return None
        props = {"security.protocol": protocol,
                 "ssl.endpoint.identification.algorithm":
                     self.listener_value(name, "ssl.endpoint.identification.algorithm") or ""}
        if protocol.startswith("SASL_"):
            mechanism = self["sasl.mechanism.inter.broker.protocol"]
            props.update({"sasl.mechanism": mechanism,
                          "sasl.jaas.config": self.jaas_config(name, mechanism) or ""})
        if protocol.endswith("SSL"):
            stores = self.tls_stores[name]
            props.update({"ssl.keystore.key": stores.keys.key_pem, "ssl.keystore.certificate.chain":
                          stores.keys.chain_pem, "ssl.truststore.certificates": stores.trusted_pem or ""})
        try:
            return ClientSecurity.from_properties(props)
        except KafkaError as e:
            raise ConfigError(f"the inter-broker listener {name} ({protocol}): {e}") from None

    def jaas_config(self, listener: str, mechanism: str) -> str | None:
        """A listener's JAAS login line for a SASL mechanism, found as Kafka's JaasContext.loadServerContext finds
        it: listener.name.<l>.<mechanism>.sasl.jaas.config (kbroker also takes the listener's and the broker-wide
        sasl.jaas.config), else the JAAS file of KAFKA_OPTS: its section <listener lower case>.KafkaServer if there
        is one, else KafkaServer, and in it the login module of the mechanism; None when none has it."""
        line = self.listener_value(listener, "sasl.jaas.config", mechanism)
        if line or not self.jaas_file:
            return line
        if not hasattr(self, "_jaas_sections"):
            try:
                self._jaas_sections = read_jaas_file(self.jaas_file, system_properties())
            except (JaasError, ValueError) as e:
                raise ConfigError(str(e)) from None
        for section in (f"{listener.lower()}.KafkaServer", "KafkaServer"):
            if section in self._jaas_sections:
                module = next((m for m in self._jaas_sections[section]
                               if m.class_name == _LOGIN_MODULES.get(mechanism)), None)
                if module is None:
                    return None
                options = " ".join(f'{k}="{_jaas_quote(v)}"' for k, v in module.options.items())
                return f"{module.class_name} {module.flag} {options};"
        return None

    def sasl_mechanisms(self, listener: str) -> list[str]:
        """The SASL mechanisms enabled on a listener (listener.name.<l>.sasl.enabled.mechanisms overrides)."""
        value = self.listener_value(listener, "sasl.enabled.mechanisms") or []
        return [m.strip().upper() for m in value if m.strip()]

    def listener(self, name: str) -> Listener:
        return next(l for l in self.listeners if l.name == name)

    def listener_value(self, listener: str, key: str, mechanism: str | None = None,
                       overrides: dict[str, str] | None = None):
        """The setting for one listener, as Kafka resolves it: listener.name.<listener lower case>.[<mechanism
        lower case>.]<key> when given (in overrides, else the current listener overrides), else the broker-wide
        value (typed as the broker-wide setting)."""
        prefix = f"{LISTENER_PREFIX}{listener.lower()}."
        overrides = self.listener_overrides if overrides is None else overrides
        for name in ([f"{prefix}{mechanism.lower()}.{key}"] if mechanism else []) + [f"{prefix}{key}"]:
            if name in overrides:
                raw = overrides[name]
                return _convert(key, raw) if key in SETTINGS else raw
        return self.values.get(key)

    @property
    def broker_id(self) -> int:
        return self.values["broker.id"]

    @property
    def log_retention_ms(self) -> int:
        v = self.values
        if v["log.retention.ms"] is not None:
            return v["log.retention.ms"]
        if v["log.retention.minutes"] is not None:
            return v["log.retention.minutes"] * 60000
        return v["log.retention.hours"] * 3600000

    @property
    def log_roll_ms(self) -> int:
        v = self.values
        return v["log.roll.ms"] if v["log.roll.ms"] is not None else v["log.roll.hours"] * 3600000


def load(path: str | None, overrides: list[str] | tuple[str, ...] = (), environ=None,
         strict: bool | None = None) -> BrokerConfig:
    """The broker's settings: the properties file, then the image's environment variables (env_properties), then
    overrides; in the kbroker image (KBROKER_IMAGE set) with an empty properties file, the image_defaults of the
    convention the environment follows come first. strict (default: the KBROKER_STRICT_CONFIG variable) refuses
    unknown keys."""
    props: dict[str, str] = read_properties(path) if path else {}
    environ = os.environ if environ is None else environ
    if environ.get(IMAGE_ENV) and not props:
        if not bitnami_style(environ):
            missing = [v for v in ("KAFKA_ZOOKEEPER_CONNECT", "KAFKA_ADVERTISED_LISTENERS") if v not in environ]
            if missing:
                raise ConfigError(f"{' and '.join(missing)} must be set (Confluent's image requires "
                                  f"{'them' if len(missing) > 1 else 'it'}), or a properties file mounted")
        props = image_defaults(environ)
    props.update(env_properties(environ))
    if "listeners" not in props and env_listeners(environ):
        props["listeners"] = env_listeners(environ)
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"Invalid override {item!r}: expected key=value")
        props[key.strip()] = value.strip()
    if strict is None:
        strict = environ.get(STRICT_ENV, "").strip().lower() == "true"
    try:
        jaas_file = system_properties(environ).get("java.security.auth.login.config") or None
    except ValueError as e:
        raise ConfigError(str(e)) from None
    return BrokerConfig(props, strict=strict, jmx_port=jmx_port(environ), jaas_file=jaas_file)
