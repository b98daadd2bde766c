"""A TCP relay to ZooKeeper that a test breaks: cut off every connection for a while, or break the connection of
chosen requests, before ZooKeeper gets them or after it answered them (the answer lost). Used by the ZooKeeper
client's tests and the ZooKeeper outage chaos test."""
from __future__ import annotations

import socket
import threading

from kbroker.cluster import free_port

ZK_CREATE, ZK_SET_DATA, ZK_GET_CHILDREN, ZK_MULTI = 1, 5, 8, 14     # opcodes of ZooKeeper requests


class Relay:
    """A TCP relay from a local port to ZooKeeper's. cut() closes every connection and closes new ones at once
    (the clients cut off from ZooKeeper); heal() lets them through again. drop_next() breaks the connection of
    the next few requests of a kind (a connection that breaks just as they are sent, or just as answered)."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.port = free_port()
        self.listener = socket.create_server(("127.0.0.1", self.port))
        self.cut_off = False
        self.to_drop = (0, None, None, False, False)   # (how many more, opcode, path or None for any, answered, cut)
        self.sockets: set[socket.socket] = set()
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return   # closed
            try:
                if self.cut_off:
                    raise OSError("cut")
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=1)
                upstream.settimeout(None)
            except OSError:   # cut, or ZooKeeper down: the client sees its connection dropped
                client.close()
                continue
            with self.lock:
                self.sockets |= {client, upstream}
            lose: dict[int, bool] = {}   # xid of a request whose answer is to be lost -> cut the relay then
            threading.Thread(target=self._pump_requests, args=(client, upstream, lose), daemon=True).start()
            threading.Thread(target=self._pump_answers, args=(upstream, client, lose), daemon=True).start()

    @staticmethod
    def _frames(src: socket.socket):
        """The frames (a 4-byte length, then that many bytes) read from src, until it closes."""
        buffered = b""
        while data := src.recv(65536):
            buffered += data
            while len(buffered) >= 4 and len(buffered) >= 4 + int.from_bytes(buffered[:4], "big"):
                size = 4 + int.from_bytes(buffered[:4], "big")
                frame, buffered = buffered[:size], buffered[size:]
                yield frame

    def _pump_requests(self, client: socket.socket, upstream: socket.socket, lose: dict) -> None:
        """Client to ZooKeeper, frame by frame (after the connect request, each request starts with its xid and
        opcode), breaking the connection at a request to be dropped: before forwarding it, or once answered."""
        connected = False
        try:
            for frame in self._frames(client):
                drop = connected and self._drop(frame)
                connected = True
                if drop:
                    _, _, _, answered, cut = drop
                    if not answered:
                        self._break(cut)
                    lose[int.from_bytes(frame[4:8], "big", signed=True)] = cut
                upstream.sendall(frame)
        except OSError:
            pass
        for s in (client, upstream):
            self._close(s)

    def _pump_answers(self, upstream: socket.socket, client: socket.socket, lose: dict) -> None:
        """ZooKeeper to client, frame by frame (after the connect response, each starts with the request's xid)."""
        connected = False
        try:
            for frame in self._frames(upstream):
                if connected:
                    xid = int.from_bytes(frame[4:8], "big", signed=True)
                    if xid in lose:
                        self._break(lose[xid])
                connected = True
                client.sendall(frame)
        except OSError:
            pass
        for s in (upstream, client):
            self._close(s)

    def _drop(self, frame: bytes):
        """The drop_next setting if this request (length, xid, opcode, then its fields: paths are strings, a 4-byte
        length and the bytes) is to be dropped, else None."""
        opcode = int.from_bytes(frame[8:12], "big")
        with self.lock:
            count, wanted_opcode, wanted_path, answered, cut = self.to_drop
            if count <= 0 or opcode != wanted_opcode or (wanted_path is not None and wanted_path not in frame[12:]):
                return None
            self.to_drop = (count - 1, wanted_opcode, wanted_path, answered, cut)
            return self.to_drop

    def drop_next(self, count: int, opcode: int, path: str | None = None, answered: bool = False,
                  cut: bool = False) -> None:
        """Break the connection of the next `count` requests with this opcode (and naming this path, with any
        chroot; a multi names its ops' paths): before ZooKeeper gets them, or (answered) once ZooKeeper answered
        them, the answer lost; cut: then cut the relay off until heal()."""
        wanted = None if path is None else len(path.encode()).to_bytes(4, "big") + path.encode()
        with self.lock:
            self.to_drop = (count, opcode, wanted, answered, cut)

    @property
    def left_to_drop(self) -> int:
        return self.to_drop[0]

    def _break(self, cut: bool) -> None:
        """Break the connection being pumped (the pump then closes both ends), and with cut every other one."""
        if cut:
            self.cut()
        raise OSError("connection broken on purpose")

    def _close(self, s: socket.socket) -> None:
        with self.lock:
            self.sockets.discard(s)
        try:
            s.shutdown(socket.SHUT_RDWR)   # wakes the pump blocked in recv on it
        except OSError:
            pass
        s.close()

    def cut(self) -> None:
        self.cut_off = True
        with self.lock:
            open_sockets = list(self.sockets)
        for s in open_sockets:
            self._close(s)

    def heal(self) -> None:
        self.cut_off = False

    def close(self) -> None:
        self.cut()
        self.listener.close()
