"""Quotas and throttling as Kafka 2.8 enforces them: the sampled rates (stats), the client quota managers
(Produce, Fetch, Request, ControllerMutation), the replication throttles and the connection quotas."""
