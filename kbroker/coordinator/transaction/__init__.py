"""The transaction coordinator: coordinator (the APIs' state machine, timeouts, expiry), manager
(TransactionStateManager: the `__transaction_state` partitions led here, loading, writes), state (one
transactional id's metadata, loaded from the records of common.transaction_log), markers (WriteTxnMarkers to
partition leaders, then Complete*)."""
