"""A PySpark (4.x) data source for Kafka topics served by kbroker (or any Kafka 2.8-compatible cluster), named
`kbroker`, with the options and the schema of Spark's own Kafka source and sink:

    from kbroker.spark import register
    register(spark)                                   # once per SparkSession
    df = (spark.read.format("kbroker")               # format("kafka") is Spark's own, so the name differs
          .option("kafka.bootstrap.servers", "localhost:9092")
          .option("subscribe", "events").load())

It reaches the cluster only through the Kafka protocol (kbroker.protocol and kafka-python's messages), so it
runs wherever Spark's Python workers run, with no JVM Kafka connector.
"""
from .source import KBrokerDataSource


def register(spark) -> None:
    """Make `format("kbroker")` known to this SparkSession."""
    spark.dataSource.register(KBrokerDataSource)


__all__ = ["KBrokerDataSource", "register"]
