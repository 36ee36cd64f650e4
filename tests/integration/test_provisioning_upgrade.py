# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Kubernetes upgrade (steward.cluster.cluster_upgrade) end to end on private lab hosts: cp1-cp3 and w1, w2 on a
free loopback range, each with the lab's static-pod supervisor (the kubelet's stand-in: mirror pods with the image
each manifest asks for, the Node's kubeletVersion from the host's kubelet install) and the lab's API emulator.

The hosts get kubeadm's files from the provisioning engine at v1.31.4 (without the etcd and HAProxy manifests:
nothing here needs their processes), pods of a ReplicaSet on every node. Then, with a
sampler checking the version skew policy every 0.2 s from the API (the Nodes and mirror pods, as any operator sees
them): the playbook in check mode changes no file; a run through the module's entry point is killed right after
cp2 was drained; the playbook resumes it to v1.32.0 without draining cp2 again; a second run changes nothing.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import threading
import time
from typing import Dict, List

import pytest
import requests

from support.ansible import run_playbook
from support.rbac import audited

from ansible_collections.steward.cluster.plugins.module_utils.provisioning import files, layout
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.certs import new_authority
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.node_files import plan_node_files
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.spec import parse_cluster, parse_node
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade import entry, host
from lab.kube.api import KubeServer
from lab.provisioning import hosts as lab_hosts

pytestmark = [pytest.mark.slow]

HOSTS = (('cp1', 'control_plane'), ('cp2', 'control_plane'), ('cp3', 'control_plane'),
         ('w1', 'workers'), ('w2', 'workers'))
NAMES = [h for h, _g in HOSTS]
CONTROL_PLANE, WORKERS = NAMES[:3], NAMES[3:]
FROM, TO = 'v1.31.4', 'v1.32.0'
NOW = datetime.datetime.now(datetime.timezone.utc)


def minor(version):
    """`v1.32.0` -> 32 (this test's own reading, not the engine's)."""
    return int(version.lstrip('v').split('.')[1]) if version else None


def skew(api, cm, kubelet):
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
    """Every 0.2 s: the versions the API shows (Nodes and mirror pods), the skew policy over them, and each Node's
    cordon transitions."""

    def __init__(self, server: str):
        super().__init__(daemon=True)
        self.server = server
        self.stop = threading.Event()
        self.violations: List = []
        self.cordons: Dict[str, int] = {n: 0 for n in NAMES}
        self.samples = 0
        self.timeline: List = []
        self._cordoned: Dict[str, bool] = {n: False for n in NAMES}

    def run(self) -> None:
        while not self.stop.wait(0.2):
            try:
                nodes = {n['metadata']['name']: n for n in requests.get(self.server + '/api/v1/nodes', timeout=5)
                         .json()['items']}
                pods = requests.get(self.server + '/api/v1/namespaces/kube-system/pods', timeout=5).json()['items']
            except (requests.RequestException, ValueError, KeyError):
                continue
            tags = {p['metadata']['name']: p['spec']['containers'][0]['image'].rsplit(':', 1)[1] for p in pods}
            api = {n: tags.get('kube-apiserver-' + n) for n in CONTROL_PLANE}
            cm = {n + '/' + c: tags.get('%s-%s' % (c, n)) for n in CONTROL_PLANE
                  for c in ('kube-controller-manager', 'kube-scheduler')}
            kubelet = {n: ((nodes.get(n, {}).get('status') or {}).get('nodeInfo') or {}).get('kubeletVersion')
                       for n in NAMES}
            self.samples += 1
            seen = skew(api, cm, kubelet)
            if seen:
                self.violations.append(seen)
            versions = tuple((n, api.get(n), cm.get(n + '/kube-controller-manager'), kubelet[n]) for n in NAMES)
            if not self.timeline or self.timeline[-1] != versions:
                self.timeline.append(versions)
            for name, node in nodes.items():
                now = bool((node.get('spec') or {}).get('unschedulable'))
                if now and not self._cordoned.get(name):
                    self.cordons[name] += 1
                self._cordoned[name] = now


@pytest.fixture(scope='module')
def lab(tmp_path_factory):
    state = str(tmp_path_factory.mktemp('upgrade-lab'))
    ip_base = lab_hosts.free_ip_base(len(HOSTS))
    ips = dict(zip(NAMES, lab_hosts.host_ips(ip_base, len(HOSTS))))
    server = KubeServer().start()
    kubeconfig = server.write_kubeconfig(lab_hosts.kubeconfig_path(state))
    inventory = lab_hosts.write_inventory(state, ip_base, HOSTS)
    cluster = parse_cluster({'control_plane': [{'name': n, 'address': ips[n]} for n in CONTROL_PLANE],
                             'kubernetes_version': FROM})
    authority = new_authority('ecdsa-p256', NOW, 3650)
    initial = ','.join('%s=%s' % (n, cluster.peer_url(ips[n])) for n in CONTROL_PLANE)
    for name in NAMES:
        root = lab_hosts.root_of(state, name)
        node = parse_node({'node_name': name, 'address': ips[name], 'local_address': ips[name],
                           'role': 'control-plane' if name in CONTROL_PLANE else 'worker'}, cluster)
        planned = plan_node_files(cluster, node, authority, files.Root(root).read, NOW,
                                  (initial, 'new') if name in CONTROL_PLANE else None)
        skip = (layout.MANIFEST['etcd'], layout.MANIFEST['haproxy'])
        files.apply(files.Root(root), files.plan(files.Root(root), {p: f for p, f in planned.files.items()
                                                                    if p not in skip}))
        lab_hosts.install_kubelet_stub(root, FROM)
        lab_hosts.start_supervisor(root, kubeconfig, interval=0.2)
    try:
        _wait(lambda: _versions(server.url) == {n: FROM for n in NAMES} and len(_mirrors(server.url)) == 9, 60,
              'Nodes and mirror pods at %s' % FROM)
        _workloads(server.url)
        yield {'state': state, 'inventory': inventory, 'kubeconfig': kubeconfig, 'server': server}
    finally:
        for name in NAMES:
            lab_hosts.stop_host(lab_hosts.root_of(state, name))
        server.stop()


def _wait(ok, timeout, what):
    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, 'timed out waiting for ' + what
        time.sleep(0.2)


def _versions(url):
    nodes = requests.get(url + '/api/v1/nodes', timeout=5).json()['items']
    return {n['metadata']['name']: ((n.get('status') or {}).get('nodeInfo') or {}).get('kubeletVersion') for n in nodes}


def _mirrors(url):
    pods = requests.get(url + '/api/v1/namespaces/kube-system/pods', timeout=5).json()['items']
    return {p['metadata']['name']: p['spec']['containers'][0]['image'] for p in pods}


def _workloads(url):
    """Two pods of a ReplicaSet on every node (nothing recreates them: each is evicted exactly once or not at all)."""
    ns = url + '/api/v1/namespaces/default'
    rs = requests.post(url + '/apis/apps/v1/namespaces/default/replicasets', timeout=5, json={
        'apiVersion': 'apps/v1', 'kind': 'ReplicaSet', 'metadata': {'name': 'web'},
        'spec': {'replicas': 10, 'selector': {'matchLabels': {'app': 'web'}},
                 'template': {'metadata': {'labels': {'app': 'web'}},
                              'spec': {'containers': [{'name': 'c', 'image': 'web'}]}}}})
    assert rs.status_code in (200, 201), rs.text
    uid = rs.json()['metadata']['uid']
    for name in NAMES:
        for i in range(2):
            answer = requests.post(ns + '/pods', timeout=5, json={
                'apiVersion': 'v1', 'kind': 'Pod',
                'metadata': {'name': 'web-%s-%d' % (name, i), 'labels': {'app': 'web'},
                             'ownerReferences': [{'apiVersion': 'apps/v1', 'kind': 'ReplicaSet', 'name': 'web',
                                                  'uid': uid, 'controller': True}]},
                'spec': {'nodeName': name, 'containers': [{'name': 'c', 'image': 'web'}]},
                'status': {'phase': 'Running', 'conditions': [{'type': 'Ready', 'status': 'True'}]}})
            assert answer.status_code in (200, 201), answer.text


def _disk(state):
    out = {}
    for name in NAMES:
        root = lab_hosts.root_of(state, name)
        for directory in ('etc', 'var/lib', 'usr'):
            for base, _dirs, names in os.walk(os.path.join(root, directory)):
                for n in names:
                    with open(os.path.join(base, n), 'rb') as f:
                        out[os.path.join(base, n)] = hashlib.sha256(f.read()).hexdigest()
    return out


def _evictions(audit):
    out: Dict[str, int] = {}
    for _agent, method, path, _query in list(audit):
        if method == 'POST' and path.endswith('/eviction'):
            pod = path.split('/pods/', 1)[1].split('/', 1)[0]
            node = pod.split('-')[1]
            out[node] = out.get(node, 0) + 1
    return out


def _params(lab, stage, node=None):
    hv = lab_hosts.read_hosts(lab['state'])
    p = {'version': TO, 'via': [], 'stage': stage, 'control_plane': CONTROL_PLANE, 'workers': WORKERS,
         'node_name': node, 'kubeconfig': lab['kubeconfig'], 'request_timeout': 30.0, 'max_unavailable': 2,
         'timeout': 60.0, 'drain_timeout': 60.0, 'eviction_timeout': 30.0, 'protected_namespaces': []}
    if node:
        p.update(root=lab_hosts.root_of(lab['state'], node),
                 kubelet_install_command=hv[node]['cluster_upgrade_kubelet_install_command'])
    return p


class Killed(BaseException):
    """The run dies here (as a SIGKILL would: nothing after it runs)."""


def test_upgrade_check_mode_kill_resume_and_second_run(lab, monkeypatch):
    audit = audited(lab['server'])
    sampler = Sampler(lab['server'].url)
    sampler.start()
    started = time.monotonic()
    try:
        # 1. check mode: the plan and the target, no file changed
        before = _disk(lab['state'])
        checked = run_playbook('steward.cluster.cluster_upgrade', inventory=lab['inventory'], check=True,
                               extra_vars={'cluster_upgrade_version': TO, 'cluster_upgrade_max_unavailable': 2},
                               timeout=300)
        assert checked.rc == 0, (checked.stdout[-5000:], checked.stderr[-2000:])
        assert 'upgrade to %s through %s: 10 step(s)' % (TO, TO) in checked.stdout
        assert _disk(lab['state']) == before and _evictions(audit) == {}
        check_time = time.monotonic() - started

        # 2. a run through the module's entry point, killed right after cp2 was drained
        for stage, nodes in (('kube-apiserver', CONTROL_PLANE), ('controller-manager-scheduler', CONTROL_PLANE),
                             ('kubelet', ['cp1'])):
            for node in nodes:
                done = entry.cluster_upgrade(_params(lab, stage, node), False)
                assert done['changed'] and not done['blocked'], done
        blocked = entry.cluster_upgrade(_params(lab, 'kubelet', 'w1'), False)   # workers wait for cp2, cp3
        assert blocked['blocked'] and not blocked['changed']

        def die(_self, _version):
            raise Killed()
        monkeypatch.setattr(host.HostOps, 'install_kubelet', die)
        with pytest.raises(Killed):
            entry.cluster_upgrade(_params(lab, 'kubelet', 'cp2'), False)
        monkeypatch.undo()
        assert _evictions(audit) == {'cp1': 2, 'cp2': 2}
        shown = entry.cluster_upgrade(_params(lab, 'plan'), True)
        assert shown['status']['records']['cp2']['phase'] == 'drained'
        assert [s['nodes'] for s in shown['plan']['steps']] == [['cp2'], ['cp3'], ['w1', 'w2']]

        # 3. the playbook resumes: cp2 is not drained again
        resumed_at = time.monotonic()
        run = run_playbook('steward.cluster.cluster_upgrade', inventory=lab['inventory'],
                           extra_vars={'cluster_upgrade_version': TO, 'cluster_upgrade_max_unavailable': 2},
                           timeout=600)
        assert run.rc == 0, (run.stdout[-6000:], run.stderr[-2000:])
        resume_time = time.monotonic() - resumed_at
        assert _versions(lab['server'].url) == {n: TO for n in NAMES}
        assert all(image.endswith(':' + TO) for name, image in _mirrors(lab['server'].url).items())

        # 4. a second run changes nothing
        again = run_playbook('steward.cluster.cluster_upgrade', inventory=lab['inventory'],
                             extra_vars={'cluster_upgrade_version': TO}, timeout=300)
        assert again.rc == 0 and all(s.get('changed', 0) == 0 for s in again.stats.values()), again.stats
    finally:
        sampler.stop.set()
        sampler.join(5)

    assert _evictions(audit) == {n: 2 for n in NAMES}          # every pod evicted once: no node drained twice
    assert sampler.cordons == {n: 1 for n in NAMES}             # every node cordoned once
    assert sampler.violations == [] and sampler.samples > 20    # the skew policy held at every sample
    assert skew({'cp1': 'v1.32.0', 'cp2': 'v1.31.4'}, {}, {'w1': 'v1.32.0'})   # (and the check can see a violation)
    assert skew({'cp1': 'v1.32.0'}, {'cp1/kube-scheduler': 'v1.30.1'}, {})
    nodes = {n['metadata']['name']: n for n in requests.get(lab['server'].url + '/api/v1/nodes', timeout=5)
             .json()['items']}
    assert not any((n.get('spec') or {}).get('unschedulable') for n in nodes.values())
    # the order the API showed: every apiserver before any controller-manager, every one of those before a kubelet
    first = {what: next(i for i, t in enumerate(sampler.timeline) if any(v[k] == TO for v in t))
             for what, k in (('api', 1), ('cm', 2), ('kubelet', 3))}
    last_api = next(i for i, t in enumerate(sampler.timeline) if all(v[1] == TO for v in t[:3]))
    assert first['api'] <= last_api < first['cm'] < first['kubelet']
    print('cluster upgrade on lab hosts: check mode %.1fs, resumed run %.1fs, total %.1fs, %d samples, evictions %s'
          % (check_time, resume_time, time.monotonic() - started, sampler.samples, _evictions(audit)))
