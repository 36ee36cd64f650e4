# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one etcd host can say about its own member: data on disk, process, and what the member reports.

Recovery decisions need facts that no remote client can give: whether a stopped member still has
its data, and the raft index of a leaderless survivor. Everything here is read-only.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common import validate

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import (
    EtcdConnection,
    Gateway,
    member_id_hex,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError, RestoreRefused
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.process import ProcessSpec, running_pid


DATA_ABSENT = 'absent'
DATA_EMPTY = 'empty'
DATA_PRESENT = 'present'
DATA_NOT_A_DIRECTORY = 'not-a-directory'


def data_dir_state(data_dir: str) -> Dict[str, Any]:
    """What is at a member's data dir now: the one answer for facts, restores and resets.

    `state`: absent, empty, present (anything in it), or not-a-directory (a file or a symlink, never
    touched by a restore); `has_data`: etcd's WAL or backend db is there (an empty dir, or one with
    something else in it, is as good as none for recovery); `exists`: a directory (symlinks followed)."""
    if not os.path.lexists(data_dir):
        state = DATA_ABSENT
    elif not os.path.isdir(data_dir) or os.path.islink(data_dir):
        state = DATA_NOT_A_DIRECTORY
    else:
        state = DATA_PRESENT if os.listdir(data_dir) else DATA_EMPTY
    member = os.path.join(data_dir, 'member')
    wal_dir = os.path.join(member, 'wal')
    db = os.path.join(member, 'snap', 'db')
    wals = sorted(f for f in os.listdir(wal_dir) if f.endswith('.wal')) if os.path.isdir(wal_dir) else []
    return {
        'state': state,
        'exists': os.path.isdir(data_dir),
        'has_data': bool(wals) or os.path.isfile(db),
        'wal_files': len(wals),
        'db_size': os.path.getsize(db) if os.path.isfile(db) else 0,
    }


def pid_alive(pid_file: Optional[str]) -> Optional[bool]:
    """True/False from the pid file; None when there is no pid file to ask (e.g. systemd hosts). True only when
    the pid is an etcd that started when the pid file says (process.running_pid's rule): facts must not call a
    recycled pid, a `sleep` for instance, the running member."""
    if not pid_file:
        return None
    return running_pid(ProcessSpec(pid_file=pid_file)) is not None


def inspect_member(conn: EtcdConnection, *, name: str, data_dir: str, client_url: str, peer_url: str,
                   pid_file: Optional[str] = None, probe_timeout: float = 2.0) -> Dict[str, Any]:
    """Facts about the member on this host, in the shape `recovery.plan_recovery` reads."""
    facts: Dict[str, Any] = {
        'name': name, 'client_url': client_url, 'peer_url': peer_url, 'data_dir': data_dir,
        'host_reachable': True, 'process_running': pid_alive(pid_file),
        'responding': False, 'healthy': False, 'member_id': None, 'cluster_id': None,
        'raft_index': None, 'raft_term': None, 'leader': None, 'is_learner': False,
        'members': [], 'errors': [],
    }
    facts.update({'data_' + k: v for k, v in data_dir_state(data_dir).items()})
    with Gateway(conn.with_endpoints([client_url])) as gw:
        try:
            status = gw.status(client_url, timeout=probe_timeout)
        except EtcdError as exc:
            facts['errors'].append('status: %s' % exc)
            return facts
        header = status.get('header', {})
        facts.update({
            'responding': True,
            'member_id': member_id_hex(header.get('member_id', 0)),
            'cluster_id': member_id_hex(header.get('cluster_id', 0)),
            'raft_index': int(status.get('raftIndex', 0)),
            'raft_applied_index': int(status.get('raftAppliedIndex', status.get('raftIndex', 0))),
            'raft_term': int(status.get('raftTerm', 0)),
            'leader': member_id_hex(status.get('leader', 0)) if status.get('leader') else None,
            'is_learner': bool(status.get('isLearner', False)),
            'version': status.get('version'),
        })
        if facts['process_running'] is None:
            facts['process_running'] = True
        try:
            facts['members'] = [
                {'id': member_id_hex(m.get('ID', 0)), 'name': m.get('name', ''),
                 'peer_urls': m.get('peerURLs', []), 'is_learner': bool(m.get('isLearner', False))}
                for m in gw.member_list(client_url)
            ]
        except EtcdError as exc:
            facts['errors'].append('member list: %s' % exc)
        if facts['leader'] is None:
            # A member that knows no leader cannot serve a linearizable read: asking would only spend
            # probe_timeout (recovery's first step waits for its slowest host). The playbook gives a majority
            # that answers without a leader an election's time before it calls the quorum lost.
            facts['errors'].append('linearizable read: not tried, the member knows no leader')
            return facts
        try:
            gw.linearizable_read(client_url, timeout=probe_timeout)
            facts['healthy'] = True
        except EtcdError as exc:
            facts['errors'].append('linearizable read: %s' % exc)
    return facts


def aside_path(data_dir: str, now: float, reason: str) -> str:
    """`<data_dir>.<reason>-<unix>`, with a counter when that already exists: the one naming rule for kept data."""
    base = '%s.%s-%d' % (data_dir.rstrip('/'), reason, int(now))
    candidate, n = base, 0
    while os.path.lexists(candidate):
        n += 1
        candidate = '%s.%d' % (base, n)
    return candidate


def set_aside(data_dir: str, *, now: float, reason: str = 'lost', check_mode: bool = False) -> Optional[str]:
    """Move a data dir out of the way (never delete it); None when there is nothing to move. Only a real
    directory (absolute, not a symlink, not a system directory, never a regular file) is moved, and only beside
    itself: `reason` is one name (no `/`, `..` or newline), checked in check mode too."""
    data_dir = validate.safe_target_dir(data_dir, 'data_dir')
    validate.path_component(reason, 'reason')
    state = data_dir_state(data_dir)['state']
    if state == DATA_ABSENT:
        return None
    if state == DATA_EMPTY:
        if not check_mode:
            os.rmdir(data_dir)
        return None
    target = aside_path(data_dir, now, reason)
    if not check_mode:
        try:
            os.rename(data_dir, target)
        except OSError as exc:
            raise RestoreRefused('could not move %s aside to %s: %s' % (data_dir, target, exc)) from exc
    return target


def ensure_empty_data_dir(data_dir: str, *, check_mode: bool = False) -> bool:
    """Create the (empty, 0700) data dir a joining member starts from; True when created."""
    if os.path.isdir(data_dir):
        return False
    if not check_mode:
        os.makedirs(data_dir, mode=0o700)
    return True


def reset_data_dir(data_dir: str, *, state: str, reason: str, now: float, check_mode: bool = False) -> tuple:
    """(changed, moved_to): `absent` leaves no dir, `empty` leaves an empty one; old contents are moved aside.
    InvalidInput (field `path` or `reason`) before anything moves, for the rules of set_aside."""
    data_dir = validate.safe_target_dir(data_dir, 'path')
    validate.path_component(reason, 'reason')
    current = data_dir_state(data_dir)['state']
    if state == 'empty' and current == DATA_EMPTY:
        return False, None
    existed = current != DATA_ABSENT
    moved = set_aside(data_dir, now=now, reason=reason, check_mode=check_mode)
    if state == 'empty':
        if not check_mode:
            ensure_empty_data_dir(data_dir)
        return True, moved
    return existed, moved
