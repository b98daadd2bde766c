"""Who is looking: the console's server-side sessions, their logins and anti-forgery tokens, and the clients that
act for them.

The browser keeps one signed cookie holding a random session id (HttpOnly, SameSite=Lax). Everything else stays
in this process: the per-session CSRF token every form and script sends back, and, on a SASL cluster, the login
(username and password) the console's client presents to the brokers, so the cluster's ACLs apply to what each
visitor sees and does. Clients are pooled per principal: a page checks one out for its request and gives it back,
or drops it when the cluster failed under it (the next page opens a fresh connection).
"""
from __future__ import annotations

import dataclasses
import hmac
import secrets
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from admin_cli.kafka_client import AdminClient
from kbroker.protocol.client.security import ClientSecurity

SESSION_IDLE_SECONDS = 8 * 3600      # a session unused this long is forgotten (its login with it)
POOL_IDLE_CLIENTS = 4                # idle clients kept per principal


@dataclass
class Visitor:
    csrf_token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    username: str | None = None
    password: str | None = None
    seen: float = field(default_factory=time.monotonic)

    def token_matches(self, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(token.encode(), self.csrf_token.encode())


class Visitors:
    """Sessions by id; ids are random, unguessable and replaced at login (no session fixation)."""

    def __init__(self):
        self._by_id: dict[str, Visitor] = {}
        self._lock = threading.Lock()

    def get(self, sid: str | None) -> Visitor | None:
        now = time.monotonic()
        with self._lock:
            visitor = self._by_id.get(sid) if sid else None
            if visitor is not None and now - visitor.seen > SESSION_IDLE_SECONDS:
                del self._by_id[sid]
                visitor = None
            if visitor is not None:
                visitor.seen = now
            return visitor

    def new(self, username: str | None = None, password: str | None = None) -> tuple[str, Visitor]:
        sid = secrets.token_urlsafe(32)
        visitor = Visitor(username=username, password=password)
        with self._lock:
            self._by_id[sid] = visitor
        return sid, visitor

    def forget(self, sid: str | None) -> None:
        with self._lock:
            self._by_id.pop(sid, None)


class ClientPool:
    """AdminClients of the console, pooled by principal (one pool when the cluster needs no login)."""

    def __init__(self, bootstrap: list[tuple[str, int]], security: ClientSecurity | None, timeout: float):
        self.bootstrap, self.security, self.timeout = bootstrap, security, timeout
        self._idle: dict[tuple, list[AdminClient]] = {}
        self._lock = threading.Lock()

    def security_for(self, visitor: Visitor | None) -> ClientSecurity | None:
        if self.security is None or not self.security.uses_sasl or visitor is None or visitor.username is None:
            return self.security
        return dataclasses.replace(self.security, username=visitor.username, password=visitor.password)

    def new_client(self, security: ClientSecurity | None, timeout: float | None = None) -> AdminClient:
        return AdminClient(self.bootstrap, timeout=timeout or self.timeout, client_id="kbroker-console",
                           security=security)

    @contextmanager
    def client(self, visitor: Visitor | None):
        """A client acting as visitor's principal; closed instead of pooled when the block raised."""
        security = self.security_for(visitor)
        key = (security.username, security.password) if security is not None else (None, None)
        with self._lock:
            idle = self._idle.get(key)
            client = idle.pop() if idle else None
        if client is None:
            client = self.new_client(security)
        try:
            yield client
        except BaseException:
            client.close()
            raise
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if len(idle) < POOL_IDLE_CLIENTS:
                idle.append(client)
                client = None
        if client is not None:
            client.close()

    def close(self) -> None:
        with self._lock:
            clients = [c for idle in self._idle.values() for c in idle]
            self._idle.clear()
        for c in clients:
            c.close()
