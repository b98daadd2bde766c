"""JSON message schemas (kafka-python format) for the inter-broker APIs that kafka-python lacks."""
