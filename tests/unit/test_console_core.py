"""The console's request checks, without a cluster: every state-changing request needs the session's token and the
console's own origin, a SASL cluster's pages need a login first, and a login never redirects off the console."""
from __future__ import annotations

import re

import pytest

from kbroker.console.app import create_app
from kbroker.console.login import _local
from kbroker.console.web import ConsoleSettings, Series
from kbroker.protocol.client.security import ClientSecurity

NOWHERE = [("127.0.0.1", 1)]       # no broker: these requests never reach the cluster
SASL = ClientSecurity(protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256", username="console", password="x")


def token_of(client) -> str:
    html = client.get("/login").get_data(as_text=True)
    return re.search(r'name="csrf-token" content="([^"]+)"', html).group(1)


@pytest.fixture
def sasl_app():
    return create_app(ConsoleSettings(NOWHERE, SASL, request_timeout=0.5))


def test_pages_of_a_sasl_cluster_ask_for_a_login_first(sasl_app):
    client = sasl_app.test_client()
    r = client.get("/topics")
    assert r.status_code == 302 and r.headers["Location"].startswith("/login?next=")
    assert client.get("/overview/throughput.json").status_code == 401
    page = client.get("/login")
    assert page.status_code == 200 and b"SCRAM-SHA-256" in page.data


def test_a_post_without_the_session_token_is_refused(sasl_app):
    client = sasl_app.test_client()
    token = token_of(client)
    assert client.post("/login", data={"username": "a", "password": "b"}).status_code == 403
    assert client.post("/login", data={"username": "a", "password": "b", "csrf_token": token + "x"}).status_code == 403
    # another browser's session has its own token
    other = sasl_app.test_client()
    assert other.post("/login", data={"username": "a", "password": "b", "csrf_token": token}).status_code == 403


@pytest.mark.parametrize("headers", [{"Origin": "http://evil.example"}, {"Origin": "null"},
                                     {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"}])
def test_a_post_from_another_site_is_refused_even_with_the_token(sasl_app, headers):
    client = sasl_app.test_client()
    token = token_of(client)
    r = client.post("/logout", data={"csrf_token": token}, headers=headers)
    assert r.status_code == 403


def test_the_console_own_post_passes_the_checks(sasl_app):
    client = sasl_app.test_client()
    token = token_of(client)
    r = client.post("/logout", data={"csrf_token": token}, headers={"Origin": "http://localhost",
                                                                     "Sec-Fetch-Site": "same-origin"})
    assert r.status_code == 302 and r.headers["Location"] == "/login"


def test_a_failed_login_keeps_nobody_logged_in(sasl_app):
    client = sasl_app.test_client()
    token = token_of(client)
    r = client.post("/login", data={"username": "alice", "password": "pw", "csrf_token": token})
    assert r.status_code == 503                     # no broker answers at NOWHERE
    assert client.get("/topics").status_code == 302


@pytest.mark.parametrize("target,expected", [
    ("/topics?x=1", "/topics?x=1"), ("", "/"), (None, "/"), ("https://evil.example/", "/"),
    ("//evil.example/x", "/"), ("javascript:alert(1)", "/"), ("topics", "/")])
def test_after_login_only_paths_of_the_console(sasl_app, target, expected):
    with sasl_app.test_request_context():
        assert _local(target) == expected


def test_escaped_error_messages_and_security_headers():
    app = create_app(ConsoleSettings(NOWHERE, request_timeout=0.5))
    r = app.test_client().get("/<script>alert(1)</script>")
    assert r.status_code == 404
    assert b"<script>alert" not in r.data
    assert "script-src 'self'" in r.headers["Content-Security-Policy"]
    assert r.headers["X-Frame-Options"] == "DENY"
    r = app.test_client().get("/")                   # no broker: the error page, 503
    assert r.status_code == 503 and b"did not answer" in r.data


def test_series_rates_of_a_growing_total():
    s = Series(max_age=10)
    for t, v in ((0, 0), (1, 10), (2, 30), (3, 20), (15, 40)):
        s.add(t, v)
    assert [t for t, _ in s.samples] == [15]        # older than max_age dropped
    s2 = Series()
    for t, v in ((0, 0), (1, 10), (2, 30), (3, 20)):
        s2.add(t, v)
    assert s2.rates() == [(1, 10.0), (2, 20.0), (3, 0.0)]
