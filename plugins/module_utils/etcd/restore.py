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
Only the full snapshot is restored; deltas after it are not applied (etcdutl cannot apply them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from typing import Any, Dict, List, Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.etcd.binaries import find_snapshot_tool
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import (
    EtcdError,
    RestoreRefused,
    SnapshotNotFound,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd import local_member
from ansible_collections.steward.cluster.plugins.module_utils.etcd.local_store import fsync_path
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store import Snapshot, SnapshotStore
from ansible_collections.steward.cluster.plugins.module_utils.etcd.verify import hash_file, verify_snapshot_file

MARKER_SUFFIX = '.restore.json'
ASIDE_REASON = 'pre-restore'
RESTORE_TIMEOUT = 3600

STATE_ABSENT = 'absent'
STATE_EMPTY = 'empty'
STATE_PRESENT = 'present'


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
    """`n1=http://a:2380,n2=http://b:2380` -> {name: [peer urls]}; RestoreRefused says what is wrong."""
    members: Dict[str, List[str]] = {}
    for item in (initial_cluster or '').split(','):
        item = item.strip()
        if not item:
            continue
        member, sep, url = item.partition('=')
        if not sep or not member.strip() or '://' not in url:
            raise RestoreRefused('initial_cluster entry %r is not name=scheme://host:port' % item)
        members.setdefault(member.strip(), []).append(url.strip())
    if not members:
        raise RestoreRefused('initial_cluster is empty; expected name=http://host:2380,...')
    return members


def check_member_args(name: str, initial_cluster: str, initial_advertise_peer_urls: Sequence[str]) -> None:
    members = parse_initial_cluster(initial_cluster)
    if not name:
        raise RestoreRefused('the member name is empty')
    if name not in members:
        raise RestoreRefused('member %r is not in initial_cluster (%s)' % (name, ', '.join(sorted(members))))
    urls = [u.strip() for u in initial_advertise_peer_urls or [] if u and u.strip()]
    if not urls:
        raise RestoreRefused('initial_advertise_peer_urls is empty')
    if sorted(urls) != sorted(members[name]):
        raise RestoreRefused('initial_advertise_peer_urls %s differ from the peer URLs of %r in initial_cluster (%s)' % (
            ','.join(urls), name, ','.join(members[name])))


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
    """What is at the data dir now: absent / empty / present, and which snapshot it was restored from."""
    if not os.path.lexists(data_dir):
        state = STATE_ABSENT
    elif not os.path.isdir(data_dir) or os.path.islink(data_dir):
        raise RestoreRefused('data_dir %s exists and is not a directory: refusing to touch it' % data_dir)
    else:
        state = STATE_PRESENT if os.listdir(data_dir) else STATE_EMPTY
    marker = read_marker(data_dir) if state == STATE_PRESENT else None
    return {'path': data_dir, 'state': state,
            'restored_from': marker.get('snapshot') if marker else None,
            'restored_sha256': marker.get('sha256') if marker else None}


def aside_path(data_dir: str, now: float) -> str:
    """`<data_dir>.pre-restore-<unix>`, with a counter when that already exists."""
    return local_member.aside_path(data_dir, now, ASIDE_REASON)


def _write_marker(data_dir: str, content: Dict[str, Any]) -> None:
    path = marker_path(data_dir)
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        json.dump(content, f, indent=2, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)
    fsync_path(os.path.dirname(path))


# --- the restore itself ----------------------------------------------------------------------------
def run_restore_tool(snapshot_path: str, target_dir: str, *, name: str, initial_cluster: str,
                     initial_cluster_token: str, initial_advertise_peer_urls: Sequence[str],
                     tool: Optional[str] = None) -> str:
    """`etcdutl|etcdctl snapshot restore` into `target_dir` (which must not exist). Returns the tool kind."""
    binary, kind = find_snapshot_tool(tool)
    env = dict(os.environ)
    if kind == 'etcdctl':
        env['ETCDCTL_API'] = '3'
    cmd = [binary, 'snapshot', 'restore', snapshot_path, '--name', name, '--data-dir', target_dir,
           '--initial-cluster', initial_cluster, '--initial-cluster-token', initial_cluster_token,
           '--initial-advertise-peer-urls', ','.join(initial_advertise_peer_urls)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=RESTORE_TIMEOUT, env=env)
    except subprocess.TimeoutExpired as exc:
        raise EtcdError('%s snapshot restore did not finish in %ss' % (kind, RESTORE_TIMEOUT)) from exc
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        raise EtcdError('%s snapshot restore of %s failed (rc=%d): %s' % (
            kind, snapshot_path, proc.returncode, lines[-1] if lines else 'no output'))
    return kind


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


def _restore(fetch, source: Dict[str, Any], *, expected_sha256: Optional[str], expected_size: Optional[int],
             name: str, data_dir: str, initial_cluster: str, initial_cluster_token: str,
             initial_advertise_peer_urls: Sequence[str], force: bool, tool: Optional[str], tmp_dir: Optional[str],
             now: float, check_mode: bool) -> Dict[str, Any]:
    """Shared by store and file restores: `fetch(dir) -> local path` supplies the snapshot file."""
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
    if before['state'] == STATE_PRESENT:
        same = (before['restored_from'] == source['name'] and expected_sha256 is not None
                and before['restored_sha256'] == expected_sha256)
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
        snapshot_file = fetch(work)
        verification = verify_snapshot_file(snapshot_file, expected_sha256=expected_sha256, expected_size=expected_size,
                                            tool=tool)
        result['verification'] = verification
        after = {'path': data_dir, 'state': STATE_PRESENT, 'restored_from': source['name'],
                 'restored_sha256': verification['sha256']}
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
        _write_marker(data_dir, {'snapshot': source['name'], 'sha256': verification['sha256'],
                                 'revision': verification['revision'], 'source': source.get('source'),
                                 'member': name, 'restored_at': int(now), 'moved_aside': aside})
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if staging:
            shutil.rmtree(staging, ignore_errors=True)


def restore_member(store: SnapshotStore, snapshot: Snapshot, *, name: str, data_dir: str, initial_cluster: str,
                   initial_cluster_token: str, initial_advertise_peer_urls: Sequence[str], force: bool = False,
                   tool: Optional[str] = None, tmp_dir: Optional[str] = None, now: float,
                   check_mode: bool = False) -> Dict[str, Any]:
    """Restore one member's data dir from a store snapshot. Returns {changed, snapshot, data_dir, moved_aside, diff...}."""
    if not snapshot.valid or not snapshot.is_full:
        raise RestoreRefused('snapshot %s is %s%s: only valid full snapshots are restored' % (
            _label(snapshot), snapshot.status, '' if snapshot.is_full else ' and not a full snapshot'))
    meta = snapshot.metadata or {}
    if not meta.get('sha256'):
        raise RestoreRefused('snapshot %s has no sha256 in its metadata: cannot verify it, refusing to restore'
                             % _label(snapshot))

    def fetch(work: str) -> str:
        path = os.path.join(work, _label(snapshot))
        store.fetch(snapshot, path)
        return path

    result = _restore(fetch, {'name': _label(snapshot), 'source': '%s/%s' % (store.url.rstrip('/'), snapshot.key)},
                      expected_sha256=meta['sha256'], expected_size=meta.get('size', snapshot.size), name=name,
                      data_dir=data_dir, initial_cluster=initial_cluster, initial_cluster_token=initial_cluster_token,
                      initial_advertise_peer_urls=initial_advertise_peer_urls, force=force, tool=tool,
                      tmp_dir=tmp_dir, now=now, check_mode=check_mode)
    result['snapshot'] = snapshot.to_dict()
    return result


def restore_file(path: str, *, name: str, data_dir: str, initial_cluster: str, initial_cluster_token: str,
                 initial_advertise_peer_urls: Sequence[str], expected_sha256: Optional[str] = None,
                 force: bool = False, tool: Optional[str] = None, tmp_dir: Optional[str] = None, now: float,
                 check_mode: bool = False) -> Dict[str, Any]:
    """Restore from a local snapshot file that is not in a store (verified by trailer and status, sha256 if given)."""
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise SnapshotNotFound('snapshot file %s does not exist' % path)
    sha256 = expected_sha256 or hash_file(path).sha256

    def fetch(work: str) -> str:
        return path

    result = _restore(fetch, {'name': os.path.basename(path), 'source': path}, expected_sha256=sha256,
                      expected_size=None, name=name, data_dir=data_dir, initial_cluster=initial_cluster,
                      initial_cluster_token=initial_cluster_token,
                      initial_advertise_peer_urls=initial_advertise_peer_urls, force=force, tool=tool,
                      tmp_dir=tmp_dir, now=now, check_mode=check_mode)
    result['snapshot'] = {'name': os.path.basename(path), 'key': path, 'sha256': sha256,
                          'size': os.path.getsize(path), 'valid': True, 'status': 'file'}
    return result
