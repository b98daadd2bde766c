"""Plain data the broker, zk/ and kadmin share: the config tables (Kafka's ConfigDef, LogConfig and
DynamicBrokerConfig), the admin errors they raise, the internal topics' names and Kafka's entity-name
sanitizer. Nothing here imports the rest of kbroker or zk/, so any layer may import it."""
