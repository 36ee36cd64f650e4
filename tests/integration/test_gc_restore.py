"""GC and restore against real etcd clusters (both versions), real stores and real ansible-playbook runs."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery import restore
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store import naming
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import RestoreRefused, SnapshotInvalid
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.snapshot import take_full_snapshot
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.stores import open_store
from support.ansible import local_play, run_playbook

HOUR = 3600


def play(tasks, **kwargs):
    return run_playbook(local_play(tasks), **kwargs)


def _snapshots(cluster, store, count):
    """`count` full snapshots an hour apart (names dated in the past), new keys before each; returns all keys."""
    conn = EtcdConnection.from_params({'endpoints': cluster.endpoints})
    expected = {}
    now = time.time()
    for i in range(count):
        batch = {'/gc/%d/%03d' % (i, k): 'v%d-%d' % (i, k) for k in range(20)}
        cluster.put_many(batch)
        expected.update(batch)
        take_full_snapshot(conn, store, now=now - (count - i) * HOUR)
    return expected


def _incomplete(store, src, revision, created, age):
    """Data without metadata, newer than the store's first recorded snapshot (so ours, unfinished: an S3
    upload without its second phase, or a delete killed between metadata and data), `age` seconds old."""
    name = str(naming.full_name(revision, int(created)))
    path = os.path.join(store.ensure_dir(), name)
    shutil.copy(src, path)
    os.utime(path, (time.time() - age, time.time() - age))
    return name


def _orphan(store, revision):
    """Metadata without data: what a writer killed before renaming its data into place leaves."""
    name = str(naming.full_name(revision, int(time.time())))
    with open(os.path.join(store.ensure_dir(), name + naming.METADATA_SUFFIX), 'w') as f:
        json.dump({'format': 1, 'name': name, 'sha256': '0' * 64, 'size': 1}, f)


def _gc_task(name, store, **extra):
    args = dict(store=store, policy='LimitBased', max_backups=2)
    args.update(extra)
    return {'name': name, 'steward.cluster.etcd_snapshot_gc': args, 'register': 'r'}


def test_gc_then_restore_three_members(etcd3, tmp_path):
    store_dir = str(tmp_path / 'store')
    store = open_store(store_dir)
    expected = _snapshots(etcd3, store, 3)
    fulls = [s for s in store.list() if s.valid]
    assert len(fulls) == 3
    newest = str(fulls[-1].name)
    src = os.path.join(store_dir, fulls[-1].key)
    old_incomplete = _incomplete(store, src, 999990, time.time() - 1.5 * HOUR, age=2 * HOUR)
    fresh_incomplete = _incomplete(store, src, 999991, time.time(), age=10)
    oldest_path = os.path.join(store_dir, fulls[0].key)

    # --- GC in check mode (lists, deletes nothing), for real, then again (nothing left to do) ---
    check = dict(_gc_task('gc check', store_dir), check_mode=True, diff=True)
    stat = {'name': 'stat after check', 'ansible.builtin.stat': {'path': oldest_path}}
    res = play([check, stat, _gc_task('gc', store_dir), _gc_task('gc again', store_dir)])
    r = res.result('gc check')
    assert r['changed'] is True, r
    assert sorted(d['name'] for d in r['deleted']) == sorted([str(fulls[0].name), old_incomplete])
    reasons = {d['name']: d['reason'] for d in r['deleted']}
    assert reasons[str(fulls[0].name)].startswith('LimitBased')
    assert 'grace period' in reasons[old_incomplete]
    assert fresh_incomplete in r['kept'] and newest in r['kept']
    assert str(fulls[0].name) not in r['diff']['after']['snapshots']
    assert str(fulls[0].name) in r['diff']['before']['snapshots']
    assert res.result('stat after check')['stat']['exists'] is True
    real = res.result('gc')
    assert real['changed'] is True and real['deleted'] == r['deleted']
    assert 'diff' not in real
    again = res.result('gc again')
    assert again['changed'] is False and again['deleted'] == []
    left = store.list()
    assert [str(s.name) for s in left if s.valid] == [str(f.name) for f in fulls[1:]]
    assert [str(s.name) for s in left if not s.valid] == [fresh_incomplete]
    assert not os.path.exists(oldest_path)

    # --- stop the cluster; prepare a corrupt store and an invalid-only store ------------------
    etcd3.stop()
    corrupt_dir = str(tmp_path / 'corrupt')
    os.makedirs(os.path.join(corrupt_dir, 'v2'))
    for suffix in ('', naming.METADATA_SUFFIX):
        shutil.copy(src + suffix, os.path.join(corrupt_dir, 'v2', newest + suffix))
    with open(os.path.join(corrupt_dir, 'v2', newest), 'r+b') as f:
        f.seek(4096)
        byte = f.read(1)
        f.seek(4096)
        f.write(bytes([byte[0] ^ 0xff]))
    invalid_dir = str(tmp_path / 'invalid')
    _orphan(open_store(invalid_dir), 5)

    members = list(etcd3.members.values())
    initial_cluster = etcd3.initial_cluster()
    old_dir = members[0].data_dir  # the killed member's data: must be refused, then moved aside with force
    new_dirs = {m.name: str(tmp_path / 'restored' / (m.name + '.etcd')) for m in members}

    def restore_args(member, data_dir, **extra):
        args = dict(store=store_dir, name=member.name, data_dir=data_dir, initial_cluster=initial_cluster,
                    initial_cluster_token='restored', initial_advertise_peer_urls=[member.peer_url])
        args.update(extra)
        return args

    m1 = members[0]
    check_dir = str(tmp_path / 'check.etcd')
    tasks = [{'name': 'restore check', 'check_mode': True,
              'steward.cluster.etcd_restore': restore_args(m1, check_dir)}]
    tasks += [{'name': 'restore %s' % m.name, 'steward.cluster.etcd_restore': restore_args(m, new_dirs[m.name])}
              for m in members]
    tasks += [
        {'name': 'restore again', 'steward.cluster.etcd_restore': restore_args(m1, new_dirs[m1.name])},
        {'name': 'refuse existing', 'steward.cluster.etcd_restore': restore_args(m1, old_dir), 'ignore_errors': True},
        {'name': 'force', 'steward.cluster.etcd_restore': restore_args(m1, old_dir, force=True)},
        {'name': 'corrupt', 'ignore_errors': True,
         'steward.cluster.etcd_restore': restore_args(m1, str(tmp_path / 'c.etcd'), store=corrupt_dir)},
        {'name': 'only invalid', 'ignore_errors': True,
         'steward.cluster.etcd_restore': restore_args(m1, str(tmp_path / 'i.etcd'), store=invalid_dir)},
    ]
    res = play(tasks, diff=True)
    checked = res.result('restore check')
    assert checked['changed'] is True and checked['verification']['sha256'] == fulls[-1].metadata['sha256'], checked
    assert checked['diff']['after']['restored_from'] == newest
    assert not os.path.exists(check_dir) and not os.path.exists(check_dir + '.restore.json')
    for m in members:
        r = res.result('restore %s' % m.name)
        assert r['changed'] is True and r['snapshot']['name'] == newest, r
        assert r['moved_aside'] is None and r['diff']['before']['state'] == 'absent'
        assert r['diff']['after']['restored_from'] == newest
        assert set(r['verification']['checks']) >= {'sha256', 'size', 'snapshot-status'}
    again = res.result('restore again')
    assert again['changed'] is False, again
    refused = res.result('refuse existing')
    assert refused.get('failed') and 'exists and is not empty' in refused['msg'] and 'force' in refused['msg']
    forced = res.result('force')
    assert forced['changed'] is True and forced['moved_aside'].startswith(old_dir + '.pre-restore-')
    assert os.path.isdir(os.path.join(forced['moved_aside'], 'member'))
    with open(old_dir + '.restore.json') as f:
        assert json.load(f)['snapshot'] == newest
    corrupt = res.result('corrupt')
    assert corrupt.get('failed') and 'sha256' in corrupt['msg'], corrupt
    assert not os.path.exists(str(tmp_path / 'c.etcd'))
    invalid = res.result('only invalid')
    assert invalid.get('failed') and 'no valid full snapshot' in invalid['msg'], invalid
    assert not os.path.exists(str(tmp_path / 'i.etcd'))
    assert not [p for p in os.listdir(str(tmp_path / 'restored')) if '.restoring-' in p]

    # --- start the restored members as a new cluster and read every key back -----------------
    for m in members:
        m.data_dir = new_dirs[m.name]
        etcd3.start_member(m.name, state='new')
    etcd3.wait_healthy()
    for m in members:
        assert etcd3.get_all('/gc/', endpoint=m.client_url) == expected


def test_restore_check_mode_and_refusals_engine(etcd1, tmp_path):
    """Engine-level: check mode verifies and restores nothing; a corrupt file leaves an existing dir untouched."""
    store = open_store(str(tmp_path / 'store'))
    _snapshots(etcd1, store, 1)
    snap = restore.select_snapshot(store)
    m = list(etcd1.members.values())[0]
    kw = dict(name=m.name, initial_cluster=etcd1.initial_cluster(), initial_cluster_token='t',
              initial_advertise_peer_urls=[m.peer_url], now=time.time())
    target = str(tmp_path / 'check.etcd')
    r = restore.restore_member(store, snap, data_dir=target, check_mode=True, **kw)
    assert r['changed'] is True and r['verification']['sha256'] == snap.metadata['sha256']
    assert not os.path.exists(target) and not os.path.exists(target + '.restore.json')

    # an existing, non-empty data dir stays exactly as it was when the snapshot is corrupt, even with force
    existing = str(tmp_path / 'existing.etcd')
    os.makedirs(os.path.join(existing, 'member'))
    with open(os.path.join(existing, 'member', 'keep'), 'w') as f:
        f.write('precious')
    path = os.path.join(store.root, snap.key)
    with open(path, 'r+b') as f:
        f.seek(100)
        f.write(b'\0\1\2\3')
    with pytest.raises(SnapshotInvalid, match='sha256'):
        restore.restore_member(store, snap, data_dir=existing, force=True, **kw)
    assert os.listdir(existing) == ['member'] and not [p for p in os.listdir(str(tmp_path)) if 'pre-restore' in p]

    with pytest.raises(RestoreRefused, match='not in initial_cluster'):
        restore.restore_member(store, snap, data_dir=target, name='nobody', initial_cluster=etcd1.initial_cluster(),
                               initial_cluster_token='t', initial_advertise_peer_urls=[m.peer_url], now=time.time())
    with pytest.raises(RestoreRefused, match='differ from the peer URLs'):
        restore.restore_member(store, snap, data_dir=target, name=m.name, initial_cluster=etcd1.initial_cluster(),
                               initial_cluster_token='t', initial_advertise_peer_urls=['http://x:1'], now=time.time())


def test_restore_from_s3_and_file(etcd1, s3_bucket, tmp_path):
    endpoint, bucket = s3_bucket
    store = open_store('s3://%s/etcd' % bucket, endpoint_url=endpoint)
    expected = _snapshots(etcd1, store, 1)
    snap = restore.select_snapshot(store)
    m = list(etcd1.members.values())[0]
    kw = dict(name=m.name, initial_cluster=etcd1.initial_cluster(), initial_cluster_token='t',
              initial_advertise_peer_urls=[m.peer_url], now=time.time())
    from_s3 = str(tmp_path / 's3.etcd')
    assert restore.restore_member(store, snap, data_dir=from_s3, **kw)['changed'] is True
    local_copy = str(tmp_path / 'copy.db')
    store.fetch(snap, local_copy)
    from_file = str(tmp_path / 'file.etcd')
    r = restore.restore_file(local_copy, data_dir=from_file, **kw)
    assert r['changed'] is True
    assert restore.restore_file(local_copy, data_dir=from_file, **kw)['changed'] is False
    etcd1.stop()
    m.data_dir = from_s3
    etcd1.start_member(m.name)
    etcd1.wait_healthy()
    assert etcd1.get_all('/gc/') == expected
