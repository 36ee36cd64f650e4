# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Executing a quorum-loss recovery (druid's row 10, runbook ETCD-45) one step per pass, as a pure planner.

plan.py decides THAT a recovery is due and from which source (RecoverQuorum: the surviving member with the newest
revision, or the newest verified full snapshot, and the loss window). This module decides the NEXT step of a
recovery in progress; the `etcd` loop does it, posts its Event and records the new state.

Why the state is recorded on the Etcd (annotation STATE, JSON) and not only derived from the objects: after the
member Leases are recreated and the StatefulSet is at 0, the objects no longer say which source was chosen, nor
that a recovery (and not a user's scale to 0) is under way. A controller restarted mid-way reads the annotation and
goes on; every step is idempotent (doing it twice changes nothing more), so a crash between a step and the write of
the new state repeats the step harmlessly.

The steps, each an Event (phase names are the annotation's `phase`):
  start            RecoverQuorum becomes RecoveryStarted (`QuorumLossRecoveryStarted`): the plan, its source and
                   loss window are recorded; nothing else changes yet.
  save-source      source 'member': the surviving member's data (its sidecar still renews its Lease; its pod may be
                   NotReady, as druid's readiness probe needs quorum) is saved to the store as a full snapshot, taken
                   by its own member-side program (`GET /snapshot/full`; etcd serves a snapshot without quorum):
                   `QuorumLossSourceSaved`. Without a store there is no way to carry the data to the first
                   member, and the recovery is refused before anything changed (`QuorumLossNeedsOperator`).
  stop             the StatefulSet to 0 (`QuorumLossMembersStopped`), then wait until no member pod is left;
                   then every member Lease is deleted and recreated empty, member 0's carrying RESTORE_MARKER
                   (`QuorumLossLeasesRecreated`): its member-side program restores the newest full snapshot and
                   its deltas (the saved source, or the verified snapshot) as a new single-member cluster, moving
                   whatever its data dir held aside (never deleting it).
  start-one        the StatefulSet to 1 (`QuorumLossFirstMemberStarted`); wait until member 0 is Ready and the
                   cluster (of one) is quorate.
  rejoin           RESTORE_MARKER removed, the other members' Leases marked create-as-learner, the StatefulSet to
                   spec.replicas (`QuorumLossMembersRejoining`): druid's scale-up path; a member with old data
                   rejoins as a learner with its data moved aside (initialization row 4), one with an empty PVC
                   joins as a learner (row 9). Wait for AllMembersReady.
  done             `QuorumLossRecovered` with the source and the loss window; the annotation is removed.

No PVC is deleted by any step: a member's old data is moved aside inside its own volume by the member-side program.
A source member whose pod is gone before its data was saved ends the recovery before anything was destroyed
(`QuorumLossRecoveryAborted`); the next pass plans again from what is left.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, Mapping, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.druid import components as c
from ansible_collections.steward.cluster.plugins.module_utils.druid import plan as p
from ansible_collections.steward.cluster.plugins.module_utils.druid import status as st
from ansible_collections.steward.cluster.plugins.module_utils.druid.errors import DruidError
from ansible_collections.steward.cluster.plugins.module_utils.druid.spec import EtcdSpec, member_names
from ansible_collections.steward.cluster.plugins.module_utils.kube.conditions import rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import renewed_at

STATE = 'cluster.steward.io/quorum-loss-recovery'        # on the Etcd: the recovery in progress (JSON)
REQUEST = 'cluster.steward.io/recover-quorum-loss'        # on the Etcd: an operator asks for a recovery now
RESTORE_MARKER = 'cluster.steward.io/restore-from-store'  # on member 0's Lease: restore before start (unix seconds)

SAVE_SOURCE, STOP, START_ONE, REJOIN = 'save-source', 'stop', 'start-one', 'rejoin'
PHASES = (SAVE_SOURCE, STOP, START_ONE, REJOIN)


class RecoveryStateError(DruidError):
    """The STATE annotation cannot be read: names the annotation, the value and the rule."""


@dataclasses.dataclass(frozen=True)
class State:
    """A recovery in progress: the next `phase`; the plan it executes (source 'member' or 'snapshot', the source
    `member` and its `revision`, the `loss_window` in revisions); `started` (unix seconds) is also RESTORE_MARKER's
    value, so the member-side program can tell a restore it already did for this recovery."""
    phase: str
    source: str
    member: str = ''
    revision: int = 0
    loss_window: int = 0
    started: int = 0

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True, separators=(',', ':'))

    def at(self, phase: str) -> 'State':
        return dataclasses.replace(self, phase=phase)


def read_state(annotations: Optional[Mapping[str, Any]]) -> Optional[State]:
    """The recovery in progress from the Etcd's annotations; None when none is."""
    text = (annotations or {}).get(STATE)
    if not text:
        return None
    try:
        data = json.loads(text)
        state = State(**{f.name: data[f.name] for f in dataclasses.fields(State) if f.name in data})
    except (ValueError, TypeError, KeyError) as exc:
        raise RecoveryStateError('metadata.annotations[%s]: %r is not a recovery state (%s)' % (STATE, text[:200], exc))
    if state.phase not in PHASES or state.source not in ('member', 'snapshot'):
        raise RecoveryStateError('metadata.annotations[%s]: phase %r / source %r unknown (phases %s; sources member, '
                                 'snapshot)' % (STATE, state.phase, state.source, ', '.join(PHASES)))
    return state


@dataclasses.dataclass(frozen=True)
class Step(p.Action):
    """A recovery step; `state` is the recovery after it (None: finished, the annotation goes)."""
    state: Optional[State] = None
    warning = True


@dataclasses.dataclass(frozen=True)
class RecoveryStarted(Step):
    event = 'QuorumLossRecoveryStarted'


@dataclasses.dataclass(frozen=True)
class SaveSource(Step):
    """GET /snapshot/full on `pod`'s member-side program (port `port`)."""
    pod: str = ''
    port: int = 0
    event = 'QuorumLossSourceSaved'


@dataclasses.dataclass(frozen=True)
class StopMembers(Step):
    event = 'QuorumLossMembersStopped'


@dataclasses.dataclass(frozen=True)
class RecreateLeases(Step):
    """Delete `delete` (ours) and create `create` empty, `first` with RESTORE_MARKER = state.started."""
    delete: Tuple[str, ...] = ()
    create: Tuple[str, ...] = ()
    first: str = ''
    event = 'QuorumLossLeasesRecreated'


@dataclasses.dataclass(frozen=True)
class StartFirstMember(Step):
    event = 'QuorumLossFirstMemberStarted'


@dataclasses.dataclass(frozen=True)
class RejoinMembers(Step):
    """RESTORE_MARKER off `first`'s Lease; `learners`' Leases (desired, with create-as-learner) applied; replicas
    to `to`."""
    first: str = ''
    learners: Tuple[str, ...] = ()
    to: int = 0
    event = 'QuorumLossMembersRejoining'


@dataclasses.dataclass(frozen=True)
class Recovered(Step):
    event = 'QuorumLossRecovered'
    warning = False


@dataclasses.dataclass(frozen=True)
class Aborted(Step):
    event = 'QuorumLossRecoveryAborted'


STEP_KINDS = (RecoveryStarted, SaveSource, StopMembers, RecreateLeases, StartFirstMember, RejoinMembers, Recovered,
              Aborted)


def _window(state: State) -> str:
    where = "member %s's data at revision %d" % (state.member, state.revision) if state.source == 'member' else \
        'the verified full snapshot at revision %d' % state.revision
    return '%s; loss window %d revision(s)' % (where, state.loss_window)


def start(spec: EtcdSpec, action: p.RecoverQuorum, now: float) -> p.Action:
    """The first step of an executed RecoverQuorum: record the plan (or refuse when it cannot be carried out)."""
    if action.source == 'member' and not spec.backups_enabled:
        return p.NeedsRecovery('%s; the loop carries a member\'s data to the new first member through the backup '
                               'store, and this Etcd has no spec.backup.store: nothing was changed, follow the '
                               'runbook (docs/etcd-druid.md)' % action.message)
    revision = action.member_revision if action.source == 'member' else action.snapshot_revision
    state = State(phase=SAVE_SOURCE if action.source == 'member' else STOP, source=action.source,
                  member=action.member if action.source == 'member' else '', revision=revision,
                  loss_window=action.loss_window, started=int(now))
    return RecoveryStarted('%s; recovery started at %s (one step per pass)' % (action.message, rfc3339(now)),
                           state=state)


def next_step(spec: EtcdSpec, status: Mapping[str, Any], observed: st.Observed, state: State, now: float,
              options: p.Options = p.Options()) -> p.Action:
    """The next step of the recovery `state` from what is observed now: a Step, or a Wait while a step's effect is
    still coming (pods stopping, the first member restoring, learners catching up)."""
    first = member_names(spec.name, max(spec.replicas, 1))[0]
    sts = observed.statefulset
    replicas = int(((sts or {}).get('spec') or {}).get('replicas') or 0)
    if sts is None:
        return p.Wait('quorum-loss recovery (%s): the StatefulSet %s is missing; it is not recreated during a '
                      'recovery, an operator must look' % (state.phase, spec.name))
    if state.phase == SAVE_SOURCE:
        pod = observed.pods.get(state.member)
        renewed = renewed_at(observed.member_leases.get(state.member))
        if pod is None or (pod.get('metadata') or {}).get('deletionTimestamp') or renewed is None \
                or now - renewed > options.unknown_grace:
            return Aborted('quorum-loss recovery aborted before anything was changed: the source member %s no '
                           'longer answers (its pod is gone or its Lease is not renewed), so its data cannot be '
                           'saved; the next pass plans again' % state.member)
        return SaveSource('saving %s to the store as a full snapshot (the recovery\'s source)' % _window(state),
                          pod=state.member, port=spec.backup.port, state=state.at(STOP))
    if state.phase == STOP:
        if replicas != 0:
            return StopMembers('quorum-loss recovery: StatefulSet %s scaled %d -> 0 to stop every member' % (
                spec.name, replicas), state=state)
        if observed.pods:
            return p.Wait('quorum-loss recovery: waiting until no member pod runs (%s)' % ', '.join(sorted(
                observed.pods, key=c.ordinal_of)))
        names = tuple(member_names(spec.name, spec.replicas))
        return RecreateLeases('quorum-loss recovery: member Leases deleted and recreated empty; %s restores %s from '
                              'the store' % (first, _window(state)),
                              delete=tuple(sorted(observed.member_leases, key=c.ordinal_of)), create=names,
                              first=first, state=state.at(START_ONE))
    if state.phase == START_ONE:
        if replicas != 1:
            return StartFirstMember('quorum-loss recovery: StatefulSet %s scaled to 1; %s restores and starts alone'
                                    % (spec.name, first), state=state)
        members = {m['name']: m for m in status.get('members') or []}
        if not (members.get(first, {}).get('status') == st.MEMBER_READY and st.condition_true(status, st.READY)):
            return p.Wait('quorum-loss recovery: waiting for %s to restore and become Ready' % first)
        if spec.replicas <= 1:
            return _recovered(spec, state)
        learners = tuple(member_names(spec.name, spec.replicas)[1:])
        return RejoinMembers('quorum-loss recovery: %s serves; %s rejoin as learners (their old data, if any, is '
                             'moved aside by their member-side program)' % (first, ', '.join(learners)),
                             first=first, learners=learners, to=spec.replicas, state=state.at(REJOIN))
    # REJOIN
    if replicas != spec.replicas:
        return RejoinMembers('quorum-loss recovery: StatefulSet %s scaled to %d' % (spec.name, spec.replicas),
                             first=first, learners=tuple(member_names(spec.name, spec.replicas)[1:]),
                             to=spec.replicas, state=state)
    if not st.condition_true(status, st.ALL_MEMBERS_READY):
        return p.Wait('quorum-loss recovery: waiting for every member to be Ready (%d of %d)' % (
            len([m for m in status.get('members') or [] if m.get('status') == st.MEMBER_READY]), spec.replicas))
    return _recovered(spec, state)


def _recovered(spec: EtcdSpec, state: State) -> Recovered:
    return Recovered('quorum recovered: %d member(s) Ready, restored from %s' % (spec.replicas, _window(state)),
                     state=None)


def restore_marker_patch(state: Optional[State]) -> Dict[str, Any]:
    """The metadata patch of member 0's Lease: the marker while restoring, removed after."""
    return {'metadata': {'annotations': {RESTORE_MARKER: str(state.started) if state else None}}}
