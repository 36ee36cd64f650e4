"""Nodes and their Leases in `kube-node-lease`, renewed by a thread like kubelets do (`NodeLeases`), and the
Deployments a dependency watchdog scales (`deployment`): for the demo's watchdog act and the watchdog tests.
`partition(names)` stops renewing some (their leases expire), `heal(names)` renews them again. None of it imports
the watchdog's code."""

from __future__ import annotations

import datetime
import threading
import time
from typing import Any, Dict, Iterable, List, Optional

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

LEASE_NS = 'kube-node-lease'


def micro(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, tz=datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%S.%fZ')


def node_object(name: str) -> Dict[str, Any]:
    return {'apiVersion': 'v1', 'kind': 'Node', 'metadata': {'name': name, 'labels': {'kubernetes.io/hostname': name}},
            'status': {'conditions': [{'type': 'Ready', 'status': 'True'}]}}


def lease_object(name: str, renewed: float) -> Dict[str, Any]:
    return {'apiVersion': 'coordination.k8s.io/v1', 'kind': 'Lease', 'metadata': {'name': name, 'namespace': LEASE_NS},
            'spec': {'holderIdentity': name, 'leaseDurationSeconds': 40, 'renewTime': micro(renewed)}}


class NodeLeases:
    """`count` Nodes node-0.. with Leases, renewed every `period` seconds while not partitioned. With `names`:
    Leases for these Nodes, which someone else registered (e.g. the machines bench's kubelets)."""

    def __init__(self, client, count: int = 0, period: float = 1.5, prefix: str = 'node-',
                 names: Optional[List[str]] = None):
        self.client = client
        self.names = list(names) if names is not None else ['%s%d' % (prefix, i) for i in range(count)]
        self.period = period
        self.partitioned: set = set()
        self.errors: List[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name='node-leases', daemon=True)
        now = time.time()
        for name in self.names:
            if names is None:
                client.create(api_path('v1', 'nodes'), node_object(name))
            client.create(api_path('coordination.k8s.io/v1', 'leases', LEASE_NS), lease_object(name, now))

    def start(self) -> 'NodeLeases':
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def partition(self, names: Iterable[str]) -> None:
        self.partitioned |= set(names)

    def heal(self, names: Optional[Iterable[str]] = None) -> None:
        self.partitioned -= set(self.names if names is None else names)
        self.renew()

    def expire(self, names: Iterable[str], age: float = 3600.0) -> None:
        """Set these leases' renewTime `age` seconds back (and stop renewing them)."""
        self.partition(names)
        for name in names:
            self.client.merge_patch(api_path('coordination.k8s.io/v1', 'leases', LEASE_NS, name),
                                    {'spec': {'renewTime': micro(time.time() - age)}})

    def renew(self) -> None:
        now = time.time()
        for name in self.names:
            if name not in self.partitioned:
                try:
                    self.client.merge_patch(api_path('coordination.k8s.io/v1', 'leases', LEASE_NS, name),
                                            {'spec': {'renewTime': micro(now)}})
                except Exception as exc:  # a kubelet keeps trying; the test can look at what failed
                    self.errors.append('%s: %r' % (name, exc))

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.renew()


def deployment(name: str, replicas: int, annotations: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    labels = {'app': name}
    return {'apiVersion': 'apps/v1', 'kind': 'Deployment',
            'metadata': {'name': name, 'labels': labels, 'annotations': dict(annotations or {})},
            'spec': {'replicas': replicas, 'selector': {'matchLabels': labels},
                     'template': {'metadata': {'labels': labels}, 'spec': {'containers': [{'name': 'c', 'image': 'x'}]}}},
            'status': {'replicas': replicas, 'readyReplicas': replicas, 'observedGeneration': 1}}
