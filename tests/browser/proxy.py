"""A TCP proxy in front of the bridge that can cut the browser's SSE connections, and refuse new ones
for a while, as a restarting proxy or a network drop would."""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field


@dataclass
class _Conn:
    client: socket.socket
    upstream: socket.socket
    sse: bool = False
    heads: list[bytes] = field(default_factory=list)


class DroppingProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.refuse_sse = False
        self.sse_requests: list[str] = []  # request heads of every SSE request seen, in order
        self.refused = 0
        self._conns: list[_Conn] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            conn = _Conn(client, upstream)
            with self._lock:
                self._conns.append(conn)
            threading.Thread(target=self._pump_up, args=(conn,), daemon=True).start()
            threading.Thread(target=self._pump_down, args=(conn,), daemon=True).start()

    def _pump_up(self, conn: _Conn) -> None:
        try:
            while True:
                data = conn.client.recv(65536)
                if not data:
                    break
                if b"/events/sse" in data.split(b"\r\n", 1)[0]:
                    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1")
                    with self._lock:
                        self.sse_requests.append(head)
                        if self.refuse_sse:
                            self.refused += 1
                            raise ConnectionAbortedError("refused")
                        conn.sse = True
                conn.upstream.sendall(data)
        except OSError:
            pass
        self._close(conn)

    def _pump_down(self, conn: _Conn) -> None:
        try:
            while True:
                data = conn.upstream.recv(65536)
                if not data:
                    break
                conn.client.sendall(data)
        except OSError:
            pass
        self._close(conn)

    def _close(self, conn: _Conn) -> None:
        for sock in (conn.client, conn.upstream):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        with self._lock:
            if conn in self._conns:
                self._conns.remove(conn)

    def drop_sse(self) -> int:
        """Cuts every open SSE connection; returns how many."""
        with self._lock:
            victims = [c for c in self._conns if c.sse]
        for conn in victims:
            self._close(conn)
        return len(victims)

    def close(self) -> None:
        self._closed = True
        self.listener.close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            self._close(conn)
