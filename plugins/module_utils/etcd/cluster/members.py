# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Membership changes: add (as learner), promote, remove, move leadership, update a member's peer URLs.

Learner add / promote / move-leader are not in the Python gRPC clients, so everything here goes
through the v3 JSON gateway. etcd refuses a change until its leader has been connected to every
voting member for 5 s ("unhealthy cluster"), and refuses to promote a learner that has not caught up:
both are retried every RETRY_INTERVAL until a deadline, so a change lands within a fraction of a
second of the moment etcd allows it (recovery speed, issue 17). Quorum checks run before any change; `force` skips only our own check, etcd's
strict reconfiguration check still applies. Every add, promotion and removal is timed (timing.py), retries
included, for the processes that export etcd-backup-restore's membership histograms.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, FrozenSet, List, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import Deadline, retry_until
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, shown
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import (
    EtcdConnection,
    Gateway,
    member_id_hex,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.cluster import (
    cluster_info,
    healthy_endpoint,
    member_endpoint,
    members_from_raw,
    would_keep_quorum,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.initial_cluster import (
    initial_cluster,
    normalize_url,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster import timing
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import (
    EtcdError,
    EtcdUnavailable,
    MembershipError,
    QuorumRisk,
    Refusal,
)

# Refusals that mean "not now, try again later" rather than "never".
RETRYABLE_CHANGE = frozenset({Refusal.UNHEALTHY, Refusal.NO_LEADER, Refusal.TIMEOUT})
RETRYABLE_PROMOTE = RETRYABLE_CHANGE | {Refusal.LEARNER_NOT_READY}
RETRYABLE_ADD = RETRYABLE_CHANGE | {Refusal.TOO_MANY_LEARNERS, Refusal.LEARNER_PENDING}


RETRY_INTERVAL = 0.1


def _retry(action: Callable[[], Any], retryable: FrozenSet[Refusal], timeout: float, what: str,
           sleep: Callable[[float], None] = time.sleep) -> Any:
    """Run `action` until it succeeds, a refusal outside `retryable` comes, or `timeout` seconds pass, every
    RETRY_INTERVAL (common/deadline.retry_until); giving up raises the last error's class with the count."""
    def give_up(exc: EtcdError, attempts: int) -> EtcdError:
        return exc.__class__('%s: still refused after %d attempts in %ss: %s' % (what, attempts, timeout, exc),
                             exc.refusal)
    return retry_until(Deadline(max(timeout, 0), what), lambda _left: action(), (EtcdError,), pause=RETRY_INTERVAL,
                       cap=RETRY_INTERVAL, sleep=sleep, retryable=lambda exc: exc.refusal in retryable, give_up=give_up)


def _public(member: Dict[str, Any]) -> Dict[str, Any]:
    return {k: member[k] for k in ('id', 'name', 'peer_urls', 'client_urls', 'is_learner') if k in member}


def member_list_view(members: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """What the diff shows: stable fields only, sorted by name then peer URL."""
    view = [{'id': m['id'], 'name': m['name'], 'peer_urls': sorted(m['peer_urls']), 'is_learner': m['is_learner']}
            for m in members]
    return sorted(view, key=lambda m: (m['name'], m['peer_urls']))


def find_member(members: List[Dict[str, Any]], *, name: Optional[str] = None, member_id: Optional[str] = None,
                peer_urls: Optional[List[str]] = None) -> Optional[Dict[str, Any]]:
    """The one member matching every given criterion; MembershipError when they point at different members."""
    candidates = []
    for m in members:
        urls = {normalize_url(u) for u in m['peer_urls']}
        if member_id is not None and int(m['id'], 16) == int(member_id, 16):
            candidates.append(m)
        elif peer_urls and urls & {normalize_url(u) for u in peer_urls}:
            candidates.append(m)
        elif name and m['name'] == name:
            candidates.append(m)
    unique = {m['id']: m for m in candidates}
    if len(unique) > 1:
        raise MembershipError('name=%r member_id=%r peer_urls=%r match different members: %s' % (
            name, member_id, peer_urls, ', '.join('%s (%s)' % (m['name'] or '(unstarted)', m['id'])
                                                  for m in unique.values())))
    if not unique:
        return None
    member = list(unique.values())[0]
    if member_id is not None and int(member['id'], 16) != int(member_id, 16):
        # the name (or peer URL) names a member, the id another one or none: a typo, never "nothing to do"
        raise MembershipError('member_id %s matches no member, but %s names member %s (%s): they disagree' % (
            member_id, 'name=%r' % name if name and member['name'] == name else 'peer_urls=%r' % (peer_urls,),
            member['name'] or '(unstarted)', member['id']))
    if name and member['name'] and member['name'] != name:
        raise MembershipError('member %s with peer URLs %s is named %r, not %r' % (
            member['id'], ', '.join(member['peer_urls']), member['name'], name))
    if peer_urls and {normalize_url(u) for u in member['peer_urls']} != {normalize_url(u) for u in peer_urls}:
        raise MembershipError('member %r (%s) has peer URLs %s, not %s; remove it first to change them' % (
            member['name'], member['id'], ', '.join(member['peer_urls']), ', '.join(peer_urls)))
    return member


def _require_quorum(info: Dict[str, Any], action: str) -> str:
    endpoint = healthy_endpoint(info)
    if not info['has_quorum'] or endpoint is None:
        raise EtcdUnavailable('cannot %s: the cluster has no quorum (%d of %d voting members healthy, %d needed)' % (
            action, len(info['healthy_members']), len(info['voting_members']), info['quorum_size']))
    return endpoint


def _check_quorum(info: Dict[str, Any], force: bool, action: str, **change: Any) -> None:
    ok, numbers = would_keep_quorum(info['voting_members'], info['healthy_members'], **change)
    if not ok and not force:
        raise QuorumRisk('refusing to %s: afterwards %d of %d voting members would be healthy, quorum needs %d '
                         '(use force to override)' % (action, numbers['healthy_after'], numbers['voting_after'],
                                                      numbers['quorum_after']))


def _current_members(conn: EtcdConnection, endpoint: str) -> List[Dict[str, Any]]:
    with Gateway(conn) as gw:
        return members_from_raw(gw.call(endpoint, '/v3/cluster/member/list', {'linearizable': True}).get('members', []))


def _promote_at(conn: EtcdConnection, endpoint: str, member_id: str) -> Any:
    with Gateway(conn) as gw:
        return gw.call(endpoint, '/v3/cluster/member/promote', {'ID': str(int(member_id, 16))})


def _promote(conn: EtcdConnection, info: Dict[str, Any], member: Dict[str, Any], timeout: float) -> None:
    def attempt() -> Any:
        fresh = cluster_info(conn)
        return _promote_at(conn, _require_quorum(fresh, 'promote learner %s' % member['id']), member['id'])

    timing.timed(timing.PROMOTE, member['name'] or member['id'], lambda: _retry(
        attempt, RETRYABLE_PROMOTE, timeout, 'promote learner %r (%s): it must be started with initial_cluster and '
        'catch up with the leader' % (member['name'] or '(unstarted)', member['id'])))


def ensure_member_present(conn: EtcdConnection, *, name: str, peer_urls: List[str], learner: bool = True,
                          promote: bool = True, force: bool = False, retry_timeout: float = 60,
                          promote_timeout: float = 60, check_mode: bool = False) -> Dict[str, Any]:
    """Add `name` with `peer_urls` (as learner by default) and promote it once in sync; idempotent."""
    if not name:
        raise MembershipError('name is required to add a member')
    if not peer_urls:
        raise MembershipError('peer_urls is required to add member %r' % name)
    info = cluster_info(conn)
    before = info['members']
    member = find_member(before, name=name, peer_urls=peer_urls)
    result: Dict[str, Any] = {'changed': False, 'added': False, 'promoted': False, 'actions': [], 'warnings': []}
    after = [dict(m) for m in before]

    if member is None:
        action = 'add member %r (%s) as %s' % (name, ', '.join(peer_urls), 'learner' if learner else 'voting member')
        if not learner:
            _check_quorum(info, force, action, add='new')
        pending = [m for m in before if m['is_learner']]
        if pending and learner:
            result['warnings'].append('learner %r (%s) is not promoted yet; etcd allows one learner at a time' % (
                pending[0]['name'] or '(unstarted)', pending[0]['id']))
        result['actions'].append(action)
        result.update(changed=True, added=True)
        if check_mode:
            member = {'id': None, 'name': name, 'peer_urls': list(peer_urls), 'client_urls': [], 'is_learner': learner}
            after.append(member)
        else:
            member, after = _add(conn, info, name, peer_urls, learner, retry_timeout)
        just_added = True
    else:
        just_added = False

    if member['is_learner'] and promote:
        action = 'promote learner %r (%s) to voting member' % (name, member['id'] or 'new')
        _check_quorum(info, force, action, add=member['id'] or 'new', add_healthy=member['id'] in info['healthy_members'])
        if check_mode:
            result['actions'].append(action)
            result.update(changed=True, promoted=True)
            after = [dict(m, is_learner=False) if m is member or m['id'] == member['id'] else m for m in after]
        else:
            try:
                _promote(conn, info, member, promote_timeout)
            except MembershipError as exc:
                if not just_added:
                    raise
                # Nobody could have started a member added a moment ago by this very call: report, don't fail.
                result['warnings'].append('%s; run again with promote=true after starting it. (%s)' % (
                    'learner %r added but not promoted: start it with initial_cluster' % name, exc))
            else:
                result['actions'].append(action)
                result.update(changed=True, promoted=True)
            endpoint = healthy_endpoint(cluster_info(conn)) or healthy_endpoint(info)
            after = _current_members(conn, endpoint) if endpoint else after
            member = next((m for m in after if m['id'] == member['id']), member)

    result['member'] = dict(_public(member), name=member['name'] or name, started=bool(member.get('client_urls')))
    result['members'] = [_public(m) for m in after]
    result['initial_cluster'] = initial_cluster(after, name, list(peer_urls))
    result['initial_cluster_state'] = 'existing'
    result['diff'] = {'before': member_list_view(before), 'after': member_list_view(after)}
    result['msg'] = '; '.join(result['actions']) or 'member %r is present' % name
    return result


def _add_at(conn: EtcdConnection, endpoint: str, members: List[Dict[str, Any]], name: str, peer_urls: List[str],
            learner: bool) -> Dict[str, Any]:
    """One add through `endpoint`, given the members it lists now: {'member': it} when it is there already (an
    earlier attempt went through although its answer was lost), else {'raw': etcd's answer}."""
    existing = find_member(members, name=name, peer_urls=peer_urls)
    if existing is not None:
        return {'member': existing, 'endpoint': endpoint}
    pending = [m for m in members if m['is_learner']]
    if pending and learner:
        raise MembershipError('learner %r (%s) is not promoted yet; etcd allows one learner at a time' % (
            pending[0]['name'] or '(unstarted)', pending[0]['id']), Refusal.LEARNER_PENDING)
    body = {'peerURLs': list(peer_urls), 'isLearner': bool(learner)}
    with Gateway(conn) as gw:
        return {'raw': gw.call(endpoint, '/v3/cluster/member/add', body), 'endpoint': endpoint}


def _added(conn: EtcdConnection, answer: Dict[str, Any]):
    """(the added member, the members after) from _add_at's answer."""
    if 'member' in answer:
        return answer['member'], _current_members(conn, answer['endpoint'])
    raw = answer['raw']
    added = members_from_raw([raw.get('member') or {}])[0]
    added['name'] = added['name'] or ''
    after = members_from_raw(raw.get('members') or []) or _current_members(conn, answer['endpoint'])
    return added, after


def _add(conn: EtcdConnection, info: Dict[str, Any], name: str, peer_urls: List[str], learner: bool,
         retry_timeout: float):
    def attempt() -> Any:
        fresh = cluster_info(conn)
        endpoint = _require_quorum(fresh, 'add member %r' % name)
        return _add_at(conn, endpoint, fresh['members'], name, peer_urls, learner)

    operation = timing.ADD_LEARNER if learner else timing.ADD_MEMBER
    return _added(conn, timing.timed(operation, name, lambda: _retry(
        attempt, RETRYABLE_ADD, retry_timeout, 'add member %r (%s)' % (name, ', '.join(peer_urls)))))


def join_as_learner(conn: EtcdConnection, endpoint: str, *, name: str, peer_urls: List[str],
                    retry_timeout: float) -> Dict[str, Any]:
    """Add `name` as a learner through one member that serves (`endpoint`), retried while etcd says not now
    (5 s since the last change, another learner pending); idempotent. Each attempt is one linearizable member
    list and one add: recovery's critical path, where a cluster-wide probe per attempt (ensure_member_present)
    costs more than etcd's own wait. {member, members, initial_cluster}."""
    def attempt() -> Any:
        return _add_at(conn, endpoint, _current_members(conn, endpoint), name, peer_urls, True)

    member, after = _added(conn, timing.timed(timing.ADD_LEARNER, name, lambda: _retry(
        attempt, RETRYABLE_ADD, retry_timeout, 'add learner %r (%s)' % (name, ', '.join(peer_urls)))))
    return {'member': _public(member), 'members': [_public(m) for m in after],
            'initial_cluster': initial_cluster(after, name, list(peer_urls))}


def promote_learner(conn: EtcdConnection, endpoint: str, member_id: str, retry_timeout: float) -> None:
    """Promote learner `member_id` through `endpoint` once etcd allows it: etcd's own check (the learner's log
    matches the leader's, and a quorum of voters has started afterwards) decides; refusals are retried."""
    timing.timed(timing.PROMOTE, member_id, lambda: _retry(
        lambda: _promote_at(conn, endpoint, member_id), RETRYABLE_PROMOTE, retry_timeout,
        'promote learner %s: it must run and catch up with the leader' % member_id))


def update_peer_urls(conn: EtcdConnection, member_id: str, peer_urls: List[str], retry_timeout: float) -> List[Dict[str, Any]]:
    """etcd's MemberUpdate: member `member_id` (hex) advertises `peer_urls` from now on (the other members dial it
    there); the member list after it. The change goes through the cluster (it needs quorum); a refusal that means
    "not now" is retried until `retry_timeout`. How a member started with https peer URLs over data whose member
    list still names its http ones turns its peers to TLS (druid's ETCD-42 step 2, etcd-backup-restore's
    member peer URL update)."""
    if not peer_urls:
        raise MembershipError('update peer URLs of member %s: no peer URL given' % member_id)
    body = {'ID': str(int(member_id, 16)), 'peerURLs': list(peer_urls)}

    def attempt() -> List[Dict[str, Any]]:
        fresh = cluster_info(conn)
        endpoint = _require_quorum(fresh, 'update the peer URLs of member %s' % member_id)
        with Gateway(conn) as gw:
            answer = gw.call(endpoint, '/v3/cluster/member/update', body)
        return members_from_raw(answer.get('members') or []) or _current_members(conn, endpoint)
    return _retry(attempt, RETRYABLE_CHANGE, retry_timeout, 'update the peer URLs of member %s to %s' % (
        member_id, ','.join(peer_urls)))


def parse_member_id(text: Any, field: str = 'member_id') -> int:
    """An etcd member ID as etcdctl prints it (hex, never 0: etcd gives no member the ID 0): the one rule for every
    option and argument that names a member; InvalidInput names `field`."""
    try:
        member_id = int(text, 16)
    except (TypeError, ValueError):
        raise InvalidInput(field, 'hex', 'expected a member id in hex (as etcdctl prints it), got %s' % shown(text),
                           text) from None
    if member_id <= 0:
        raise InvalidInput(field, 'hex', 'an etcd member ID is a positive hex number, never %s' % shown(text), text)
    return member_id


def ensure_member_absent(conn: EtcdConnection, *, name: Optional[str] = None, member_id: Optional[str] = None,
                         peer_url: Optional[str] = None, force: bool = False, check_mode: bool = False,
                         retry_timeout: float = 60) -> Dict[str, Any]:
    """Remove the member matching name / member_id / peer_url unless that would lose quorum; idempotent."""
    if not (name or member_id or peer_url):
        raise MembershipError('one of name, member_id or peer_url is required to remove a member')
    if member_id is not None:
        parse_member_id(member_id, 'member_id')
    info = cluster_info(conn)
    before = info['members']
    member = find_member(before, name=name, member_id=member_id, peer_urls=[peer_url] if peer_url else None)
    result: Dict[str, Any] = {'changed': False, 'removed': False, 'actions': [], 'warnings': [], 'member': None}
    after = list(before)
    if member is not None:
        action = 'remove member %r (%s)' % (member['name'] or '(unstarted)', member['id'])
        if not member['is_learner']:
            _check_quorum(info, force, action, remove=member['id'])
        result['actions'].append(action)
        result.update(changed=True, removed=True, member=_public(member))
        after = [m for m in before if m['id'] != member['id']]
        if not check_mode:
            after = _remove(conn, info, member, retry_timeout)
    result['members'] = [_public(m) for m in after]
    result['diff'] = {'before': member_list_view(before), 'after': member_list_view(after)}
    result['msg'] = '; '.join(result['actions']) or 'no such member: nothing to remove'
    return result


def _remove(conn: EtcdConnection, info: Dict[str, Any], member: Dict[str, Any], retry_timeout: float):
    if info['leader'] == member['id']:
        # Hand leadership over first so the cluster does not sit through an election after the removal.
        target = next((m['id'] for m in info['members']
                       if m['healthy'] and not m['is_learner'] and m['id'] != member['id']), None)
        if target:
            try:
                move_leader(conn, target)
            except EtcdError:
                pass  # best effort: etcd handles the removal of its leader by itself
    body = {'ID': str(int(member['id'], 16))}
    state: Dict[str, Any] = {}

    def attempt() -> Any:
        fresh = cluster_info(conn)
        if not any(m['id'] == member['id'] for m in fresh['members']):
            state['members'] = fresh['members']
            return None  # gone already (an earlier attempt's answer was lost)
        endpoints = [r['endpoint'] for r in fresh['endpoints'] if r['healthy'] and r['member_id'] != member['id']]
        endpoint = endpoints[0] if endpoints else _require_quorum(fresh, 'remove member %s' % member['id'])
        with Gateway(conn) as gw:
            answer = gw.call(endpoint, '/v3/cluster/member/remove', body)
        state['members'] = members_from_raw(answer.get('members') or [])
        return answer

    timing.timed(timing.REMOVE, member['name'] or member['id'], lambda: _retry(
        attempt, RETRYABLE_CHANGE, retry_timeout, 'remove member %r (%s)' % (member['name'], member['id'])))
    return state.get('members', [m for m in info['members'] if m['id'] != member['id']])


def move_leader(conn: EtcdConnection, target_id: str, info: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Transfer leadership to `target_id` (hex); the request must go to the current leader."""
    info = info or cluster_info(conn)
    target = int(target_id, 16)
    if info['leader'] is None:
        raise EtcdUnavailable('cannot move leadership: the cluster has no leader')
    if int(info['leader'], 16) == target:
        return {'changed': False, 'leader': info['leader']}
    endpoint = member_endpoint(info, info['leader'])
    if endpoint is None:
        raise EtcdUnavailable('cannot move leadership: no client endpoint of leader %s was probed' % info['leader'])
    with Gateway(conn) as gw:
        gw.call(endpoint, '/v3/maintenance/transfer-leadership', {'targetID': str(target)})
    return {'changed': True, 'leader': member_id_hex(target), 'previous_leader': info['leader']}
