"""kube/watch.ListWatch tells an idle watch (urllib3's ReadTimeoutError: resumed quietly) from a broken one
(reported through on_error, then resumed) by the exception's type, not by its text. A real HTTP server on loopback
that answers the list, then holds each watch open after one event (idle) or cuts it inside a chunk (broken)."""

from __future__ import annotations

import json
import threading
import time

import kubernetes
import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeUnavailable
from ansible_collections.steward.cluster.plugins.module_utils.kube.watch import ListWatch

from support.bad_input import serve_each

LIST = {'kind': 'PodList', 'apiVersion': 'v1', 'metadata': {'resourceVersion': '1'}, 'items': []}


class WatchServer:
    def __init__(self, broken: bool):
        self.broken = broken
        self.closed = threading.Event()
        self.watches = 0
        self.sock = serve_each(self._serve)
        self.url = 'http://127.0.0.1:%d' % self.sock.getsockname()[1]

    def _serve(self, conn):
        try:
            conn.settimeout(5)
            request = conn.recv(65536)
            if b'watch=' not in request.split(b'\r\n', 1)[0]:
                body = json.dumps(LIST).encode()
                conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n'
                             b'Connection: close\r\n\r\n%s' % (len(body), body))
                return
            self.watches += 1
            event = json.dumps({'type': 'ADDED', 'object': {'metadata': {'name': 'p%d' % self.watches,
                                                                         'resourceVersion': str(1 + self.watches)}}})
            line = event.encode() + b'\n'
            conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n'
                         b'%x\r\n%s\r\n' % (len(line), line))
            if self.broken:
                conn.sendall(b'40\r\n{"type": "ADD')   # a chunk cut short, then the connection goes
                return
            self.closed.wait(10)                          # idle: the client's read timeout ends it
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.closed.set()
        self.sock.close()


@pytest.mark.parametrize('broken', [False, True], ids=['idle', 'broken'])
def test_idle_watches_resume_quietly_and_broken_ones_are_reported(broken):
    server = WatchServer(broken)
    configuration = kubernetes.client.Configuration()
    configuration.host = server.url
    seen, errors = [], []
    try:
        watch = ListWatch(KubeClient(configuration), '/api/v1/namespaces/default/pods',
                          lambda kind, obj: seen.append((kind, obj['metadata']['name'])),
                          idle_timeout=0.5, deadline=time.time() + 2.5, on_error=errors.append)
        watch.run()
    finally:
        server.close()
    assert ('ADDED', 'p1') in seen and server.watches >= 2            # resumed after the first one ended
    if broken:
        assert errors and all(isinstance(e, KubeUnavailable) for e in errors), errors
    else:
        assert errors == []
