"""kadmin: the kbroker administration tool, two ways to the same cluster.

With `--zookeeper` the topic, config, reassignment and election commands write ZooKeeper exactly as Kafka 2.8's
`--zookeeper` tools (AdminZkClient) do, so a Kafka broker, a kbroker broker or `zkCli.sh` sees the same znodes,
and wait for the controller where Kafka's tools do. With `--bootstrap-server` they use the brokers' Admin APIs
(admin_cli.kafka_client, over the project's protocol client kbroker.protocol.client) as Kafka's AdminClient
does. `groups` (kafka-consumer-groups.sh) always speaks the Kafka protocol, since consumer groups live in the
group coordinators, not in ZooKeeper; so do `transactions` (kafka-transactions.sh), except that with
`--zookeeper` their list and describe replay the `__transaction_state` log read from its leaders.

One module per command group (topics, configs, reassign, elect, cluster, acls, groups, transactions, users)
holds its click commands and builds one result object from either source, rendered by admin_cli.output (rich
tables, or --output json); admin_cli.context is what the commands share (settings, the way to the cluster,
waits), admin_cli.errors the exit statuses. Entry point: `admin_cli.main:cli`, the root group.
"""
