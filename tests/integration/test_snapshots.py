"""Full snapshots of real etcd clusters into a local dir and moto S3, with faults.

Faults are real: the engine runs in a subprocess that is SIGKILLed mid-write / mid-upload /
between the data and metadata phases; corruption is flipped bytes in the store."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import boto3
import pytest
import requests

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdUnavailable, SnapshotInvalid, StoreError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.snapshot import (
    list_snapshots,
    take_full_snapshot,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.stores import open_store
from support.ansible import local_play, run_playbook
from lab.env.ports import free_port

NOW = 1767225600


def load(cluster, count=50, size=100, prefix='/data/'):
    items = {'%s%05d' % (prefix, i): 'v' * size for i in range(count)}
    cluster.put_many(items)
    return items


def load_bulk(cluster, megabytes):
    """~`megabytes` MB of 512 KiB values through the gateway (fast enough for a fault test)."""
    value = base64.b64encode(os.urandom(384 * 1024)).decode()  # 512 KiB of base64 text
    with requests.Session() as s:
        for i in range(megabytes * 2):
            key = base64.b64encode(('/bulk/%05d' % i).encode()).decode()
            s.post(cluster.endpoints[0] + '/v3/kv/put', json={'key': key, 'value': base64.b64encode(value.encode()).decode()},
                   timeout=30).raise_for_status()


def conn_of(cluster):
    return EtcdConnection(endpoints=tuple(cluster.endpoints))


def s3_store(s3_bucket, prefix='etcd/main'):
    url, bucket = s3_bucket
    return open_store('s3://%s/%s' % (bucket, prefix), endpoint_url=url), url, bucket


def scratch(tmp_path):
    """An empty temp dir for the engine (tmp_path also holds the etcd data dirs)."""
    path = tmp_path / 'scratch'
    path.mkdir(exist_ok=True)
    return str(path)


def statuses(store):
    return [(s.key.rsplit('/', 1)[-1], s.status) for s in store.list()]


# --- engine: local dir and S3 -----------------------------------------------------------------
def test_snapshot_of_three_members_to_local_dir(etcd3, tmp_path):
    load(etcd3)
    store = open_store(str(tmp_path / 'store'))
    result = take_full_snapshot(conn_of(etcd3), store, now=NOW)
    snap = result['snapshot']
    assert result['changed'] and snap['status'] == 'valid' and snap['valid']
    meta = snap['metadata']
    assert snap['name'] == 'Full-00000000-%08d-%d' % (meta['revision'], NOW)
    assert meta['revision'] >= 51 and meta['total_keys'] is None  # counted only by a full structure read
    assert meta['hash_kv']['revision'] <= meta['revision'] and meta['hash_kv']['hash'] > 0
    assert meta['member_name'] in etcd3.members and meta['etcd_version'] == etcd3.version
    assert meta['verified']['checks'] == ['sha256-trailer', 'bolt-structure']
    assert result['member']['endpoint'] in etcd3.endpoints
    assert sorted(os.listdir(tmp_path / 'store' / 'v2')) == [snap['name'], snap['name'] + '.meta.json']
    info = list_snapshots(store)
    assert info['latest_valid']['name'] == snap['name'] and info['latest_valid']['checked'] == 'content'
    assert info['counts'] == {'valid': 1, 'unrecorded': 0, 'incomplete': 0, 'corrupt': 0, 'orphan-metadata': 0,
                              'partial': 0}


def test_snapshot_of_three_members_to_s3(etcd3, s3_bucket, tmp_path):
    load(etcd3)
    store, url, bucket = s3_store(s3_bucket)
    result = take_full_snapshot(conn_of(etcd3), store, now=NOW, tmp_dir=scratch(tmp_path))
    name = result['snapshot']['name']
    assert result['snapshot']['valid'] and os.listdir(scratch(tmp_path)) == []  # temp file cleaned
    keys = sorted(o['Key'] for o in boto3.client('s3', endpoint_url=url).list_objects_v2(Bucket=bucket)['Contents'])
    assert keys == ['etcd/main/v2/' + name, 'etcd/main/v2/%s.meta.json' % name]
    info = list_snapshots(store)
    assert [s['status'] for s in info['snapshots']] == ['valid']
    assert info['latest_valid']['sha256'] == result['snapshot']['sha256']


def test_corrupted_snapshot_is_reported_by_verify_sha256(etcd1, s3_bucket, tmp_path):
    load(etcd1)
    local = open_store(str(tmp_path / 'store'))
    name = take_full_snapshot(conn_of(etcd1), local, now=NOW)['snapshot']['name']
    path = tmp_path / 'store' / 'v2' / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    assert list_snapshots(local, verify='listing')['counts']['valid'] == 1  # same size: only content can tell
    info = list_snapshots(local)
    assert info['counts']['corrupt'] == 1 and info['latest_valid'] is None
    assert 'sha256' in info['snapshots'][0]['problem'] and info['snapshots'][0]['failed_check'] == 'sha256'

    store, url, bucket = s3_store(s3_bucket)
    take_full_snapshot(conn_of(etcd1), store, now=NOW + 1)
    boto3.client('s3', endpoint_url=url).put_object(Bucket=bucket, Key='etcd/main/v2/' + name.replace(str(NOW), str(NOW + 1)),
                                                    Body=bytes(data))
    info = list_snapshots(store)
    assert [s['status'] for s in info['snapshots']] == ['corrupt']


def test_failed_verification_publishes_nothing_and_cleans_up(etcd1, tmp_path):
    """A snapshot the structural check rejects never reaches the store; its temp file is removed."""
    load(etcd1)
    tool = tmp_path / 'etcdutl'
    # a tool that runs (answers `version`) but rejects the snapshot
    tool.write_text('#!/bin/sh\n[ "$1" = version ] && exec echo "etcdutl version: 3.5.9"\n'
                    'echo "Error: invalid database" >&2\nexit 1\n')
    tool.chmod(0o755)
    store = open_store(str(tmp_path / 'store'))
    with pytest.raises(SnapshotInvalid, match='snapshot status rejected') as rejected:
        take_full_snapshot(conn_of(etcd1), store, now=NOW, tool=str(tool), full_structure=True)
    assert rejected.value.check == 'snapshot-status'
    assert os.listdir(tmp_path / 'store' / 'v2') == [] and store.list() == []


# --- store errors -----------------------------------------------------------------------------
def test_s3_unreachable_is_a_clear_error(etcd1, tmp_path):
    store = open_store('s3://bucket/etcd', endpoint_url='http://127.0.0.1:%d' % free_port())
    with pytest.raises(StoreError, match='unreachable'):
        store.list()
    with pytest.raises(StoreError, match='unreachable'):
        take_full_snapshot(conn_of(etcd1), store, now=NOW, tmp_dir=scratch(tmp_path))
    assert os.listdir(scratch(tmp_path)) == []


def test_s3_missing_bucket_is_a_clear_error(etcd1, s3_server, tmp_path):
    store = open_store('s3://no-such-bucket-%s/etcd' % uuid.uuid4().hex[:8], endpoint_url=s3_server)
    with pytest.raises(StoreError, match='does not exist'):
        store.list()
    with pytest.raises(StoreError, match='does not exist'):
        take_full_snapshot(conn_of(etcd1), store, now=NOW, tmp_dir=scratch(tmp_path))
    assert os.listdir(scratch(tmp_path)) == []


@pytest.fixture
def s3_with_auth(tmp_path):
    """A separate moto server that enforces IAM auth (INITIAL_NO_AUTH_ACTION_COUNT=0)."""
    port = free_port()
    env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT='0')
    proc = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), 'moto_server'), '-H', '127.0.0.1',
                             '-p', str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = 'http://127.0.0.1:%d' % port
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            requests.get(url, timeout=1)
            break
        except requests.RequestException:
            time.sleep(0.1)
    yield url
    proc.kill()
    proc.wait()


def test_s3_wrong_credentials_are_a_clear_error(s3_with_auth):
    store = open_store('s3://bucket/etcd', endpoint_url=s3_with_auth, access_key='AKIAWRONGWRONGWRONG',
                       secret_key='wrong')
    with pytest.raises(StoreError, match='refused the credentials.*InvalidAccessKeyId'):
        store.list()
    with pytest.raises(StoreError, match='refused the credentials'):
        store.check()


def test_no_healthy_member(etcd1, tmp_path):
    etcd1.stop()
    with pytest.raises(EtcdUnavailable, match='no etcd member can serve a snapshot'):
        take_full_snapshot(conn_of(etcd1), open_store(str(tmp_path / 's')), now=NOW)
    assert not (tmp_path / 's' / 'v2').exists() or os.listdir(tmp_path / 's' / 'v2') == []


# --- SIGKILL of the engine ----------------------------------------------------------------------
DRIVER = r'''
import json, sys, time
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot import snapshot as engine
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.local_store import LocalStore
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.s3_store import S3Store

args = json.loads(sys.argv[1])

def pause(label):
    print(label, flush=True)
    time.sleep(120)

if args['pause'] == 'write':          # the temp file is written, not yet verified or published
    real_verify = engine.verify_snapshot_file
    def verify(*a, **kw):
        pause('PAUSED')
        return real_verify(*a, **kw)
    engine.verify_snapshot_file = verify
elif args['pause'] == 'between':      # data published, metadata not yet
    real_meta = LocalStore.publish_metadata
    def publish_metadata(self, *a, **kw):
        pause('PAUSED')
    LocalStore.publish_metadata = publish_metadata
    S3Store.publish_metadata = publish_metadata
elif args['pause'] == 'after-metadata':  # local: metadata published, data not yet renamed into place
    real_publish = LocalStore._publish_file
    def publish_file(self, tmp, final):
        if not final.endswith('.meta.json'):
            pause('PAUSED')
        return real_publish(self, tmp, final)
    LocalStore._publish_file = publish_file
elif args['pause'] == 'upload':       # the multipart upload has begun
    def progress(self, n):
        pause('PAUSED')
    S3Store._progress = progress

if args['store'].startswith('s3://'):
    store = S3Store(args['store'], endpoint_url=args['endpoint_url'], multipart_threshold=5 * 1024 * 1024,
                    multipart_chunksize=5 * 1024 * 1024, max_concurrency=1)
else:
    store = LocalStore(args['store'])
engine.take_full_snapshot(EtcdConnection(tuple(args['endpoints'])), store, now=1767225600, tmp_dir=args.get('tmp_dir'))
print('DONE', flush=True)
'''


def run_and_kill(tmp_path, cluster, store_url, pause, endpoint_url=None, tmp_dir=None):
    driver = tmp_path / 'driver.py'
    driver.write_text(DRIVER)
    args = {'store': store_url, 'endpoints': cluster.endpoints, 'pause': pause, 'endpoint_url': endpoint_url,
            'tmp_dir': tmp_dir}
    proc = subprocess.Popen([sys.executable, str(driver), json.dumps(args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line == 'PAUSED', 'driver did not reach the pause: %r %s' % (line, proc.stderr.read()[-2000:])
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.parametrize('pause, expected', [
    ('write', ['partial']),
    ('between', ['partial']),  # verified data waits under its temp name until its metadata is published
    ('after-metadata', ['orphan-metadata', 'partial']),
], ids=['killed-while-writing', 'killed-between-data-and-metadata', 'killed-before-the-data-rename'])
def test_kill_during_local_snapshot_leaves_nothing_valid(etcd1, tmp_path, pause, expected):
    load(etcd1)
    store = open_store(str(tmp_path / 'store'))
    run_and_kill(tmp_path, etcd1, str(tmp_path / 'store'), pause)
    listed = store.list()
    assert sorted(s.status for s in listed) == expected
    assert store.latest_valid() is None
    assert list_snapshots(store)['latest_valid'] is None


def test_kill_during_s3_upload_leaves_nothing_valid(etcd1, s3_bucket, tmp_path):
    load_bulk(etcd1, 12)  # > 2 parts of 5 MiB: a real multipart upload
    store, url, bucket = s3_store(s3_bucket)
    run_and_kill(tmp_path, etcd1, store.url, 'upload', endpoint_url=url, tmp_dir=scratch(tmp_path))
    listed = store.list()
    assert listed and all(s.status == 'partial' for s in listed), statuses(store)
    assert 'Contents' not in boto3.client('s3', endpoint_url=url).list_objects_v2(Bucket=bucket)
    assert store.latest_valid() is None


def test_kill_between_phases_on_s3_leaves_nothing_valid(etcd1, s3_bucket, tmp_path):
    load(etcd1)
    store, url = s3_store(s3_bucket)[:2]
    run_and_kill(tmp_path, etcd1, store.url, 'between', endpoint_url=url, tmp_dir=scratch(tmp_path))
    assert [s.status for s in store.list()] == ['incomplete']
    assert store.latest_valid() is None


# --- modules through ansible-playbook --------------------------------------------------------------
def play(tmp_path, tasks, check=False):
    """Run the tasks with the real ansible-playbook; results are registered and dumped to a file
    (ansible-core 2.19 ships no json stdout callback, so the harness' parser has nothing to read)."""
    out = tmp_path / ('results-%s.json' % uuid.uuid4().hex[:6])
    registered = [t['name'] for t in tasks]
    body = [dict(t, register='r_' + t['name']) for t in tasks]
    body.append({'name': 'dump', 'check_mode': False, 'ansible.builtin.copy': {
        'dest': str(out), 'content': '{{ {%s} | to_json }}' % ', '.join("'%s': r_%s" % (n, n) for n in registered)}})
    res = run_playbook(local_play(body), check=check, env={'ANSIBLE_STDOUT_CALLBACK': 'default'})
    assert res.rc == 0, res.stdout[-3000:] + res.stderr[-2000:]
    return json.loads(out.read_text())


def test_modules_via_playbook(etcd3, tmp_path):
    load(etcd3)
    store = str(tmp_path / 'store')
    task = {'name': 'snap', 'steward.cluster.etcd_snapshot': {'endpoints': etcd3.endpoints, 'store': store}}
    info = {'name': 'info', 'steward.cluster.etcd_snapshot_info': {'store': store}}

    checked = play(tmp_path, [task, info], check=True)
    planned = checked['snap']
    assert planned['changed'] and planned['snapshot']['status'] == 'planned'
    assert planned['snapshot']['name'].startswith('Full-00000000-')
    assert checked['info']['counts']['valid'] == 0 and not checked['info']['changed']
    assert not os.path.exists(store)  # check mode created nothing

    real = play(tmp_path, [task, info])
    snap = real['snap']
    assert snap['changed'] and snap['snapshot']['valid'] and snap['member']['endpoint'] in etcd3.endpoints
    listing = real['info']
    assert listing['latest_valid']['name'] == snap['snapshot']['name'] and listing['counts']['valid'] == 1
    assert not listing['changed']


def test_modules_fail_clearly(tmp_path, s3_server):
    bad_bucket = 's3://no-such-bucket-%s/etcd' % uuid.uuid4().hex[:8]
    res = play(tmp_path, [
        {'name': 'info', 'steward.cluster.etcd_snapshot_info': {'store': bad_bucket, 's3_endpoint_url': s3_server},
         'ignore_errors': True},
        {'name': 'scheme', 'steward.cluster.etcd_snapshot_info': {'store': 'ftp://x/y'}, 'ignore_errors': True},
    ])
    assert res['info']['failed'] and 'does not exist' in res['info']['msg']
    assert res['scheme']['failed'] and "unsupported scheme 'ftp'" in res['scheme']['msg']
