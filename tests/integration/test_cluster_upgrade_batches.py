# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The workers' batches of a Kubernetes upgrade on private lab hosts (tests/support/upgrade_lab.py): cp1 and w1-w3,
one pod of a ReplicaSet on every node, and a `db` pod on w1 and w2 under a PodDisruptionBudget that allows one
disruption. With cluster_upgrade_max_unavailable 2:

  check mode shows the batches [w1], [w2, w3]: w1 and w2 together would evict both db pods, more than the budget
  allows (the split is named), and changes nothing;
  a run through the module's entry point finishes w1 and is killed right after w2 was drained (its record says
  `drained`); the plan then shows w1 done and the batch [w2, w3] with w2's phase, w2 first;
  the playbook resumes: w2 is not drained again, w3 joins its batch, every pod was evicted once, every node
  cordoned once, the skew policy held at every 0.2 s sample.
"""

from __future__ import annotations

import pytest
import requests

from support.ansible import run_playbook
from support.rbac import audited
from support.upgrade_lab import Sampler, UpgradeLab, evictions, versions

from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade import entry, host
from lab.provisioning import hosts as lab_hosts

pytestmark = [pytest.mark.slow]

HOSTS = (('cp1', 'control_plane'), ('w1', 'workers'), ('w2', 'workers'), ('w3', 'workers'))
NAMES = [h for h, _g in HOSTS]
WORKERS = ['w1', 'w2', 'w3']
FROM, TO = 'v1.31.4', 'v1.32.0'


@pytest.fixture
def lab(tmp_path):
    hosts = UpgradeLab(str(tmp_path / 'lab'), HOSTS, FROM, pods_per_node=1)
    try:
        hosts.start(60)
        url = hosts.server.url
        for node in ('w1', 'w2'):
            answer = requests.post(url + '/api/v1/namespaces/default/pods', timeout=5, json={
                'apiVersion': 'v1', 'kind': 'Pod',
                'metadata': {'name': 'db-%s' % node, 'labels': {'app': 'db'},
                             'ownerReferences': [{'apiVersion': 'apps/v1', 'kind': 'StatefulSet', 'name': 'db',
                                                  'uid': 'db-uid', 'controller': True}]},
                'spec': {'nodeName': node, 'containers': [{'name': 'c', 'image': 'db'}]},
                'status': {'phase': 'Running', 'conditions': [{'type': 'Ready', 'status': 'True'}]}})
            assert answer.status_code in (200, 201), answer.text
        answer = requests.post(url + '/apis/policy/v1/namespaces/default/poddisruptionbudgets', timeout=5, json={
            'apiVersion': 'policy/v1', 'kind': 'PodDisruptionBudget', 'metadata': {'name': 'db'},
            'spec': {'maxUnavailable': 1, 'selector': {'matchLabels': {'app': 'db'}}}})
        assert answer.status_code in (200, 201), answer.text
        yield hosts
    finally:
        hosts.stop()


def _params(hosts, stage, node=None):
    p = {'version': TO, 'via': [], 'stage': stage, 'control_plane': ['cp1'], 'workers': WORKERS,
         'node_name': node, 'kubeconfig': hosts.kubeconfig, 'request_timeout': 30.0, 'max_unavailable': 2,
         'timeout': 60.0, 'drain_timeout': 60.0, 'eviction_timeout': 30.0, 'protected_namespaces': []}
    if node:
        hv = lab_hosts.read_hosts(hosts.state)
        p.update(root=hosts.root(node), kubelet_install_command=hv[node]['cluster_upgrade_kubelet_install_command'])
    return p


class Killed(BaseException):
    """The run dies here (as a SIGKILL would: nothing after it runs)."""


def test_batches_split_by_a_budget_resumed_after_a_kill_without_a_second_drain(lab, monkeypatch):
    hosts = lab
    audit = audited(hosts.server)
    extra = {'cluster_upgrade_version': TO, 'cluster_upgrade_max_unavailable': 2}
    before = hosts.disk()
    checked = run_playbook('steward.cluster.cluster_upgrade', inventory=hosts.inventory, check=True,
                           extra_vars=extra, timeout=300)
    assert checked.rc == 0, (checked.stdout[-5000:], checked.stderr[-2000:])
    assert "worker batches: [['w1'], ['w2', 'w3']] (at most 2, by max_unavailable" in checked.stdout
    assert 'batch 1 closed before w2: default/db allows 1 disruption(s), the batch would evict 2 of its pods' \
        in checked.stdout
    assert hosts.disk() == before and evictions(audit) == {}

    sampler = Sampler(hosts.server.url, NAMES, ['cp1'])
    sampler.start()
    try:
        # a run through the module's entry point: the control plane, w1 (batch 1), then killed after w2's drain
        for stage, node in (('kube-apiserver', 'cp1'), ('controller-manager-scheduler', 'cp1'), ('kubelet', 'cp1'),
                            ('kubelet', 'w1')):
            done = entry.cluster_upgrade(_params(hosts, stage, node), False)
            assert done['changed'] and not done['blocked'], done

        def die(_self, _version):
            raise Killed()
        monkeypatch.setattr(host.HostOps, 'install_kubelet', die)
        with pytest.raises(Killed):
            entry.cluster_upgrade(_params(hosts, 'kubelet', 'w2'), False)
        monkeypatch.undo()
        assert evictions(audit) == {'cp1': 1, 'w1': 2, 'w2': 2}
        shown = entry.cluster_upgrade(_params(hosts, 'plan'), True)
        assert shown['status']['done'] == ['cp1', 'w1']
        assert shown['status']['batches'] == [{'batch': 1, 'nodes': {'w2': 'drained', 'w3': None}}]
        assert shown['plan']['batches']['in_flight'] == ['w2']

        run = run_playbook('steward.cluster.cluster_upgrade', inventory=hosts.inventory, extra_vars=extra, timeout=600)
        assert run.rc == 0, (run.stdout[-6000:], run.stderr[-2000:])
    finally:
        sampler.stop.set()
        sampler.join(5)
    assert versions(hosts.server.url) == {n: TO for n in NAMES}
    assert evictions(audit) == {'cp1': 1, 'w1': 2, 'w2': 2, 'w3': 1}     # every pod once: w2 not drained again
    assert sampler.cordons == {n: 1 for n in NAMES}
    assert sampler.violations == [] and sampler.samples > 10
