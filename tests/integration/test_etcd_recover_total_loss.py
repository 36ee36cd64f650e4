"""steward.cluster.etcd_recover after a total loss whose newest backup is corrupt, on a lab of real etcd
processes: etcd_backup_verify names the corrupt snapshot and the one a recovery would restore; the recovery
restores that older backup on every host at once, names the corrupt one, and says where its seconds went."""

from __future__ import annotations

import os
import re

import pytest

from support.recover_lab import lab3  # noqa: F401  # pylint: disable=unused-import
from support.recover_lab import assert_all_keys, backup_keys, plan_of, put, recover

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from lab.demo import etcd_act
from lab import manager

pytestmark = pytest.mark.slow


def test_total_loss_with_a_corrupt_newest_backup_restores_the_older_one(lab3):
    state, hosts = lab3
    store = os.path.join(state, 'backups')
    data = etcd_act.load(hosts, 300)
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
    verified = manager.run_playbook(state, 'steward.cluster.etcd_backup_verify', ['-e', 'etcd_backup_store=' + store],
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
    assert {'diagnose', 'plan', 'restore', 'recover', 'check', 'backup', 'total'} <= set(steps), table[:1000]
    per_host = re.findall(r"'  (etcd\d): (start|wait until healthy)\s+(\d+\.\d) s'", table)
    assert {host for host, _step, _seconds in per_host} == set(hosts), table[:2000]  # every host's own steps
