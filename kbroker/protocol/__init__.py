"""Kafka wire-protocol support for kbroker."""
