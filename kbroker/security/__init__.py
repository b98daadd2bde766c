"""Security on the broker's side: the SASL servers (PLAIN, SCRAM), the SCRAM credential cache, the ACL authorizer
and its ZooKeeper cache, certificates and the dev cluster's secured preset.

Kafka 2.8's behaviour, field by field, is in shared/reference/security.md. The SASL mechanics the client shares
(SCRAM's math, messages and credential format, PLAIN's token) are kbroker.protocol.sasl's, so nothing of the
client imports this package; nothing here imports gevent at module level.
"""
