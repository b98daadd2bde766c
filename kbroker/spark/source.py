"""The data source Spark sees: short name `kbroker`, the schema of Spark's Kafka source, and the batch reader,
stream reader and batch writer behind `spark.read`, `spark.readStream` and `df.write`."""
from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from .arrow import spark_schema
from .options import OptionError, sink_options, source_options


def _include_headers(options) -> bool:
    return str(options.get("includeHeaders", "false")).strip().lower() == "true"


class KBrokerDataSource(DataSource):
    """`spark.read.format("kbroker")` with the options of Spark's Kafka source (see kbroker.spark.options)."""

    @classmethod
    def name(cls) -> str:
        return "kbroker"

    def schema(self) -> StructType:
        return spark_schema(_include_headers(self.options))

    def _check_schema(self, schema: StructType) -> None:
        if schema != spark_schema(_include_headers(self.options)):
            raise OptionError("Kafka source has a fixed schema and cannot be set with a custom one")

    def reader(self, schema: StructType):
        from .reader import BatchReader
        self._check_schema(schema)
        return BatchReader(source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType):
        from .stream import StreamReader
        self._check_schema(schema)
        return StreamReader(source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool):
        from .writer import Writer
        if overwrite:
            raise OptionError("Save mode Overwrite not allowed for Kafka. Allowed save modes are Append and "
                              "ErrorIfExists (default).")
        compression = str(self.options.get("kafka.compression.type", "none")).strip().lower()
        return Writer(sink_options(self.options), schema, compression)
