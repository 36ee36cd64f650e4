"""A druid `Etcd` on the lab's parts for a rolling-update scenario (the test test_druid_rolling_upgrade.py and the
bench bench/druid_rolling.py) and for bench/druid_lifecycle.py: the API emulator with the shipped CRDs, the pod
runtime on a loopback /24 reserved for it (lab/pods/network.py: runs in parallel never meet; no lab lock), the
controller's `etcd` loop (or the loops and flags a caller names), and helpers to read pods, Events and the members'
etcd versions the way a druid user would (pod IPs, the API's Events). It imports no engine code the scenario
exercises: only the lab's parts and the collection's Kubernetes path helper."""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import time
from typing import Any, Callable, Dict, List, Optional

import requests

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

from lab import parts
from lab.env.controller import ControllerProcess, install_crds
from lab.kube.api import KubeServer
from lab.paths import module_argv
from lab.pods import network
from lab.pods.runtime import Runtime
from support.tls import make_pki

WRAPPER = 'europe-docker.pkg.dev/gardener-project/public/gardener/etcd-wrapper:'
MERGE = {'Content-Type': 'application/merge-patch+json'}


def _client(url: str):
    import kubernetes
    from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient
    configuration = kubernetes.client.Configuration()
    configuration.host = url
    return KubeClient(configuration)


class DruidLab:
    """start() brings the parts up; stop() takes every process it started down (by its records)."""

    def __init__(self, work_dir: str, namespace: str = 'demo', name: str = 'etcd-main', sync_period: str = '2s',
                 controller_args: Optional[List[str]] = None):
        """`controller_args`: the controller's arguments instead of `--controllers etcd` with `sync_period`."""
        self.work_dir = work_dir
        self.controller_args = controller_args
        self.ns, self.name = namespace, name
        self.network = network.reserve()
        self.cidr = self.network.cidr
        self.record = work_dir + '/runtime.pid'
        self.sync_period = sync_period
        self.kube: Optional[KubeServer] = None
        self.controller: Optional[ControllerProcess] = None
        self.session = requests.Session()

    @property
    def etcd_path(self) -> str:
        return api_path('druid.gardener.cloud/v1alpha1', 'etcds', self.ns, self.name)

    def start(self, controller: bool = True) -> 'DruidLab':
        self.kube = KubeServer(status_delay=0.2, pod_runtime=True).start()
        install_crds(_client(self.kube.url))
        parts.start(self.record, module_argv('lab.pods.runtime', 'run', '--kube-url', self.kube.url, '--state-dir',
                                             self.work_dir, '--pod-cidr', self.cidr, '--interval', '0.2'),
                    self.work_dir + '/runtime.log')
        if controller:
            self.start_controller()
        return self

    def start_controller(self) -> None:
        self.controller = ControllerProcess(self.kube, self.work_dir + '/controller', args=self.controller_args or [
            '--controllers', 'etcd', '--etcd-status-sync-period', self.sync_period]).start()

    def stop_controller(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None

    def stop(self) -> None:
        self.stop_controller()
        parts.stop(self.record)
        if self.kube is not None:
            Runtime(self.kube.url, self.work_dir, self.cidr).stop_all()
            self.kube.stop()
        self.network.close()

    # --- the Etcd ----------------------------------------------------------------------------------------------
    def create(self, replicas: int, tag: str) -> None:
        answer = self.session.post(self.kube.url + api_path('druid.gardener.cloud/v1alpha1', 'etcds', self.ns), json={
            'apiVersion': 'druid.gardener.cloud/v1alpha1', 'kind': 'Etcd',
            'metadata': {'name': self.name, 'namespace': self.ns, 'labels': {'role': 'main'}},
            'spec': {'replicas': replicas, 'labels': {'app': self.name, 'role': 'main'},
                     'etcd': {'image': WRAPPER + tag, 'quota': '2Gi', 'defragmentationSchedule': '0 3 * * *'},
                     'backup': {'fullSnapshotSchedule': '0 */24 * * *'}}})
        assert answer.status_code == 201, answer.text

    def set_image(self, tag: str) -> None:
        """A druid user's image change: the tag, with the reconcile annotation."""
        answer = self.session.patch(self.kube.url + self.etcd_path, headers=MERGE, json={
            'metadata': {'annotations': {'gardener.cloud/operation': 'reconcile'}},
            'spec': {'etcd': {'image': WRAPPER + tag}}})
        assert answer.status_code == 200, answer.text

    def secret(self, name: str, data: Dict[str, Any], kind: str = 'Opaque') -> None:
        """A Secret in the Etcd's namespace (values as bytes or text)."""
        answer = self.session.post(self.kube.url + '/api/v1/namespaces/%s/secrets' % self.ns, json={
            'apiVersion': 'v1', 'kind': 'Secret', 'metadata': {'name': name, 'namespace': self.ns}, 'type': kind,
            'data': {k: base64.b64encode(v if isinstance(v, bytes) else v.encode()).decode() for k, v in data.items()}})
        assert answer.status_code == 201, answer.text

    def pod_pki(self, directory: str) -> Dict[str, bytes]:
        """A CA, a server certificate (serverAuth and clientAuth: etcd presents it to its peers too) for druid's DNS
        names and every address of this lab's pod network (the runtime rewrites peer names to pod IPs, docs/lab.md),
        and a client certificate; PEM bytes by file name (ca.crt, server.crt/key, client.crt/key), the files in
        `directory`."""
        peer = '%s-peer' % self.name
        dns = ['%s-local' % self.name, '%s-client' % self.name, '%s-client.%s' % (self.name, self.ns),
               '%s-client.%s.svc' % (self.name, self.ns), '*.%s' % peer, '*.%s.%s' % (peer, self.ns),
               '*.%s.%s.svc' % (peer, self.ns), '*.%s.%s.svc.cluster.local' % (peer, self.ns)]
        paths = make_pki(directory, ips=[str(ip) for ip in ipaddress.ip_network(self.cidr)], dns=dns)
        found = {}
        for path in paths.values():
            with open(path, 'rb') as f:
                found[os.path.basename(path)] = f.read()
        return found

    def status(self) -> Dict[str, Any]:
        return self.session.get(self.kube.url + self.etcd_path).json().get('status') or {}

    def wait(self, test: Callable[[], Any], deadline: float, what: str, every: float = 0.5) -> Any:
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            got = test()
            if got:
                return got
            time.sleep(every)
        raise AssertionError('%s not reached within %ss: %s' % (what, deadline, json.dumps(self.status())[:1500]))

    def all_ready(self, size: int) -> bool:
        s = self.status()
        return bool(s.get('ready') and s.get('clusterSize') == size and s.get('readyReplicas') == size and any(
            c['type'] == 'AllMembersReady' and c['status'] == 'True' for c in s.get('conditions') or []))

    # --- pods, Events, etcd -------------------------------------------------------------------------------------
    def pods(self) -> List[Dict[str, Any]]:
        return self.session.get(self.kube.url + '/api/v1/namespaces/%s/pods' % self.ns).json()['items']

    def client_urls(self) -> List[str]:
        """Every member's client URL (pod IP: the lab keeps a pod's IP across restarts, as its DNS name is kept)."""
        return sorted('http://%s:2379' % p['status']['podIP'] for p in self.pods() if (p.get('status') or {}).get('podIP'))

    def events(self, reason: Optional[str] = None) -> List[Dict[str, Any]]:
        found = self.session.get(self.kube.url + '/api/v1/namespaces/%s/events' % self.ns).json()['items']
        found = [e for e in found if (e.get('involvedObject') or {}).get('name') == self.name
                 and (reason is None or e.get('reason') == reason)]
        return sorted(found, key=lambda e: e.get('eventTime') or e.get('lastTimestamp') or '')

    @staticmethod
    def versions(urls: List[str]) -> Dict[str, str]:
        out = {}
        for url in urls:
            try:
                out[url] = requests.post(url + '/v3/maintenance/status', json={}, timeout=2).json().get('version', '')
            except (requests.RequestException, ValueError):
                out[url] = ''
        return out

    @staticmethod
    def read_prefix(url: str, prefix: str) -> Dict[str, str]:
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        answer = requests.post(url + '/v3/kv/range', timeout=10, json={
            'key': base64.b64encode(prefix.encode()).decode(), 'range_end': base64.b64encode(end.encode()).decode()})
        answer.raise_for_status()
        return {base64.b64decode(kv['key']).decode(): base64.b64decode(kv.get('value', '')).decode()
                for kv in answer.json().get('kvs') or []}

    def put_keys(self, prefix: str, count: int) -> Dict[str, str]:
        """`count` keys `<prefix><nn>` = `v<n>` written through the first member; what every member must then hold."""
        url = self.client_urls()[0]
        expected = {'%s%02d' % (prefix, i): 'v%d' % i for i in range(count)}
        for key, value in expected.items():
            answer = requests.post(url + '/v3/kv/put', timeout=10, json={
                'key': base64.b64encode(key.encode()).decode(), 'value': base64.b64encode(value.encode()).decode()})
            assert answer.status_code == 200, answer.text
        return expected

    def assert_keys_everywhere(self, prefix: str, expected: Dict[str, str], grace: float = 15.0) -> None:
        """Every member holds exactly `expected` under `prefix` (a new member may trail the leader for `grace` s)."""
        for url in self.client_urls():
            deadline = time.monotonic() + grace
            while self.read_prefix(url, prefix) != expected and time.monotonic() < deadline:
                time.sleep(0.5)
            assert self.read_prefix(url, prefix) == expected, url

    def member_list(self) -> List[Dict[str, Any]]:
        """etcd's member list as the first member that answers gives it (plain-http client URLs)."""
        for url in self.client_urls():
            try:
                answer = requests.post(url + '/v3/cluster/member/list', json={}, timeout=5)
                if answer.status_code == 200:
                    return answer.json().get('members') or []
            except requests.RequestException:
                continue
        return []

    def peer_tls_secrets(self, directory: str) -> Dict[str, Any]:
        """The peer CA and server Secrets (pod_pki's certificates); the `spec.etcd.peerUrlTls` that names them."""
        pem = self.pod_pki(directory)
        self.secret('ca-etcd-peer', {'ca.crt': pem['ca.crt']})
        self.secret('etcd-peer-server-tls', {'tls.crt': pem['server.crt'], 'tls.key': pem['server.key']},
                    'kubernetes.io/tls')
        return {'tlsCASecretRef': {'name': 'ca-etcd-peer'}, 'serverTLSSecretRef': {'name': 'etcd-peer-server-tls'}}
