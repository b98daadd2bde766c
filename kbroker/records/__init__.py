"""Kafka's record formats: v2 record batches, v0/v1 message sets, compression, validation and conversion.

Knows nothing of files, sockets or requests: it works on byte buffers.
"""
