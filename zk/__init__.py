"""ZooKeeper for kbroker: Kafka's znode layout and codecs, a typed kazoo client, and a local server launcher."""
