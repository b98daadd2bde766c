"""The data source on a secured cluster: Spark's kafka.security.protocol / kafka.sasl.* / kafka.ssl.* options
carry a SASL_SSL SCRAM-SHA-512 login (the `kbroker cluster up --security sasl_ssl` preset) to the batch write
and the batch read; a wrong password fails the query with the broker's authentication error."""
from __future__ import annotations

import pytest

from kbroker.security.certs import make_ca
from kbroker.spark.options import OptionError, source_options
from tests.conftest import fresh_chroot
from tests.integration.conftest import Cluster
from tests.keytool import STORE_PASSWORD, keytool
from tests.spark.conftest import unique
from zk.admin import AdminZkClient


@pytest.fixture(scope="module")
def secured(zookeeper, tmp_path_factory):
    c = Cluster(fresh_chroot(zookeeper), str(tmp_path_factory.mktemp("spark-sasl-ssl")))
    try:
        yield c.start_brokers(1, security="sasl_ssl")
    finally:
        c.stop()


def kafka_options(cluster: Cluster, **changes) -> dict[str, str]:
    props = {**cluster.client_properties, **changes}
    return {"kafka.bootstrap.servers": cluster.bootstrap, **{f"kafka.{k}": v for k, v in props.items()}}


def test_batch_write_and_read_over_sasl_ssl_scram(spark, secured):
    assert secured.client_properties["security.protocol"] == "SASL_SSL"
    assert secured.client_properties["sasl.mechanism"] == "SCRAM-SHA-512"
    topic = unique("secured")
    AdminZkClient(secured.zk).create_topic(topic, None, assignment={0: [1], 1: [1]})
    options = kafka_options(secured)
    rows = [(f"k{i}", f"v{i}") for i in range(100)]
    spark.createDataFrame(rows, "key string, value string").write.format("kbroker").options(**options) \
        .option("topic", topic).mode("append").save()

    got = spark.read.format("kbroker").options(**options).option("subscribe", topic).load() \
        .selectExpr("CAST(key AS STRING) k", "CAST(value AS STRING) v").collect()
    assert sorted((r.k, r.v) for r in got) == sorted(rows)

    wrong = kafka_options(secured, **{"sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule '
                                                          'required username="admin" password="wrong";'})
    with pytest.raises(Exception, match="SASL_AUTHENTICATION_FAILED|[Aa]uthentication failed"):
        spark.read.format("kbroker").options(**wrong).option("subscribe", topic).load().collect()


def test_batch_read_trusting_a_jks_trust_store(spark, secured, tmp_path):
    """kafka.ssl.truststore.* naming a JKS store (the cluster's CA imported by keytool): read on the driver, its
    certificates reach the executors."""
    jks = str(tmp_path / "truststore.jks")
    keytool("-importcert", "-noprompt", "-alias", "CARoot", "-file", secured.security.ca_path, "-keystore", jks,
            "-storetype", "JKS", "-storepass", STORE_PASSWORD)
    topic = unique("jks")
    AdminZkClient(secured.zk).create_topic(topic, None, assignment={0: [1]})
    options = kafka_options(secured, **{"ssl.truststore.type": "JKS", "ssl.truststore.location": jks,
                                        "ssl.truststore.password": STORE_PASSWORD})
    rows = [(f"k{i}", f"v{i}") for i in range(10)]
    spark.createDataFrame(rows, "key string, value string").write.format("kbroker").options(**options) \
        .option("topic", topic).mode("append").save()
    got = spark.read.format("kbroker").options(**options).option("subscribe", topic).load() \
        .selectExpr("CAST(key AS STRING) k", "CAST(value AS STRING) v").collect()
    assert sorted((r.k, r.v) for r in got) == rows


def test_security_options_are_checked_when_the_query_is_defined(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text(make_ca()[0])
    options = source_options({"kafka.bootstrap.servers": "b:9092", "subscribe": "t",
                              "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-256",
                              "kafka.sasl.username": "alice", "kafka.sasl.password": "pw",
                              "kafka.ssl.ca.location": str(ca),
                              "kafka.ssl.endpoint.identification.algorithm": ""}, False)
    s = options.security
    assert (s.protocol, s.sasl_mechanism, s.username, s.password, s.ca_pem, s.check_hostname) == \
        ("SASL_SSL", "SCRAM-SHA-256", "alice", "pw", ca.read_text(), False)
    with pytest.raises(OptionError, match="needs a username and a password"):
        source_options({"kafka.bootstrap.servers": "b:9092", "subscribe": "t",
                        "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN"}, False)
    with pytest.raises(OptionError, match=r"trust store /x\.jks: cannot read it"):
        source_options({"kafka.bootstrap.servers": "b:9092", "subscribe": "t", "kafka.security.protocol": "SSL",
                        "kafka.ssl.truststore.type": "JKS", "kafka.ssl.truststore.location": "/x.jks"}, False)
