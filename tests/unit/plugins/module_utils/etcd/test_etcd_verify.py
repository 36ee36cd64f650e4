"""verify_snapshot_file against real snapshot files (made by a real etcd once per session)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import SnapshotInvalid
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.verify import (
    SnapshotHasher,
    hash_file,
    verify_snapshot_file,
)


@pytest.fixture(scope='module')
def good_snapshot(tmp_path_factory):
    """A real snapshot taken with etcdctl from a real 1-member etcd."""
    from support.etcd_cluster import EtcdCluster  # tests/ is on sys.path (tests/conftest.py)
    base = tmp_path_factory.mktemp('etcd')
    cluster = EtcdCluster(str(base / 'e'), 1).start()
    try:
        cluster.put_many({'k%03d' % i: 'v' * 100 for i in range(50)})
        path = str(base / 'good.db')
        subprocess.run([cluster.etcdctl, '--endpoints', cluster.endpoints[0], 'snapshot', 'save', path],
                       check=True, capture_output=True, env=dict(os.environ, ETCDCTL_API='3'))
    finally:
        cluster.stop()
    return path


def _truncate(data):
    return data[:len(data) // 2]


def _flip_middle(data):
    i = len(data) // 2
    return data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:]


def _flip_trailer(data):
    return data[:-1] + bytes([data[-1] ^ 0x01])


def _garbage(data):
    return os.urandom(len(data))


def _drop_trailer(data):
    return data[:-32]


@pytest.mark.parametrize('mutate, message', [
    (_truncate, 'sha256 trailer'),
    (_flip_middle, 'does not match its content'),
    (_flip_trailer, 'does not match its content'),
    (_garbage, 'does not match its content'),
    (_drop_trailer, 'trailer'),
    (lambda d: b'', 'trailer'),
], ids=['truncated', 'flipped-byte', 'flipped-trailer', 'garbage', 'no-trailer', 'empty'])
def test_damaged_file_is_invalid(good_snapshot, tmp_path, mutate, message):
    data = open(good_snapshot, 'rb').read()
    bad = tmp_path / 'bad.db'
    bad.write_bytes(mutate(data))
    with pytest.raises(SnapshotInvalid, match=message):
        verify_snapshot_file(str(bad))


def test_good_file_passes_every_check(good_snapshot):
    data = open(good_snapshot, 'rb').read()
    result = verify_snapshot_file(good_snapshot, expected_sha256=hashlib.sha256(data).hexdigest(),
                                  expected_size=len(data))
    assert result['sha256'] == hashlib.sha256(data).hexdigest()
    assert result['size'] == len(data)
    assert result['revision'] >= 51 and result['total_keys'] >= 50
    assert result['checks'] == ['size', 'sha256', 'sha256-trailer', 'snapshot-status']


@pytest.mark.parametrize('kwargs, message', [
    ({'expected_sha256': '0' * 64}, 'has sha256'),
    ({'expected_size': 1}, 'expected 1'),
], ids=['wrong-sha', 'wrong-size'])
def test_expectations_are_checked(good_snapshot, kwargs, message):
    with pytest.raises(SnapshotInvalid, match=message):
        verify_snapshot_file(good_snapshot, **kwargs)


def test_structure_check_catches_a_consistent_but_broken_db(good_snapshot, tmp_path):
    """A file whose trailer matches but which is no bolt database: only `snapshot status` can tell."""
    body = os.urandom(8192)
    path = tmp_path / 'fake.db'
    path.write_bytes(body + hashlib.sha256(body).digest())
    with pytest.raises(SnapshotInvalid, match='snapshot status rejected'):
        verify_snapshot_file(str(path))


def test_missing_file():
    with pytest.raises(SnapshotInvalid, match='does not exist'):
        verify_snapshot_file('/nonexistent/x.db')


@pytest.mark.parametrize('chunks', [
    [b'a' * 100],
    [b'a' * 10, b'b' * 5, b'c' * 40, b'd' * 3, b'e' * 31],
    [b'x'] * 70,
    [os.urandom(1000), os.urandom(7), os.urandom(33)],
], ids=['one', 'mixed', 'bytes', 'random'])
def test_incremental_hasher_matches_whole_file(chunks):
    data = b''.join(chunks)
    hasher = SnapshotHasher()
    for chunk in chunks:
        hasher.update(chunk)
    digests = hasher.result()
    assert digests.sha256 == hashlib.sha256(data).hexdigest()
    assert digests.content_sha256 == hashlib.sha256(data[:-32]).digest()
    assert digests.trailer == data[-32:]
    with tempfile.NamedTemporaryFile() as f:
        f.write(data)
        f.flush()
        assert hash_file(f.name) == digests
