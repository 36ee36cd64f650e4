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
import shutil
import tempfile
import threading
from typing import Any, Dict, List, Optional, Tuple, Union

from ansible_collections.steward.cluster.plugins.module_utils.common.times import format_rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store import naming
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.compression import compress_file, suffix_for
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import (
    EtcdConnection,
    Gateway,
    member_id_hex,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import (
    EtcdError,
    EtcdUnavailable,
    SnapshotInvalid,
    StoreError,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.fetch import fetch_delta, fetch_full
from ansible_collections.steward.cluster.plugins.module_utils.etcd.wire.calls import hash_kv
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.local_store import (
    LocalStore,
    remove_quietly,
    temp_name,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.snapshot_stream import stream_snapshot
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.store import (
    METADATA_FORMAT,
    STATUS_CORRUPT,
    STATUS_INCOMPLETE,
    STATUS_ORPHAN,
    STATUS_PARTIAL,
    STATUS_UNRECORDED,
    STATUS_VALID,
    Snapshot,
    SnapshotStore,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.verify import (
    hash_file,
    verify_snapshot_file,
)

STATUSES = (STATUS_VALID, STATUS_UNRECORDED, STATUS_INCOMPLETE, STATUS_CORRUPT, STATUS_ORPHAN, STATUS_PARTIAL)
VERIFY_CONTENT = 'content'
VERIFY_LISTING = 'listing'
VERIFY_MODES = (VERIFY_CONTENT, VERIFY_LISTING)
STATUS_PLANNED = 'planned'
HASH_KV_WAIT = 120
HASH_KV_AT = 0.8  # share of the database streamed when HashKV is asked (HashKVRecorder)


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
    db_size: int = 0

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


def unix(now: Union[float, int, datetime.datetime]) -> int:
    if isinstance(now, datetime.datetime):
        return int(now.timestamp())
    return int(now)


def _choice(gateway: Gateway, endpoint: str, status: Dict[str, Any], names: Dict[str, str]) -> MemberChoice:
    header = status.get('header') or {}
    member_id = member_id_hex(header.get('member_id') or header.get('memberId') or 0)
    if not names:
        try:
            names.update({member_id_hex(m.get('ID', 0)): m.get('name', '') for m in gateway.member_list(endpoint)})
        except EtcdError:
            pass
    return MemberChoice(
        endpoint=endpoint, member_id=member_id, name=names.get(member_id, ''),
        cluster_id=member_id_hex(header.get('cluster_id') or header.get('clusterId') or 0),
        version=status.get('version', ''), revision=int(header.get('revision') or 0),
        applied_index=int(status.get('raftAppliedIndex') or status.get('raftIndex') or 0),
        is_leader=member_id_hex(status.get('leader') or 0) == member_id,
        db_size=int(status.get('dbSize') or 0))


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
        candidates.append(_choice(gateway, endpoint, status, names))
    if not candidates:
        raise EtcdUnavailable('no etcd member can serve a snapshot (none answered status and a quorum read): %s'
                              % '; '.join(problems))
    return max(candidates, key=lambda c: (c.applied_index, not c.is_leader))


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
        'verified': {'at': format_rfc3339(unix(now)), 'checks': verified['checks']},
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
                       check_mode: bool = False, compression: Optional[str] = None,
                       full_structure: bool = False) -> Dict[str, Any]:
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
                                      tool=tool, compression=compression, member=member,
                                      full_structure=full_structure)
    return {'changed': True, 'snapshot': final.to_dict(), 'member': member.to_dict()}


def take_member_snapshot(conn: EtcdConnection, store: SnapshotStore, endpoint: str, *,
                         now: Union[float, int, datetime.datetime], tmp_dir: Optional[str] = None,
                         snapshot_timeout: float = 900) -> Tuple[Snapshot, MemberChoice]:
    """A verified full snapshot of ONE member's data as it answers by itself (status only, no quorum read), into
    the store: how a quorum-loss recovery keeps a surviving member's data, when its cluster has no quorum to answer
    pick_member's linearizable read. Never for scheduled backups (a minority member's data may be stale): the
    caller chose this member on evidence (druid/plan.py: the survivor with the newest revision)."""
    with Gateway(conn.with_endpoints([endpoint])) as gateway:
        status = gateway.status(endpoint)
        if status.get('isLearner'):
            raise EtcdUnavailable('%s is a learner: its data is not a voting member\'s' % endpoint)
        member = _choice(gateway, endpoint, status, {})
    return snapshot_to_store(conn.with_endpoints([endpoint]), store, now=now, tmp_dir=tmp_dir,
                             snapshot_timeout=snapshot_timeout, member=member)


def snapshot_to_store(conn: EtcdConnection, store: SnapshotStore, *, now: Union[float, int, datetime.datetime],
                      tmp_dir: Optional[str] = None, snapshot_timeout: float = 900, tool: Optional[str] = None,
                      compression: Optional[str] = None, member: Optional[MemberChoice] = None,
                      full_structure: bool = False) -> Tuple[Snapshot, MemberChoice]:
    """Stream a snapshot from the best member, verify it, publish it; (snapshot, member).

    `full_structure` adds a full `snapshot status` read to the trailer and bolt checks (verify.py)."""
    if member is None:
        with Gateway(conn) as gateway:
            member = pick_member(conn, gateway)
    tmp_path = temp_path_for(store, tmp_dir)
    recorder = HashKVRecorder(conn, member)
    try:
        hasher = stream_snapshot(conn, member.endpoint, tmp_path, snapshot_timeout,
                                 tail=(int(member.db_size * HASH_KV_AT), recorder.start))
        verified = verify_snapshot_file(tmp_path, tool=tool, digests=hasher.result(), full_structure=full_structure)
        extra = recorder.result(verified['revision'])
        return publish_full(store, tmp_path, verified, member, now, compression, extra), member
    finally:
        recorder.join()
        remove_quietly(tmp_path)


class HashKVRecorder:
    """etcd's HashKV of the member at the revision it reported just before the stream began, asked
    when the stream is nearly received (HASH_KV_AT of the member's database size), so it overlaps the
    stream's tail and the final fsync. It costs etcd a pass over its keys: asked at the start it slows
    the whole stream down on a small machine, asked after it adds its time to the snapshot's.

    The snapshot holds that revision (a snapshot is never older than the state before it was asked
    for), so restore verification can restore it and compare HashKV at the same revision: proof that
    the restored data is the cluster's, key for key. Recorded as metadata `hash_kv`."""

    def __init__(self, conn: EtcdConnection, member: MemberChoice):
        self.revision = member.revision
        self.answer: Dict[str, Any] = {}
        self.thread = threading.Thread(target=self._ask, args=(conn, member.endpoint), name='snapshot-hashkv',
                                       daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _ask(self, conn: EtcdConnection, endpoint: str) -> None:
        try:
            self.answer['hash_kv'] = hash_kv(conn, endpoint, self.revision, timeout=max(conn.timeout, 60.0))
        except EtcdError as exc:
            self.answer['hash_kv_problem'] = str(exc)

    def join(self, timeout: Optional[float] = None) -> None:
        if self.thread.ident is not None:
            self.thread.join(timeout)

    def result(self, snapshot_revision: int) -> Dict[str, Any]:
        """{hash_kv: {...}} or {hash_kv: None, hash_kv_problem: why}."""
        self.join(HASH_KV_WAIT)
        if self.thread.ident is None or self.thread.is_alive():
            return {'hash_kv': None, 'hash_kv_problem': 'HashKV did not answer within %ds' % HASH_KV_WAIT}
        if self.revision <= 0 or self.revision > snapshot_revision:
            return {'hash_kv': None, 'hash_kv_problem': 'revision %d is not in the snapshot (at %d)' % (
                self.revision, snapshot_revision)}
        return dict({'hash_kv': None}, **self.answer)


def recheck(store: SnapshotStore, snapshot: Snapshot, tmp_dir: Optional[str], tool: Optional[str]) -> Snapshot:
    """Read a usable snapshot back and verify its content (against its metadata when it has some);
    corrupt, naming the check that failed, on mismatch."""
    work = tempfile.mkdtemp(prefix='steward-verify-', dir=tmp_dir)
    try:
        if snapshot.is_full:
            fetch_full(store, snapshot, work, tool)
        else:
            fetch_delta(store, snapshot, work)
    except SnapshotInvalid as exc:
        return dataclasses.replace(snapshot, status=STATUS_CORRUPT, problem=str(exc), failed_check=exc.check,
                                   checked=VERIFY_CONTENT)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return dataclasses.replace(snapshot, checked=VERIFY_CONTENT)


def list_snapshots(store: SnapshotStore, *, verify: str = VERIFY_CONTENT, tmp_dir: Optional[str] = None,
                   tool: Optional[str] = None) -> Dict[str, Any]:
    """Every snapshot in restore order, the latest usable full one, and counts per status. Read-only.

    `verify`: 'content' reads every usable snapshot back (what "is this backup usable" needs);
    'listing' is the cheap mode: names, sizes and metadata only, a file corrupted in place still lists
    as valid."""
    if verify not in VERIFY_MODES:
        raise EtcdError('verify must be one of %s, got %r' % (', '.join(VERIFY_MODES), verify))
    snapshots = store.list()
    if verify == VERIFY_CONTENT:
        snapshots = [recheck(store, s, tmp_dir, tool) if s.valid else s for s in snapshots]
    counts = {status: 0 for status in STATUSES}
    for s in snapshots:
        counts[s.status] = counts.get(s.status, 0) + 1
    fulls = [s for s in snapshots if s.valid and s.is_full]
    return {
        'snapshots': [s.to_dict() for s in snapshots],
        'latest_valid': fulls[-1].to_dict() if fulls else None,
        'counts': counts,
        'verify': verify,
    }
