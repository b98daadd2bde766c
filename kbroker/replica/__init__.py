"""Replication: partition leader/follower state and the replica manager that applies the controller's orders."""
