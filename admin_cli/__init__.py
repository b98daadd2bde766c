"""kadmin: the kbroker administration tool.

Topic and cluster commands that write ZooKeeper exactly as Kafka 2.8's `kafka-topics.sh --zookeeper`
(AdminZkClient) does, so a Kafka broker, a kbroker broker or `zkCli.sh` sees the same znodes; `reassign` and
`elect-leaders` write /admin/reassign_partitions and /admin/preferred_replica_election as
`kafka-reassign-partitions.sh --zookeeper` and `kafka-preferred-replica-election.sh --zookeeper` do, then wait
for the controller. `groups` (kafka-consumer-groups.sh) speaks the Kafka protocol to the brokers instead
(admin_cli.kafka_client), since consumer groups live in the group coordinators, not in ZooKeeper.
Entry point: `admin_cli.main:cli`.
"""
