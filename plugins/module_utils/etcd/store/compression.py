# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Snapshot compression with etcd-backup-restore's name suffixes (`.gz` gzip, `.zlib` zlib).

A compressed object is verified twice: its stored bytes against the sha256 in its metadata, and,
once decompressed, the snapshot itself (trailer, `snapshot status`). `.Z` (LZW) objects of the
other tool are recognised by name but cannot be read: there is no LZW codec in Python's library.
"""

from __future__ import annotations

import gzip
import os
import zlib
from typing import Any, Optional

from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import SnapshotInvalid, StoreError
from ansible_collections.steward.cluster.plugins.module_utils.common.files import open_private

POLICY_SUFFIX = {'gzip': '.gz', 'zlib': '.zlib'}
SUFFIX_POLICY = {v: k for k, v in POLICY_SUFFIX.items()}
CHUNK = 4 * 1024 * 1024
CHECK_DECOMPRESSION = 'decompression'


def suffix_for(policy: Optional[str]) -> str:
    """'' for no compression; StoreError for a policy we cannot write."""
    if not policy:
        return ''
    if policy not in POLICY_SUFFIX:
        raise StoreError('unknown compression policy %r (expected one of %s)' % (policy, ', '.join(POLICY_SUFFIX)))
    return POLICY_SUFFIX[policy]


def compress_file(src: str, dest: str, policy: str) -> None:
    """Write `src` compressed to `dest` and fsync it."""
    with open(src, 'rb') as fin, open_private(dest) as raw:
        writer = compressing_writer(raw, policy)
        _copy(fin, writer)
        writer.close()
        raw.flush()
        os.fsync(raw.fileno())


def decompress_file(src: str, dest: str, suffix: str) -> None:
    """Undo `compress_file`; SnapshotInvalid when the data is not what the suffix says."""
    if not suffix:
        raise ValueError('decompress_file needs a compression suffix')
    if suffix not in SUFFIX_POLICY:
        raise SnapshotInvalid('snapshots compressed as %r cannot be read here (supported: %s)' % (
            suffix, ', '.join(SUFFIX_POLICY)), CHECK_DECOMPRESSION)
    try:
        with open(src, 'rb') as fin, open_private(dest) as out:
            if suffix == '.gz':
                with gzip.GzipFile(fileobj=fin, mode='rb') as stream:
                    _copy(stream, out)
            else:
                decompressor = zlib.decompressobj()
                _transform(fin, out, decompressor.decompress, decompressor.flush)
                if not decompressor.eof:
                    raise SnapshotInvalid('zlib stream of %s is truncated' % src, CHECK_DECOMPRESSION)
    except (OSError, EOFError, zlib.error) as exc:
        raise SnapshotInvalid('cannot decompress %s (%s): %s' % (src, suffix, exc), CHECK_DECOMPRESSION) from exc


class _ZlibWriter:
    """A write-only file object that zlib-compresses into `raw`."""

    def __init__(self, raw: Any):
        self.raw = raw
        self.compressor = zlib.compressobj(6)

    def write(self, data: bytes) -> int:
        self.raw.write(self.compressor.compress(data))
        return len(data)

    def close(self) -> None:
        self.raw.write(self.compressor.flush())


class _Plain:
    def __init__(self, raw: Any):
        self.raw = raw

    def write(self, data: bytes) -> int:
        return self.raw.write(data)

    def close(self) -> None:
        pass


def compressing_writer(raw: Any, policy: Optional[str]) -> Any:
    """A file object writing to `raw` through the policy's compressor; `close()` finishes the stream
    (and leaves `raw` open)."""
    if not policy:
        return _Plain(raw)
    suffix_for(policy)
    if policy == 'gzip':
        return gzip.GzipFile(fileobj=raw, mode='wb', compresslevel=6, mtime=0)
    return _ZlibWriter(raw)


def decompress_bytes(data: bytes, suffix: str) -> bytes:
    if not suffix:
        return data
    if suffix not in SUFFIX_POLICY:
        raise SnapshotInvalid('snapshots compressed as %r cannot be read here' % suffix, CHECK_DECOMPRESSION)
    try:
        return gzip.decompress(data) if suffix == '.gz' else zlib.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise SnapshotInvalid('cannot decompress delta snapshot (%s): %s' % (suffix, exc), CHECK_DECOMPRESSION) from exc


def _transform(fin, fout, step, finish) -> None:
    """Stream `fin` through a zlib (de)compressor object's step/flush into `fout`."""
    while True:
        chunk = fin.read(CHUNK)
        if not chunk:
            break
        fout.write(step(chunk))
    fout.write(finish())


def _copy(fin, fout) -> None:
    while True:
        chunk = fin.read(CHUNK)
        if not chunk:
            return
        fout.write(chunk)
