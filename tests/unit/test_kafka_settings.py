"""Every Kafka 2.8 broker setting is known, with Kafka's type, default and dynamic update mode: the table below is
kafka-site's 28/generated/kafka_config.html (the 218 documented keys) plus the 15 internal KRaft keys of 2.8.2's
KafkaConfig.scala, cross-checked against its *Prop names. Types: b boolean, i int, l long, h short, d double,
s string, L list, p password, c class; modes: R read-only, B per-broker, C cluster-wide."""
import sys

import pytest

from kbroker.common.broker_config import update_mode
from kbroker.common.config_def import MAX_INT, MAX_LONG, format_value
from kbroker.config import SETTINGS, BrokerConfig, ConfigError

MAX_DOUBLE = sys.float_info.max
TYPES = {"b": "boolean", "i": "int", "l": "long", "h": "short", "d": "double", "s": "string", "L": "list",
         "p": "password", "c": "class"}
MODES = {"R": "read-only", "B": "per-broker", "C": "cluster-wide"}

KAFKA_28 = {
    "advertised.host.name": ("s", None, "R"),
    "advertised.listeners": ("s", None, "B"),
    "advertised.port": ("i", None, "R"),
    "alter.config.policy.class.name": ("c", None, "R"),
    "alter.log.dirs.replication.quota.window.num": ("i", 11, "R"),
    "alter.log.dirs.replication.quota.window.size.seconds": ("i", 1, "R"),
    "authorizer.class.name": ("s", "", "R"),
    "auto.create.topics.enable": ("b", True, "R"),
    "auto.leader.rebalance.enable": ("b", True, "R"),
    "background.threads": ("i", 10, "C"),
    "broker.id": ("i", -1, "R"),
    "broker.id.generation.enable": ("b", True, "R"),
    "broker.rack": ("s", None, "R"),
    "client.quota.callback.class": ("c", None, "R"),
    "compression.type": ("s", "producer", "C"),
    "connection.failed.authentication.delay.ms": ("i", 100, "R"),
    "connections.max.idle.ms": ("l", 600000, "R"),
    "connections.max.reauth.ms": ("l", 0, "R"),
    "control.plane.listener.name": ("s", None, "R"),
    "controlled.shutdown.enable": ("b", True, "R"),
    "controlled.shutdown.max.retries": ("i", 3, "R"),
    "controlled.shutdown.retry.backoff.ms": ("l", 5000, "R"),
    "controller.quota.window.num": ("i", 11, "R"),
    "controller.quota.window.size.seconds": ("i", 1, "R"),
    "controller.socket.timeout.ms": ("i", 30000, "R"),
    "create.topic.policy.class.name": ("c", None, "R"),
    "default.replication.factor": ("i", 1, "R"),
    "delegation.token.expiry.check.interval.ms": ("l", 3600000, "R"),
    "delegation.token.expiry.time.ms": ("l", 86400000, "R"),
    "delegation.token.master.key": ("p", None, "R"),
    "delegation.token.max.lifetime.ms": ("l", 604800000, "R"),
    "delegation.token.secret.key": ("p", None, "R"),
    "delete.records.purgatory.purge.interval.requests": ("i", 1, "R"),
    "delete.topic.enable": ("b", True, "R"),
    "fetch.max.bytes": ("i", 57671680, "R"),
    "fetch.purgatory.purge.interval.requests": ("i", 1000, "R"),
    "group.initial.rebalance.delay.ms": ("i", 3000, "R"),
    "group.max.session.timeout.ms": ("i", 1800000, "R"),
    "group.max.size": ("i", MAX_INT, "R"),
    "group.min.session.timeout.ms": ("i", 6000, "R"),
    "host.name": ("s", "", "R"),
    "inter.broker.listener.name": ("s", None, "R"),
    "inter.broker.protocol.version": ("s", "2.8-IV1", "R"),
    "kafka.metrics.polling.interval.secs": ("i", 10, "R"),
    "kafka.metrics.reporters": ("L", [], "R"),
    "leader.imbalance.check.interval.seconds": ("l", 300, "R"),
    "leader.imbalance.per.broker.percentage": ("i", 10, "R"),
    "listener.security.protocol.map": ("s", "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                              "SASL_SSL:SASL_SSL", "B"),
    "listeners": ("s", None, "B"),
    "log.cleaner.backoff.ms": ("l", 15000, "C"),
    "log.cleaner.dedupe.buffer.size": ("l", 134217728, "C"),
    "log.cleaner.delete.retention.ms": ("l", 86400000, "C"),
    "log.cleaner.enable": ("b", True, "R"),
    "log.cleaner.io.buffer.load.factor": ("d", 0.9, "C"),
    "log.cleaner.io.buffer.size": ("i", 524288, "C"),
    "log.cleaner.io.max.bytes.per.second": ("d", MAX_DOUBLE, "C"),
    "log.cleaner.max.compaction.lag.ms": ("l", MAX_LONG, "C"),
    "log.cleaner.min.cleanable.ratio": ("d", 0.5, "C"),
    "log.cleaner.min.compaction.lag.ms": ("l", 0, "C"),
    "log.cleaner.threads": ("i", 1, "C"),
    "log.cleanup.policy": ("L", ["delete"], "C"),
    "log.dir": ("s", "/tmp/kafka-logs", "R"),
    "log.dirs": ("s", None, "R"),
    "log.flush.interval.messages": ("l", MAX_LONG, "C"),
    "log.flush.interval.ms": ("l", None, "C"),
    "log.flush.offset.checkpoint.interval.ms": ("i", 60000, "R"),
    "log.flush.scheduler.interval.ms": ("l", MAX_LONG, "R"),
    "log.flush.start.offset.checkpoint.interval.ms": ("i", 60000, "R"),
    "log.index.interval.bytes": ("i", 4096, "C"),
    "log.index.size.max.bytes": ("i", 10485760, "C"),
    "log.message.downconversion.enable": ("b", True, "C"),
    "log.message.format.version": ("s", "2.8-IV1", "R"),
    "log.message.timestamp.difference.max.ms": ("l", MAX_LONG, "C"),
    "log.message.timestamp.type": ("s", "CreateTime", "C"),
    "log.preallocate": ("b", False, "C"),
    "log.retention.bytes": ("l", -1, "C"),
    "log.retention.check.interval.ms": ("l", 300000, "R"),
    "log.retention.hours": ("i", 168, "R"),
    "log.retention.minutes": ("i", None, "R"),
    "log.retention.ms": ("l", None, "C"),
    "log.roll.hours": ("i", 168, "R"),
    "log.roll.jitter.hours": ("i", 0, "R"),
    "log.roll.jitter.ms": ("l", None, "C"),
    "log.roll.ms": ("l", None, "C"),
    "log.segment.bytes": ("i", 1073741824, "C"),
    "log.segment.delete.delay.ms": ("l", 60000, "C"),
    "max.connection.creation.rate": ("i", MAX_INT, "C"),
    "max.connections": ("i", MAX_INT, "C"),
    "max.connections.per.ip": ("i", MAX_INT, "C"),
    "max.connections.per.ip.overrides": ("s", "", "C"),
    "max.incremental.fetch.session.cache.slots": ("i", 1000, "R"),
    "message.max.bytes": ("i", 1048588, "C"),
    "metric.reporters": ("L", [], "C"),
    "metrics.num.samples": ("i", 2, "R"),
    "metrics.recording.level": ("s", "INFO", "R"),
    "metrics.sample.window.ms": ("l", 30000, "R"),
    "min.insync.replicas": ("i", 1, "C"),
    "num.io.threads": ("i", 8, "C"),
    "num.network.threads": ("i", 3, "C"),
    "num.partitions": ("i", 1, "R"),
    "num.recovery.threads.per.data.dir": ("i", 1, "C"),
    "num.replica.alter.log.dirs.threads": ("i", None, "R"),
    "num.replica.fetchers": ("i", 1, "C"),
    "offset.metadata.max.bytes": ("i", 4096, "R"),
    "offsets.commit.required.acks": ("h", -1, "R"),
    "offsets.commit.timeout.ms": ("i", 5000, "R"),
    "offsets.load.buffer.size": ("i", 5242880, "R"),
    "offsets.retention.check.interval.ms": ("l", 600000, "R"),
    "offsets.retention.minutes": ("i", 10080, "R"),
    "offsets.topic.compression.codec": ("i", 0, "R"),
    "offsets.topic.num.partitions": ("i", 50, "R"),
    "offsets.topic.replication.factor": ("h", 3, "R"),
    "offsets.topic.segment.bytes": ("i", 104857600, "R"),
    "password.encoder.cipher.algorithm": ("s", "AES/CBC/PKCS5Padding", "R"),
    "password.encoder.iterations": ("i", 4096, "R"),
    "password.encoder.key.length": ("i", 128, "R"),
    "password.encoder.keyfactory.algorithm": ("s", None, "R"),
    "password.encoder.old.secret": ("p", None, "R"),
    "password.encoder.secret": ("p", None, "R"),
    "port": ("i", 9092, "R"),
    "principal.builder.class": ("c", None, "B"),
    "producer.purgatory.purge.interval.requests": ("i", 1000, "R"),
    "queued.max.request.bytes": ("l", -1, "R"),
    "queued.max.requests": ("i", 500, "R"),
    "quota.consumer.default": ("l", MAX_LONG, "R"),
    "quota.producer.default": ("l", MAX_LONG, "R"),
    "quota.window.num": ("i", 11, "R"),
    "quota.window.size.seconds": ("i", 1, "R"),
    "replica.fetch.backoff.ms": ("i", 1000, "R"),
    "replica.fetch.max.bytes": ("i", 1048576, "R"),
    "replica.fetch.min.bytes": ("i", 1, "R"),
    "replica.fetch.response.max.bytes": ("i", 10485760, "R"),
    "replica.fetch.wait.max.ms": ("i", 500, "R"),
    "replica.high.watermark.checkpoint.interval.ms": ("l", 5000, "R"),
    "replica.lag.time.max.ms": ("l", 30000, "R"),
    "replica.selector.class": ("s", None, "R"),
    "replica.socket.receive.buffer.bytes": ("i", 65536, "R"),
    "replica.socket.timeout.ms": ("i", 30000, "R"),
    "replication.quota.window.num": ("i", 11, "R"),
    "replication.quota.window.size.seconds": ("i", 1, "R"),
    "request.timeout.ms": ("i", 30000, "R"),
    "reserved.broker.max.id": ("i", 1000, "R"),
    "sasl.client.callback.handler.class": ("c", None, "R"),
    "sasl.enabled.mechanisms": ("L", ["GSSAPI"], "B"),
    "sasl.jaas.config": ("p", None, "B"),
    "sasl.kerberos.kinit.cmd": ("s", "/usr/bin/kinit", "B"),
    "sasl.kerberos.min.time.before.relogin": ("l", 60000, "B"),
    "sasl.kerberos.principal.to.local.rules": ("L", ["DEFAULT"], "B"),
    "sasl.kerberos.service.name": ("s", None, "B"),
    "sasl.kerberos.ticket.renew.jitter": ("d", 0.05, "B"),
    "sasl.kerberos.ticket.renew.window.factor": ("d", 0.8, "B"),
    "sasl.login.callback.handler.class": ("c", None, "R"),
    "sasl.login.class": ("c", None, "R"),
    "sasl.login.refresh.buffer.seconds": ("h", 300, "B"),
    "sasl.login.refresh.min.period.seconds": ("h", 60, "B"),
    "sasl.login.refresh.window.factor": ("d", 0.8, "B"),
    "sasl.login.refresh.window.jitter": ("d", 0.05, "B"),
    "sasl.mechanism.inter.broker.protocol": ("s", "GSSAPI", "B"),
    "sasl.server.callback.handler.class": ("c", None, "R"),
    "sasl.server.max.receive.size": ("i", 524288, "R"),
    "security.inter.broker.protocol": ("s", "PLAINTEXT", "R"),
    "security.providers": ("s", None, "R"),
    "socket.connection.setup.timeout.max.ms": ("l", 30000, "R"),
    "socket.connection.setup.timeout.ms": ("l", 10000, "R"),
    "socket.receive.buffer.bytes": ("i", 102400, "R"),
    "socket.request.max.bytes": ("i", 104857600, "R"),
    "socket.send.buffer.bytes": ("i", 102400, "R"),
    "ssl.cipher.suites": ("L", [], "B"),
    "ssl.client.auth": ("s", "none", "B"),
    "ssl.enabled.protocols": ("L", ["TLSv1.2"], "B"),
    "ssl.endpoint.identification.algorithm": ("s", "https", "B"),
    "ssl.engine.factory.class": ("c", None, "B"),
    "ssl.key.password": ("p", None, "B"),
    "ssl.keymanager.algorithm": ("s", "SunX509", "B"),
    "ssl.keystore.certificate.chain": ("p", None, "B"),
    "ssl.keystore.key": ("p", None, "B"),
    "ssl.keystore.location": ("s", None, "B"),
    "ssl.keystore.password": ("p", None, "B"),
    "ssl.keystore.type": ("s", "JKS", "B"),
    "ssl.principal.mapping.rules": ("s", "DEFAULT", "R"),
    "ssl.protocol": ("s", "TLSv1.2", "B"),
    "ssl.provider": ("s", None, "B"),
    "ssl.secure.random.implementation": ("s", None, "B"),
    "ssl.trustmanager.algorithm": ("s", "PKIX", "B"),
    "ssl.truststore.certificates": ("p", None, "B"),
    "ssl.truststore.location": ("s", None, "B"),
    "ssl.truststore.password": ("p", None, "B"),
    "ssl.truststore.type": ("s", "JKS", "B"),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": ("i", 10000, "R"),
    "transaction.max.timeout.ms": ("i", 900000, "R"),
    "transaction.remove.expired.transaction.cleanup.interval.ms": ("i", 3600000, "R"),
    "transaction.state.log.load.buffer.size": ("i", 5242880, "R"),
    "transaction.state.log.min.isr": ("i", 2, "R"),
    "transaction.state.log.num.partitions": ("i", 50, "R"),
    "transaction.state.log.replication.factor": ("h", 3, "R"),
    "transaction.state.log.segment.bytes": ("i", 104857600, "R"),
    "transactional.id.expiration.ms": ("i", 604800000, "R"),
    "unclean.leader.election.enable": ("b", False, "C"),
    "zookeeper.clientCnxnSocket": ("s", None, "R"),
    "zookeeper.connect": ("s", None, "R"),
    "zookeeper.connection.timeout.ms": ("i", None, "R"),
    "zookeeper.max.in.flight.requests": ("i", 10, "R"),
    "zookeeper.session.timeout.ms": ("i", 18000, "R"),
    "zookeeper.set.acl": ("b", False, "R"),
    "zookeeper.ssl.cipher.suites": ("L", None, "R"),
    "zookeeper.ssl.client.enable": ("b", False, "R"),
    "zookeeper.ssl.crl.enable": ("b", False, "R"),
    "zookeeper.ssl.enabled.protocols": ("L", None, "R"),
    "zookeeper.ssl.endpoint.identification.algorithm": ("s", "HTTPS", "R"),
    "zookeeper.ssl.keystore.location": ("s", None, "R"),
    "zookeeper.ssl.keystore.password": ("p", None, "R"),
    "zookeeper.ssl.keystore.type": ("s", None, "R"),
    "zookeeper.ssl.ocsp.enable": ("b", False, "R"),
    "zookeeper.ssl.protocol": ("s", "TLSv1.2", "R"),
    "zookeeper.ssl.truststore.location": ("s", None, "R"),
    "zookeeper.ssl.truststore.password": ("p", None, "R"),
    "zookeeper.ssl.truststore.type": ("s", None, "R"),
    "zookeeper.sync.time.ms": ("i", 2000, "R"),
}
KRAFT_INTERNAL = {
    "process.roles": ("L", [], "R"),
    "node.id": ("i", -1, "R"),
    "controller.listener.names": ("s", None, "R"),
    "controller.quorum.voters": ("L", [], "R"),
    "controller.quorum.election.timeout.ms": ("i", 1000, "R"),
    "controller.quorum.fetch.timeout.ms": ("i", 2000, "R"),
    "controller.quorum.election.backoff.max.ms": ("i", 1000, "R"),
    "controller.quorum.append.linger.ms": ("i", 25, "R"),
    "controller.quorum.request.timeout.ms": ("i", 2000, "R"),
    "controller.quorum.retry.backoff.ms": ("i", 20, "R"),
    "metadata.log.dir": ("s", None, "R"),
    "broker.heartbeat.interval.ms": ("i", 2000, "R"),
    "broker.session.timeout.ms": ("i", 9000, "R"),
    "initial.broker.registration.timeout.ms": ("i", 60000, "R"),
    "sasl.mechanism.controller.protocol": ("s", "GSSAPI", "R"),
}
# Where kbroker's entry deliberately differs from the documentation: comma-separated strings kbroker keeps as
# lists (the same text), listeners derived from host.name and port when unset (as Kafka does), and the TLS
# defaults of Kafka 2.8 on Java 11+ (the documentation was generated on Java 8).
AS_LIST = {"listeners", "advertised.listeners", "listener.security.protocol.map", "log.dirs"}
JAVA_11_DEFAULTS = {"ssl.protocol": "TLSv1.3", "ssl.enabled.protocols": ["TLSv1.2", "TLSv1.3"]}
# kbroker's own settings and the AclAuthorizer's / DynamicConfig's that are not KafkaConfig keys
OTHERS = {"metrics.port", "metrics.host", "down.conversion.cache.bytes", "min.incremental.fetch.session.eviction.ms",
          "producer.id.expiration.ms", "super.users", "allow.everyone.if.no.acl.found",
          "leader.replication.throttled.rate", "follower.replication.throttled.rate",
          "replica.alter.log.dirs.io.max.bytes.per.second"}


def test_counts():
    assert len(KAFKA_28) == 218 and len(KRAFT_INTERNAL) == 15
    assert set(SETTINGS) == set(KAFKA_28) | set(KRAFT_INTERNAL) | OTHERS


@pytest.mark.parametrize("name", sorted({**KAFKA_28, **KRAFT_INTERNAL}))
def test_type_default_and_mode_are_kafkas(name):
    kind, default, mode = {**KAFKA_28, **KRAFT_INTERNAL}[name]
    key = SETTINGS[name]
    assert update_mode(name) == MODES[mode]
    if name in AS_LIST:
        assert (kind, key.type, format_value(key.default)) == ("s", "list", default)
    else:
        assert key.type == TYPES[kind]
        assert key.default == JAVA_11_DEFAULTS.get(name, default)
    assert key.default is None or key.check is None or key.check(key.default) is None


ZK = {"zookeeper.connect": "zk:2181"}
KAFKAS_OWN = [
    ("principal.builder.class", "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"),
    ("metric.reporters", "org.apache.kafka.common.metrics.JmxReporter"),
    ("ssl.engine.factory.class", "org.apache.kafka.common.security.ssl.DefaultSslEngineFactory"),
    ("ssl.secure.random.implementation", "SHA1PRNG"),
    ("ssl.keymanager.algorithm", "SunX509"),
    ("ssl.trustmanager.algorithm", "PKIX"),
    ("ssl.provider", "SunJSSE"),
    ("authorizer.class.name", "kafka.security.authorizer.AclAuthorizer"),
    ("num.network.threads", "16"), ("num.io.threads", "32"), ("background.threads", "20"),
    ("socket.send.buffer.bytes", "-1"), ("queued.max.request.bytes", "104857600"),
    ("metrics.num.samples", "3"), ("metrics.recording.level", "DEBUG"), ("kafka.metrics.polling.interval.secs", "5"),
    ("password.encoder.secret", "s3cret"), ("sasl.kerberos.service.name", "kafka"),
    ("controller.quorum.voters", "1@localhost:9093"), ("node.id", "1"),
]


@pytest.mark.parametrize("name, value", KAFKAS_OWN)
def test_kafkas_own_classes_and_jvm_tuning_are_accepted(name, value):
    assert format_value(BrokerConfig({**ZK, name: value})[name]) == value


CANNOT = [
    ("principal.builder.class", "com.acme.PrincipalBuilder", "custom Java class"),
    ("create.topic.policy.class.name", "com.acme.Policy", "custom Java class"),
    ("alter.config.policy.class.name", "com.acme.Policy", "custom Java class"),
    ("client.quota.callback.class", "com.acme.Quotas", "custom Java class"),
    ("metric.reporters", "org.apache.kafka.common.metrics.JmxReporter,com.acme.Reporter", "metrics reporter"),
    ("kafka.metrics.reporters", "kafka.metrics.KafkaCSVMetricsReporter", "Yammer"),
    ("sasl.server.callback.handler.class", "com.acme.Handler", "custom Java class"),
    ("sasl.client.callback.handler.class", "com.acme.Handler", "custom Java class"),
    ("sasl.login.callback.handler.class", "com.acme.Handler", "custom Java class"),
    ("sasl.login.class", "com.acme.Login", "custom Java class"),
    ("listener.name.sasl_plaintext.plain.sasl.server.callback.handler.class", "com.acme.Handler", "custom Java"),
    ("ssl.engine.factory.class", "com.acme.Engine", "custom Java class"),
    ("security.providers", "com.acme.ProviderCreator", "JCA security providers"),
    ("ssl.provider", "BCJSSE", "JCA security provider"),
    ("ssl.keymanager.algorithm", "X509Custom", "key manager"),
    ("ssl.trustmanager.algorithm", "Custom", "trust manager"),
    ("ssl.secure.random.implementation", "NoSuchPRNG", "SecureRandom"),
    ("delegation.token.master.key", "k", "delegation tokens"),
    ("process.roles", "broker,controller", "KRaft"),
]


@pytest.mark.parametrize("name, value, why", CANNOT)
def test_what_kbroker_cannot_do_is_refused_naming_key_and_reason(name, value, why):
    with pytest.raises(ConfigError) as e:
        BrokerConfig({**ZK, name: value})
    message = str(e.value)
    assert name in message and why in message and "\n" not in message


@pytest.mark.parametrize("name, value", [("metrics.recording.level", "LOUD"), ("password.encoder.iterations", "10"),
                                         ("sasl.login.refresh.buffer.seconds", "3601"), ("port", "x"),
                                         ("sasl.login.refresh.window.factor", "0.4"),
                                         ("inter.broker.protocol.version", "9.9"),
                                         ("log.message.format.version", "bogus")])
def test_invalid_values_of_new_keys_are_refused(name, value):
    with pytest.raises(ConfigError, match=name.replace(".", r"\.")):
        BrokerConfig({**ZK, name: value})


def test_listeners_default_from_host_name_and_port_as_kafka():
    c = BrokerConfig({**ZK, "port": "9999", "host.name": "127.0.0.1"})
    assert [(x.host, x.port) for x in c.listeners] == [("127.0.0.1", 9999)]
    c = BrokerConfig({**ZK, "port": "9999", "advertised.host.name": "kafka1"})
    assert [(x.host, x.port) for x in c.advertised_listeners] == [("kafka1", 9999)]
    assert [(x.host, x.port) for x in BrokerConfig(ZK).listeners] == [("", 9092)]
