"""One connection to one broker: framing, request headers, correlation checks, pipelining, timeouts.

Requests are message objects (kafka-python's classes, or ours from protocol.interbroker) whose version is
set; their bodies are encoded by the message class and the request header by protocol.header. Several
requests may be in flight: responses are read back in the order the requests were sent, each checked against
the correlation id it was sent with. A request that expects no response (Produce with acks=0) is only sent.

The socket is a plain blocking one: in the broker process gevent's monkey-patching makes it cooperative, in
kadmin, Spark's workers and the benchmarks it blocks its thread. Any failure closes the connection and raises
KafkaError (ConnectionLost when the broker could not be reached or stopped answering).

With a ClientSecurity, connect() also secures the connection before any request: TLS (the broker's certificate
checked against the trusted CAs and, unless ssl.endpoint.identification.algorithm is empty, the host name) and
the SASL login (SaslHandshake v1, then SaslAuthenticate with the PLAIN token or the SCRAM exchange, whose final
server signature is verified). A refused login raises KafkaError SASL_AUTHENTICATION_FAILED (or
UNSUPPORTED_SASL_MECHANISM) with the broker's message, and so does a certificate the client does not trust:
neither is worth retrying (errors.RETRIABLE does not hold them).
"""
from __future__ import annotations

import socket
import ssl
import struct
from collections import deque

from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from ..errors import Errors, KafkaError, error_name
from ..header import request_header, skip_tagged_fields
from ..sasl import plain
from ..sasl.scram import ScramClient
from .errors import ConnectionLost
from .security import ClientSecurity

_SIZE = struct.Struct(">i")
_JOIN_MAX = 1 << 16     # bodies up to this size go out in one send with their header
API_VERSIONS_KEY = 18   # its response header stays v0 even in flexible versions

# The highest version Kafka 2.8 serves, per API key: a client talking to a newer broker stays on 2.8's wire.
KAFKA_28_MAX = {
    0: 9, 1: 12, 2: 6, 3: 11, 4: 5, 5: 3, 6: 7, 7: 3, 8: 8, 9: 7, 10: 3, 11: 7, 12: 4, 13: 4, 14: 5, 15: 5,
    16: 4, 17: 1, 18: 3, 19: 7, 20: 6, 21: 2, 22: 4, 23: 4, 24: 3, 25: 3, 26: 3, 27: 1, 28: 3, 29: 2, 30: 2,
    31: 2, 32: 4, 33: 2, 34: 2, 35: 2, 36: 2, 37: 3, 38: 2, 39: 2, 40: 2, 41: 2, 42: 2, 43: 2, 44: 1, 45: 0,
    46: 0, 47: 0, 48: 1, 49: 1, 50: 0, 51: 0, 56: 0, 57: 0, 60: 0, 61: 0,
    65: 0, 66: 0,   # DescribeTransactions, ListTransactions: KIP-664 (Kafka 3.0), served by kbroker as extensions
}


def _os_error(e: OSError) -> str:
    return e.strerror or str(e) or type(e).__name__


def api_name(request) -> str:
    """'Metadata' for a MetadataRequest."""
    return request.name[:-len("Request")] if request.name.endswith("Request") else request.name


class Connection:
    """A connection to host:port; connects on first use (or connect()), reconnects after close()."""

    def __init__(self, host: str, port: int, client_id: str, timeout: float = 30.0,
                 security: ClientSecurity | None = None):
        """security: TLS and SASL login for a secured listener (plaintext when None)."""
        self.host, self.port = host, port
        self.security = security
        self.address = f"{host}:{port}"
        self.client_id = client_id
        self.timeout = timeout
        self.sock: socket.socket | None = None
        self.correlation_id = 0
        self.versions: dict[int, tuple[int, int]] = {}   # api key -> (min, max), when ApiVersions was asked
        self._in_flight: deque = deque()                  # (correlation id, request, decode) in send order

    def connect(self, timeout: float | None = None) -> None:
        self.close()
        try:
            self.sock = socket.create_connection((self.host, self.port), timeout=timeout or self.timeout)
        except OSError as e:
            raise ConnectionLost(f"Cannot connect to {self.address}: {_os_error(e)}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.security is not None and self.security.uses_tls:
            self._start_tls()
        if self.security is not None and self.security.uses_sasl:
            try:
                self._sasl_login(timeout)
            except KafkaError:
                self.close()
                raise

    def _start_tls(self) -> None:
        try:
            self.sock = self.security.ssl_context().wrap_socket(self.sock, server_hostname=self.host)
        except ssl.SSLCertVerificationError as e:
            self.close()
            raise KafkaError(Errors.SASL_AUTHENTICATION_FAILED,
                             f"SSL handshake with {self.address} failed: certificate verify failed: "
                             f"{e.verify_message or e}") from None
        except OSError as e:
            self.close()
            raise ConnectionLost(f"SSL handshake with {self.address} failed: {_os_error(e)}") from None

    def _sasl_login(self, timeout: float | None) -> None:
        """SaslHandshake v1 then the mechanism's SaslAuthenticate round trips; KafkaError when refused."""
        mechanism = self.security.sasl_mechanism
        r = self.send(SaslHandshakeRequest(version=1, mechanism=mechanism), timeout)
        if r.error_code:
            raise KafkaError(r.error_code, f"Client SASL mechanism '{mechanism}' not enabled in the server, "
                                           f"enabled mechanisms are {r.mechanisms}")

        def round_trip(token: bytes) -> bytes:
            a = self.send(SaslAuthenticateRequest(version=1, auth_bytes=token), timeout)
            if a.error_code:
                raise KafkaError(a.error_code, a.error_message or error_name(a.error_code))
            return bytes(a.auth_bytes)

        user, password = self.security.username, self.security.password
        if mechanism == "PLAIN":
            round_trip(plain.client_token(user, password))
            return
        scram = ScramClient(mechanism, user, password)
        server_first = round_trip(scram.first())
        scram.verify(round_trip(scram.final(server_first)))

    def close(self) -> None:
        sock, self.sock = self.sock, None
        self._in_flight.clear()
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def version_for(self, request_cls, min_needed: int = 0) -> int:
        """The highest version of request_cls both this broker (its ApiVersions answer) and Kafka 2.8 serve."""
        key = request_cls.API_KEY
        served = self.versions.get(key)
        top = min(KAFKA_28_MAX.get(key, request_cls.max_version), request_cls.max_version)
        if served is not None:
            top = min(top, served[1])
        if served is None or top < max(served[0], min_needed):
            raise KafkaError(Errors.UNSUPPORTED_VERSION, f"The broker at {self.address} does not serve "
                                                         f"{api_name(request_cls)} version {min_needed} or later.")
        return top

    # ---- sending and receiving ----------------------------------------------------------------------------
    def send(self, request, timeout: float | None = None, decode: bool = True):
        """Send one request and wait for its response (None when it expects none; see submit for decode)."""
        if not self.submit(request, decode=decode, timeout=timeout):
            return None
        return self.receive(timeout)

    def submit(self, request, body=None, decode: bool = True, timeout: float | None = None) -> bool:
        """Send a request without waiting; receive() reads the answers in order. body: the request's encoded
        body when already at hand (a frame sent many times); decode=False: receive() returns the response body
        as a memoryview into the frame (for the hot-path decoders). False when no response will come."""
        if self.sock is None:
            self.connect(timeout)
        version = request.API_VERSION
        self.correlation_id = (self.correlation_id + 1) & 0x7FFFFFFF
        flexible = request.flexible_version_q(version)
        head = request_header(request.API_KEY, version, self.correlation_id, self.client_id, flexible)
        if body is None:
            body = request.encode(version=version)
        expects = request.expect_response()
        try:
            self.sock.settimeout(timeout or self.timeout)
            prefix = _SIZE.pack(len(head) + len(body)) + head
            if len(body) <= _JOIN_MAX:
                self.sock.sendall(prefix + bytes(body))
            else:                                    # a large body (records) is sent as is, not copied
                self.sock.sendall(prefix)
                self.sock.sendall(body)
        except OSError as e:
            self.close()
            raise ConnectionLost(f"{api_name(request)} to {self.address} failed: {_os_error(e)}") from None
        if expects:
            self._in_flight.append((self.correlation_id, request, decode))
        return expects

    def receive(self, timeout: float | None = None):
        """The response to the oldest request in flight: decoded, or its body as a memoryview (decode=False)."""
        if not self._in_flight:
            raise KafkaError(Errors.INVALID_REQUEST, f"no request to {self.address} awaits an answer")
        correlation_id, request, decode = self._in_flight[0]
        try:
            self.sock.settimeout(timeout or self.timeout)
            frame = self._read(_SIZE.unpack(self._read(4))[0])
        except socket.timeout:
            self.close()
            raise ConnectionLost(f"Timed out waiting for {self.address} to answer {api_name(request)}.") from None
        except OSError as e:
            self.close()
            raise ConnectionLost(f"{api_name(request)} to {self.address} failed: {_os_error(e)}") from None
        self._in_flight.popleft()
        view = memoryview(frame)
        answered = _SIZE.unpack_from(view, 0)[0] if len(view) >= 4 else None
        if answered != correlation_id:
            self.close()
            raise KafkaError(Errors.NETWORK_EXCEPTION, f"{self.address} answered correlation id {answered}, "
                                                       f"expected {correlation_id}.")
        version = request.API_VERSION
        try:
            pos = 4
            if request.flexible_version_q(version) and request.API_KEY != API_VERSIONS_KEY:
                pos = skip_tagged_fields(view, pos)
            if not decode:
                return view[pos:]
            request.with_header(correlation_id=correlation_id, client_id=self.client_id)
            return request.header.get_response_class().decode(view[pos:], version=version)
        except Exception as e:
            self.close()
            raise KafkaError(Errors.CORRUPT_MESSAGE, f"Cannot decode the {api_name(request)} response of "
                                                     f"{self.address}: {type(e).__name__} {e}".rstrip()) from None

    def _read(self, n: int) -> bytearray:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if k == 0:
                raise ConnectionError("connection closed by the broker")
            got += k
        return buf
