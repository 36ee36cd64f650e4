# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Full snapshots: pick a member, stream, verify, publish in two phases; and list a store.

A snapshot becomes valid only after it was verified (etcd's sha256 trailer, `snapshot status`)
and its size re-read from the store: the metadata object that makes it valid is written last.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import queue
import shutil
import tempfile
import threading
from typing import Any, Dict, List, Optional, Tuple, Union

from ansible_collections.steward.cluster.plugins.module_utils.etcd import naming
from ansible_collections.steward.cluster.plugins.module_utils.etcd.compression import compress_file, suffix_for
from ansible_collections.steward.cluster.plugins.module_utils.etcd.client import (
    EtcdConnection,
    Gateway,
    grpc_client,
    member_id_hex,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import (
    EtcdError,
    EtcdUnavailable,
    SnapshotInvalid,
    StoreError,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.fetch import fetch_delta, fetch_full
from ansible_collections.steward.cluster.plugins.module_utils.etcd.local_store import LocalStore, remove_quietly, temp_name
from ansible_collections.steward.cluster.plugins.module_utils.etcd.private_files import open_private
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store import (
    METADATA_FORMAT,
    STATUS_CORRUPT,
    STATUS_INCOMPLETE,
    STATUS_ORPHAN,
    STATUS_PARTIAL,
    STATUS_VALID,
    Snapshot,
    SnapshotStore,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.verify import (
    SnapshotHasher,
    hash_file,
    verify_snapshot_file,
)

STATUSES = (STATUS_VALID, STATUS_INCOMPLETE, STATUS_CORRUPT, STATUS_ORPHAN, STATUS_PARTIAL)
WRITE_BUFFER = 4 * 1024 * 1024
STATUS_PLANNED = 'planned'


@dataclasses.dataclass
class MemberChoice:
    """The member a snapshot is streamed from, and why it was chosen."""

    endpoint: str
    member_id: str
    name: str
    cluster_id: str
    version: str
    revision: int
    applied_index: int
    is_leader: bool

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


def unix(now: Union[float, int, datetime.datetime]) -> int:
    if isinstance(now, datetime.datetime):
        return int(now.timestamp())
    return int(now)


def iso(now: Union[float, int, datetime.datetime]) -> str:
    return datetime.datetime.fromtimestamp(unix(now), tz=datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')


def pick_member(conn: EtcdConnection, gateway: Gateway) -> MemberChoice:
    """The healthiest voting member: answers status and a linearizable read; highest applied
    index wins, a follower before the leader on ties (keeps load off the leader)."""
    candidates: List[MemberChoice] = []
    problems: List[str] = []
    names: Dict[str, str] = {}
    for endpoint in conn.endpoints:
        try:
            status = gateway.status(endpoint)
            if status.get('isLearner'):
                problems.append('%s is a learner' % endpoint)
                continue
            gateway.linearizable_read(endpoint)
        except EtcdError as exc:
            problems.append(str(exc))
            continue
        header = status.get('header') or {}
        member_id = member_id_hex(header.get('member_id') or header.get('memberId') or 0)
        if not names:
            try:
                names = {member_id_hex(m.get('ID', 0)): m.get('name', '') for m in gateway.member_list(endpoint)}
            except EtcdError:
                names = {}
        candidates.append(MemberChoice(
            endpoint=endpoint, member_id=member_id, name=names.get(member_id, ''),
            cluster_id=member_id_hex(header.get('cluster_id') or header.get('clusterId') or 0),
            version=status.get('version', ''), revision=int(header.get('revision') or 0),
            applied_index=int(status.get('raftAppliedIndex') or status.get('raftIndex') or 0),
            is_leader=member_id_hex(status.get('leader') or 0) == member_id))
    if not candidates:
        raise EtcdUnavailable('no etcd member can serve a snapshot (none answered status and a quorum read): %s'
                              % '; '.join(problems))
    return max(candidates, key=lambda c: (c.applied_index, not c.is_leader))


class _HashingWriter:
    """File-like sink for pyetcd's snapshot(): writes each chunk and hashes it in a worker thread.

    hashlib releases the GIL on large buffers, so hashing overlaps with receiving and writing
    instead of adding its time to the stream (the file is never read back)."""

    BATCH = 1024 * 1024

    def __init__(self, f: Any, hasher: SnapshotHasher):
        self.f = f
        self.hasher = hasher
        self._queue: 'queue.Queue[Optional[bytes]]' = queue.Queue(maxsize=64)
        self._pending: List[bytes] = []
        self._pending_size = 0
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, name='snapshot-hash', daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            chunk = self._queue.get()
            if chunk is None:
                return
            try:
                self.hasher.update(chunk)
            except BaseException as exc:  # pylint: disable=broad-except
                self._error = exc

    def write(self, data: bytes) -> int:
        written = self.f.write(data)
        self._pending.append(data)
        self._pending_size += len(data)
        if self._pending_size >= self.BATCH:
            self._flush_pending()
        return written

    def _flush_pending(self) -> None:
        if self._pending:
            self._queue.put(b''.join(self._pending))
            self._pending = []
            self._pending_size = 0

    def finish(self) -> None:
        """Hash what is left and wait for the worker; re-raise its error."""
        self._flush_pending()
        self._queue.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error


def stream_snapshot(conn: EtcdConnection, endpoint: str, path: str, timeout: float) -> SnapshotHasher:
    """Stream the member's snapshot into `path` and fsync it; a fresh client, because pyetcd applies
    its timeout to the whole stream and poisons an endpoint after a failure."""
    hasher = SnapshotHasher()
    client = grpc_client(conn, endpoint, timeout=timeout)
    try:
        with open_private(path, 'wb', WRITE_BUFFER) as f:
            writer = _HashingWriter(f, hasher)
            try:
                client.snapshot(writer)
            finally:
                writer.finish()
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        raise StoreError('cannot write snapshot temp file %s: %s' % (path, exc)) from exc
    except EtcdError:
        raise
    except Exception as exc:  # grpc / pyetcd errors: connection lost, deadline exceeded
        raise EtcdUnavailable('snapshot stream from %s failed after %d bytes: %s: %s' % (
            endpoint, hasher.size, exc.__class__.__name__, exc)) from exc
    finally:
        try:
            client.close()
        except Exception:  # pylint: disable=broad-except
            pass
    return hasher


def check_store(store: SnapshotStore, check_mode: bool) -> None:
    """Fail before streaming a big snapshot when the store cannot take it."""
    check = getattr(store, 'check', None)
    if check is not None:
        check(create=not check_mode)


def temp_path_for(store: SnapshotStore, tmp_dir: Optional[str]) -> str:
    if tmp_dir:
        if not os.path.isdir(tmp_dir):
            raise StoreError('tmp_dir %s is not a directory' % tmp_dir)
        return os.path.join(tmp_dir, temp_name('snapshot'))
    if isinstance(store, LocalStore):
        return store.new_temp_path('snapshot')  # same filesystem: publishing is a rename
    return os.path.join(tempfile.gettempdir(), temp_name('snapshot'))


def snapshot_metadata(name: naming.SnapshotName, verified: Dict[str, Any], member: MemberChoice,
                      now: Union[float, int, datetime.datetime]) -> Dict[str, Any]:
    return {
        'format': METADATA_FORMAT,
        'name': str(name),
        'kind': name.kind,
        'sha256': verified['sha256'],
        'size': verified['size'],
        'start_revision': name.start_revision,
        'revision': name.end_revision,
        'created': name.created,
        'cluster_id': member.cluster_id,
        'member_id': member.member_id,
        'member_name': member.name,
        'etcd_version': member.version,
        'total_keys': verified['total_keys'],
        'hash': verified['hash'],
        'source_endpoint': member.endpoint,
        'verified': {'at': iso(now), 'checks': verified['checks']},
    }


def publish_two_phase(store: SnapshotStore, name: naming.SnapshotName, path: str, metadata: Dict[str, Any]) -> Snapshot:
    """Publish a verified local file: data, size re-read from the store, then the metadata that
    makes it valid. On any failure the data is deleted again, so nothing half-published stays."""
    published: Optional[Snapshot] = None
    try:
        published = store.publish_data(name, path)
        if published.size != metadata['size']:
            raise StoreError('snapshot %s has %d bytes in the store, %d were verified' % (
                name, published.size, metadata['size']))
        final = store.publish_metadata(published, metadata)
        if not final.valid:
            raise StoreError('snapshot %s does not list as valid after publishing: %s' % (name, final.problem))
        published = None  # done: nothing to undo
        return final
    except BaseException:
        if published is not None:
            try:
                store.delete(published)  # unverified data in the store; it would only list as incomplete
            except EtcdError:
                pass
        raise


def compressed_copy(path: str, policy: str, tmp_dir: str) -> Tuple[str, Dict[str, Any]]:
    """(compressed file, {sha256, size} of it) for publishing a verified snapshot compressed."""
    dest = os.path.join(tmp_dir, temp_name('snapshot' + suffix_for(policy)))
    compress_file(path, dest, policy)
    digests = hash_file(dest)
    return dest, {'sha256': digests.sha256, 'size': digests.size}


def publish_full(store: SnapshotStore, path: str, verified: Dict[str, Any], member: MemberChoice,
                 now: Union[float, int, datetime.datetime], compression: Optional[str] = None,
                 extra: Optional[Dict[str, Any]] = None) -> Snapshot:
    """Publish a verified full snapshot file (compressed when asked); `extra` goes into the metadata."""
    suffix = suffix_for(compression)
    name = naming.full_name(verified['revision'], unix(now), suffix)
    metadata = snapshot_metadata(name, verified, member, now)
    metadata.update(extra or {})
    if not compression:
        return publish_two_phase(store, name, path, metadata)
    packed, digests = compressed_copy(path, compression, os.path.dirname(path) or tempfile.gettempdir())
    try:
        metadata.update(uncompressed_sha256=verified['sha256'], uncompressed_size=verified['size'],
                        compression=compression, **digests)
        return publish_two_phase(store, name, packed, metadata)
    finally:
        remove_quietly(packed)


def take_full_snapshot(conn: EtcdConnection, store: SnapshotStore, *, now: Union[float, int, datetime.datetime],
                       tmp_dir: Optional[str] = None, snapshot_timeout: float = 900, tool: Optional[str] = None,
                       check_mode: bool = False, compression: Optional[str] = None) -> Dict[str, Any]:
    """Take, verify and publish one full snapshot. Returns {changed, snapshot, member}."""
    suffix = suffix_for(compression)
    with Gateway(conn) as gateway:
        member = pick_member(conn, gateway)
    check_store(store, check_mode)
    if check_mode:
        name = naming.full_name(member.revision, unix(now), suffix)
        planned = {
            'name': str(name), 'key': '%s/%s' % (naming.LAYOUT_V2, name), 'kind': name.kind,
            'start_revision': name.start_revision, 'end_revision': name.end_revision, 'created': name.created,
            'size': None, 'status': STATUS_PLANNED, 'valid': False, 'problem': '', 'sha256': None, 'metadata': None,
        }
        return {'changed': True, 'snapshot': planned, 'member': member.to_dict()}

    final, member = snapshot_to_store(conn, store, now=now, tmp_dir=tmp_dir, snapshot_timeout=snapshot_timeout,
                                      tool=tool, compression=compression, member=member)
    return {'changed': True, 'snapshot': final.to_dict(), 'member': member.to_dict()}


def snapshot_to_store(conn: EtcdConnection, store: SnapshotStore, *, now: Union[float, int, datetime.datetime],
                      tmp_dir: Optional[str] = None, snapshot_timeout: float = 900, tool: Optional[str] = None,
                      compression: Optional[str] = None, member: Optional[MemberChoice] = None) -> Tuple[Snapshot, MemberChoice]:
    """Stream a snapshot from the best member, verify it, publish it; (snapshot, member)."""
    if member is None:
        with Gateway(conn) as gateway:
            member = pick_member(conn, gateway)
    tmp_path = temp_path_for(store, tmp_dir)
    try:
        hasher = stream_snapshot(conn, member.endpoint, tmp_path, snapshot_timeout)
        verified = verify_snapshot_file(tmp_path, tool=tool, digests=hasher.result())
        return publish_full(store, tmp_path, verified, member, now, compression), member
    finally:
        remove_quietly(tmp_path)


def recheck(store: SnapshotStore, snapshot: Snapshot, tmp_dir: Optional[str], tool: Optional[str]) -> Snapshot:
    """Read a valid snapshot back and verify it against its metadata (and its content); corrupt on mismatch."""
    work = tempfile.mkdtemp(prefix='steward-verify-', dir=tmp_dir)
    try:
        if snapshot.is_full:
            fetch_full(store, snapshot, work, tool)
        else:
            fetch_delta(store, snapshot, work)
    except SnapshotInvalid as exc:
        return dataclasses.replace(snapshot, status=STATUS_CORRUPT, problem=str(exc))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return snapshot


def list_snapshots(store: SnapshotStore, *, verify_sha256: bool = False, tmp_dir: Optional[str] = None,
                   tool: Optional[str] = None) -> Dict[str, Any]:
    """Every snapshot in restore order, the latest valid full one, and counts per status. Read-only."""
    snapshots = store.list()
    if verify_sha256:
        snapshots = [recheck(store, s, tmp_dir, tool) if s.valid else s for s in snapshots]
    counts = {status: 0 for status in STATUSES}
    for s in snapshots:
        counts[s.status] = counts.get(s.status, 0) + 1
    fulls = [s for s in snapshots if s.valid and s.is_full]
    return {
        'snapshots': [s.to_dict() for s in snapshots],
        'latest_valid': fulls[-1].to_dict() if fulls else None,
        'counts': counts,
    }
