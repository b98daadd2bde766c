"""Kafka's log, on-disk compatible with Kafka 2.8: segments (`.log`, `.index`, `.timeindex`, `.txnindex`), the
log of one partition, the log manager of a broker's log dirs, and the checkpoint files.

Knows nothing of sockets or requests: reads hand back file slices that the network layer sends with sendfile.
"""
