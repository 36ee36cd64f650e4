"""Backups proven by restoring them (issue 17 §1): the newest full snapshot and its deltas are restored
into a throwaway etcd and compared with what the backup recorded; a corrupt newest snapshot is named
and the fallback restores the older one; stores written by etcd-backup-restore are read, verified and
restored (their objects are made here as that tool writes them: etcdctl's stream, its delta format)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import socket
import subprocess
import time

import boto3
import pytest
import requests

from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.backup_verify import summary, verify_backup
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.delta import Event
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.delta_writer import write_delta
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import RestoreRefused
from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery.restore import restore_with_fallback
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.snapshot import (
    list_snapshots,
    take_full_snapshot,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.stores import open_store
from support.ansible import local_play, run_playbook

NOW = 1767225600


def kvs(cluster, prefix):
    """The keys under `prefix` with their revisions, as the gateway returns them."""
    end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    r = requests.post(cluster.endpoints[0] + '/v3/kv/range', timeout=10,
                      json={'key': base64.b64encode(prefix.encode()).decode(),
                            'range_end': base64.b64encode(end.encode()).decode()})
    return sorted(r.json().get('kvs', []), key=lambda kv: int(kv['mod_revision']))


def events_of(cluster, prefix):
    """Delta events for keys written once each under `prefix` (what a watch delivered)."""
    return [Event(0, base64.b64decode(kv['key']), base64.b64decode(kv.get('value', '')), int(kv['mod_revision']),
                  int(kv['create_revision']), int(kv['version'])) for kv in kvs(cluster, prefix)]


def flip(path, offset=None):
    with open(path, 'r+b') as f:
        size = os.fstat(f.fileno()).st_size
        f.seek(size // 2 if offset is None else offset)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))


def restore_args(tmp_path, name='m1'):
    return dict(name=name, data_dir=str(tmp_path / ('restored-' + name)), initial_cluster='%s=http://127.0.0.1:2380' % name,
                initial_cluster_token='verify', initial_advertise_peer_urls=['http://127.0.0.1:2380'], now=time.time())


def test_newest_backup_restores_then_a_corrupt_one_is_named_and_the_older_one_used(etcd1, tmp_path):
    conn = EtcdConnection(endpoints=tuple(etcd1.endpoints))
    store = open_store(str(tmp_path / 'store'))
    etcd1.put_many({'/old/%03d' % i: 'a' * 50 for i in range(200)})
    older = take_full_snapshot(conn, store, now=NOW)['snapshot']
    etcd1.put_many({'/new/%03d' % i: 'b' * 50 for i in range(100)})
    newest = take_full_snapshot(conn, store, now=NOW + 60)['snapshot']
    etcd1.put_many({'/delta/%02d' % i: 'c' for i in range(30)})
    events = events_of(etcd1, '/delta/')
    delta = write_delta(store, newest['end_revision'] + 1, events, now=NOW + 80)

    good = verify_backup(store, work_dir=str(tmp_path))
    assert good['ok'] and good['snapshot'] == newest['name'] and good['deltas'] == [str(delta.name)], summary(good)
    assert good['restored_revision'] == good['expected_revision'] == events[-1].revision
    assert good['hash_kv']['match'] is True and good['hash_kv']['revision'] <= newest['end_revision']
    assert [v['result'] for v in good['verdicts']] == ['intact', 'intact']
    assert good['would_restore'] == {'snapshot': newest['name'], 'deltas': 1, 'last_delta': str(delta.name),
                                     'revision': events[-1].revision}
    assert set(good['steps']) == {'read and check', 'restore and start', 'compare', 'replay deltas'}
    assert 'HashKV matches the cluster' in summary(good)
    assert not [p for p in os.listdir(str(tmp_path)) if p.startswith('steward-verify')], 'scratch left behind'

    flip(str(tmp_path / 'store' / newest['key']))  # the newest full snapshot, corrupted mid-file
    play = local_play([{'name': 'verify', 'steward.cluster.etcd_backup_verify': {
        'store': str(tmp_path / 'store'), 'tmp_dir': str(tmp_path)}, 'ignore_errors': True}])
    res = run_playbook(play).result('verify')
    assert res['failed'] and not res['ok'], res
    assert res['verdicts'][0] == dict(res['verdicts'][0], name=newest['name'], result='corrupt', failed_check='sha256')
    assert res['fallback'] == older['name'] and res['would_restore']['snapshot'] == older['name']
    assert newest['name'] in res['msg'] and 'not restorable' in res['msg'] and older['name'] in res['msg']

    # the older snapshot cannot reach the newest delta (no deltas between the two fulls): that loses
    # writes, so it is refused unless asked for, like any gap
    refused = '%s is corrupt.*%s is unrestorable.*revisions' % (newest['name'], older['name'])
    with pytest.raises(RestoreRefused, match=refused):
        restore_with_fallback(store, **restore_args(tmp_path))
    restored = restore_with_fallback(store, stop_at_gap=True, **restore_args(tmp_path))
    assert restored['changed'] and restored['snapshot']['name'] == older['name'] and restored['gap']
    assert [(s['name'], s['status'], s['failed_check']) for s in restored['skipped']] == [
        (newest['name'], 'corrupt', 'sha256')]
    assert os.path.isdir(str(tmp_path / 'restored-m1' / 'member'))


def test_a_corrupt_delta_is_named_and_stops_the_chain(etcd1, tmp_path):
    conn = EtcdConnection(endpoints=tuple(etcd1.endpoints))
    store = open_store(str(tmp_path / 'store'))
    etcd1.put_many({'/a/%02d' % i: 'x' for i in range(20)})
    full = take_full_snapshot(conn, store, now=NOW)['snapshot']
    etcd1.put_many({'/d1/%02d' % i: 'y' for i in range(10)})
    first = write_delta(store, full['end_revision'] + 1, events_of(etcd1, '/d1/'), now=NOW + 20)
    etcd1.put_many({'/d2/%02d' % i: 'z' for i in range(10)})
    second = write_delta(store, first.name.end_revision + 1, events_of(etcd1, '/d2/'), now=NOW + 40)
    flip(str(tmp_path / 'store' / second.key), offset=5)

    result = verify_backup(store, work_dir=str(tmp_path))
    assert not result['ok'] and result['restored_revision'] == first.name.end_revision
    assert [(v['name'], v['result']) for v in result['verdicts']] == [
        (full['name'], 'intact'), (str(first.name), 'intact'), (str(second.name), 'corrupt')]
    assert result['verdicts'][2]['failed_check'] == 'sha256' and result['fallback'] is None
    assert result['would_restore']['last_delta'] == str(first.name)

    with pytest.raises(RestoreRefused, match='no snapshot in .* can be restored; nothing was changed'):
        restore_with_fallback(store, **restore_args(tmp_path))
    assert not os.path.exists(str(tmp_path / 'restored-m1'))
    up_to_gap = restore_with_fallback(store, stop_at_gap=True, **restore_args(tmp_path))
    assert up_to_gap['revision'] == first.name.end_revision and up_to_gap['deltas'] == [str(first.name)]
    assert [(s['name'], s['status']) for s in up_to_gap['skipped']] == [(str(second.name), 'corrupt')]


# --- stores written by etcd-backup-restore ----------------------------------------------------------
def druid_delta(kv_list):
    """etcd-backup-restore's delta: a JSON array of {etcdEvent, time} (Go's encoding) and its sha256."""
    items = []
    for kv in kv_list:
        item = {'key': kv['key'], 'create_revision': int(kv['create_revision']),
                'mod_revision': int(kv['mod_revision']), 'version': int(kv['version'])}
        if kv.get('value'):
            item['value'] = kv['value']
        items.append({'etcdEvent': {'kv': item}, 'time': '2026-01-01T00:00:00.000000001Z'})
    data = json.dumps(items, separators=(',', ':')).encode()
    return data + hashlib.sha256(data).digest()


def druid_objects(cluster, tmp_path):
    """{name: bytes} as etcd-backup-restore names and writes them: a full snapshot (etcd's stream), a
    gzip-compressed one, and a delta after it."""
    cluster.put_many({'/druid/%03d' % i: 'v%d' % i for i in range(50)})
    path = str(tmp_path / 'druid.db')
    subprocess.run([cluster.etcdctl, '--endpoints', cluster.endpoints[0], 'snapshot', 'save', path], check=True,
                   capture_output=True, env=dict(os.environ, ETCDCTL_API='3'))
    with open(path, 'rb') as f:
        full = f.read()
    revision = int(requests.post(cluster.endpoints[0] + '/v3/kv/range', json={'key': 'AA=='}, timeout=10)
                   .json()['header']['revision'])
    cluster.put_many({'/druid/new/%02d' % i: 'n%d' % i for i in range(5)})
    delta = druid_delta(kvs(cluster, '/druid/new/'))
    end = revision + 5
    return {'Full-00000000-%08d-%d.gz' % (revision, NOW - 600): gzip.compress(full),  # compressed, as the tool can
            'Full-00000000-%08d-%d' % (revision, NOW): full,
            'Incr-%08d-%08d-%d' % (revision + 1, end, NOW + 20): delta}, end


@pytest.mark.parametrize('where', ['local', 's3'])
def test_an_etcd_backup_restore_store_is_read_verified_and_restored(etcd1, s3_bucket, tmp_path, where):
    objects, end = druid_objects(etcd1, tmp_path)
    if where == 'local':
        os.makedirs(str(tmp_path / 'druid' / 'v2'))
        for name, body in objects.items():
            (tmp_path / 'druid' / 'v2' / name).write_bytes(body)
        store = open_store(str(tmp_path / 'druid'))
    else:
        url, bucket = s3_bucket
        s3 = boto3.client('s3', endpoint_url=url)
        for name, body in objects.items():
            s3.put_object(Bucket=bucket, Key='etcd-main/v2/' + name, Body=body)
        store = open_store('s3://%s/etcd-main' % bucket, endpoint_url=url)

    listed = list_snapshots(store, tmp_dir=str(tmp_path))
    assert [(s['name'][-3:], s['status'], s['checked']) for s in listed['snapshots']] == [
        ('.gz', 'unrecorded', 'content'), (str(NOW)[-3:], 'unrecorded', 'content'), (str(NOW + 20)[-3:], 'unrecorded',
                                                                                     'content')]
    proof = verify_backup(store, work_dir=str(tmp_path))
    assert proof['ok'] and proof['restored_revision'] == end, summary(proof)
    assert proof['hash_kv']['match'] is None and 'records no HashKV' in proof['hash_kv']['note']
    restored = restore_with_fallback(store, tmp_dir=str(tmp_path), **restore_args(tmp_path, 'druid'))
    assert restored['changed'] and restored['revision'] == end and restored['skipped'] == []


def test_a_scratch_port_taken_before_etcd_binds_it_is_retried_on_other_ports(etcd1, tmp_path, monkeypatch):
    # A port found free can be held by someone else when etcd binds it; the first scratch etcd then exits at
    # once. That is not the backup's fault: the check starts again on other ports and answers intact.
    from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot import replay
    taken = socket.socket()
    taken.bind(('127.0.0.1', 0))
    taken.listen(1)
    taken_port = taken.getsockname()[1]
    handed = []
    real = replay._loopback_port

    def first_one_taken():
        handed.append(real() if handed else taken_port)
        return handed[-1]

    monkeypatch.setattr(replay, '_loopback_port', first_one_taken)
    conn = EtcdConnection(endpoints=tuple(etcd1.endpoints))
    store = open_store(str(tmp_path / 'store'))
    etcd1.put_many({'/k/%02d' % i: 'v' for i in range(20)})
    take_full_snapshot(conn, store, now=NOW)
    try:
        outcome = verify_backup(store, work_dir=str(tmp_path))
    finally:
        taken.close()
    assert outcome['ok'] and [v['result'] for v in outcome['verdicts']] == ['intact'], summary(outcome)
    assert len(handed) == 4 and handed[0] == taken_port and taken_port not in handed[1:], handed
