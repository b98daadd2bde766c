"""kbroker: a Kafka 2.8-compatible broker written in Python."""
