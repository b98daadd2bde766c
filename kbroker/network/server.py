"""The gevent socket server: one acceptor greenlet per listener, one greenlet per connection.

Per connection, requests are handled and answered strictly in order (Kafka's guarantee); a client may pipeline,
the kernel buffers what it sent ahead. One overlap goes beyond Kafka, which reads a connection's next request
only once the last one is answered: a Produce waiting for its acks=all replication answers with a
DeferredAnswer once its records are appended, and the connection reads on — a following Produce is appended at
once (appends stay in request order) and one follower fetch carries both, instead of a replication round trip
each (librdkafka keeps up to 5 in flight, so a produce otherwise waits out up to 5 round trips). Any other
request waits until every earlier answer is sent, as in Kafka; answers leave in request order; at most
MAX_DEFERRED answers wait per connection. Framing follows Kafka's NetworkReceive: a 4-byte size then the
request; a size below zero or above socket.request.max.bytes closes the connection, as does a request that
cannot be parsed. A failure on one connection never reaches the others.

Each listener has one acceptor greenlet, as Kafka's Acceptor thread: it accepts a connection, has the connection
quotas admit it (quota.connection_quotas: creation rates and connection counts, broker-wide, per listener and per
IP), waiting there while the broker or the listener is throttled or full (the next connections wait in the kernel's
accept queue meanwhile), then serves it in a greenlet of its own. A connection over its IP's creation rate is closed
unserved after its throttle time, one over max.connections.per.ip at once. One reaper greenlet closes the
connections idle for longer than connections.max.idle.ms (no request read and no answer made since: a connection
whose request is still being handled, a long-poll fetch, counts as idle too, as in Kafka, whose Selector sees no
activity on a muted channel; negative: never) and, while the broker holds more than max.connections, the least
recently active connections of the listeners other than the protected inter-broker one (Kafka's
closeExcessConnections).

A client over a quota is answered at once and its connection is then muted (Kafka's KIP-219 channel mute): the
dispatcher sets the session's muted_until, and nothing more is read from the connection until then; a request
already read ahead behind a deferred Produce, when its answer brought the throttle, waits unhandled until then.

The server knows frames, not APIs: the broker hands it the dispatcher (frame, session, times -> response pieces),
so nothing under network/ imports api/ (DESIGN.md §5). A Session is the connection's identity as requests see it:
the listener it came in on, that listener's security protocol, the peer address and the authenticated principal
(Kafka's KafkaPrincipal as "User:<name>"; User:ANONYMOUS until TLS or SASL says otherwise).

Each request read gets a RequestTimes, its timeline as Kafka's RequestChannel.Request keeps it: the server stamps
when it was read and when its answer's send began and ended, the dispatcher the rest; once the answer is sent (or
none was due) it goes to the request_done sink (the broker's metrics: Kafka's request time breakdown).

Each listener counts what Kafka's Selector counts for its socket-server-metrics (ListenerStats, read by
kbroker.metrics at scrapes): frames read and bytes, answers sent and bytes, authentications ended. As in Kafka, the
frames of a SASL exchange and their answers are not counted (Kafka's authenticator reads them itself); a TLS
handshake or a SASL exchange that ends the connection with an authentication error counts a failed one.
"""
from __future__ import annotations

import logging
import os
import socket
import struct
import time
from collections import deque
from dataclasses import dataclass

import gevent
import gevent.event
import gevent.socket
from gevent.socket import wait_write

from ..config import ConfigError
from ..protocol.deferred import DeferredAnswer
from ..protocol.header import CloseConnection
from ..protocol.hotpath import is_file_slice
from ..quota.connection_quotas import ConnectionThrottled, TooManyConnections
from . import tls
from .sasl import SASL_AUTHENTICATE, SaslAuthenticator, SaslSettings

log = logging.getLogger("kbroker.network")
_SIZE = struct.Struct(">i")
_API_KEY = struct.Struct(">h")
_API_KEY_VERSION = struct.Struct(">hh")
TLS_CHUNK = 256 * 1024   # bytes of a file slice read at a time for a TLS connection
FAILURE_LINGER = 1.0     # seconds the client gets to close first after a SASL failure answer
PRODUCE_API_KEY = 0      # the only request read while earlier answers are deferred
MAX_DEFERRED = 5         # answers waiting per connection before it stops reading (librdkafka's and Java's
                         # idempotent producers keep at most 5 requests in flight)
ACCEPT_BACKLOG = 1024
ACCEPT_ERROR_DELAY = 0.1   # seconds an acceptor pauses after accept() failed (out of file descriptors, ...)
REAP_INTERVAL = 1.0      # seconds between the reaper's looks at idle and excess connections (at most)


def read_exact(sock, n: int) -> bytearray | None:
    """n bytes, or None if the peer closed (or reset) before they all arrived."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        try:
            k = sock.recv_into(view[got:], n - got)
        except OSError:
            return None
        if k == 0:
            return None
        got += k
    return buf


def send_file_slice(sock, piece) -> None:
    """os.sendfile the slice to the socket, waiting cooperatively when the socket buffer is full.
    Raises OSError if the file ends early (the response would be short: the connection must close)."""
    out_fd, in_fd = sock.fileno(), piece.fd
    offset, left = piece.position, piece.length
    while left > 0:
        try:
            sent = os.sendfile(out_fd, in_fd, offset, left)
        except BlockingIOError:
            wait_write(out_fd)
            continue
        if sent == 0:
            raise OSError(f"file ended {left} bytes before the slice did")
        offset += sent
        left -= sent


def copy_file_slice(sock, piece) -> None:
    """Read the slice (os.pread, TLS_CHUNK bytes at a time) and send it through the socket (a TLS one: sendfile
    would bypass the encryption). Raises OSError if the file ends early."""
    offset, left = piece.position, piece.length
    while left > 0:
        chunk = os.pread(piece.fd, min(left, TLS_CHUNK), offset)
        if not chunk:
            raise OSError(f"file ended {left} bytes before the slice did")
        sock.sendall(chunk)
        offset += len(chunk)
        left -= len(chunk)


def linger_for_close(sock, seconds: float) -> None:
    """Wait (reading and dropping input) until the peer closes, for at most `seconds`. After a SASL failure answer
    the client closes first: kafka-python drops an answer that arrives together with the end of the stream and
    would report a lost connection instead of the authentication failure."""
    with gevent.Timeout(seconds, False):
        try:
            while sock.recv(4096):
                pass
        except OSError:
            pass


LARGE_PIECE = 64 * 1024   # send_pieces sends byte pieces this large without copying them


def send_pieces(sock, pieces, zero_copy: bool = True) -> int:
    """Write a response given as pieces: small byte pieces are coalesced, large ones (cached down-converted
    records) sent as they are, file slices go by sendfile (zero_copy, plaintext sockets) or are read and sent
    (TLS sockets). Returns the bytes sent."""
    pending = bytearray()
    sent = 0
    for piece in pieces:
        if is_file_slice(piece):
            if pending:
                sock.sendall(pending)
                pending = bytearray()
            (send_file_slice if zero_copy else copy_file_slice)(sock, piece)
            sent += piece.length
        elif len(piece) >= LARGE_PIECE:
            if pending:
                sock.sendall(pending)
                pending = bytearray()
            sock.sendall(piece)
            sent += len(piece)
        else:
            pending += piece
    if pending:
        sock.sendall(pending)
    return sent + len(pending)


def stamping(dispatch):
    """dispatch marking the connection active when a request arrives and when its answer is made (Kafka's Selector
    counts a channel active on every read and write; the reaper closes the idle ones)."""
    clock = time.monotonic

    def stamped(frame, session, times):
        session.last_active = clock()
        out = dispatch(frame, session, times)
        session.last_active = clock()
        return out
    return stamped


class ListenerStats:
    """One listener's counts for Kafka's socket-server-metrics (kbroker.metrics names them), updated on the
    connections' greenlets once authenticated: frames read (`receives`, their bytes with the size prefix),
    answers sent (`sends`, their bytes, the largest since metrics last sampled it), authentications ended."""
    __slots__ = ("auth_failed", "auth_no_reauth", "auth_ok", "received_bytes", "receives", "send_max", "sends",
                 "sent_bytes")

    def __init__(self):
        for name in self.__slots__:
            setattr(self, name, 0)

    def authenticated(self, client_reauth: bool) -> None:
        self.auth_ok += 1
        if not client_reauth:
            self.auth_no_reauth += 1


class RequestTimes:
    """One request's timeline in time.perf_counter() seconds (Kafka's RequestChannel.Request): `received` when its frame
    (of `size` bytes, after the size prefix) was read; the dispatcher stamps `dequeued` (its handling starts),
    `local_done` (the handler returned), `ready` (the response is made), adds `remote` (waits inside the handler that
    Kafka's handlers park in a purgatory) and names it (`name`, `version`, `throttle_ms`); `send_start` and `end` frame
    the answer's send. A request the dispatcher did not name (it closed the connection) is not reported."""
    __slots__ = ("dequeued", "end", "local_done", "name", "ready", "received", "remote", "send_start", "size",
                 "throttle_ms", "version")

    def __init__(self, received: float, size: int = 0):
        self.received, self.size = received, size
        self.remote = 0.0
        self.name = None
        self.throttle_ms = 0


class _Answers:
    """A connection's answers not sent yet, in request order (response pieces, None for no response, or
    DeferredAnswers, each with its request's RequestTimes): every answer leaves through here. Whichever greenlet
    completes the answer at the head sends it and every ready one behind it; one sender at a time. Each answer
    sent (or due none) reports its request's times to request_done; each one sent counts in `stats` (None while a
    SASL exchange runs)."""

    def __init__(self, sock, address, zero_copy: bool, request_done, stats: ListenerStats | None):
        self.sock, self.address, self.zero_copy = sock, address, zero_copy
        self.request_done, self.stats = request_done, stats
        self.queue: deque = deque()
        self.sending = False
        self.broken = False            # a send failed or an answer failed: the connection is being closed
        self.sent = gevent.event.Event()   # set each time the queue shrinks

    def add(self, answer, times: RequestTimes) -> None:
        self.queue.append((answer, times))
        if isinstance(answer, DeferredAnswer):
            answer.on_ready(self._ready)
        else:
            self.flush()

    def _ready(self, _answer) -> None:
        self.flush()

    def flush(self) -> None:
        if self.sending:
            return      # the sending greenlet picks up what became ready meanwhile
        self.sending = True
        try:
            queue = self.queue
            clock = time.perf_counter
            while queue:
                head, times = queue[0]
                if isinstance(head, DeferredAnswer):
                    if not head.ready:
                        break
                    if head.failed:
                        self._break()
                    head = head.value
                if not self.broken:
                    times.send_start = clock()
                    try:
                        if head is not None:
                            sent = send_pieces(self.sock, head, self.zero_copy)
                            stats = self.stats
                            if stats is not None:
                                stats.sends += 1
                                stats.sent_bytes += sent
                                if sent > stats.send_max:   # noqa: PLR1730 (max() costs a call per response)
                                    stats.send_max = sent
                    except OSError as e:
                        log.debug("closing connection from %s:%s: %s", self.address[0], self.address[1], e)
                        self._break()
                    else:
                        times.end = clock()
                        if times.name is not None:
                            self.request_done(times)
                queue.popleft()
                self.sent.set()
        finally:
            self.sending = False

    def _break(self) -> None:
        """Close the connection under its reader (which then ends)."""
        if not self.broken:
            self.broken = True
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def wait_for_room(self, all_sent: bool) -> None:
        """Until every answer is sent (all_sent) or fewer than MAX_DEFERRED wait."""
        limit = 0 if all_sent else MAX_DEFERRED - 1
        while len(self.queue) > limit:
            self.sent.clear()
            self.sent.wait()


ANONYMOUS = "User:ANONYMOUS"


@dataclass
class Session:
    """Who is on the other end of one connection (Kafka's RequestContext principal, listener and address)."""
    listener: str                 # listener name, e.g. "PLAINTEXT"
    security_protocol: str        # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    client_address: tuple         # (ip, port)
    principal: str = ANONYMOUS    # "User:<name>"
    sasl: object = None           # network.sasl.SaslAuthenticator on a SASL listener
    last_active: float = 0.0      # time.monotonic() of the last request read or answer made (the idle reaper's)
    muted_until: float = 0.0      # time.monotonic() before which no request is read (a quota's throttle)

    @property
    def client_host(self) -> str:
        return str(self.client_address[0])

    def mute_for(self, ms: int) -> None:
        """Read no request for ms milliseconds from now (a quota throttled the client, KIP-219)."""
        self.muted_until = max(self.muted_until, time.monotonic() + ms / 1000.0)

    def wait_unmuted(self) -> None:
        muted = self.muted_until - time.monotonic()
        if muted > 0:
            gevent.sleep(muted)


class SocketServer:
    def __init__(self, dispatch, config, listeners, max_request_bytes: int, quotas, credentials, request_done):
        """dispatch(frame, session, times) -> the response pieces (or a DeferredAnswer of them), or None when none is
        due; config: the broker's (live) config, for the listeners' security; quotas: the broker's
        ConnectionQuotas; credentials: the SCRAM credential cache (security.credentials) for SASL listeners;
        request_done(times): each request's RequestTimes once answered."""
        self.config = config
        self.request_done = request_done
        self.quotas = quotas
        idle_ms = config["connections.max.idle.ms"]
        self.idle_s = idle_ms / 1000 if idle_ms >= 0 else None
        self.dispatch = dispatch if self.idle_s is None else stamping(dispatch)
        self.sasl_settings = {l.name: SaslSettings.for_listener(config, l.name, credentials)
                              for l in listeners if l.security_protocol.startswith("SASL_")}
        # ConfigError when a keystore or truststore does not load
        self.tls_contexts = {l.name: (tls.server_context(config, l.name),
                                      tls.PrincipalMapper(config.listener_value(l.name, "ssl.principal.mapping.rules")))
                             for l in listeners if l.security_protocol in ("SSL", "SASL_SSL")}
        self._tls_stores = {name: config.tls_stores[name] for name in self.tls_contexts}   # what they were made of
        self.max_request_bytes = max_request_bytes
        self.sockets: dict[str, socket.socket] = {}     # listening socket per listener name
        self.bound_ports: dict[str, int] = {}
        self.listeners = listeners
        self.listener_stats = {l.name: ListenerStats() for l in listeners}
        self.connections: dict = {}                     # socket -> Session, of every admitted connection
        self._throttled: set = set()                    # sockets waiting to be closed unserved
        self._greenlets: list = []                      # the acceptors and the reaper

    def reload_tls(self) -> None:
        """New server contexts for the TLS listeners whose stores the config has read again (a dynamic key store
        or trust store): connections accepted from now on get them, those open keep theirs."""
        for name, (_, mapper) in list(self.tls_contexts.items()):
            if self._tls_stores[name] is not self.config.tls_stores[name]:
                try:
                    self.tls_contexts[name] = (tls.server_context(self.config, name), mapper)
                except ConfigError as e:   # the config loaded them already; kept as they were if not
                    log.error("listener %s keeps its TLS context: %s", name, e)
                    continue
                self._tls_stores[name] = self.config.tls_stores[name]
                log.info("listener %s serves its new key store and trust store to new connections", name)

    def bind(self) -> None:
        """Bind every listener now (so a clash fails startup before anything is registered)."""
        for listener in self.listeners:
            host = listener.host or "0.0.0.0"
            sock = gevent.socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((host, listener.port))
                sock.listen(ACCEPT_BACKLOG)
            except OSError:
                sock.close()
                raise
            self.sockets[listener.name] = sock
            self.bound_ports[listener.name] = sock.getsockname()[1]

    def start(self) -> None:
        self._greenlets = [gevent.spawn(self._accept, l) for l in self.listeners] + [gevent.spawn(self._reap)]

    def stop(self) -> None:
        gevent.killall(self._greenlets)
        for sock in [*self.sockets.values(), *self.connections, *self._throttled]:
            try:
                sock.close()
            except OSError:
                pass

    def _accept(self, listener) -> None:
        """The listener's acceptor: accept, have the connection admitted (waiting there while the listener or the
        broker is throttled or full), serve it in a greenlet of its own; close it unserved if its IP is over a
        limit."""
        name, server = listener.name, self.sockets[listener.name]
        handle = self._handler(listener)
        while True:
            try:
                sock, address = server.accept()
            except OSError as e:
                log.error("accepting a connection on listener %s failed: %s", name, e)
                gevent.sleep(ACCEPT_ERROR_DELAY)
                continue
            ip = address[0]
            if ip.startswith("::ffff:") and "." in ip:   # an IPv4 client of a dual-stack listener
                ip = ip[7:]
            try:
                self.quotas.inc(name, ip)
            except ConnectionThrottled as e:
                log.debug("closing connection from %s:%s in %d ms, unserved: %s", ip, address[1], e.throttle_ms, e)
                self._close_later(sock, e.throttle_ms)
                continue
            except TooManyConnections as e:
                log.info("closing connection from %s:%s: %s (max.connections.per.ip)", ip, address[1], e)
                sock.close()
                continue
            except BaseException:
                sock.close()
                raise
            gevent.spawn(handle, sock, address, ip)

    def _close_later(self, sock, delay_ms: int) -> None:
        self._throttled.add(sock)

        def close():
            self._throttled.discard(sock)
            sock.close()
        gevent.spawn_later(delay_ms / 1000, close)

    def _handler(self, listener):
        listener_name, protocol = listener.name, listener.security_protocol
        stats = self.listener_stats[listener_name]

        def handle(sock, address, ip):
            # the listener's context now: a rotated key store serves the connections accepted after it
            tls_context, mapper = self.tls_contexts.get(listener_name, (None, None))
            session = Session(listener_name, protocol, address, last_active=time.monotonic())
            self.connections[sock] = session
            conn = sock
            try:
                # As Kafka: no Nagle delay on responses (a response's last partial segment would otherwise wait
                # for the client's delayed ACK, ~40 ms).
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if tls_context is not None:
                    # wrapping detaches the plain socket: from here the TLS one is the connection
                    try:
                        conn = tls.handshake(tls_context, sock, f"{ip}:{address[1]}")
                    except tls.HandshakeRefused:
                        stats.auth_failed += 1
                        conn = None
                    self.connections.pop(sock, None)
                    if conn is None:
                        return
                    self.connections[conn] = session
                    try:
                        session.principal = tls.principal(conn, mapper) or ANONYMOUS
                    except ValueError as e:
                        log.info("closing connection from %s:%s: %s", ip, address[1], e)
                        return
                if listener_name in self.sasl_settings:
                    session.sasl = SaslAuthenticator(self.sasl_settings[listener_name], f"{ip}:{address[1]}")
                elif tls_context is not None:   # SSL: the handshake authenticated (no re-authentication there)
                    stats.authenticated(False)
                self._serve(conn, address, session, stats)
            finally:
                self.connections.pop(conn, None)
                self.quotas.dec(listener_name, ip)
                sock.close()
                if conn is not None:
                    conn.close()
        return handle

    def _reap(self) -> None:
        """Close the connections idle for longer than connections.max.idle.ms, and the excess ones while the broker
        is over max.connections; looks every REAP_INTERVAL, for idle ones only once the oldest activity may have
        expired (Kafka's IdleExpiryManager)."""
        idle = self.idle_s
        tick = REAP_INTERVAL if idle is None else min(REAP_INTERVAL, max(idle, 0.1))
        next_idle_check = 0.0
        while True:
            gevent.sleep(tick)
            now = time.monotonic()
            if idle is not None and now >= next_idle_check:
                oldest = now
                for conn, session in list(self.connections.items()):
                    if now - session.last_active > idle:
                        self.quotas.closing_idle(session.listener)
                        self._close(conn, session, f"idle for more than connections.max.idle.ms={idle * 1000:.0f}",
                                    logging.DEBUG)
                    else:
                        oldest = min(oldest, session.last_active)
                next_idle_check = oldest + idle
            excess = self.quotas.excess()
            if excess:
                closable = [(s.last_active, c, s) for c, s in self.connections.items()
                            if s.listener != self.quotas.protected]
                closable.sort(key=lambda entry: entry[0])
                for _, conn, session in closable[:excess]:
                    self._close(conn, session, f"the broker is over max.connections={self.quotas.max_connections}",
                                logging.INFO)

    def _close(self, conn, session: Session, reason: str, level: int) -> None:
        """Close an admitted connection under its reader (which then ends, and its handler cleans up)."""
        log.log(level, "closing connection from %s:%s: %s", session.client_host, session.client_address[1], reason)
        self.connections.pop(conn, None)
        try:
            conn.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _serve(self, sock, address, session: Session, stats: ListenerStats) -> None:
        answers = _Answers(sock, address, session.security_protocol in ("PLAINTEXT", "SASL_PLAINTEXT"),
                           self.request_done, None if session.sasl else stats)
        clock = time.perf_counter
        while True:
            session.wait_unmuted()
            head = read_exact(sock, 4)
            if head is None:
                return
            (size,) = _SIZE.unpack(head)
            if size < 0 or size > self.max_request_bytes:
                log.warning("closing connection from %s:%s: request size %d is outside 0..%d "
                            "(socket.request.max.bytes)", address[0], address[1], size, self.max_request_bytes)
                return
            frame = read_exact(sock, size)
            if frame is None:
                log.debug("connection from %s:%s closed mid-request", *address[:2])
                return
            times = RequestTimes(clock(), size)
            auth = session.sasl
            if auth is not None and not auth.complete:
                if not self._authenticating(sock, answers, address, session, frame, times, stats):
                    return
                if auth.complete:
                    answers.stats = stats
                continue
            stats.receives += 1
            stats.received_bytes += size + 4
            if answers.queue:   # deferred answers wait: only a Produce goes ahead of them (the docstring's overlap)
                api_key = _API_KEY.unpack_from(frame, 0)[0] if len(frame) >= 2 else -1
                answers.wait_for_room(all_sent=api_key != PRODUCE_API_KEY)
            session.wait_unmuted()   # a throttle that came with a deferred answer while this request was read
            if answers.broken or not self._answer(answers, address, session, frame, times):
                return

    def _answer(self, answers: _Answers, address, session: Session, frame, times: RequestTimes,
                failure_delay: float = 0.0) -> bool:
        """Dispatch one request and send its answer (after the deferred ones before it); False when the
        connection must close. An answer that ends a SASL exchange with a failure is sent after failure_delay
        seconds."""
        try:
            out = self.dispatch(memoryview(frame), session, times)
        except CloseConnection as e:
            log.warning("closing connection from %s:%s: %s", address[0], address[1], e)
            return False
        except gevent.GreenletExit:
            raise
        except Exception:
            log.exception("closing connection from %s:%s: request handler failed", *address[:2])
            return False
        if session.sasl is not None and session.sasl.close_after:
            gevent.sleep(failure_delay)
        answers.add(out, times)
        return not answers.broken

    def _authenticating(self, sock, answers: _Answers, address, session: Session, frame,
                        times: RequestTimes, stats: ListenerStats) -> bool:
        """One frame before SASL authentication completed: a raw token after a v0 handshake, else a request the
        state machine must allow. False when the connection must close: a request not allowed (no answer), or
        after answering a failure (sent after connection.failed.authentication.delay.ms, as Kafka delays it; counted
        in stats as a failed authentication, as Kafka counts its AuthenticationExceptions)."""
        auth = session.sasl
        delay = self.config["connection.failed.authentication.delay.ms"] / 1000.0
        if auth.raw:
            answer = auth.raw_token(frame)
            if answer is None:
                stats.auth_failed += 1
                gevent.sleep(delay)
                return False
            try:
                sock.sendall(_SIZE.pack(len(answer)) + answer)
            except OSError:
                return False
        else:
            api_key, version = _API_KEY_VERSION.unpack_from(frame, 0) if len(frame) >= 4 else (-1, -1)
            if not auth.allows(api_key):
                log.info("closing connection from %s:%s: request with api key %d before SASL authentication "
                         "(state %s)", address[0], address[1], api_key, auth.state)
                return False
            # Kafka's connectedClientSupportsReauthentication: a SaslAuthenticate above v0 (KIP-368)
            auth.client_reauth = auth.client_reauth or (api_key == SASL_AUTHENTICATE and version > 0)
            if not self._answer(answers, address, session, frame, times, delay):
                return False
            if auth.close_after:
                stats.auth_failed += 1
                linger_for_close(sock, FAILURE_LINGER)
                return False
        if auth.complete:
            stats.authenticated(auth.client_reauth)
            session.principal = auth.principal
            log.debug("%s:%s authenticated as %s (%s)", address[0], address[1], auth.principal, auth.mechanism)
        return True
