"""The SASL exchanges as pure functions: PLAIN (PlainSaslServer's checks) and SCRAM (server and client sides of
RFC 5802 as Kafka's ScramSaslServer/ScramSaslClient), good and bad input. Every refusal is a KafkaError
SASL_AUTHENTICATION_FAILED with Kafka's message, never another exception."""
from __future__ import annotations

import base64

import pytest

from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.sasl import plain
from kbroker.protocol.sasl.scram import (ScramClient, client_key, digest, escape_name, hmac_digest, make_credential,
                                         salted_password, unescape_name)
from kbroker.security import plain_server
from kbroker.security.scram_server import ScramServer

USERS = {"alice": "alice-secret"}


def refused(fn, *args) -> str:
    with pytest.raises(KafkaError) as e:
        fn(*args)
    assert e.value.code == Errors.SASL_AUTHENTICATION_FAILED
    return str(e.value)


def test_plain_accepts_the_right_password_with_or_without_authzid():
    assert plain_server.authenticate(plain.client_token("alice", "alice-secret"), USERS) == "alice"
    assert plain_server.authenticate(b"alice\0alice\0alice-secret", USERS) == "alice"


@pytest.mark.parametrize("token, message", [
    (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
    (b"\0bob\0alice-secret", "Authentication failed: Invalid username or password"),
    (b"alice\0alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"\0alice\0alice-secret\0", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    (b"", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    (b"\0\0alice-secret", "Authentication failed: username not specified"),
    (b"\0alice\0", "Authentication failed: password not specified"),
    (b"bob\0alice\0alice-secret", "authorization id that is different from username"),
    (b"\0al\xffice\0x", "not UTF-8"),
])
def test_plain_refusals(token, message):
    assert message in refused(plain_server.authenticate, token, USERS)


def test_plain_users_from_jaas_options():
    assert plain_server.users_from_jaas({"username": "admin", "password": "p", "user_admin": "p", "user_bob": "b",
                                  "user_": "x"}) == {"admin": "p", "bob": "b"}


@pytest.mark.parametrize("name", ["plain", "a,b", "a=b", "=2C", ",=,", "ünï"])
def test_saslname_escapes_round_trip(name):
    assert unescape_name(escape_name(name)) == name


@pytest.mark.parametrize("text", ["a=b", "a=2", "a=4F", "a,b"])
def test_bad_saslname(text):
    with pytest.raises(ValueError):
        unescape_name(text)


MECHS = ["SCRAM-SHA-256", "SCRAM-SHA-512"]


def server_for(mech: str, users: dict[str, str], iterations: int = 4096) -> ScramServer:
    creds = {u: make_credential(mech, p, iterations) for u, p in users.items()}
    return ScramServer(mech, creds.get)


@pytest.mark.parametrize("mech", MECHS)
@pytest.mark.parametrize("user", ["alice", "carol,=x"])
def test_scram_exchange_succeeds_both_ways(mech, user):
    server = server_for(mech, {user: "pw"})
    client = ScramClient(mech, user, "pw")
    server_first = server.evaluate(client.first())
    client.verify(server.evaluate(client.final(server_first)))   # the client checks the server's signature
    assert server.complete and server.username == user


@pytest.mark.parametrize("mech", MECHS)
def test_scram_wrong_password_unknown_user_and_too_few_iterations(mech):
    generic = f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mech}"
    server = server_for(mech, {"alice": "pw"})
    client = ScramClient(mech, "alice", "wrong")
    final = client.final(server.evaluate(client.first()))
    assert refused(server.evaluate, final) == generic
    assert refused(server_for(mech, {"alice": "pw"}).evaluate, ScramClient(mech, "bob", "pw").first()) == generic
    low = server_for(mech, {"alice": "pw"}, iterations=4095)
    assert refused(low.evaluate, ScramClient(mech, "alice", "pw").first()) == generic


@pytest.mark.parametrize("first", [
    b"", b"garbage", b"p=tls-unique,,n=alice,r=abc", b"n,,r=abc,n=alice", b"n,,n=alice", b"n,,n=alice,r=",
    b"n,,n=,r=abc", b"n,,n=al=ice,r=abc", b"n,x,n=alice,r=abc", b"n,,n=alice,r=abc,=zz", b"\xff\xfe",
])
def test_scram_malformed_client_first(first):
    assert "invalid credentials" in refused(server_for("SCRAM-SHA-256", {"alice": "pw", "al=ice": "x"}).evaluate,
                                            first)


def test_scram_authzid_must_match_the_user():
    server = server_for("SCRAM-SHA-256", {"alice": "pw"})
    assert "authorization id that is different from username" in refused(server.evaluate, b"n,a=bob,n=alice,r=abc")
    ok = server_for("SCRAM-SHA-256", {"alice": "pw"})
    assert ok.evaluate(b"n,a=alice,n=alice,r=abc").startswith(b"r=abc")


def _final_parts(mech):
    server = server_for(mech, {"alice": "pw"})
    client = ScramClient(mech, "alice", "pw")
    server_first = server.evaluate(client.first())
    return server, client, server_first, client.final(server_first).decode()


@pytest.mark.parametrize("mangle", [
    lambda f: f.replace("c=biws", "c=eSws"),                 # channel binding y,, instead of n,,
    lambda f: f.replace("c=biws,", ""),
    lambda f: f.rsplit(",p=", 1)[0],                          # no proof
    lambda f: f.rsplit(",p=", 1)[0] + ",p=not*base64",
    lambda f: f.rsplit(",p=", 1)[0] + ",p=" + base64.b64encode(b"short").decode(),
    lambda f: f.replace("r=", "r=x", 1) + "x",                # nonce not ending with the server's
    lambda f: "garbage",
])
def test_scram_malformed_client_final(mangle):
    server, _, _, final = _final_parts("SCRAM-SHA-512")
    assert "invalid credentials" in refused(server.evaluate, mangle(final).encode())


def test_scram_final_nonce_only_needs_the_server_part():
    """librdkafka before 2.6.1 does not repeat client + server nonce in the final r=; only its end (the server's
    nonce) is checked, and the proof covers the message as sent."""
    mech = "SCRAM-SHA-256"
    server = server_for(mech, {"alice": "pw"})
    server_first = server.evaluate(b"n,,n=alice,r=cnonce").decode()
    attrs = dict(kv.split("=", 1) for kv in server_first.split(","))
    server_nonce = attrs["r"][len("cnonce"):]
    without_proof = f"c=biws,r=other{server_nonce}"
    auth_message = f"n=alice,r=cnonce,{server_first},{without_proof}".encode()
    salted = salted_password(mech, "pw", base64.b64decode(attrs["s"]), int(attrs["i"]))
    key = client_key(mech, salted)
    signature = hmac_digest(mech, digest(mech, key), auth_message)
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(key, signature))).decode()
    assert server.evaluate(f"{without_proof},p={proof}".encode()).startswith(b"v=")
    assert server.complete


def test_scram_messages_after_completion_are_refused():
    server, client, _, final = _final_parts("SCRAM-SHA-256")
    server.evaluate(final.encode())
    refused(server.evaluate, final.encode())


@pytest.mark.parametrize("server_first, message", [
    (b"garbage", "Invalid SCRAM server first message"),
    (b"r=other,s=c2FsdA==,i=4096", "Invalid server nonce"),
    ("r={nonce}x,s=c2FsdA==,i=4095", "less than the minimum 4096"),
    ("r={nonce}x,s=*,i=4096", "Invalid SCRAM server first message"),
])
def test_scram_client_refuses_bad_server_first(server_first, message):
    client = ScramClient("SCRAM-SHA-256", "alice", "pw")
    nonce = client.first().decode().rsplit("r=", 1)[1]
    if isinstance(server_first, str):
        server_first = server_first.format(nonce=nonce).encode()
    assert message in refused(client.final, server_first)


def test_scram_client_refuses_a_wrong_server_signature_and_server_errors():
    server, client, _, final = _final_parts("SCRAM-SHA-256")
    assert "Invalid server signature" in refused(client.verify, b"v=" + base64.b64encode(b"x" * 32))
    assert "Invalid server signature" in refused(client.verify, b"v=***")
    assert "failed with error: invalid-proof" in refused(client.verify, b"e=invalid-proof")


# ---- ssl.principal.mapping.rules (Kafka's SslPrincipalMapper) ------------------------------------------------

def test_principal_mapping_rules():
    from kbroker.network.tls import PrincipalMapper
    dn = "CN=Alice,OU=ServiceUsers,O=kbroker"
    assert PrincipalMapper(None).name(dn) == dn
    assert PrincipalMapper("DEFAULT").name(dn) == dn
    rules = PrincipalMapper(r"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, RULE:^CN=([^,]*),O=(.*)$/$1@$2/U, DEFAULT")
    assert rules.name(dn) == "alice"
    assert rules.name("CN=bob,O=acme") == "BOB@ACME"
    assert rules.name("O=acme") == "O=acme"                          # falls through to DEFAULT
    assert PrincipalMapper(r"RULE:^CN=(.*)$/$1/").name("O=acme") is None   # no rule applies: refused
    assert PrincipalMapper(r"RULE:^CN=(.*?)\/x$/$1/").name("CN=a/x") == "a"


@pytest.mark.parametrize("rules", ["RULE:^CN=(.*$/$1/", "NOPE", "RULE:abc"])
def test_bad_principal_mapping_rules(rules):
    from kbroker.config import ConfigError
    from kbroker.network.tls import PrincipalMapper
    with pytest.raises(ConfigError, match="ssl.principal.mapping.rules"):
        PrincipalMapper(rules)
