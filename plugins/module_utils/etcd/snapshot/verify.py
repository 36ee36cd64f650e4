# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Verification of an etcd snapshot file before it is published or restored.

Three independent checks, because each catches what the others miss:
1. etcd appends a sha256 of the database to every snapshot streamed over the Snapshot API:
   a truncated or bit-flipped transfer fails it;
2. the structure: `etcdutl snapshot status` (etcdctl on 3.4) reads the whole bolt database (before
   a restore, and in restore verification); right after streaming, the bolt meta pages and the path to
   the newest revision (bolt.py, milliseconds) — the trailer already proved every byte; either yields
   the revision the snapshot is named after;
3. the sha256 and size of the whole file against the values recorded in the store's metadata:
   a file that changed in the store since it was published fails it.
The file is read at most once, in chunks, for both hashes (snapshots can be many GB).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import Any, Dict, List, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common.commands import run_bounded
from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import DeadlineExceeded
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.binaries import (
    find_snapshot_tool,
    run_seconds,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.bolt import inspect_snapshot
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import SnapshotInvalid

SHA256_SIZE = 32
CHUNK = 4 * 1024 * 1024
BOLT_PAGE = 512  # etcd's own test for "has a sha256 trailer": size % 512 == 32
STATUS_TIMEOUT = 600

CHECK_TRAILER = 'sha256-trailer'
CHECK_STRUCTURE = 'snapshot-status'
CHECK_BOLT = 'bolt-structure'
CHECK_SHA256 = 'sha256'
CHECK_SIZE = 'size'


class SnapshotHasher:
    """Incremental hashes of a snapshot: the whole file and the content before the 32-byte trailer.

    One sha256 pass serves both: the content is a prefix of the whole file, so the whole file's digest
    is the content state copied and fed the trailer at the end. Usable while the snapshot is being
    received, so the file is never read again."""

    def __init__(self) -> None:
        self.content = hashlib.sha256()
        self.size = 0
        self._tail = b''

    def update(self, chunk: bytes) -> None:
        if not chunk:
            return
        self.size += len(chunk)
        if len(chunk) >= SHA256_SIZE:
            # everything but the newest 32 bytes is certainly content
            self.content.update(self._tail)
            view = memoryview(chunk)
            self.content.update(view[:-SHA256_SIZE])
            self._tail = bytes(view[-SHA256_SIZE:])
        else:
            joined = self._tail + chunk
            self.content.update(joined[:-SHA256_SIZE])
            self._tail = joined[-SHA256_SIZE:]

    def result(self) -> 'SnapshotDigests':
        whole = self.content.copy()
        whole.update(self._tail)
        return SnapshotDigests(whole.hexdigest(), self.size, self.content.digest(), self._tail)


@dataclasses.dataclass(frozen=True)
class SnapshotDigests:
    sha256: str          # hex sha256 of the whole file
    size: int
    content_sha256: bytes  # sha256 of everything but the last 32 bytes
    trailer: bytes         # the last 32 bytes


def hash_file(path: str) -> SnapshotDigests:
    hasher = SnapshotHasher()
    with open(path, 'rb') as f:
        while True:
            chunk = f.read(CHUNK)
            if not chunk:
                break
            hasher.update(chunk)
    return hasher.result()


def check_trailer(digests: SnapshotDigests) -> None:
    """etcd's own integrity trailer; a snapshot without one is refused (we only take API snapshots)."""
    if digests.size < SHA256_SIZE + BOLT_PAGE or digests.size % BOLT_PAGE != SHA256_SIZE:
        raise SnapshotInvalid('snapshot is %d bytes: not a bolt database with etcd\'s 32-byte sha256 trailer '
                              '(truncated or not an etcd snapshot)' % digests.size, CHECK_TRAILER)
    if digests.content_sha256 != digests.trailer:
        raise SnapshotInvalid('snapshot sha256 trailer does not match its content (%s expected, %s computed): '
                              'the file is corrupt or truncated' % (digests.trailer.hex(), digests.content_sha256.hex()),
                              CHECK_TRAILER)


def snapshot_status(path: str, tool: Optional[str] = None) -> Dict[str, Any]:
    """`etcdutl/etcdctl snapshot status -w json`: {hash, revision, totalKey, totalSize}."""
    binary, kind = find_snapshot_tool(tool)
    env = dict(os.environ)
    if kind == 'etcdctl':
        env['ETCDCTL_API'] = '3'
    try:
        proc = run_bounded([binary, 'snapshot', 'status', '-w', 'json', path], run_seconds(binary, STATUS_TIMEOUT),
                           '%s snapshot status %s' % (kind, path), env=env)
    except DeadlineExceeded as exc:   # the tool and its process group were killed
        raise SnapshotInvalid(str(exc), CHECK_STRUCTURE) from exc
    except OSError as exc:
        raise SnapshotInvalid('cannot run %s: %s' % (binary, exc), CHECK_STRUCTURE) from exc
    if proc.returncode != 0:
        message = (proc.stderr or proc.stdout).strip().splitlines()
        raise SnapshotInvalid('%s snapshot status rejected %s: %s' % (
            kind, path, message[-1] if message else 'rc=%d' % proc.returncode), CHECK_STRUCTURE)
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as exc:
        raise SnapshotInvalid('%s snapshot status printed no JSON for %s: %r' % (kind, path, proc.stdout[:200]),
                              CHECK_STRUCTURE) from exc


def verify_snapshot_file(path: str, *, expected_sha256: Optional[str] = None, expected_size: Optional[int] = None,
                         tool: Optional[str] = None, digests: Optional[SnapshotDigests] = None,
                         full_structure: bool = True) -> Dict[str, Any]:
    """Run every check; SnapshotInvalid names the first that fails (and `.check` which it was).

    `digests` may be passed when the hashes were computed while the file was written (saves a read).
    `full_structure=False` checks the structure with bolt.py instead of a full `snapshot status` read:
    for a file whose every byte the trailer has just proved (total_keys and hash are then None)."""
    if not os.path.isfile(path):
        raise SnapshotInvalid('snapshot file %s does not exist' % path)
    checks: List[str] = []
    if digests is None:
        digests = hash_file(path)
    actual_size = os.path.getsize(path)
    if digests.size != actual_size:
        raise SnapshotInvalid('snapshot %s is %d bytes on disk but %d bytes were hashed' % (path, actual_size, digests.size),
                              CHECK_SIZE)
    if expected_size is not None:
        if digests.size != int(expected_size):
            raise SnapshotInvalid('snapshot %s is %d bytes, expected %d' % (path, digests.size, int(expected_size)),
                                  CHECK_SIZE)
        checks.append(CHECK_SIZE)
    if expected_sha256:
        if digests.sha256 != expected_sha256.lower():
            raise SnapshotInvalid('snapshot %s has sha256 %s, expected %s' % (path, digests.sha256, expected_sha256),
                                  CHECK_SHA256)
        checks.append(CHECK_SHA256)
    check_trailer(digests)
    checks.append(CHECK_TRAILER)
    result = {'sha256': digests.sha256, 'size': digests.size, 'checks': checks}
    if not full_structure:
        try:
            bolt = inspect_snapshot(path)
        except SnapshotInvalid as exc:
            raise SnapshotInvalid(str(exc), CHECK_BOLT) from exc
        checks.append(CHECK_BOLT)
        result.update(revision=bolt['revision'], total_keys=None, hash=None,
                      consistent_index=bolt['consistent_index'])
        return result
    status = snapshot_status(path, tool)
    checks.append(CHECK_STRUCTURE)
    result.update(revision=int(status.get('revision', 0)), total_keys=int(status.get('totalKey', 0)),
                  hash=int(status.get('hash', 0)))
    return result
