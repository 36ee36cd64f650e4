# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read snapshots back from a store, verified: nothing is restored, replayed or compacted from
bytes that do not match what was recorded when the snapshot was published. Snapshots without
metadata (etcd-backup-restore's, status `unrecorded`) are checked by their content alone: etcd's
sha256 trailer and the full structure for a full snapshot, the trailer and the events for a delta."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.compression import (
    decompress_bytes,
    decompress_file,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.delta import Event, decode_events
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import SnapshotInvalid
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.local_store import (
    LocalStore,
    remove_quietly,
    temp_name,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.store import Snapshot, SnapshotStore
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.verify import (
    CHECK_SHA256,
    CHECK_SIZE,
    hash_file,
    verify_snapshot_file,
)

CHECK_STORED = 'stored-sha256'
CHECK_DELTA = 'delta-content'
CHECK_LISTING = 'listing'  # the listing already says the snapshot is not usable


def label(snapshot: Snapshot) -> str:
    return str(snapshot.name) if snapshot.name else snapshot.key.rsplit('/', 1)[-1]


def _require_valid(snapshot: Snapshot) -> Dict[str, Any]:
    meta = snapshot.metadata or {}
    if not snapshot.valid or (snapshot.metadata is not None and not meta.get('sha256')):
        raise SnapshotInvalid('snapshot %s is %s%s: refusing to read it' % (
            label(snapshot), snapshot.status, ' (%s)' % snapshot.problem if snapshot.problem else ''), CHECK_LISTING)
    return meta


def _check_stored(path: str, snapshot: Snapshot, meta: Dict[str, Any]) -> None:
    if not meta.get('sha256'):
        return  # unrecorded: nothing was recorded to compare with
    digests = hash_file(path)
    if digests.sha256 != str(meta['sha256']).lower():
        raise SnapshotInvalid('snapshot %s has sha256 %s, its metadata records %s' % (
            label(snapshot), digests.sha256, meta['sha256']), CHECK_SHA256)
    if meta.get('size') is not None and digests.size != int(meta['size']):
        raise SnapshotInvalid('snapshot %s is %d bytes, its metadata records %s' % (
            label(snapshot), digests.size, meta['size']), CHECK_SIZE)


def fetch_full(store: SnapshotStore, snapshot: Snapshot, work_dir: str,
               tool: Optional[str] = None) -> Tuple[str, Dict[str, Any]]:
    """(local path of the plain snapshot file, verification) for a valid full snapshot.

    The file lives in `work_dir` unless the store is a local directory and the snapshot is not
    compressed (then it is read in place: the caller must not delete it; see `owned`)."""
    meta = _require_valid(snapshot)
    if not snapshot.is_full:
        raise SnapshotInvalid('snapshot %s is not a full snapshot' % label(snapshot))
    suffix = snapshot.name.compression_suffix if snapshot.name else ''
    in_place = store.path_of(snapshot) if isinstance(store, LocalStore) else None
    raw = in_place or os.path.join(work_dir, temp_name(label(snapshot)))
    try:
        if in_place is None:
            store.fetch(snapshot, raw)
        if not suffix:
            verification = verify_snapshot_file(raw, expected_sha256=meta.get('sha256'),
                                                expected_size=meta.get('size', snapshot.size), tool=tool)
            return raw, verification
        _check_stored(raw, snapshot, meta)
        plain = os.path.join(work_dir, temp_name(label(snapshot) + '.db'))
        decompress_file(raw, plain, suffix)
        verification = verify_snapshot_file(plain, expected_sha256=meta.get('uncompressed_sha256'), tool=tool)
        verification['checks'] = ([CHECK_STORED] if snapshot.recorded else []) + verification['checks']
        return plain, verification
    finally:
        if in_place is None and suffix:
            remove_quietly(raw)


def fetch_delta(store: SnapshotStore, snapshot: Snapshot, work_dir: str) -> List[Event]:
    """The events of a valid delta snapshot, checked against its metadata and its name's revisions."""
    meta = _require_valid(snapshot)
    in_place = store.path_of(snapshot) if isinstance(store, LocalStore) else None
    path = in_place or os.path.join(work_dir, temp_name(label(snapshot)))
    try:
        if in_place is None:
            store.fetch(snapshot, path)
        _check_stored(path, snapshot, meta)
        with open(path, 'rb') as f:
            blob = f.read()
    finally:
        if in_place is None:
            remove_quietly(path)
    try:
        events = decode_events(decompress_bytes(blob, snapshot.name.compression_suffix),
                               'delta snapshot %s' % label(snapshot))
    except SnapshotInvalid as exc:
        raise SnapshotInvalid(str(exc), exc.check or CHECK_DELTA) from exc
    name = snapshot.name
    if events and (events[0].revision < name.start_revision or events[-1].revision != name.end_revision):
        raise SnapshotInvalid('delta snapshot %s holds revisions %d..%d, its name says %d..%d' % (
            label(snapshot), events[0].revision, events[-1].revision, name.start_revision, name.end_revision),
            CHECK_DELTA)
    return events
