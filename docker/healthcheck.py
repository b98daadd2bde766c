#!/usr/bin/env python3
"""Docker healthcheck for a kbroker container: healthy when every listener answers ApiVersions.

Sends an ApiVersions v0 request to 127.0.0.1 on each port of KAFKA_LISTENERS (or the ports given as
arguments) and checks the response: matching correlation id, error_code 0 (NONE) and an API list that
includes ApiVersions (key 18) itself. Standard library only. Exit 0 healthy, 1 unhealthy.
"""
from __future__ import annotations

import os
import socket
import struct
import sys

API_VERSIONS = 18
CORRELATION_ID = 0x6B62726B  # "kbrk"
CLIENT_ID = b"kbroker-healthcheck"


def listener_ports(listeners: str) -> list[int]:
    """Ports of a Kafka listeners value, e.g. INTERNAL://0.0.0.0:19092,EXTERNAL://:9092 -> [19092, 9092]."""
    ports = []
    for entry in listeners.split(","):
        entry = entry.strip()
        if not entry:
            continue
        port = entry.rpartition(":")[2]
        if port.isdigit() and int(port) > 0:
            ports.append(int(port))
    return ports


def api_versions_request(correlation_id: int = CORRELATION_ID) -> bytes:
    # Request header v1 (api_key, api_version, correlation_id, client_id) and ApiVersions v0's empty body.
    body = struct.pack(">hhih", API_VERSIONS, 0, correlation_id, len(CLIENT_ID)) + CLIENT_ID
    return struct.pack(">i", len(body)) + body


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed mid-response")
        buf += chunk
    return buf


def check_response(payload: bytes, correlation_id: int = CORRELATION_ID) -> list[int]:
    """The API keys of an ApiVersions v0 response; ValueError when it is not a healthy one."""
    if len(payload) < 10:
        raise ValueError(f"short response ({len(payload)} bytes)")
    corr, error_code, count = struct.unpack_from(">ihi", payload, 0)
    if corr != correlation_id:
        raise ValueError(f"correlation id {corr} != {correlation_id}")
    if error_code != 0:
        raise ValueError(f"error_code {error_code}")
    if count < 0 or len(payload) < 10 + 6 * count:
        raise ValueError(f"bad api_keys array (count {count})")
    keys = [struct.unpack_from(">hhh", payload, 10 + 6 * i)[0] for i in range(count)]
    if API_VERSIONS not in keys:
        raise ValueError("ApiVersions missing from the advertised APIs")
    return keys


def probe(host: str, port: int, timeout: float = 5.0) -> list[int]:
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(api_versions_request())
        (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
        if not 0 < size < 1 << 20:
            raise ValueError(f"bad response size {size}")
        return check_response(_recv_exactly(sock, size))


def main(argv: list[str]) -> int:
    host = os.environ.get("KBROKER_HEALTHCHECK_HOST", "127.0.0.1")
    ports = [int(a) for a in argv] or listener_ports(os.environ.get("KAFKA_LISTENERS", "PLAINTEXT://:9092"))
    if not ports:
        print("unhealthy: no listener port to probe", file=sys.stderr)
        return 1
    for port in ports:
        try:
            keys = probe(host, port)
        except (OSError, ValueError) as e:
            print(f"unhealthy: {host}:{port}: {e}", file=sys.stderr)
            return 1
        print(f"ok: {host}:{port} answers ApiVersions ({len(keys)} APIs)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
