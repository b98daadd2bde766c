"""The SASL mechanics both ends of a connection share, pure and without I/O: SCRAM (the RFC 5802 math, Kafka's
credential format, the messages and the client's exchange) and PLAIN's token. The shared client logs in with
them; the broker's authenticators (kbroker.security) check logins with them; kadmin and the admin manager make
and read credentials with them."""
