"""SnapshotSink: what it writes, hashes and when it calls the tail callback (no etcd needed)."""

from __future__ import annotations

import hashlib
import os

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot import snapshot_stream
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.snapshot_stream import SnapshotSink
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.verify import SnapshotHasher

CHUNK = 16 * 1024  # an HTTP/2 DATA frame: what one slice of a read holds at most


def _stream(tmp_path, reads, tail_at):
    """Feed `reads` (lists of slices, as wire/http2.py hands them over) to a sink; returns (file bytes, hasher,
    bytes written when the tail fired)."""
    path = str(tmp_path / 'snap')
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    fired = []
    written = []
    hasher = SnapshotHasher()
    sink = SnapshotSink(fd, hasher, (tail_at, lambda: fired.append(sum(written))))
    try:
        for views in reads:
            written.append(sum(len(v) for v in views))
            sink.write([memoryview(v) for v in views])
        sink.reached_tail()
        sink.finish()
    finally:
        os.close(fd)
    with open(path, 'rb') as f:
        return f.read(), hasher, fired


def test_tail_fires_once_near_the_end_and_data_is_intact(tmp_path):
    reads = [[os.urandom(CHUNK) for _unused in range(4)] for _unused in range(10)]
    data, hasher, fired = _stream(tmp_path, reads, tail_at=30 * CHUNK)
    assert data == b''.join(b''.join(r) for r in reads)
    assert hasher.size == len(data)
    assert hasher.result().sha256 == hashlib.sha256(data).hexdigest()
    assert fired == [32 * CHUNK]  # after the read that took the total past 30 chunks


@pytest.mark.parametrize('tail_at', [0, 10 ** 12], ids=['size unknown', 'stream shorter than expected'])
def test_tail_fires_at_the_end_otherwise(tmp_path, tail_at):
    reads = [[os.urandom(CHUNK)] for _unused in range(10)]
    data, _hasher, fired = _stream(tmp_path, reads, tail_at=tail_at)
    assert data == b''.join(r[0] for r in reads)
    assert fired == [len(data)]


def test_more_slices_than_one_writev_takes_and_periodic_write_back(tmp_path, monkeypatch):
    monkeypatch.setattr(snapshot_stream, 'IOV_MAX', 3)
    monkeypatch.setattr(snapshot_stream, 'SYNC_EVERY', 2 * CHUNK)
    synced = []
    real = os.fdatasync
    monkeypatch.setattr(snapshot_stream.os, 'fdatasync', lambda fd: synced.append(fd) or real(fd))
    reads = [[os.urandom(CHUNK // 2) for _unused in range(7)] for _unused in range(4)]
    data, hasher, _fired = _stream(tmp_path, reads, tail_at=0)
    assert data == b''.join(b''.join(r) for r in reads)
    assert hasher.result().sha256 == hashlib.sha256(data).hexdigest()
    assert synced, 'written back while the stream went on'
