# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Copying backups between stores (druid's EtcdCopyBackupsTask, ETCD-46) with real local stores."""

from __future__ import annotations

import hashlib
import os

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.copy import (
    CopyError, copy_backups, plan_copy, wait_for_final)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.naming import SnapshotName
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.stores import open_store

DAY = 86400
NOW = 1_800_000_000


def put(store, tmp_path, kind, start, end, created, final=False, corrupt=False):
    name = SnapshotName(kind, start, end, created, final=final)
    data = ('%s' % name).encode() * 50
    src = tmp_path / ('src-%s' % name)
    src.write_bytes(data)
    snap = store.publish_data(name, str(src))
    meta = {'format': 1, 'name': str(name), 'size': len(data), 'sha256': hashlib.sha256(data).hexdigest()}
    store.publish_metadata(snap, meta)
    if corrupt:
        with open(os.path.join(store.url.replace('file://', ''), 'v2', str(name)), 'ab') as f:
            f.write(b'x')


@pytest.fixture
def stores(tmp_path):
    source = open_store(str(tmp_path / 'source'))
    target = open_store(str(tmp_path / 'target'))
    # three backups: 10 days old, 3 days old, 1 hour old, each a full and two deltas
    for i, age in enumerate((10 * DAY, 3 * DAY, 3600)):
        base = 1000 * (i + 1)
        put(source, tmp_path, 'Full', 0, base, NOW - age)
        put(source, tmp_path, 'Incr', base + 1, base + 10, NOW - age + 60)
        put(source, tmp_path, 'Incr', base + 11, base + 20, NOW - age + 120)
    return source, target


def names(snapshots):
    return [str(s.name) for s in snapshots]


def test_all_backups_by_default_oldest_first_fulls_before_their_deltas(stores):
    source, target = stores
    plan = plan_copy(source.list(), target.list(), now=NOW)
    assert plan.backups == 3 and len(plan.copy) == 9
    assert [s.name.kind for s in plan.copy[:3]] == ['Full', 'Incr', 'Incr']
    assert [s.name.end_revision for s in plan.copy] == sorted(s.name.end_revision for s in plan.copy)
    result = copy_backups(source, target, plan)
    assert result['changed'] and len(result['copied']) == 9
    copied = target.list()
    assert names(copied) == names(source.list()) and all(s.valid for s in copied)
    assert all(s.metadata['copied_from'] == source.url for s in copied)
    again = plan_copy(source.list(), target.list(), now=NOW)
    assert again.copy == [] and len(again.present) == 9, 'a second run copies nothing'


@pytest.mark.parametrize('age,backups,expected', [(None, 1, [3000]), (5, None, [2000, 3000]), (5, 1, [3000]),
                                                  (0, None, []), (None, 0, []), (30, 2, [2000, 3000])])
def test_max_backup_age_in_days_and_max_backups_newest_first(stores, age, backups, expected):
    source, target = stores
    plan = plan_copy(source.list(), target.list(), now=NOW, max_backup_age=age, max_backups=backups)
    assert sorted(s.name.end_revision for s in plan.copy if s.is_full) == expected
    assert plan.backups == len(expected)


def test_a_corrupt_link_is_reported_and_nothing_after_it_in_that_backup_is_copied(stores, tmp_path):
    source, target = stores
    put(source, tmp_path, 'Full', 0, 4000, NOW - 60)
    put(source, tmp_path, 'Incr', 4001, 4010, NOW - 50, corrupt=True)
    put(source, tmp_path, 'Incr', 4011, 4020, NOW - 40)
    plan = plan_copy(source.list(), target.list(), now=NOW, max_backups=1)
    assert names(plan.copy) == ['Full-00000000-00004000-%d' % (NOW - 60)]
    assert plan.invalid and plan.invalid[0]['name'].startswith('Incr-00004001') and plan.invalid[0]['status'] == 'corrupt'


def test_check_mode_copies_nothing(stores):
    source, target = stores
    result = copy_backups(source, target, plan_copy(source.list(), target.list(), now=NOW), check_mode=True)
    assert result['changed'] and len(result['copied']) == 9 and target.list() == []


def test_bytes_changed_after_listing_are_caught_before_publishing(stores):
    source, target = stores
    plan = plan_copy(source.list(), target.list(), now=NOW, max_backups=1)
    with open(os.path.join(source.url.replace('file://', ''), 'v2', str(plan.copy[1].name)), 'ab') as f:
        f.write(b'late')
    with pytest.raises(CopyError, match='does not match its metadata') as failed:
        copy_backups(source, target, plan)
    assert 'after 1 copied' in str(failed.value)
    assert names(target.list()) == [str(plan.copy[0].name)], 'what was copied before stays, valid'


@pytest.mark.parametrize('field,value', [('max_backups', -1), ('max_backup_age', 1 << 32), ('max_backups', 'x'),
                                         ('max_backup_age', True)])
def test_limits_are_uint32_and_named(stores, field, value):
    source, target = stores
    with pytest.raises(CopyError, match='maxBackups' if field == 'max_backups' else 'maxBackupAge'):
        plan_copy(source.list(), target.list(), now=NOW, **{field: value})


def test_wait_for_final_returns_at_the_final_snapshot_or_goes_on_at_the_timeout(stores, tmp_path):
    source, _target = stores
    clock = [0.0]
    timed = wait_for_final(source, 30, clock=lambda: clock[0], sleep=lambda s: clock.__setitem__(0, clock[0] + s))
    assert timed['timed_out'] and timed['final'] is None and timed['waited'] >= 30
    put(source, tmp_path, 'Full', 0, 5000, NOW, final=True)
    found = wait_for_final(source, 0, clock=lambda: clock[0], sleep=lambda s: None)
    assert found == {'final': 'Full-00000000-00005000-%d.final' % NOW, 'waited': 0.0, 'timed_out': False}
