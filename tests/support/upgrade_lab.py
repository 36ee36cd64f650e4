# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private lab hosts for Kubernetes upgrades (steward.cluster.cluster_upgrade), shared by the integration tests and
bench/k8s_upgrade.py: control-plane nodes and workers on a free loopback range, each with the lab's static-pod
supervisor (the kubelet's stand-in: mirror pods with the image each manifest asks for, the Node's kubeletVersion
from the host's kubelet install) and the lab's API emulator; kubeadm's files from the provisioning engine at a
version (without the etcd and HAProxy manifests, unless `etcd_image` asks for real etcd static pods: then a
plain-HTTP etcd on 127.0.0.1 per control-plane node, run by the supervisor from the binary of the image's minor).

The skew check (`skew`, `Sampler`) reads what the API shows, as any operator would, and states the version skew
policy in its own few lines, independently of the engine it checks.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import requests
import yaml

from lab.env.controller import ControllerProcess, wait_for as wait_until
from lab.env.ports import free_port
from lab.kube.api import KubeServer
from lab.provisioning import hosts as lab_hosts

from ansible_collections.steward.cluster.plugins.module_utils.provisioning import files, layout
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.certs import new_authority
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.node_files import plan_node_files
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.spec import parse_cluster, parse_node

HOSTS = (('cp1', 'control_plane'), ('cp2', 'control_plane'), ('cp3', 'control_plane'),
         ('w1', 'workers'), ('w2', 'workers'))

# Bare-metal workers through the node-maintenance state machine: the profile the tests and the benchmark give the
# real maintenance controller (docs/upgrades.md shows it): the way in checks the request, the approval and
# maxMaintenance, and drains; the way out uncordons.
MAINTENANCE_NS = 'steward-system'
MAINTENANCE_REQUEST = 'example.com/kubelet-upgrade'
MAINTENANCE_CONFIG = '''
intervals:
  requeue: 1s
instances:
  check:
  - {type: hasAnnotation, name: requested, config: {key: %(request)s, value: "true"}}
  - {type: hasAnnotation, name: approved, config: {key: cloud.sap/maintenance-approved, value: "true"}}
  - {type: maxMaintenance, name: one_at_a_time, config: {max: %(max)d}}
  trigger:
  - {type: alterAnnotation, name: remove_approval, config: {key: cloud.sap/maintenance-approved, remove: true}}
  - {type: drain, name: drain, config: {timeout: 120s, evictionTimeout: 60s}}
  - {type: uncordon, name: uncordon}
profiles:
- name: kubelet-upgrade
  operational:
    transitions:
    - {check: requested, next: maintenance-required}
  maintenance-required:
    transitions:
    - {check: approved && one_at_a_time, trigger: remove_approval && drain, next: in-maintenance}
  in-maintenance:
    transitions:
    - {check: "!requested", trigger: uncordon, next: operational}
'''


def maintenance_config(max_maintenance: int = 1) -> str:
    return MAINTENANCE_CONFIG % {'request': MAINTENANCE_REQUEST, 'max': max_maintenance}


def start_maintenance_controller(hosts: 'UpgradeLab', state: str, max_maintenance: int = 1) -> Any:
    """The maintenance config in a ConfigMap, the workers labelled with its profile, the real controller
    (`--maintenance-config`) started; returns it once every worker is `operational`. The caller stops it."""
    url = hosts.server.url
    requests.post(url + '/api/v1/namespaces/%s/configmaps' % MAINTENANCE_NS, timeout=5, json={
        'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'maintenance', 'namespace': MAINTENANCE_NS},
        'data': {'maintenance.yaml': maintenance_config(max_maintenance)}}).raise_for_status()
    for name in hosts.workers:
        requests.patch(url + '/api/v1/nodes/' + name, timeout=5, headers={'Content-Type': 'application/merge-patch+json'},
                       json={'metadata': {'labels': {'cloud.sap/maintenance-profile': 'kubelet-upgrade'}}}
                       ).raise_for_status()
    controller = ControllerProcess(hosts.server, state,
                                   args=['--maintenance-config', 'configmap/%s/maintenance' % MAINTENANCE_NS]).start()

    def operational() -> bool:
        nodes = requests.get(url + '/api/v1/nodes', timeout=5).json()['items']
        return all((n['metadata'].get('labels') or {}).get('cloud.sap/maintenance-state') == 'operational'
                   for n in nodes if n['metadata']['name'] in hosts.workers)
    try:
        wait_until(operational, 60, 0.2, 'the controller to label the workers')
    except BaseException:
        controller.stop()
        raise
    return controller


def minor(version: Optional[str]) -> Optional[int]:
    """`v1.32.0` -> 32 (this module's own reading, not the engine's)."""
    return int(version.lstrip('v').split('.')[1]) if version else None


def skew(api: Dict[str, Any], cm: Dict[str, Any], kubelet: Dict[str, Any]) -> List[str]:
    """The version skew policy, written out here independently of the engine (kubernetes.io/releases/
    version-skew-policy): apiservers one minor apart at most; controller-manager/scheduler not newer than the oldest
    apiserver nor more than one minor older than the newest; kubelets not newer than the oldest apiserver nor more
    than three minors older than the newest."""
    apis = [minor(v) for v in api.values() if v]
    if not apis:
        return []
    low, high = min(apis), max(apis)
    out = ['apiservers %s' % api] if high - low > 1 else []
    out += ['%s %s' % (n, v) for n, v in cm.items() if v and not high - 1 <= minor(v) <= low]
    out += ['kubelet %s %s' % (n, v) for n, v in kubelet.items() if v and not high - 3 <= minor(v) <= low]
    return out


class Sampler(threading.Thread):
    """Every `interval` s: the versions the API shows (Nodes and mirror pods), the skew policy over them, and each
    Node's cordon transitions. `timeline` holds each change: per node (name, kube-apiserver, kube-controller-manager,
    kubelet, etcd) as the mirror pods' tags and the Node show them."""

    def __init__(self, server: str, names: Sequence[str], control_plane: Sequence[str], interval: float = 0.2):
        super().__init__(daemon=True)
        self.server = server
        self.names = list(names)
        self.control_plane = list(control_plane)
        self.interval = interval
        self.stop = threading.Event()
        self.violations: List = []
        self.cordons: Dict[str, int] = {n: 0 for n in self.names}
        self.samples = 0
        self.timeline: List = []
        self._cordoned: Dict[str, bool] = {n: False for n in self.names}
        self.most_workers_cordoned = 0   # the most workers cordoned at one sample: a batch drains together
        # monotonic times: the first sample with a worker cordoned, the last with one cordoned (the workers' phase)
        self.workers_from: Optional[float] = None
        self.workers_to: Optional[float] = None

    def start(self) -> None:
        super().start()
        threading.Thread(target=self._watch_cordons, daemon=True).start()

    def _watch_cordons(self) -> None:
        """Cordon transitions from a watch of the Nodes, not from the samples: a worker of a batch can be cordoned,
        drained and uncordoned between two samples when the machine is loaded (the sampler's GETs wait on the API
        server), and a missed cordon would read as "not cordoned"."""
        seen: Dict[str, bool] = {}

        def note(node: Dict[str, Any]) -> None:
            name = node['metadata']['name']
            now = bool((node.get('spec') or {}).get('unschedulable'))
            if now and not seen.get(name):
                self.cordons[name] = self.cordons.get(name, 0) + 1
            seen[name] = now
        while not self.stop.is_set():
            try:
                listed = requests.get(self.server + '/api/v1/nodes', timeout=5).json()
                for node in listed['items']:
                    note(node)
                with requests.get(self.server + '/api/v1/nodes', stream=True, timeout=(5, 30), params={
                        'watch': '1', 'resourceVersion': listed['metadata'].get('resourceVersion', '')}) as stream:
                    for line in stream.iter_lines():
                        if self.stop.is_set():
                            return
                        event = json.loads(line) if line else {}
                        if event.get('type') in ('ADDED', 'MODIFIED'):
                            note(event['object'])
            except (requests.RequestException, ValueError, KeyError):
                self.stop.wait(0.2)

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            try:
                nodes = {n['metadata']['name']: n for n in requests.get(self.server + '/api/v1/nodes', timeout=5)
                         .json()['items']}
                pods = requests.get(self.server + '/api/v1/namespaces/kube-system/pods', timeout=5).json()['items']
            except (requests.RequestException, ValueError, KeyError):
                continue
            tags = {p['metadata']['name']: p['spec']['containers'][0]['image'].rsplit(':', 1)[1] for p in pods}
            api = {n: tags.get('kube-apiserver-' + n) for n in self.control_plane}
            cm = {n + '/' + c: tags.get('%s-%s' % (c, n)) for n in self.control_plane
                  for c in ('kube-controller-manager', 'kube-scheduler')}
            kubelet = {n: ((nodes.get(n, {}).get('status') or {}).get('nodeInfo') or {}).get('kubeletVersion')
                       for n in self.names}
            self.samples += 1
            seen = skew(api, cm, kubelet)
            if seen:
                self.violations.append(seen)
            versions = tuple((n, api.get(n), cm.get(n + '/kube-controller-manager'), kubelet[n], tags.get('etcd-' + n))
                             for n in self.names)
            if not self.timeline or self.timeline[-1] != versions:
                self.timeline.append(versions)
            for name, node in nodes.items():   # (cordons are counted by the watch)
                self._cordoned[name] = bool((node.get('spec') or {}).get('unschedulable'))
            cordoned = sum(1 for name in self.names if name not in self.control_plane and self._cordoned.get(name))
            self.most_workers_cordoned = max(self.most_workers_cordoned, cordoned)
            if cordoned:
                self.workers_from = self.workers_from or time.monotonic()
                self.workers_to = time.monotonic()

    @property
    def workers_seconds(self) -> Optional[float]:
        """From the first worker cordoned to the last worker uncordoned, as sampled (None: no worker was)."""
        return None if self.workers_from is None else round(self.workers_to - self.workers_from + self.interval, 1)


def wait_for(ok: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        if time.monotonic() >= deadline:
            raise TimeoutError('timed out waiting for ' + what)
        time.sleep(0.2)


def versions(url: str) -> Dict[str, Optional[str]]:
    nodes = requests.get(url + '/api/v1/nodes', timeout=5).json()['items']
    return {n['metadata']['name']: ((n.get('status') or {}).get('nodeInfo') or {}).get('kubeletVersion') for n in nodes}


def mirrors(url: str) -> Dict[str, str]:
    pods = requests.get(url + '/api/v1/namespaces/kube-system/pods', timeout=5).json()['items']
    return {p['metadata']['name']: p['spec']['containers'][0]['image'] for p in pods}


def evictions(audit: Sequence[Tuple[str, str, str, Any]]) -> Dict[str, int]:
    """{node: evictions} from the emulator's audit log (pods are named web-<node>-<i>)."""
    out: Dict[str, int] = {}
    for _agent, method, path, _query in list(audit):
        if method == 'POST' and path.endswith('/eviction'):
            pod = path.split('/pods/', 1)[1].split('/', 1)[0]
            node = pod.split('-')[1]
            out[node] = out.get(node, 0) + 1
    return out


def etcd_manifest(name: str, ports: Dict[str, Tuple[int, int]], image: str) -> str:
    """A plain-HTTP etcd static pod on 127.0.0.1 (kubeadm's labels, so its mirror pod is read like kubeadm's)."""
    client, peer = 'http://127.0.0.1:%d' % ports[name][0], 'http://127.0.0.1:%d' % ports[name][1]
    initial = ','.join('%s=http://127.0.0.1:%d' % (n, ports[n][1]) for n in ports)
    flags = {'name': name, 'data-dir': '/var/lib/etcd', 'listen-client-urls': client, 'advertise-client-urls': client,
             'listen-peer-urls': peer, 'initial-advertise-peer-urls': peer, 'initial-cluster': initial,
             'initial-cluster-state': 'new', 'initial-cluster-token': 'k8s-upgrade',
             'heartbeat-interval': '50', 'election-timeout': '500'}
    pod = {'apiVersion': 'v1', 'kind': 'Pod',
           'metadata': {'name': 'etcd', 'namespace': 'kube-system',
                        'labels': {'component': 'etcd', 'tier': 'control-plane'}},
           'spec': {'hostNetwork': True,
                    'containers': [{'name': 'etcd', 'image': image, 'imagePullPolicy': 'IfNotPresent',
                                    'command': ['etcd'] + ['--%s=%s' % kv for kv in sorted(flags.items())],
                                    'volumeMounts': [{'name': 'etcd-data', 'mountPath': '/var/lib/etcd'}]}],
                    'volumes': [{'name': 'etcd-data',
                                 'hostPath': {'path': '/var/lib/etcd', 'type': 'DirectoryOrCreate'}}]}}
    return yaml.safe_dump(pod, default_flow_style=False, sort_keys=False)


class UpgradeLab:
    """The hosts, their files at `version`, their supervisors and the API; `start()` waits until every Node and
    mirror pod reports `version`; `stop()` ends every process it started."""

    def __init__(self, state: str, hosts: Sequence[Tuple[str, str]] = HOSTS, version: str = 'v1.31.4',
                 etcd_image: Optional[str] = None, pods_per_node: int = 2):
        self.state = state
        self.hosts = tuple(hosts)
        self.names = [h for h, _g in self.hosts]
        self.control_plane = [h for h, g in self.hosts if g == 'control_plane']
        self.workers = [h for h, g in self.hosts if g == 'workers']
        self.version = version
        self.etcd_image = etcd_image
        self.pods_per_node = pods_per_node
        self.etcd_ports = {n: (free_port(), free_port()) for n in self.control_plane} if etcd_image else {}
        self.server: Any = None
        self.kubeconfig = ''
        self.inventory = ''

    @property
    def etcd_endpoints(self) -> List[str]:
        return ['http://127.0.0.1:%d' % self.etcd_ports[n][0] for n in self.control_plane]

    def root(self, name: str) -> str:
        return lab_hosts.root_of(self.state, name)

    def start(self, timeout: float = 90.0) -> 'UpgradeLab':
        now = datetime.datetime.now(datetime.timezone.utc)
        os.makedirs(self.state, exist_ok=True)
        ip_base = lab_hosts.free_ip_base(len(self.hosts))
        ips = dict(zip(self.names, lab_hosts.host_ips(ip_base, len(self.hosts))))
        self.server = KubeServer().start()
        self.kubeconfig = self.server.write_kubeconfig(lab_hosts.kubeconfig_path(self.state))
        self.inventory = lab_hosts.write_inventory(self.state, ip_base, self.hosts)
        cluster = parse_cluster({'control_plane': [{'name': n, 'address': ips[n]} for n in self.control_plane],
                                 'kubernetes_version': self.version})
        authority = new_authority('ecdsa-p256', now, 3650)
        initial = ','.join('%s=%s' % (n, cluster.peer_url(ips[n])) for n in self.control_plane)
        skip = (layout.MANIFEST['etcd'], layout.MANIFEST['haproxy'])
        for name in self.names:
            root = self.root(name)
            cp = name in self.control_plane
            node = parse_node({'node_name': name, 'address': ips[name], 'local_address': ips[name],
                               'role': 'control-plane' if cp else 'worker'}, cluster)
            planned = plan_node_files(cluster, node, authority, files.Root(root).read, now,
                                      (initial, 'new') if cp else None)
            files.apply(files.Root(root), files.plan(files.Root(root), {p: f for p, f in planned.files.items()
                                                                        if p not in skip}))
            if cp and self.etcd_image:
                path = layout.host_path(root, layout.MANIFEST['etcd'])
                with open(path, 'w') as f:
                    f.write(etcd_manifest(name, self.etcd_ports, self.etcd_image))
                os.chmod(path, 0o600)
            lab_hosts.install_kubelet_stub(root, self.version)
            lab_hosts.start_supervisor(root, self.kubeconfig, interval=0.2)
        mirrors_expected = 3 * len(self.control_plane) + (len(self.control_plane) if self.etcd_image else 0)
        wait_for(lambda: versions(self.server.url) == {n: self.version for n in self.names}
                 and len(mirrors(self.server.url)) == mirrors_expected, timeout,
                 'Nodes and mirror pods at %s' % self.version)
        if self.pods_per_node:
            self.workloads()
        return self

    def workloads(self) -> None:
        """`pods_per_node` pods of a ReplicaSet on every node (nothing recreates them: each is evicted exactly once
        or not at all)."""
        url = self.server.url
        ns = url + '/api/v1/namespaces/default'
        rs = requests.post(url + '/apis/apps/v1/namespaces/default/replicasets', timeout=5, json={
            'apiVersion': 'apps/v1', 'kind': 'ReplicaSet', 'metadata': {'name': 'web'},
            'spec': {'replicas': self.pods_per_node * len(self.names), 'selector': {'matchLabels': {'app': 'web'}},
                     'template': {'metadata': {'labels': {'app': 'web'}},
                                  'spec': {'containers': [{'name': 'c', 'image': 'web'}]}}}})
        if rs.status_code not in (200, 201):
            raise RuntimeError(rs.text)
        uid = rs.json()['metadata']['uid']
        for name in self.names:
            for i in range(self.pods_per_node):
                answer = requests.post(ns + '/pods', timeout=5, json={
                    'apiVersion': 'v1', 'kind': 'Pod',
                    'metadata': {'name': 'web-%s-%d' % (name, i), 'labels': {'app': 'web'},
                                 'ownerReferences': [{'apiVersion': 'apps/v1', 'kind': 'ReplicaSet', 'name': 'web',
                                                      'uid': uid, 'controller': True}]},
                    'spec': {'nodeName': name, 'containers': [{'name': 'c', 'image': 'web'}]},
                    'status': {'phase': 'Running', 'conditions': [{'type': 'Ready', 'status': 'True'}]}})
                if answer.status_code not in (200, 201):
                    raise RuntimeError(answer.text)

    def disk(self) -> Dict[str, str]:
        """sha256 of every file below the hosts' etc, var/lib and usr (etcd's data excepted: it writes on its own)."""
        out = {}
        for name in self.names:
            root = self.root(name)
            for directory in ('etc', 'var/lib', 'usr'):
                for base, _dirs, names in os.walk(os.path.join(root, directory)):
                    if os.path.join(root, 'var/lib/etcd') in os.path.join(base, ''):
                        continue
                    for n in names:
                        with open(os.path.join(base, n), 'rb') as f:
                            out[os.path.join(base, n)] = hashlib.sha256(f.read()).hexdigest()
        return out

    def pod_starts(self, name: str, pod: str = 'etcd') -> int:
        """How many times the supervisor started `pod` on this host (its log: the kubelet's events)."""
        with open(os.path.join(self.root(name), 'var/log/supervisor.log')) as f:
            return sum(1 for line in f if ': started %s (pid' % pod in line)

    def stop(self) -> None:
        for name in self.names:
            lab_hosts.stop_host(self.root(name))
        if self.server is not None:
            self.server.stop()
