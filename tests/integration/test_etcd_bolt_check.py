"""The fast structural check (bolt.py) against real snapshots of every installed etcd version: the
revision it reads is the one `snapshot status` reports, and broken files are refused with the reason."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.bolt import inspect_snapshot
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import SnapshotInvalid


def save(cluster, path):
    """A snapshot as etcdctl saves it (etcd's stream, with its sha256 trailer)."""
    subprocess.run([cluster.etcdctl, '--endpoints', cluster.endpoints[0], 'snapshot', 'save', path], check=True,
                   capture_output=True, env=dict(os.environ, ETCDCTL_API='3'))
    return path


def status(cluster, path):
    tool = os.path.join(cluster.bin_dir, 'etcdutl')
    cmd = [tool] if os.path.exists(tool) else [cluster.etcdctl]
    out = subprocess.run(cmd + ['snapshot', 'status', '-w', 'json', path], check=True, capture_output=True, text=True,
                         env=dict(os.environ, ETCDCTL_API='3')).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_revision_matches_snapshot_status(etcd1, tmp_path):
    empty = save(etcd1, str(tmp_path / 'empty.db'))
    assert inspect_snapshot(empty)['revision'] == status(etcd1, empty)['revision']
    etcd1.put_many({'/k/%04d' % i: 'v' * (i % 600) for i in range(1000)})  # many leaf pages
    etcd1.put_many({'/k/%04d' % i: '' for i in range(0, 1000, 7)})
    full = save(etcd1, str(tmp_path / 'full.db'))
    found = inspect_snapshot(full)
    assert found['revision'] == status(etcd1, full)['revision'] > 1000
    assert found['db_size'] == os.path.getsize(full) - 32 and found['consistent_index'] > 0


def flip(path, offset):
    with open(path, 'r+b') as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


def test_broken_files_are_refused_with_the_reason(etcd1, tmp_path):
    etcd1.put_many({'/k/%04d' % i: 'v' * 100 for i in range(500)})
    good = save(etcd1, str(tmp_path / 'good.db'))
    revision = inspect_snapshot(good)['revision']

    one_meta = shutil.copy(good, str(tmp_path / 'one-meta.db'))
    flip(one_meta, 16 + 40)  # a byte of meta page 0: bbolt falls back to meta page 1
    assert inspect_snapshot(one_meta)['revision'] == revision

    cases = {
        'both-meta': ([16 + 40, 4096 + 16 + 40], 'no valid meta page'),
        'magic': ([16, 4096 + 16], 'magic'),
    }
    for name, (offsets, reason) in cases.items():
        broken = shutil.copy(good, str(tmp_path / (name + '.db')))
        for offset in offsets:
            flip(broken, offset)
        with pytest.raises(SnapshotInvalid, match=reason):
            inspect_snapshot(broken)

    truncated = str(tmp_path / 'truncated.db')
    with open(good, 'rb') as src, open(truncated, 'wb') as dst:
        data = src.read()
        dst.write(data[:len(data) - 32 - 4096] + data[-32:])  # one page short, trailer kept
    with pytest.raises(SnapshotInvalid, match='the database has'):
        inspect_snapshot(truncated)

    not_etcd = str(tmp_path / 'zeros.db')
    with open(not_etcd, 'wb') as f:
        f.write(b'\0' * (8 * 4096 + 32))
    with pytest.raises(SnapshotInvalid, match='bolt structure'):
        inspect_snapshot(not_etcd)
