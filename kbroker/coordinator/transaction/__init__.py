"""The transaction coordinator: coordinator (the APIs' state machine, timeouts, expiry), manager
(TransactionStateManager: the `__transaction_state` partitions led here, loading, writes), state (one
transactional id's metadata and its record formats), markers (WriteTxnMarkers to partition leaders, then
Complete*)."""
