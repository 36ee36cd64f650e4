# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Restore an etcd member's data dir from a verified full snapshot.

Order of work, each step chosen so that a failure loses nothing and leaves nothing half-done:
1. refuse early (bad input, an existing non-empty data dir without `force`) before any download;
2. fetch the snapshot to a temp file and verify it against the sha256/size in its metadata, plus
   etcd's own trailer and `snapshot status` — *before* anything near the data dir is touched;
3. `etcdutl snapshot restore` (etcd 3.5+) or `etcdctl snapshot restore` (3.4 has no etcdutl) into a
   temp sibling of the data dir, so a failed restore leaves no partial data dir behind;
4. only then move an existing data dir aside to `<data_dir>.pre-restore-<unix>` (never deleted)
   and rename the new one into place (same filesystem: atomic);
5. write a marker `<data_dir>.restore.json` beside the data dir (etcd owns what is inside it), so
   running again with the same snapshot changes nothing.
From a store, the delta snapshots after the full one are applied too (by default): etcdutl cannot
apply them, so step 2 replays them into a scratch etcd and step 3 restores the rebuilt snapshot
(see replay.py); the restore then loses at most the writes of the last delta period. A gap in the
deltas refuses the restore unless `stop_at_gap` accepts losing what lies beyond it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import (
    EtcdError,
    RestoreInputError,
    RestoreRefused,
    SnapshotInvalid,
    SnapshotNotFound,
    SnapshotUnrestorable,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member import local_member
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.delta import Chain, plan_chain
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.fetch import fetch_delta, fetch_full
from ansible_collections.steward.cluster.plugins.module_utils.common.files import fsync_path, write_atomic
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.replay import CHECK_REPLAY, replay
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.restore_tool import run_restore_tool
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.store import Snapshot, SnapshotStore
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.verify import (
    hash_file,
    verify_snapshot_file,
)

MARKER_SUFFIX = '.restore.json'
ASIDE_REASON = 'pre-restore'

STATE_EMPTY = local_member.DATA_EMPTY
STATE_PRESENT = local_member.DATA_PRESENT


# --- choosing a snapshot ---------------------------------------------------------------------------
def _label(snapshot: Snapshot) -> str:
    return str(snapshot.name) if snapshot.name else snapshot.key.rsplit('/', 1)[-1]


def _status_summary(snapshots: Sequence[Snapshot]) -> str:
    counts: Dict[str, int] = {}
    for s in snapshots:
        kind = s.name.kind if s.name else 'object'
        counts['%s %s' % (s.status, kind)] = counts.get('%s %s' % (s.status, kind), 0) + 1
    return ', '.join('%d %s' % (n, what) for what, n in sorted(counts.items()))


def select_snapshot(store: SnapshotStore, name: Optional[str] = None) -> Snapshot:
    """The named snapshot (which must be a valid full one) or the latest valid full snapshot."""
    snapshots = store.list()
    if name:
        wanted = name.rsplit('/', 1)[-1]
        matches = [s for s in snapshots if s.key == name or _label(s) == wanted]
        if not matches:
            raise SnapshotNotFound('snapshot %r is not in the store %s (it holds %s)' % (
                name, store.url, _status_summary(snapshots) or 'nothing'))
        snap = matches[-1]
        if not snap.valid:
            raise RestoreRefused('snapshot %s in %s is %s (%s): refusing to restore from it' % (
                _label(snap), store.url, snap.status, snap.problem or 'not valid'))
        if not snap.is_full:
            raise RestoreRefused('snapshot %s is a delta snapshot: a restore needs a full snapshot' % _label(snap))
        return snap
    if not snapshots:
        raise SnapshotNotFound('the store %s holds no snapshots: nothing to restore' % store.url)
    fulls = [s for s in snapshots if s.valid and s.is_full]
    if not fulls:
        raise RestoreRefused('the store %s holds no valid full snapshot (%s): refusing to restore' % (
            store.url, _status_summary(snapshots)))
    return fulls[-1]


# --- input checks ----------------------------------------------------------------------------------
def parse_initial_cluster(initial_cluster: str) -> Dict[str, List[str]]:
    """`n1=http://a:2380,n2=http://b:2380` -> {name: [peer urls]}; RestoreInputError says what is wrong."""
    members: Dict[str, List[str]] = {}
    for item in (initial_cluster or '').split(','):
        item = item.strip()
        if not item:
            continue
        member, sep, url = item.partition('=')
        if not sep or not member.strip() or '://' not in url:
            raise RestoreInputError('initial_cluster', 'format', 'entry %r is not name=scheme://host:port' % item,
                                    initial_cluster)
        members.setdefault(member.strip(), []).append(url.strip())
    if not members:
        raise RestoreInputError('initial_cluster', 'non-empty', 'is empty; expected name=http://host:2380,...',
                                initial_cluster)
    return members


def check_member_args(name: str, initial_cluster: str, initial_advertise_peer_urls: Sequence[str]) -> None:
    """The restored member's name, initial_cluster and peer URLs agree (checked before any store is read)."""
    members = parse_initial_cluster(initial_cluster)
    if not name:
        raise RestoreInputError('name', 'non-empty', 'the member name is empty', name)
    if name not in members:
        raise RestoreInputError('name', 'in-initial-cluster', 'member %r is not in initial_cluster (%s)' % (
            name, ', '.join(sorted(members))), name)
    urls = [u.strip() for u in initial_advertise_peer_urls or [] if u and u.strip()]
    if not urls:
        raise RestoreInputError('initial_advertise_peer_urls', 'non-empty', 'is empty', initial_advertise_peer_urls)
    if sorted(urls) != sorted(members[name]):
        raise RestoreInputError('initial_advertise_peer_urls', 'match', '%s differ from the peer URLs of %r in '
                                'initial_cluster (%s)' % (','.join(urls), name, ','.join(members[name])), urls)


# --- data dir state --------------------------------------------------------------------------------
def marker_path(data_dir: str) -> str:
    return data_dir + MARKER_SUFFIX


def read_marker(data_dir: str) -> Optional[Dict[str, Any]]:
    try:
        with open(marker_path(data_dir)) as f:
            data = json.load(f)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def data_dir_state(data_dir: str) -> Dict[str, Any]:
    """What is at the data dir now (local_member.data_dir_state: absent / empty / present), and which snapshot
    it was restored from."""
    state = local_member.data_dir_state(data_dir)['state']
    if state == local_member.DATA_NOT_A_DIRECTORY:
        raise RestoreRefused('data_dir %s exists and is not a directory: refusing to touch it' % data_dir)
    marker = read_marker(data_dir) if state == STATE_PRESENT else None
    return {'path': data_dir, 'state': state,
            'restored_from': marker.get('snapshot') if marker else None,
            'restored_sha256': marker.get('sha256') if marker else None}


def aside_path(data_dir: str, now: float) -> str:
    """`<data_dir>.pre-restore-<unix>`, with a counter when that already exists."""
    return local_member.aside_path(data_dir, now, ASIDE_REASON)


def _write_marker(data_dir: str, content: Dict[str, Any]) -> None:
    write_atomic(marker_path(data_dir), json.dumps(content, indent=2, sort_keys=True), 0o644)


# --- the restore itself ----------------------------------------------------------------------------
def _place(staged: str, data_dir: str, state: str, aside: Optional[str]) -> None:
    """Move the old data dir aside (or drop it when empty) and the staged one into place."""
    if state == STATE_PRESENT:
        os.rename(data_dir, aside)
        old_marker = marker_path(data_dir)
        if os.path.exists(old_marker):
            os.rename(old_marker, marker_path(aside))
    elif state == STATE_EMPTY:
        os.rmdir(data_dir)
    try:
        os.rename(staged, data_dir)
    except OSError:
        if state == STATE_PRESENT:
            os.rename(aside, data_dir)  # put the old data back; never leave the member without its data
        raise
    fsync_path(os.path.dirname(data_dir))


@dataclasses.dataclass
class Source:
    """What a restore restores from: its name (idempotence key), where, and how it is verified."""

    name: str
    where: str
    sha256: Optional[str]                              # None: the file is hashed when prepared
    prepare: Callable[[str], Tuple[str, Dict[str, Any]]]  # work dir -> (snapshot file, verification)
    details: Dict[str, Any] = dataclasses.field(default_factory=dict)


def _restore(source: Source, *, name: str, data_dir: str, initial_cluster: str, initial_cluster_token: str,
             initial_advertise_peer_urls: Sequence[str], force: bool, tool: Optional[str], tmp_dir: Optional[str],
             now: float, check_mode: bool) -> Dict[str, Any]:
    """Shared by every restore: refuse early, prepare (fetch, verify, replay) in a temp dir, then place."""
    if not data_dir or not os.path.isabs(data_dir):
        raise RestoreRefused('data_dir %r must be an absolute path' % data_dir)
    data_dir = os.path.normpath(data_dir)
    if data_dir == os.path.dirname(data_dir):
        raise RestoreRefused('data_dir %s cannot be a filesystem root' % data_dir)
    urls = [u.strip() for u in initial_advertise_peer_urls]
    check_member_args(name, initial_cluster, urls)
    before = data_dir_state(data_dir)
    result: Dict[str, Any] = {'changed': False, 'data_dir': data_dir, 'moved_aside': None, 'verification': None,
                              'marker': marker_path(data_dir), 'diff': {'before': before, 'after': before}}
    result.update(source.details)
    if before['state'] == STATE_PRESENT:
        same = (before['restored_from'] == source.name and source.sha256 is not None
                and before['restored_sha256'] == source.sha256)
        if same and not force:
            return result
        if not force:
            raise RestoreRefused('data_dir %s exists and is not empty%s: refusing to overwrite it; set force to move it '
                                 'aside to %s<unix time> and restore' % (
                                     data_dir, ' (restored from %s)' % before['restored_from']
                                     if before['restored_from'] else '', '%s.%s-' % (data_dir, ASIDE_REASON)))
    aside = aside_path(data_dir, now) if before['state'] == STATE_PRESENT else None
    parent = os.path.dirname(data_dir)

    work = tempfile.mkdtemp(prefix='steward-restore-', dir=tmp_dir)
    staging = None
    try:
        snapshot_file, verification = source.prepare(work)
        result.update(source.details)  # a restore that stopped at a failed delta says so
        result['verification'] = verification
        sha256 = source.sha256 or verification['sha256']
        after = {'path': data_dir, 'state': STATE_PRESENT, 'restored_from': source.name, 'restored_sha256': sha256}
        result.update(changed=True, moved_aside=aside, diff={'before': before, 'after': after})
        if check_mode:
            return result
        os.makedirs(parent, exist_ok=True)
        staging = tempfile.mkdtemp(prefix='.%s.restoring-' % os.path.basename(data_dir), dir=parent)
        staged = os.path.join(staging, 'data')
        result['tool'] = run_restore_tool(snapshot_file, staged, name=name, initial_cluster=initial_cluster,
                                          initial_cluster_token=initial_cluster_token,
                                          initial_advertise_peer_urls=urls, tool=tool)
        try:
            _place(staged, data_dir, before['state'], aside)
        except OSError as exc:
            raise EtcdError('cannot move the restored data into %s: %s' % (data_dir, exc)) from exc
        marker = {'snapshot': source.name, 'sha256': sha256, 'revision': verification['revision'],
                  'source': source.where, 'member': name, 'restored_at': int(now), 'moved_aside': aside}
        marker.update(source.details)
        _write_marker(data_dir, marker)
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if staging:
            shutil.rmtree(staging, ignore_errors=True)


def restore_plan(store: SnapshotStore, snapshot: Snapshot, apply_deltas: bool = True,
                 stop_at_gap: bool = False, last_delta: Optional[str] = None) -> Chain:
    """The full snapshot and the deltas a restore applies; RestoreRefused on a gap unless `stop_at_gap`.

    `last_delta` pins the chain's end, so several members restored one after another get the same
    data even while new deltas keep arriving."""
    if not snapshot.valid or not snapshot.is_full:
        raise RestoreRefused('snapshot %s is %s%s: only valid full snapshots are restored' % (
            _label(snapshot), snapshot.status, '' if snapshot.is_full else ' and not a full snapshot'))
    if snapshot.metadata is not None and not snapshot.recorded:
        raise RestoreRefused('snapshot %s has no sha256 in its metadata: cannot verify it, refusing to restore'
                             % _label(snapshot))
    if not apply_deltas:
        return Chain(snapshot, [], snapshot.name.end_revision)
    chain = plan_chain(store.list(), base=snapshot)
    if chain.gap and not stop_at_gap:
        raise SnapshotUnrestorable(
            'cannot restore %s with its deltas: %s; restoring would lose the writes after revision %d. Set stop_at_gap '
            'to restore up to revision %d anyway, or apply_deltas=false for the full snapshot only' % (
                _label(snapshot), chain.gap, chain.tip, chain.tip))
    if last_delta:
        wanted = last_delta.rsplit('/', 1)[-1]
        names = [_label(d) for d in chain.deltas]
        if wanted not in names:
            raise RestoreRefused('last_delta %s does not continue %s (its deltas: %s)' % (
                wanted, _label(snapshot), ', '.join(names) or 'none'))
        kept = chain.deltas[:names.index(wanted) + 1]
        chain = Chain(snapshot, kept, kept[-1].name.end_revision)
    return chain


def restore_member(store: SnapshotStore, snapshot: Snapshot, *, name: str, data_dir: str, initial_cluster: str,
                   initial_cluster_token: str, initial_advertise_peer_urls: Sequence[str], force: bool = False,
                   tool: Optional[str] = None, tmp_dir: Optional[str] = None, now: float,
                   check_mode: bool = False, apply_deltas: bool = True, stop_at_gap: bool = False,
                   last_delta: Optional[str] = None, etcd_binary: Optional[str] = None) -> Dict[str, Any]:
    """Restore one member's data dir from a full snapshot of a store and (by default) the delta
    snapshots after it. Returns {changed, snapshot, deltas, revision, data_dir, moved_aside, diff...}.

    A delta that fails verification ends the chain like a gap: refused, or with `stop_at_gap` the
    restore stops before it and names it in `skipped_deltas`."""
    chain = restore_plan(store, snapshot, apply_deltas, stop_at_gap, last_delta)
    details: Dict[str, Any] = {'deltas': [_label(d) for d in chain.deltas], 'revision': chain.tip,
                               'gap': chain.gap or None, 'skipped_deltas': []}
    label, key = _chain_key(snapshot, chain.deltas)

    def prepare(work: str) -> Tuple[str, Dict[str, Any]]:
        base_path, verification = fetch_full(store, snapshot, work, tool)
        if not chain.deltas:
            return base_path, verification
        used: List[Snapshot] = []

        def batches():
            for delta in chain.deltas:
                try:
                    events = fetch_delta(store, delta, work)
                except SnapshotInvalid as exc:
                    if not stop_at_gap:
                        raise
                    details['skipped_deltas'] = [skipped_entry(delta, exc)] + [
                        {'name': _label(d), 'status': 'not-applied', 'failed_check': None,
                         'reason': 'after %s, which failed verification' % _label(delta)}
                        for d in chain.deltas[chain.deltas.index(delta) + 1:]]
                    details['gap'] = 'delta snapshot %s failed verification (%s): restored up to the one before' % (
                        _label(delta), exc.check or 'content')
                    return
                used.append(delta)
                yield events

        replayed = replay(base_path, snapshot.name.end_revision, batches(), os.path.join(work, 'replayed.db'),
                          work_dir=work, etcd_binary=etcd_binary, tool=tool)
        if len(used) < len(chain.deltas):
            source.name, source.sha256 = _chain_key(snapshot, used)
            details.update(deltas=[_label(d) for d in used], revision=replayed.revision)
        return replayed.path, dict(replayed.verification, base=verification, replayed_events=replayed.events)

    source = Source(label, '%s/%s' % (store.url.rstrip('/'), snapshot.key), key, prepare, details)
    result = _restore(source, name=name, data_dir=data_dir, initial_cluster=initial_cluster,
                      initial_cluster_token=initial_cluster_token,
                      initial_advertise_peer_urls=initial_advertise_peer_urls, force=force, tool=tool,
                      tmp_dir=tmp_dir, now=now, check_mode=check_mode)
    result['snapshot'] = snapshot.to_dict()
    return result


def _chain_key(snapshot: Snapshot, deltas: Sequence[Snapshot]) -> Tuple[str, str]:
    """(label, idempotence key) of a full snapshot and the deltas applied: recorded hashes, or for
    unrecorded (etcd-backup-restore) snapshots their names and sizes."""
    last = deltas[-1] if deltas else None
    label = _label(snapshot) + (' + %d deltas to %s' % (len(deltas), _label(last)) if last else '')
    key = (snapshot.metadata or {}).get('sha256') or 'unrecorded:%s:%d' % (_label(snapshot), snapshot.size)
    if last:
        key += ':' + ((last.metadata or {}).get('sha256') or 'unrecorded:%s:%d' % (_label(last), last.size))
    return label, key


def restore_file(path: str, *, name: str, data_dir: str, initial_cluster: str, initial_cluster_token: str,
                 initial_advertise_peer_urls: Sequence[str], expected_sha256: Optional[str] = None,
                 force: bool = False, tool: Optional[str] = None, tmp_dir: Optional[str] = None, now: float,
                 check_mode: bool = False) -> Dict[str, Any]:
    """Restore from a local snapshot file that is not in a store (verified by trailer and status, sha256 if given)."""
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise SnapshotNotFound('snapshot file %s does not exist' % path)
    sha256 = expected_sha256 or hash_file(path).sha256

    def prepare(work: str) -> Tuple[str, Dict[str, Any]]:
        return path, verify_snapshot_file(path, expected_sha256=sha256, tool=tool)

    source = Source(os.path.basename(path), path, sha256, prepare)
    result = _restore(source, name=name, data_dir=data_dir, initial_cluster=initial_cluster,
                      initial_cluster_token=initial_cluster_token,
                      initial_advertise_peer_urls=initial_advertise_peer_urls, force=force, tool=tool,
                      tmp_dir=tmp_dir, now=now, check_mode=check_mode)
    result['snapshot'] = {'name': os.path.basename(path), 'key': path, 'sha256': sha256,
                          'size': os.path.getsize(path), 'valid': True, 'status': 'file'}
    return result


# --- fallback on total loss ------------------------------------------------------------------------
def skipped_entry(snapshot: Snapshot, exc: EtcdError) -> Dict[str, Any]:
    """Why a snapshot was passed over: corrupt (a content check failed, named) or unrestorable (why)."""
    corrupt = isinstance(exc, SnapshotInvalid) and exc.check not in ('', CHECK_REPLAY)
    return {'name': _label(snapshot), 'status': 'corrupt' if corrupt else 'unrestorable',
            'failed_check': getattr(exc, 'check', '') or None, 'reason': str(exc)}


def restore_with_fallback(store: SnapshotStore, *, snapshot: Optional[str] = None, fallback: bool = True,
                          **member: Any) -> Dict[str, Any]:
    """Restore the named snapshot, or the newest usable full snapshot with its deltas; when that one
    (or a delta of its chain) fails verification or cannot be restored, the next older one, and so on.
    Every snapshot passed over is named in `skipped` with the reason. Nothing is changed unless one
    succeeds (verification and replay happen before the data dir is touched)."""
    if snapshot or not fallback:
        result = restore_member(store, select_snapshot(store, snapshot), **member)
        return dict(result, skipped=result.get('skipped_deltas', []))
    newest_first = [s for s in reversed(store.list()) if s.valid and s.is_full]
    if not newest_first:
        select_snapshot(store)  # raises the right error with the store's counts
    skipped: List[Dict[str, Any]] = []
    for candidate in newest_first:
        try:
            result = restore_member(store, candidate, **member)
        except (SnapshotInvalid, SnapshotUnrestorable) as exc:
            skipped.append(skipped_entry(candidate, exc))
            continue
        result['skipped'] = skipped + result.get('skipped_deltas', [])
        return result
    raise RestoreRefused('no snapshot in %s can be restored; nothing was changed. %s' % (
        store.url, '; '.join('%s is %s: %s' % (s['name'], s['status'], s['reason']) for s in skipped)))
