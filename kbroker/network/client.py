"""BrokerClient: one blocking (gevent-cooperative) connection to another broker, one request at a time.

Used by the controller's channel to each broker, and later by replica fetchers. Requests are message objects
(kafka-python classes or ours from protocol.interbroker); the matching response class decodes the answer.
"""
from __future__ import annotations

import socket
import struct

from ..protocol.header import request_header, skip_tagged_fields
from .server import read_exact

_SIZE = struct.Struct(">i")


class BrokerConnectionError(OSError):
    pass


class BrokerClient:
    def __init__(self, host: str, port: int, client_id: str, timeout: float = 30.0):
        self.host, self.port = host, port
        self.client_id = client_id
        self.timeout = timeout
        self.sock: socket.socket | None = None
        self.correlation_id = 0

    def connect(self) -> None:
        self.close()
        try:
            self.sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        except OSError as e:
            raise BrokerConnectionError(f"cannot connect to {self.host}:{self.port}: {e}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None

    def send(self, request, response_class, version: int):
        """Send one request and wait for its response; on any failure the connection is closed."""
        if self.sock is None:
            self.connect()
        self.correlation_id = (self.correlation_id + 1) & 0x7FFFFFFF
        flexible = request.flexible_version_q(version)
        body = request_header(request.API_KEY, version, self.correlation_id, self.client_id, flexible) + \
            bytes(request.encode(version=version))
        try:
            self.sock.sendall(_SIZE.pack(len(body)) + body)
            head = read_exact(self.sock, 4)
            frame = read_exact(self.sock, _SIZE.unpack(head)[0]) if head is not None else None
        except OSError as e:
            self.close()
            raise BrokerConnectionError(f"request to {self.host}:{self.port} failed: {e}") from None
        if frame is None:
            self.close()
            raise BrokerConnectionError(f"{self.host}:{self.port} closed the connection")
        view = memoryview(frame)
        (correlation_id,) = struct.unpack_from(">i", view, 0)
        if correlation_id != self.correlation_id:
            self.close()
            raise BrokerConnectionError(f"correlation id {correlation_id} != {self.correlation_id}")
        pos = skip_tagged_fields(view, 4) if flexible and request.API_KEY != 18 else 4
        return response_class.decode(view[pos:], version=version)
