"""Plain data and formats the broker, zk/ and kadmin share: the config tables (Kafka's ConfigDef, LogConfig and
DynamicBrokerConfig), the admin errors they raise, the internal topics' names, Kafka's entity-name sanitizer,
the encoding of the internal topics' records and the `__transaction_state` records. Nothing here imports the
rest of kbroker or zk/, so any layer may import it."""
