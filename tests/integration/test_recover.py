"""steward.cluster.etcd_recover on a lab of real etcd processes, provisioned by the collection's own role.

One lab per test (its own random loopback addresses, so parallel runs never meet), disasters injected the
way they happen: SIGKILL and a wiped data dir, a host Ansible cannot reach, a backup corrupted in the store.
Every key must be readable on every member afterwards, and the playbook says where its seconds went."""

from __future__ import annotations

import base64
import json
import os
import random
import re
import sys

import pytest
import requests

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, 'lab'))

import etcd_act  # noqa: E402
import lab  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture
def lab3(tmp_path):
    state = str(tmp_path / 'lab')
    lab.lab_up(state, 3, '127.%d.%d.11' % (random.randint(100, 250), random.randint(0, 250)), echo=False,
               sabakan=False)
    hosts = lab.read_inventory(state)
    yield state, hosts
    lab.lab_down(state, purge=False)


def recover(state, *args):
    return lab.run_playbook(state, 'steward.cluster.etcd_recover', list(args), echo=False)


def plan_of(result):
    """The 'Decide what to do' result printed by the playbook's report task."""
    out = result['output']
    start = out.index('TASK [Report the diagnosis]')
    return out[start:out.index('TASK [', start + 10)]


def assert_all_keys(hosts, data, names=None):
    for name in names or hosts:
        got = etcd_act.read_all(lab.client_url(hosts[name]))
        assert got == data, '%s: %d of %d keys' % (name, len(set(got) & set(data)), len(data))


def test_recover_every_path_on_one_lab(lab3):
    state, hosts = lab3
    store = os.path.join(state, 'backups')
    data = etcd_act.load(hosts, 300)

    healthy = recover(state)
    assert healthy['rc'] == 0 and healthy['changed'] == 0, healthy['output'][-3000:]
    assert 'action: none' in plan_of(healthy)

    backup = lab.run_playbook(state, 'steward.cluster.etcd_backup', ['-e', 'etcd_backup_store=' + store], echo=False)
    assert backup['rc'] == 0, backup['output'][-3000:]

    # minority lost for good: remove + re-add as learner + promote
    etcd_act.lose_for_good(hosts['etcd3'])
    check = recover(state, '--check')
    assert check['rc'] == 0, check['output'][-3000:]
    assert 'action: replace_members' in plan_of(check)
    assert not os.path.exists(hosts['etcd3']['etcd_data_dir']), 'check mode changed nothing'
    fixed = recover(state)
    assert fixed['rc'] == 0, fixed['output'][-4000:]
    assert 'action: replace_members' in plan_of(fixed)
    assert_all_keys(hosts, data)
    again = recover(state)
    assert again['rc'] == 0 and again['changed'] == 0

    # quorum lost, one survivor with data: force-new-cluster on it, re-add the others
    etcd_act.lose_for_good(hosts['etcd1'])
    etcd_act.lose_for_good(hosts['etcd2'])
    fixed = recover(state)
    assert fixed['rc'] == 0, fixed['output'][-4000:]
    report = plan_of(fixed)
    assert 'action: force_new_cluster' in report and 'seed: etcd3' in report, report
    assert_all_keys(hosts, data)
    with open(os.path.join(hosts['etcd3']['etcd_config_dir'], 'etcd.conf.yml')) as f:
        config = f.read()
    assert 'force-new-cluster: false' in config and 'initial-cluster-state: existing' in config

    # everything lost, and the newest backup is corrupt: the older one is restored on every host, the corrupt
    # one is named; etcd_backup_verify had said so beforehand
    older = backup_keys(state, store)
    put(hosts['etcd1'], '/demo/after-the-older-backup', 'lost with the corrupt backup')
    newest = backup_keys(state, store)
    assert newest != older
    path = os.path.join(store, 'v2', newest)
    with open(path, 'r+b') as f:
        f.seek(os.path.getsize(path) // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    verified = lab.run_playbook(state, 'steward.cluster.etcd_backup_verify', ['-e', 'etcd_backup_store=' + store],
                                echo=False)
    assert verified['rc'] != 0, verified['output'][-3000:]
    assert 'the newest backup %s is not restorable' % newest in verified['output']
    assert 'the newest restorable is %s' % older in verified['output']

    for name in hosts:
        etcd_act.lose_for_good(hosts[name])
    blocked = recover(state)
    assert blocked['rc'] != 0 and 'blocked' in blocked['output']
    fixed = recover(state, '-e', 'etcd_backup_store=' + store)
    assert fixed['rc'] == 0, fixed['output'][-4000:]
    assert 'action: restore_snapshot' in plan_of(fixed)
    summary = fixed['output'][fixed['output'].index('TASK [Summary]'):]
    assert 'restored: %s' % older in summary and '%s is corrupt' % newest in summary, summary[:3000]
    assert_all_keys(hosts, data)  # the older backup's keys, without the one written after it
    assert recover(state)['changed'] == 0
    table = fixed['output'][fixed['output'].index('TASK [Where the seconds went]'):]
    steps = dict(re.findall(r'- (\S+)\s+(\d+\.\d) s', table))
    assert {'diagnose', 'plan', 'prepare', 'start', 'check', 'backup', 'total'} <= set(steps), table[:1000]


def put(host, key, value):
    requests.post(lab.client_url(host) + '/v3/kv/put', timeout=10, json={
        'key': base64.b64encode(key.encode()).decode(), 'value': base64.b64encode(value.encode()).decode()}
    ).raise_for_status()


def backup_keys(state, store):
    """Run the etcd_backup playbook; the name of the snapshot it took."""
    result = lab.run_playbook(state, 'steward.cluster.etcd_backup', ['-e', 'etcd_backup_store=' + store], echo=False)
    assert result['rc'] == 0, result['output'][-3000:]
    return max(n for n in os.listdir(os.path.join(store, 'v2')) if n.startswith('Full-') and '.meta' not in n)


def test_unreachable_host_does_not_fail_recovery(lab3, tmp_path):
    state, hosts = lab3
    data = etcd_act.load(hosts, 100)
    # etcd3 is powered off: its process is gone and Ansible cannot reach the host
    etcd_act.lose_for_good(hosts['etcd3'])
    etcd_act.lose_for_good(hosts['etcd2'])
    inv_path = os.path.join(state, 'inventory.yml')
    with open(inv_path) as f:
        text = f.read()
    inventory = json.loads(text[text.index('{'):])
    inventory['etcd']['hosts']['etcd3'].update({'ansible_connection': 'ssh', 'ansible_host': '127.0.0.1',
                                                'ansible_port': 1, 'ansible_ssh_timeout': 2})
    with open(inv_path, 'w') as f:
        json.dump(inventory, f)
    fixed = recover(state)
    with open(os.path.join(state, 'recover.log'), 'w') as f:
        f.write(fixed['output'])
    assert fixed['rc'] == 0, fixed['output'][-4000:]
    report = plan_of(fixed)
    assert 'etcd3: unreachable' in report and 'action: force_new_cluster' in report
    assert_all_keys(hosts, data, names=['etcd1', 'etcd2'])
