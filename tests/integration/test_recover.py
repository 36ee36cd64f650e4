"""steward.cluster.etcd_recover on a lab of real etcd processes, provisioned by the collection's own role.

One lab per test (its own random loopback addresses, so parallel runs never meet), disasters injected the
way they happen: SIGKILL and a wiped data dir, a host Ansible cannot reach. Every key must be readable on
every member afterwards. (A total loss with a corrupt newest backup: test_etcd_recover_total_loss.py.)"""

from __future__ import annotations

import json
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from lab.demo import etcd_act
from lab import manager
from support.recover_lab import lab3  # noqa: E402,F401  # pylint: disable=unused-import
from support.recover_lab import assert_all_keys, plan_of, recover  # noqa: E402

pytestmark = pytest.mark.slow


def test_recover_every_path_on_one_lab(lab3):
    state, hosts = lab3
    store = os.path.join(state, 'backups')
    data = etcd_act.load(hosts, 300)

    healthy = recover(state)
    assert healthy['rc'] == 0 and healthy['changed'] == 0, healthy['output'][-3000:]
    assert 'action: none' in plan_of(healthy)

    backup = manager.run_playbook(state, 'steward.cluster.etcd_backup', ['-e', 'etcd_backup_store=' + store], echo=False)
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
