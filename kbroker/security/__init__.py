"""Security: SASL mechanisms (PLAIN, SCRAM), the ACL authorizer and its ZooKeeper cache, TLS contexts.

Kafka 2.8's behaviour, field by field, is in shared/reference/security.md. Pure pieces (the SCRAM formatter)
are shared with the client side (protocol.client), so nothing here imports gevent at module level.
"""
