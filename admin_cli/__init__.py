"""kadmin: the kbroker administration tool.

Topic and cluster commands that write ZooKeeper exactly as Kafka 2.8's `kafka-topics.sh --zookeeper`
(AdminZkClient) does, so a Kafka broker, a kbroker broker or `zkCli.sh` sees the same znodes. Entry point:
`admin_cli.main:cli`.
"""
