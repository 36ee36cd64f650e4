# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Kubernetes upgrade (steward.cluster.cluster_upgrade) end to end on private lab hosts: cp1-cp3 and w1, w2 on a
free loopback range, each with the lab's static-pod supervisor (the kubelet's stand-in: mirror pods with the image
each manifest asks for, the Node's kubeletVersion from the host's kubelet install) and the lab's API emulator
(tests/support/upgrade_lab.py, shared with bench/k8s_upgrade.py).

The hosts get kubeadm's files from the provisioning engine at v1.31.4 (without the etcd and HAProxy manifests:
nothing here needs their processes), pods of a ReplicaSet on every node. Then, with a
sampler checking the version skew policy every 0.2 s from the API (the Nodes and mirror pods, as any operator sees
them): the playbook in check mode changes no file; a run through the module's entry point is killed right after
cp2 was drained; the playbook resumes it to v1.32.0 without draining cp2 again; a second run changes nothing.
"""

from __future__ import annotations

import time

import pytest
import requests

from support.ansible import run_playbook
from support.rbac import audited
from support.upgrade_lab import HOSTS, Sampler, UpgradeLab, evictions as _evictions, mirrors as _mirrors, skew
from support.upgrade_lab import versions as _versions

from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade import entry, host
from lab.provisioning import hosts as lab_hosts

pytestmark = [pytest.mark.slow]

NAMES = [h for h, _g in HOSTS]
CONTROL_PLANE, WORKERS = NAMES[:3], NAMES[3:]
FROM, TO = 'v1.31.4', 'v1.32.0'


@pytest.fixture(scope='module')
def lab(tmp_path_factory):
    hosts = UpgradeLab(str(tmp_path_factory.mktemp('upgrade-lab')), HOSTS, FROM)
    try:
        hosts.start(60)
        yield {'state': hosts.state, 'inventory': hosts.inventory, 'kubeconfig': hosts.kubeconfig,
               'server': hosts.server, 'hosts': hosts}
    finally:
        hosts.stop()


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
    sampler = Sampler(lab['server'].url, NAMES, CONTROL_PLANE)
    sampler.start()
    started = time.monotonic()
    try:
        # 1. check mode: the plan and the target, no file changed
        before = lab['hosts'].disk()
        checked = run_playbook('steward.cluster.cluster_upgrade', inventory=lab['inventory'], check=True,
                               extra_vars={'cluster_upgrade_version': TO, 'cluster_upgrade_max_unavailable': 2},
                               timeout=300)
        assert checked.rc == 0, (checked.stdout[-5000:], checked.stderr[-2000:])
        assert 'upgrade to %s through %s: 10 step(s)' % (TO, TO) in checked.stdout
        assert lab['hosts'].disk() == before and _evictions(audit) == {}
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
