"""SASL/PLAIN's one message (RFC 4616): the client's token `[authzid] NUL username NUL password`, which the server
answers with an empty token (kbroker.security.plain_server checks it)."""


def client_token(username: str, password: str) -> bytes:
    """The client's PLAIN token (no authorization id, as Kafka's clients send it)."""
    return f"\0{username}\0{password}".encode()
