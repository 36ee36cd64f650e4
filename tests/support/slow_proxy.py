"""A TCP proxy that holds every chunk a client sends for `delay` seconds before passing it on: in front of a real
server (moto's S3) each request is answered correctly, only late - a store that is slow rather than dead, so only a
deadline across calls ends a run of many requests."""

from __future__ import annotations

import socket
import threading
import time

from support.bad_input import serve_each
from support.forward import forward


class SlowProxy:
    def __init__(self, target_port: int, delay: float, target_host: str = '127.0.0.1'):
        self.target = (target_host, target_port)
        self.delay = delay
        self.requests = 0
        self.sock = serve_each(self._connect)
        self.port = self.sock.getsockname()[1]
        self.url = 'http://127.0.0.1:%d' % self.port

    def _connect(self, client: socket.socket) -> None:
        try:
            server = socket.create_connection(self.target, timeout=10)
        except OSError:
            client.close()
            return
        threading.Thread(target=forward, args=(client, server, self._hold), daemon=True).start()
        forward(server, client)

    def _hold(self) -> None:
        self.requests += 1
        time.sleep(self.delay)

    def close(self) -> None:
        self.sock.close()
