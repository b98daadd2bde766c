"""ZooKeeper for kbroker: Kafka's znode layout and codecs, a typed kazoo client, and a local server launcher."""

LIBRARY_LOGGER = "kazoo"   # the ZooKeeper library's logger, for callers that quiet it (no kazoo import here)
