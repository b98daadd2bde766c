"""Coordinators: producer ids (producer_id_manager) and the group coordinator: group_coordinator (membership
and offsets APIs), group (one group's state machine), group_metadata_manager (GroupMetadataManager: the
__consumer_offsets partitions led here, loading, writes, expiry), schemas (the offsets topic's record formats
and the group -> partition mapping), delayed (join / sync / heartbeat timeouts on the timing wheel), zk_offsets
(v0 offsets in ZooKeeper); transaction/ (the transaction coordinator). partition_loader: the load/unload
scheduling both coordinators share."""
