"""SnapshotSink: what it writes, hashes and when it calls the tail callback (no etcd needed)."""

from __future__ import annotations

import hashlib
import os

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd import snapshot_stream
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot_stream import SnapshotSink
from ansible_collections.steward.cluster.plugins.module_utils.etcd.verify import SnapshotHasher

CHUNK = 32 * 1024  # what etcd sends per message


def _stream(tmp_path, chunks, tail_at):
    """Feed `chunks` to a sink like pyetcd does; returns (file bytes, hasher, bytes written when the tail fired)."""
    path = str(tmp_path / 'snap')
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    fired = []
    hasher = SnapshotHasher()
    sink = SnapshotSink(fd, hasher, (tail_at, lambda: fired.append(sum(sink_sizes))))
    sink_sizes = []
    try:
        for chunk in chunks:
            sink.write(chunk)
            sink_sizes.append(len(chunk))
        sink.reached_tail()
        sink.finish()
    finally:
        os.close(fd)
    with open(path, 'rb') as f:
        return f.read(), hasher, fired


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr(snapshot_stream, 'BATCH', 4 * CHUNK)


def test_tail_fires_once_near_the_end_and_data_is_intact(tmp_path, small_batches):
    chunks = [os.urandom(CHUNK) for _unused in range(40)]
    data, hasher, fired = _stream(tmp_path, chunks, tail_at=30 * CHUNK)
    assert data == b''.join(chunks)
    assert hasher.size == len(data)
    assert hasher.result().sha256 == hashlib.sha256(data).hexdigest()
    assert len(fired) == 1
    assert 30 * CHUNK <= fired[0] + CHUNK <= 36 * CHUNK  # when the batch holding byte 30*CHUNK was written


@pytest.mark.parametrize('tail_at', [0, 10 ** 12], ids=['size unknown', 'stream shorter than expected'])
def test_tail_fires_at_the_end_otherwise(tmp_path, small_batches, tail_at):
    chunks = [os.urandom(CHUNK) for _unused in range(10)]
    data, _hasher, fired = _stream(tmp_path, chunks, tail_at=tail_at)
    assert data == b''.join(chunks)
    assert fired == [len(data)]
