"""The names of Kafka's internal topics (Topic.INTERNAL_TOPICS): the group coordinator's offsets and group
metadata log and the transaction coordinator's state log."""

GROUP_METADATA_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC})
