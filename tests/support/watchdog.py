"""Test parts for the dependency watchdog, none of which imports the watchdog's code:

* `ReplicaRecorder`: records every spec.replicas change of the targets with its time (their status follows
  spec through the emulator's status mover, so the watchdog's completion gates see real progress);
* `ApiDouble`: a stand-in API server for the *probed* cluster (reached through kubeConfigSecretName): it
  answers /version, Nodes and Leases from what the test sets, and can answer a path with an HTTP error
  or hand out lease lists in turn (one per list request).
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError

HOLD = 'lab.steward.io/hold-status'


class ReplicaRecorder:
    """Records every spec.replicas change of the Deployments in `namespace` as (time, name, before, after), with
    one LIST per tick. (Their status follows spec through the emulator's own status mover, lab/kube/workloads.py;
    `lab.steward.io/hold-status: "true"` freezes one.)"""

    def __init__(self, client, namespace: str, poll: float = 0.3):
        self.client = client
        self.namespace = namespace
        self.poll = poll
        self.changes: List[Tuple[float, str, Optional[int], Optional[int]]] = []
        self._replicas: Dict[str, Optional[int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name='replica-recorder', daemon=True)
        self._ticks = 0

    def start(self) -> 'ReplicaRecorder':
        self._tick()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(self.poll):
            self._tick()

    def caught_up(self, timeout: float = 10.0) -> 'ReplicaRecorder':
        """Return once a whole tick has listed the Deployments after this call: a change a test has just seen is
        then counted (the recorder polls; reading a count right after seeing 0 replicas raced its next tick)."""
        deadline = time.monotonic() + timeout
        wanted = self._ticks + 2   # the tick under way may have listed before the change
        while self._ticks < wanted:
            if time.monotonic() >= deadline:
                raise AssertionError('the replica recorder listed nothing within %gs' % timeout)
            time.sleep(self.poll / 3)
        return self

    def _tick(self) -> None:
        try:
            items = self.client.list(api_path('apps/v1', 'deployments', self.namespace))
        except KubeError:
            return
        now = time.time()
        for obj in items:
            name = obj['metadata']['name']
            replicas = (obj.get('spec') or {}).get('replicas')
            if name in self._replicas and self._replicas[name] != replicas:
                self.changes.append((now, name, self._replicas[name], replicas))
            self._replicas[name] = replicas
        self._ticks += 1   # (a tick whose list failed saw nothing: caught_up waits for one that listed)

    def times(self, name: str, after: int) -> List[float]:
        return [t for t, n, _before, a in self.changes if n == name and a == after]

    def count(self, name: str, after: int) -> int:
        return len(self.times(name, after))

    def changes_of(self, name: str) -> List[Tuple[float, str, Optional[int], Optional[int]]]:
        return [c for c in self.changes if c[1] == name]


class ApiDouble:
    """A probed API server: /version, /api/v1/nodes and the node Leases from `nodes()` / `leases()`;
    `fail(path_prefix, status)` answers that path with an error; `lease_rounds` (a list of lease lists) is
    handed out one per lease list request, in turn."""

    def __init__(self, nodes: Callable[[], List[Dict[str, Any]]], leases: Callable[[], List[Dict[str, Any]]]):
        self.nodes = nodes
        self.leases = leases
        self.failures: Dict[str, int] = {}
        self.lease_rounds: List[Any] = []
        self.lease_lists = 0
        self.requests: List[Tuple[float, str]] = []   # (time, path) of every request
        double = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                path = self.path.split('?', 1)[0]
                double.requests.append((time.time(), path))
                for prefix, status in double.failures.items():
                    if path.startswith(prefix):
                        return self._send(status, {'kind': 'Status', 'apiVersion': 'v1', 'status': 'Failure',
                                                   'code': status, 'reason': 'TooManyRequests' if status == 429 else 'Forbidden',
                                                   'message': 'injected by the test'})
                if path == '/version':
                    return self._send(200, {'major': '1', 'minor': '30', 'gitVersion': 'v1.30.0'})
                if path == '/api/v1/nodes':
                    return self._send(200, {'kind': 'NodeList', 'apiVersion': 'v1', 'metadata': {}, 'items': double.nodes()})
                if path == '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases':
                    double.lease_lists += 1
                    source = (double.lease_rounds[(double.lease_lists - 1) % len(double.lease_rounds)]
                              if double.lease_rounds else double.leases)
                    items = source() if callable(source) else source
                    return self._send(200, {'kind': 'LeaseList', 'apiVersion': 'coordination.k8s.io/v1', 'metadata': {},
                                            'items': items})
                return self._send(404, {'kind': 'Status', 'code': 404, 'reason': 'NotFound', 'message': path})

            def _send(self, status: int, body: Dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.server.daemon_threads = True
        self.url = 'http://127.0.0.1:%d' % self.server.server_port
        threading.Thread(target=self.server.serve_forever, name='api-double', daemon=True).start()

    def fail(self, prefix: str, status: int) -> None:
        self.failures[prefix] = status

    def heal(self) -> None:
        self.failures.clear()

    def times(self, prefix: str) -> List[float]:
        return [t for t, path in self.requests if path.startswith(prefix)]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def kubeconfig_for(url: str) -> Dict[str, Any]:
    return {'apiVersion': 'v1', 'kind': 'Config', 'current-context': 'probed',
            'clusters': [{'name': 'probed', 'cluster': {'server': url}}],
            'users': [{'name': 'probe', 'user': {'token': 'probe-token'}}],
            'contexts': [{'name': 'probed', 'context': {'cluster': 'probed', 'user': 'probe'}}]}
