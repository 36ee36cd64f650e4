# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cluster view: members, per-endpoint health, leader, alarms and quorum.

Health is decided by a linearizable read with a short timeout, never by `status` alone: a member
that lost its leader still answers `status` (its leader field may name a dead leader for a while).
Unreachable endpoints are results, not exceptions; only "nobody answered at all" raises.
"""

from __future__ import annotations

import concurrent.futures
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import (
    EtcdConnection,
    Gateway,
    b64,
    member_id_hex,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError, EtcdUnavailable

# Upper bound for one probe: a leaderless member makes a linearizable read hang until this expires.
DEFAULT_PROBE_TIMEOUT = 2.0


# --- pure quorum math ---------------------------------------------------------------------------
def quorum_size(voting: int) -> int:
    """Votes needed for a raft majority among `voting` members (0 voters need 0)."""
    if voting <= 0:
        return 0
    return voting // 2 + 1


def has_quorum(voting_ids: Iterable[str], healthy_ids: Iterable[str]) -> bool:
    """True when the healthy voting members form a majority of the voting members."""
    voting = set(voting_ids)
    if not voting:
        return False
    return len(voting & set(healthy_ids)) >= quorum_size(len(voting))


def would_keep_quorum(voting_ids: Iterable[str], healthy_ids: Iterable[str], *,
                      add: Optional[str] = None, remove: Optional[str] = None,
                      add_healthy: bool = False) -> Tuple[bool, Dict[str, int]]:
    """Quorum check for one membership change, before it is made.

    `add` is a new voting member (not yet healthy unless `add_healthy`, e.g. a promoted learner);
    `remove` is a member leaving. Returns (ok, numbers) where numbers say why: the voting members
    after the change, the healthy ones among them and the quorum they need.
    """
    voting = set(voting_ids)
    healthy = set(healthy_ids) & voting
    if remove is not None:
        voting.discard(remove)
        healthy.discard(remove)
    if add is not None:
        voting.add(add)
        if add_healthy:
            healthy.add(add)
    numbers = {'voting_after': len(voting), 'healthy_after': len(healthy), 'quorum_after': quorum_size(len(voting))}
    return len(healthy) >= numbers['quorum_after'] and len(voting) > 0, numbers


# --- probing ------------------------------------------------------------------------------------
def _member_dict(raw: Dict[str, Any]) -> Dict[str, Any]:
    return {
        'id': member_id_hex(raw.get('ID', 0)),
        'name': raw.get('name', '') or '',
        'peer_urls': list(raw.get('peerURLs') or []),
        'client_urls': list(raw.get('clientURLs') or []),
        'is_learner': bool(raw.get('isLearner', False)),
    }


def members_from_raw(raw_members: Iterable[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The gateway's member list as plain dicts with hex ids."""
    return [_member_dict(m) for m in raw_members]


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def probe_endpoint(conn: EtcdConnection, endpoint: str, timeout: float) -> Dict[str, Any]:
    """Status + health of one endpoint; never raises for an unreachable or unhealthy member."""
    result: Dict[str, Any] = {
        'endpoint': endpoint, 'reachable': False, 'healthy': False, 'member_id': None, 'leader': None,
        'raft_index': None, 'raft_term': None, 'raft_applied_index': None, 'revision': None,
        'db_size': None, 'db_size_in_use': None, 'version': None, 'is_learner': False, 'errors': [],
        'cluster_id': None,
    }
    with Gateway(conn) as gw:
        try:
            status = gw.status(endpoint, timeout=timeout)
        except EtcdError as exc:
            result['errors'].append(str(exc))
            return result
        header = status.get('header') or {}
        leader = _int(status.get('leader'))
        result.update({
            'reachable': True,
            'member_id': member_id_hex(header.get('member_id', 0)),
            'cluster_id': member_id_hex(header.get('cluster_id', 0)),
            'leader': member_id_hex(leader) if leader else None,
            'raft_index': _int(status.get('raftIndex')),
            'raft_term': _int(status.get('raftTerm')),
            'raft_applied_index': _int(status.get('raftAppliedIndex')),
            'revision': _int(header.get('revision')),
            'db_size': _int(status.get('dbSize')),
            'db_size_in_use': _int(status.get('dbSizeInUse')),
            'version': status.get('version'),
            'is_learner': bool(status.get('isLearner', False)),
        })
        result['errors'].extend(str(e) for e in status.get('errors') or [])
        read = _health_read(gw, endpoint, result['is_learner'], timeout, result['errors'])
        if read is not None:
            result['healthy'] = True
            revision = _int((read.get('header') or {}).get('revision'))
            if revision:
                result['revision'] = revision
    return result


def _health_read(gw: Gateway, endpoint: str, is_learner: bool, timeout: float,
                 errors: List[str]) -> Optional[Dict[str, Any]]:
    """The health read, retried within `timeout`: a leader election (about one election timeout)
    must not make a quorate cluster look broken; a leaderless member keeps failing until the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        try:
            if is_learner:
                # Learners refuse linearizable reads; a serializable one shows the member serves data.
                return gw.call(endpoint, '/v3/kv/range', {'key': b64('health'), 'count_only': True,
                                                          'serializable': True}, max(remaining, 0.1))
            return gw.linearizable_read(endpoint, timeout=max(remaining, 0.1))
        except EtcdError as exc:
            if deadline - time.monotonic() < 0.2:
                errors.append('%s read failed: %s' % ('serializable' if is_learner else 'linearizable', exc))
                return None
        time.sleep(0.1)


def _probe_all(conn: EtcdConnection, endpoints: List[str], timeout: float) -> List[Dict[str, Any]]:
    if not endpoints:
        return []
    workers = min(8, len(endpoints))
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda ep: probe_endpoint(conn, ep, timeout), endpoints))


def _dedupe(conn: EtcdConnection, endpoints: Iterable[str]) -> List[str]:
    seen: List[str] = []
    for endpoint in endpoints:
        url = conn.url(endpoint)
        if url not in seen:
            seen.append(url)
    return seen


def cluster_info(conn: EtcdConnection, *, discover: bool = True,
                 probe_timeout: Optional[float] = None) -> Dict[str, Any]:
    """Members, per-endpoint results, leader, alarms and quorum of the cluster behind `conn`."""
    timeout = probe_timeout if probe_timeout is not None else min(conn.timeout, DEFAULT_PROBE_TIMEOUT)
    endpoints = _dedupe(conn, conn.endpoints)
    results = _probe_all(conn, endpoints, timeout)
    reachable = [r for r in results if r['reachable']]
    if not reachable:
        raise EtcdUnavailable('no etcd endpoint answered (%s): %s' % (
            ', '.join(endpoints), '; '.join(e for r in results for e in r['errors'])))

    # A healthy endpoint gives the authoritative member list; any reachable one will do otherwise.
    ordered = sorted(reachable, key=lambda r: not r['healthy'])
    raw_members: List[Dict[str, Any]] = []
    list_errors: List[str] = []
    with Gateway(conn) as gw:
        for r in ordered:
            try:
                raw_members = gw.call(r['endpoint'], '/v3/cluster/member/list', {}, timeout).get('members', []) or []
                break
            except EtcdError as exc:
                list_errors.append(str(exc))
        members = members_from_raw(raw_members)

        if discover:
            extra = [u for u in _dedupe(conn, (u for m in members for u in m['client_urls'])) if u not in endpoints]
            results.extend(_probe_all(conn, extra, timeout))

        healthy_results = [r for r in results if r['healthy']]
        alarms: List[Dict[str, str]] = []
        # Alarm lists go through raft: a leaderless member would only time out, so ask healthy ones.
        for r in healthy_results:
            try:
                raw_alarms = gw.call(r['endpoint'], '/v3/maintenance/alarm', {'action': 'GET'}, timeout).get('alarms')
                alarms = [{'member_id': member_id_hex(a.get('memberID', 0)), 'alarm': a.get('alarm', 'NONE')}
                          for a in raw_alarms or []]
                break
            except EtcdError as exc:
                list_errors.append(str(exc))

    healthy_ids = sorted({r['member_id'] for r in healthy_results})
    reachable_ids = {r['member_id'] for r in results if r['reachable']}
    voting = [m['id'] for m in members if not m['is_learner']]
    leader = None
    # Only a member that can read linearizably sees the current leader; a stale one may name a dead one.
    for r in healthy_results:
        if r['leader'] and not r['is_learner']:
            leader = r['leader']
            break
    for m in members:
        m['healthy'] = m['id'] in healthy_ids
        m['reachable'] = m['id'] in reachable_ids
        m['is_leader'] = m['id'] == leader
    quorate = has_quorum(voting, healthy_ids) or any(not r['is_learner'] for r in healthy_results)
    return {
        'cluster_id': next((r['cluster_id'] for r in healthy_results + reachable if r['cluster_id']), None),
        'members': members,
        'endpoints': results,
        'leader': leader,
        'alarms': alarms,
        'has_quorum': quorate,
        'quorum_size': quorum_size(len(voting)),
        'healthy_members': [i for i in healthy_ids if i in {m['id'] for m in members}],
        'voting_members': voting,
        'learners': [m['id'] for m in members if m['is_learner']],
        'errors': list_errors,
    }


def healthy_endpoint(info: Dict[str, Any], prefer_voter: bool = True) -> Optional[str]:
    """An endpoint that can serve writes now (a healthy voter), or None."""
    for r in info['endpoints']:
        if r['healthy'] and not (prefer_voter and r['is_learner']):
            return r['endpoint']
    return None


def member_endpoint(info: Dict[str, Any], member_id: str) -> Optional[str]:
    """The probed endpoint that belongs to `member_id` (reachable first), or None."""
    matches = [r for r in info['endpoints'] if r['member_id'] == member_id]
    matches.sort(key=lambda r: (not r['healthy'], not r['reachable']))
    return matches[0]['endpoint'] if matches else None


def fully_healthy(info: Dict[str, Any]) -> Tuple[bool, str]:
    """Every member answers a (linearizable) read and no CORRUPT alarm is raised; else why not."""
    sick = [m for m in info['members'] if not m.get('healthy')]
    if sick:
        return False, 'members not healthy: %s' % ', '.join(
            '%s (%s)' % (m['name'] or '(unstarted)', m['id']) for m in sick)
    if not info['has_quorum']:
        return False, 'cluster has no quorum'
    corrupt = [a for a in info['alarms'] if a['alarm'] == 'CORRUPT']
    if corrupt:
        return False, 'CORRUPT alarm raised by %s' % ', '.join(a['member_id'] for a in corrupt)
    return True, ''


def wait_until_healthy(conn: EtcdConnection, timeout: float, *, discover: bool = True, interval: float = 0.2,
                       clock: Callable[[], float] = time.monotonic,
                       sleep: Callable[[float], None] = time.sleep) -> Tuple[Dict[str, Any], str]:
    """Poll until every member is a healthy voting member (fully_healthy, no learner left) or `timeout`
    seconds pass: (last info, '' or why not). Sub-second polls: a cluster that heals is seen at once."""
    deadline = clock() + max(timeout, 0)
    while True:
        info = cluster_info(conn, discover=discover)
        ok, why = fully_healthy(info)
        if ok and info.get('learners'):
            ok, why = False, 'learners not promoted yet: %s' % ', '.join(info['learners'])
        if ok or clock() + interval > deadline:
            return info, why
        sleep(interval)
