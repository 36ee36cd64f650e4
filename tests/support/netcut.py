"""A network link a test can cut: a TCP forwarder on 127.0.0.1 between one client process (the controller) and
a server (the Kubernetes API emulator, EC2), so that client alone loses the server while the test keeps
reaching it directly. `cut()` resets every connection in flight and every new one (the client sees "connection
reset", as behind a failed load balancer); `restore()` forwards again."""

from __future__ import annotations

import json
import os
import socket
import struct
import threading
from typing import List, Tuple
from urllib.parse import urlsplit

from support.forward import forward


class CuttableLink:
    def __init__(self, target_url: str):
        parts = urlsplit(target_url)
        self.target: Tuple[str, int] = (parts.hostname or '127.0.0.1', parts.port or 80)
        self.scheme = parts.scheme or 'http'
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(('127.0.0.1', 0))
        self.listener.listen(64)
        self.url = '%s://127.0.0.1:%d' % (self.scheme, self.listener.getsockname()[1])
        self.is_cut = False
        self.cuts = 0
        self._open: List[socket.socket] = []
        self._lock = threading.Lock()
        self._stopping = False
        self._thread = threading.Thread(target=self._accept, name='netcut', daemon=True)

    def start(self) -> 'CuttableLink':
        self._thread.start()
        return self

    def cut(self) -> None:
        with self._lock:
            self.is_cut = True
            self.cuts += 1
            victims, self._open = self._open, []
        for sock in victims:
            _reset(sock)

    def restore(self) -> None:
        with self._lock:
            self.is_cut = False

    def stop(self) -> None:
        self._stopping = True
        self.cut()
        try:
            self.listener.close()
        except OSError:
            pass

    def write_kubeconfig(self, path: str) -> str:
        """A kubeconfig whose server is this link (what ControllerProcess asks its `kube` for)."""
        config = {'apiVersion': 'v1', 'kind': 'Config', 'current-context': 'link',
                  'clusters': [{'name': 'link', 'cluster': {'server': self.url}}],
                  'users': [{'name': 'tester', 'user': {'token': 'test-token'}}],
                  'contexts': [{'name': 'link', 'context': {'cluster': 'link', 'user': 'tester', 'namespace': 'default'}}]}
        with open(path, 'w') as f:
            json.dump(config, f)
        os.chmod(path, 0o600)
        return path

    def _accept(self) -> None:
        while not self._stopping:
            try:
                client, _addr = self.listener.accept()
            except OSError:
                return
            with self._lock:
                cut = self.is_cut
            if cut:
                _reset(client)
                continue
            try:
                server = socket.create_connection(self.target, timeout=5)
                server.settimeout(None)
            except OSError:
                _reset(client)
                continue
            with self._lock:
                self._open += [client, server]
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True, name='netcut-pump').start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        forward(src, dst)
        for sock in (src, dst):
            sock.close()
        with self._lock:
            self._open = [s for s in self._open if s not in (src, dst)]


def _reset(sock: socket.socket) -> None:
    """Close with RST (SO_LINGER 0): the peer sees a reset, not an orderly end of the stream."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
        sock.close()
    except OSError:
        pass
