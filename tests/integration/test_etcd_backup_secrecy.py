"""Backups are secrets (issue 19 §5): snapshot files 0600 in 0700 directories whatever the umask, an
operator's wider directory left alone but reported, and S3 objects encrypted server-side (AES256 by
default, KMS, SSE-C with the key sent again on every read) as head_object shows them."""

from __future__ import annotations

import os
import stat

import boto3
import pytest
from botocore.exceptions import ClientError

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import StoreError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery.restore import select_snapshot
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.s3_encryption import s3_encryption
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.snapshot import (
    list_snapshots,
    take_full_snapshot,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.stores import open_store
from support.ansible import local_play, run_playbook

NOW = 1767225600
CUSTOMER_KEY = 'c' * 32


def mode(path):
    return stat.S_IMODE(os.stat(str(path)).st_mode)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_local_store_files_0600_dirs_0700_and_an_operator_dir_is_reported(etcd1, tmp_path, umask_022):
    etcd1.put_many({'/secret/%d' % i: 'password-%d' % i for i in range(20)})
    conn = EtcdConnection(endpoints=tuple(etcd1.endpoints))
    root = tmp_path / 'backups' / 'etcd'
    snap = take_full_snapshot(conn, open_store(str(root)), now=NOW)['snapshot']
    assert mode(root) == mode(root / 'v2') == 0o700
    assert mode(root / 'v2' / snap['name']) == mode(root / 'v2' / (snap['name'] + '.meta.json')) == 0o600
    assert mode(tmp_path / 'backups') == 0o700  # created by us as well

    shared = tmp_path / 'shared'
    shared.mkdir(mode=0o755)
    os.chmod(str(shared), 0o755)
    task = {'endpoints': etcd1.endpoints, 'store': str(shared)}
    play = local_play([{'name': 'snapshot', 'steward.cluster.etcd_snapshot': task}])
    result = run_playbook(play).result('snapshot')
    assert not result.get('failed'), result
    assert mode(shared) == 0o755, 'an existing directory keeps the mode its operator gave it'
    assert mode(shared / 'v2') == 0o700 and mode(shared / 'v2' / result['snapshot']['name']) == 0o600
    assert [(n['path'], n['mode']) for n in result['store_notes']] == [(str(shared), '0755')]
    assert any('mode 0755' in w for w in result.get('warnings', []))


def _head(url, bucket, key, **extra):
    return boto3.client('s3', endpoint_url=url).head_object(Bucket=bucket, Key=key, **extra)


@pytest.mark.parametrize('settings, shown', [
    ({}, {'ServerSideEncryption': 'AES256'}),
    ({'mode': 'aws:kms', 'kms_key_id': 'alias/etcd-backups'},
     {'ServerSideEncryption': 'aws:kms', 'SSEKMSKeyId': 'alias/etcd-backups'}),
], ids=['default-aes256', 'kms'])
def test_s3_objects_are_encrypted_server_side(etcd1, s3_bucket, tmp_path, settings, shown):
    etcd1.put_many({'/secret/a': 'x'})
    url, bucket = s3_bucket
    store = open_store('s3://%s/etcd' % bucket, endpoint_url=url, encryption=s3_encryption(**settings))
    name = take_full_snapshot(EtcdConnection(endpoints=tuple(etcd1.endpoints)), store, now=NOW,
                              tmp_dir=str(tmp_path))['snapshot']['name']
    for key in ('etcd/v2/' + name, 'etcd/v2/%s.meta.json' % name):
        head = _head(url, bucket, key)
        assert {k: head.get(k) for k in shown} == shown, key
    assert store.encryption_confirmed() is True


def test_s3_sse_c_needs_the_customer_key_for_every_read(etcd1, s3_bucket, tmp_path):
    etcd1.put_many({'/secret/a': 'x'})
    url, bucket = s3_bucket
    encryption = s3_encryption(customer_key=CUSTOMER_KEY)
    store = open_store('s3://%s/sse-c' % bucket, endpoint_url=url, encryption=encryption)
    result = take_full_snapshot(EtcdConnection(endpoints=tuple(etcd1.endpoints)), store, now=NOW, tmp_dir=str(tmp_path))
    key = 'sse-c/v2/' + result['snapshot']['name']
    with pytest.raises(ClientError) as refused:
        _head(url, bucket, key)
    assert refused.value.response['Error']['Code'] == '400'
    head = _head(url, bucket, key, SSECustomerAlgorithm='AES256', SSECustomerKey=CUSTOMER_KEY)
    assert head['SSECustomerAlgorithm'] == 'AES256'
    assert head['SSECustomerKeyMD5'] == encryption.describe()['customer_key_md5']
    assert store.encryption_confirmed() is True

    info = list_snapshots(store, tmp_dir=str(tmp_path))  # downloads with the key
    assert [s['status'] for s in info['snapshots']] == ['valid']
    assert select_snapshot(store).key == 'v2/' + result['snapshot']['name']
    without_key = open_store('s3://%s/sse-c' % bucket, endpoint_url=url)
    with pytest.raises(StoreError, match='Server Side Encryption'):
        without_key.list()  # even the metadata object needs the key
