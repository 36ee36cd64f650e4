# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A scale-down's etcd membership (ETCD-18 row 13: "the leading sidecar removes superfluous members"), as pure
decisions over plain data: the `etcd` loop's side (which member Leases to mark, whether the StatefulSet may shrink
yet) and the leading member-side program's side (which ONE member to remove this period).

Why the members leave BEFORE the StatefulSet shrinks: the StatefulSet's pods are managed `Parallel`, so a 3 -> 1
scale-down stops members 1 and 2 at once. Had etcd still listed them, member 0 would be one of three, without
quorum, and nothing could remove them any more (a removal needs quorum). So the loop first marks the Leases of the
ordinals that go (`LEAVING`, its value the new replica count), the leading member's program removes those members
from etcd one per period while every one of them still runs (each removal keeps the quorum of the remaining), and
marks each Lease `REMOVED` once etcd no longer lists that member; only when every going ordinal's Lease says
`REMOVED` does the loop shrink the StatefulSet.

Why marks on the member Leases and not the bootstrap config or the Leases' absence: the loop deletes a member Lease
only after its pod is gone (too late, see above), and a running member reads its bootstrap config once, at start.
A mark is written only for ordinals at or above the new replica count of a scale-down; a scale-up or a restart
writes none, so neither can remove a member.

Why a deadline (LEAVING_SINCE, the loop's removal timeout): a leading member whose program never removes them (an
older sidecar image, a program that fails) would hold the scale-down forever without a word. Past the deadline the
loop says so and removes the member itself with the same decision (plan_removal: never below quorum, the leader
only after leadership moved) - but only members it can prove are the going pods' own: etcd's member of that name
has the ID the pod's sidecar wrote into its Lease (`holderIdentity` `<hex id>:Leader|Member`)."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.druid.components import ordinal_of
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import parse_micro

# Set by the `etcd` loop on the member Leases of the ordinals a scale-down removes; the value is the new replica
# count (only ordinals at or above it are ever removed).
LEAVING = 'cluster.steward.io/leaving'
# Set by the leading member's program on such a Lease once etcd no longer lists that member; the value is the
# removed member's hex ID ('' when etcd never listed it).
REMOVED = 'cluster.steward.io/member-removed'
# Set by the `etcd` loop with LEAVING: when it marked the Lease (RFC 3339, microseconds); the removal's deadline
# counts from it.
LEAVING_SINCE = 'cluster.steward.io/leaving-since'


def _annotations(lease: Optional[Mapping[str, Any]]) -> Mapping[str, str]:
    return ((lease or {}).get('metadata') or {}).get('annotations') or {}


def leaving_size(lease: Optional[Mapping[str, Any]]) -> Optional[int]:
    """The new replica count a Lease's LEAVING mark names; None when unmarked or unreadable."""
    text = str(_annotations(lease).get(LEAVING, '')).strip()
    return int(text) if text.isdigit() else None


def is_removed(lease: Optional[Mapping[str, Any]]) -> bool:
    return REMOVED in _annotations(lease)


def leaving_since(lease: Optional[Mapping[str, Any]]) -> Optional[float]:
    """When the loop marked the Lease LEAVING (unix seconds); None when it did not say (then it marks it again)."""
    return parse_micro(_annotations(lease).get(LEAVING_SINCE))


def holder_id(lease: Optional[Mapping[str, Any]]) -> str:
    """The member ID the member's own sidecar wrote into its Lease's holderIdentity (`<hex id>:Leader|Member`)."""
    holder = str((((lease or {}).get('spec') or {}).get('holderIdentity')) or '')
    return holder.split(':', 1)[0] if ':' in holder else ''


def provable_leases(members: Sequence[Mapping[str, Any]],
                    leases: Mapping[str, Optional[Mapping[str, Any]]]) -> Dict[str, Optional[Mapping[str, Any]]]:
    """The Leases a removal by the `etcd` loop may act on: a listed member's only when etcd's member of that name has
    the ID its own sidecar wrote into the Lease (the evidence that this etcd member is that pod's); an unlisted
    member's always (it is only marked removed). plan_removal never removes a member without a Lease."""
    ids = {str(m.get('name') or ''): str(m.get('id') or '') for m in members if m.get('name')}
    return {name: lease for name, lease in leases.items()
            if name not in ids or (holder_id(lease) and holder_id(lease) == ids[name])}


# --- the loop's side -------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ScaleDownGate:
    """What a scale-down to `to` members needs before the StatefulSet shrinks: `to_mark` (Leases without the
    LEAVING mark for `to`, or without its LEAVING_SINCE), `waiting` (marked, not yet removed from etcd); ready when
    both are empty. `overdue`: the waiting ones marked longer than the removal timeout ago, `waited` the longest
    wait in seconds."""
    to_mark: Tuple[str, ...] = ()
    waiting: Tuple[str, ...] = ()
    overdue: Tuple[str, ...] = ()
    waited: float = 0.0

    @property
    def ready(self) -> bool:
        return not self.to_mark and not self.waiting


def scale_down_gate(going: Sequence[str], member_leases: Mapping[str, Mapping[str, Any]], to: int,
                    now: Optional[float] = None, timeout: Optional[float] = None) -> ScaleDownGate:
    """`going`: the member names of the ordinals the scale-down removes. A going ordinal without a Lease has no
    program to coordinate with (nothing to wait for); to 0 members nothing is removed (hibernation keeps the
    membership: the same cluster wakes up). With `now` and `timeout`, which waits are overdue. A mark without
    LEAVING_SINCE (an older controller's) is written again, so its wait has a start."""
    if to <= 0:
        return ScaleDownGate()
    present = [n for n in going if n in member_leases]
    to_mark = tuple(n for n in present if leaving_size(member_leases[n]) != to
                    or (leaving_since(member_leases[n]) is None and not is_removed(member_leases[n])))
    waiting = tuple(n for n in present if n not in to_mark and not is_removed(member_leases[n]))
    waits = {n: now - (leaving_since(member_leases[n]) or now) for n in waiting} if now is not None else {}
    overdue = tuple(n for n in waiting if timeout is not None and waits.get(n, 0.0) > timeout)
    return ScaleDownGate(to_mark, waiting, overdue, max(waits.values(), default=0.0))


# --- the leading member's side ---------------------------------------------------------------------------------

REMOVE, TRANSFER, NOTHING = 'remove', 'transfer-leadership', 'nothing'


@dataclasses.dataclass(frozen=True)
class Removal:
    """This period's one step. `action`: REMOVE `member_id` (`name`), TRANSFER leadership to `target_id` first
    (the leader itself is never removed), or NOTHING; `mark_removed`: {Lease name: removed member's hex ID or ''}
    of LEAVING Leases etcd no longer lists, to be marked REMOVED; `reason` says why, for the log."""
    action: str
    reason: str
    member_id: str = ''
    name: str = ''
    target_id: str = ''
    mark_removed: Mapping[str, str] = dataclasses.field(default_factory=dict)


def _quorum(voters: int) -> int:
    return voters // 2 + 1


def plan_removal(members: Sequence[Mapping[str, Any]], leader_id: str,
                 leases: Mapping[str, Optional[Mapping[str, Any]]],
                 removed_ids: Optional[Mapping[str, str]] = None) -> Removal:
    """`members`: etcd's member list (dicts with id, name, is_learner, healthy); `leader_id`: the leader's hex ID
    (this program's member: only the leader's program calls this); `leases`: this Etcd's member Leases by name (a listed
    member without one is never removed); `removed_ids`: {name: hex ID} this
    program removed before (the ID a REMOVED mark records).

    A member is superfluous only when its Lease carries LEAVING and its ordinal is at or above the size the mark
    names; never the leader (leadership moves to a staying healthy voter first); never when the remaining voters'
    healthy members would fall below their quorum. Learners go first, then the highest ordinal."""
    removed_ids = removed_ids or {}
    listed = {str(m.get('name') or '') for m in members}
    unnamed = any(not m.get('name') for m in members)
    # a Lease marked LEAVING whose member etcd no longer lists: removed (unless an unstarted, still unnamed entry
    # may be it: then wait until it has a name or is gone)
    mark = {} if unnamed else {
        name: removed_ids.get(name, '') for name, lease in sorted(leases.items())
        if lease is not None and leaving_size(lease) is not None and not is_removed(lease) and name not in listed}
    candidates = []
    for m in members:
        name = str(m.get('name') or '')
        size = leaving_size(leases.get(name))
        if name and size is not None and size >= 1 and ordinal_of(name) >= size:
            candidates.append(m)
    if not candidates:
        return Removal(NOTHING, 'no superfluous member', mark_removed=mark)
    candidates.sort(key=lambda m: (not m.get('is_learner'), -ordinal_of(str(m.get('name')))))
    victim = candidates[0]
    if victim['id'] == leader_id:
        staying = [m for m in members if m not in candidates and m.get('healthy') and not m.get('is_learner')]
        if not staying:
            return Removal(NOTHING, 'member %s (%s) leads and no staying voter is healthy to take over' % (
                victim['name'], victim['id']), mark_removed=mark)
        target = min(staying, key=lambda m: ordinal_of(str(m.get('name'))))
        return Removal(TRANSFER, 'member %s (%s) is superfluous and leads: leadership moves to %s (%s) first' % (
            victim['name'], victim['id'], target['name'], target['id']), target_id=target['id'], mark_removed=mark)
    if not victim.get('is_learner'):
        voters = [m for m in members if not m.get('is_learner') and m['id'] != victim['id']]
        healthy = [m for m in voters if m.get('healthy')]
        if len(healthy) < _quorum(len(voters)):
            return Removal(NOTHING, 'removing %s (%s) would leave %d of %d voting members healthy, quorum needs %d' % (
                victim['name'], victim['id'], len(healthy), len(voters), _quorum(len(voters))), mark_removed=mark)
    size = leaving_size(leases.get(victim['name']))
    return Removal(REMOVE, 'member %s (%s) is superfluous: the Etcd scales down to %d member(s)' % (
        victim['name'], victim['id'], size), member_id=victim['id'], name=victim['name'], mark_removed=mark)
