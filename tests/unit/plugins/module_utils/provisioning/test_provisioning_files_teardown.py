"""Files below a root: plans, atomic writes, the record of what is ours, the join script that writes the same files,
and teardown that removes exactly those (manifests first, etcd data moved aside, a live member refused)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.provisioning import files, join_script, layout
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.certinfo import certificates
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import Refused
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.node_files import FileSpec, plan_node_files
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.teardown import plan_teardown, teardown

from provisioning_fixtures import NOW, MemoryRoot, authority, cluster, node

BOOT = ('cp1=https://10.0.0.1:2380', 'new')


def _install(root: files.Root, planned, spec_node) -> None:
    desired = dict(planned.files)
    desired[layout.RECORD] = FileSpec(layout.RECORD, files.record_content(
        spec_node.name, spec_node.role, list(planned.files) + [layout.RECORD]), 0o644)
    files.apply(root, files.plan(root, desired))


@pytest.fixture(scope='module')
def worker_plan():
    spec = cluster()
    worker = node(spec, 'w1', 'worker', labels={'zone': 'a'})
    return spec, worker, plan_node_files(spec, worker, authority(), MemoryRoot().read, NOW)


def test_plan_apply_and_replan(tmp_path, worker_plan):
    spec, worker, planned = worker_plan
    root = files.Root(str(tmp_path))
    changes = files.plan(root, planned.files)
    assert {c.action for c in changes} == {files.CREATE}
    files.apply(root, changes)
    assert files.plan(root, planned.files) == []
    pem = root.host(layout.KUBELET_CLIENT_PEM)
    assert stat.S_IMODE(os.stat(pem).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(pem)).st_mode) == 0o700      # /var/lib/kubelet/pki is private
    os.chmod(root.host(layout.KUBELET_CONFIG), 0o666)
    [change] = files.plan(root, planned.files)
    assert (change.path, change.action, change.what) == (layout.KUBELET_CONFIG, files.UPDATE, 'mode')
    diff = files.diff(files.plan(root, {layout.KUBELET_CLIENT_PEM: FileSpec(layout.KUBELET_CLIENT_PEM, b'x', 0o600, True)}),
                      root.root)
    assert diff[0]['before'].startswith('(secret, ') and 'PRIVATE' not in diff[0]['before'] + diff[0]['after']


def test_removal_of_files_no_longer_planned(tmp_path):
    root = files.Root(str(tmp_path))
    root.write('/etc/kubernetes/old.conf', b'x', 0o600)
    [change] = files.plan(root, {}, remove=['/etc/kubernetes/old.conf', '/etc/kubernetes/gone.conf'])
    assert (change.action, change.path) == (files.REMOVE, '/etc/kubernetes/old.conf')


def test_join_script_writes_the_planned_files_and_the_record(tmp_path, worker_plan):
    spec, worker, planned = worker_plan
    script = join_script.render(spec, worker, planned.files.values(), NOW)
    assert script.startswith('#!/bin/bash\n# steward.cluster join script for node w1 (worker)')
    path = tmp_path / 'join.sh'
    path.write_text(script)
    assert subprocess.run(['bash', '-n', str(path)], check=False).returncode == 0
    target = tmp_path / 'root'
    run = subprocess.run(['bash', str(path), '--root', str(target), '--no-start', '--no-wait'], capture_output=True,
                         text=True, check=False)
    assert run.returncode == 0, run.stderr
    expected = files.Root(str(tmp_path / 'expected'))
    _install(expected, planned, worker)
    scripted = files.Root(str(target))
    record = files.read_record(scripted)
    assert record == files.read_record(expected) and record['node'] == 'w1'
    for p in record['files']:
        assert scripted.read(p) == expected.read(p) and scripted.mode(p) == expected.mode(p), p
    bad = subprocess.run(['bash', str(path), '--bogus'], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and 'unknown argument' in bad.stderr


def test_teardown_removes_exactly_ours_and_moves_etcd_data_aside(tmp_path):
    spec = cluster()
    cp1 = node(spec, 'cp1')
    planned = plan_node_files(spec, cp1, authority(), MemoryRoot().read, NOW, BOOT)
    root = files.Root(str(tmp_path))
    _install(root, planned, cp1)
    root.write('/etc/kubernetes/operator-notes.txt', b'mine', 0o644)    # someone else's file
    os.makedirs(root.host('/var/lib/etcd/member/snap'))
    plan = plan_teardown(root)
    assert plan['manifests'] and all(p.startswith(layout.MANIFESTS_DIR) for p in plan['manifests'])
    assert plan['etcd']['peer'] == 'https://10.0.0.1:2380' and plan['etcd_data_dir'] == '/var/lib/etcd'

    with pytest.raises(Refused) as err:
        teardown(root, check_mode=False, now=NOW, member_check=lambda peer: True)
    assert err.value.rule == 'still-a-member'
    assert root.exists(layout.MANIFEST['etcd'])

    checked = teardown(root, check_mode=True, now=NOW, member_check=lambda peer: False)
    assert checked['changed'] and root.exists(layout.MANIFEST['etcd'])
    stops = iter([True, True, False])    # etcd answers twice more after its manifest went, then the kubelet stopped it
    done = teardown(root, check_mode=False, now=NOW, member_check=lambda peer: False, wait_timeout=10,
                    sleep=lambda s: None, is_listening=lambda url: next(stops))
    assert done['moved'] == ['/var/lib/etcd', '/var/lib/etcd.removed-20260301T120000Z']
    assert os.path.isdir(root.host('/var/lib/etcd.removed-20260301T120000Z/member/snap'))
    assert root.read('/etc/kubernetes/operator-notes.txt') == b'mine'
    assert not os.path.exists(root.host(layout.PKI_DIR)) and not root.exists(layout.RECORD)
    again = teardown(root, check_mode=False, now=NOW, member_check=lambda peer: True)
    assert not again['changed']


def test_certificate_inventory_of_a_node(tmp_path):
    spec = cluster()
    cp1 = node(spec, 'cp1')
    root = files.Root(str(tmp_path))
    _install(root, plan_node_files(spec, cp1, authority(), MemoryRoot().read, NOW, BOOT), cp1)
    rows = {r['name']: r for r in certificates(root, NOW, 30)}
    assert set(rows) == {'admin.conf', 'apiserver', 'apiserver-etcd-client', 'apiserver-kubelet-client', 'ca',
                         'controller-manager.conf', 'etcd-ca', 'etcd-healthcheck-client', 'etcd-peer', 'etcd-server',
                         'front-proxy-ca', 'front-proxy-client', 'kubelet-client', 'scheduler.conf'}
    assert rows['ca']['is_ca'] and rows['ca']['days_left'] == 3650 and not rows['ca']['due']
    assert rows['apiserver']['days_left'] == 365 and rows['etcd-server']['issuer'] == 'CN=etcd-ca'
    late = {r['name']: r['due'] for r in certificates(root, NOW.replace(year=2027), 30)}
    assert late['apiserver'] and not late['ca']
    root.write(layout.pki('broken.crt'), b'not a certificate', 0o644)
    broken = [r for r in certificates(root, NOW, 30) if r['path'].endswith('broken.crt')]
    assert broken[0]['due'] and 'not a PEM certificate' in broken[0]['error']
    shutil.rmtree(str(tmp_path))
