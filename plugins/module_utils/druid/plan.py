# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""druid's decision table (ETCD-18) as a pure planner: (spec, status, observed objects, now) -> the ONE action of
this pass, typed, each with the words of its Event (`event`: a CamelCase reason, `message`: what and why).

Order, first match wins (the minimum action each pass; "nothing" is Nothing, and says why):
  1. quorum lost (a majority of the members that reported are not Ready; rows 1 and 2 are skipped while the
     StatefulSet has 0 replicas: hibernated, its members' Leases are left over, not lost)
       - for less than the not-ready grace, or a lost member's pod is still there and may come back: Wait
       - for longer (or at once when an operator asked, Options.recovery_requested), with evidence: RecoverQuorum
         naming the source (the surviving member with the newest revision when it is newer than the newest verified
         full snapshot, else that snapshot) and the loss window in revisions; without a source: NeedsRecovery
         (nothing is destroyed). The loop executes a RecoverQuorum step by step with druid/recovery.py.
  2. quorate, members NotReady longer than the not-ready grace (row 9): DeletePod, one per pass, only while the
     remaining Ready members keep quorum without it, with a verified full snapshot younger than max_backup_age
     (when backups are enabled), and at most `max_unready_deletions` at once (druid: f < n/2)
  3. superfluous member Leases (ordinal >= spec.replicas once the StatefulSet has shrunk, row 13): DeleteLeases
  4. the spec (only when the gate allows it, spec.reconcile_gate):
       ApplyComponents (everything but the StatefulSet that is missing or differs),
       CreateStatefulSet, ScaleUp (from 0 replicas, a wake: the members start on their data, with a template changed
       while hibernated written in the same patch, over http first when peer TLS is newly asked: peer_tls.py),
       ScaleUp (row 11: new ordinals join as learners, ETCD-42/43; with spec.etcd.peerUrlTls only
       once every running member's Lease says its peers speak TLS: until then the new template is written, the
       members roll onto it (row 5), and Postponed (gate PeerTLS) says which members the scale-up waits for,
       peer_tls.py), ScaleDown (row 12: first
       MarkLeaving on the going ordinals' Leases and AwaitRemoval until the leading member's program has removed
       them from etcd (druid/scale_down.py says why), then replicas; their Leases are deleted by row 3 afterwards),
       UpdateStatefulSet (a new pod template, written with OnDelete: no pod restarts by itself), gated on
       AllMembersReady and BackupReady (ETCD-21)
  5. pods on an older template: RestartMember, one per pass, followers first and the leader last, each only while
     AllMembersReady and BackupReady hold and a verified full snapshot is fresh (beyond druid: druid rolls on its own);
     before the first of them, with backups enabled, a full snapshot of this change: TakeSnapshot (the backup
     leader's program takes it, as for an OnDemandSnaphotTask), AwaitSnapshot until the full-snap Lease shows it
     verified, Postponed (gate PreUpdateSnapshot) when it failed or did not come within update_snapshot_timeout
  6. the PodDisruptionBudget's minAvailable follows AllMembersReady (ETCD-20): ApplyComponents of the PDB
  7. Nothing.

Beyond druid (its users' issues): druid's row 10 scales the StatefulSet to 0 and recreates every Lease on quorum loss
as soon as BackupReady is True; here nothing destructive happens without positive evidence (the lost members'
Leases unrenewed past the grace) and a verified snapshot or a surviving member's data, and the plan says which data
survives and how many revisions are lost before anything acts.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.druid import components as c
from ansible_collections.steward.cluster.plugins.module_utils.druid import peer_tls as pt
from ansible_collections.steward.cluster.plugins.module_utils.druid import scale_down as sd
from ansible_collections.steward.cluster.plugins.module_utils.druid import status as st
from ansible_collections.steward.cluster.plugins.module_utils.druid.spec import (
    OPERATION_ANNOTATION, OPERATION_RECONCILE, EtcdSpec, member_names)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade import plan as rolling
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade import versions
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import format_micro, parse_micro, renewed_at

# A member's sidecar writes its etcd revision on its Lease with every renewal (the member-side program's part):
# the evidence of which surviving member holds the newest data.
MEMBER_REVISION = 'cluster.steward.io/revision'
# On the StatefulSet: {"template": <pod template hash>, "after": <RFC 3339 time>}. No member restarts onto that
# template until the full-snap Lease shows a verified full snapshot taken after that time. UpdateStatefulSet writes
# it with the change's start, TakeSnapshot with its request's time; kept on the object, so a rolling change resumed
# by a restarted controller does not take a second snapshot when one newer than the change's start exists.
UPDATE_SNAPSHOT = 'cluster.steward.io/update-snapshot'
PRE_UPDATE_SNAPSHOT = 'PreUpdateSnapshot'   # the Postponed gate
PEER_TLS = 'PeerTLS'   # the Postponed gate of a scale-up waiting for the running members' peer TLS (ETCD-42 step 2)


@dataclasses.dataclass(frozen=True)
class Options:
    """notready_grace: --etcd-member-notready-threshold; max_backup_age: a verified full snapshot older than this does
    not count as fresh for a destructive step; max_unready_deletions: NotReady pods deleted at once (druid: f < n/2);
    recovery_requested: an operator asked for a quorum-loss recovery now (recovery.REQUEST, set by a
    QuorumLossRecoveryTask): every member that is not Ready counts as lost without waiting for the not-ready grace;
    update_snapshot_timeout: the deadline, from its request, of the full snapshot a rolling change takes first;
    removal_timeout: how long a scale-down waits for the leading member's program to remove the going members
    before the loop says so and removes them itself (RemoveMembers)."""
    unknown_grace: float = 60.0
    notready_grace: float = 300.0
    max_backup_age: float = 3600.0
    max_unready_deletions: int = 1
    recovery_requested: bool = False
    update_snapshot_timeout: float = 600.0
    removal_timeout: float = 300.0


@dataclasses.dataclass(frozen=True)
class SnapshotRequest:
    """The full snapshot the loop asked for before a rolling change (the loop keeps it in memory; a restarted
    controller has none and judges by the StatefulSet's UPDATE_SNAPSHOT record alone): the pod template it is for,
    when it was asked (the loop's clock), and once the member answered either the snapshot's end `revision` or
    `error`."""
    template: str
    requested_at: float
    revision: Optional[int] = None
    error: str = ''


@dataclasses.dataclass(frozen=True)
class Action:
    message: str

    event = 'Action'
    warning = False
    changes = True


@dataclasses.dataclass(frozen=True)
class Nothing(Action):
    event = 'InSync'
    changes = False


@dataclasses.dataclass(frozen=True)
class Wait(Action):
    """Something is wrong, and the evidence does not yet allow acting (said in the message)."""
    event = 'Waiting'
    warning = True
    changes = False


@dataclasses.dataclass(frozen=True)
class Postponed(Action):
    """A spec change or a restart a safety gate holds back; `gate` names it (AllMembersReady, BackupReady,
    VerifiedBackup, VersionPath, PreUpdateSnapshot, PeerTLS)."""
    gate: str = ''
    event = 'UpdatePostponed'
    warning = True
    changes = False


@dataclasses.dataclass(frozen=True)
class Rolling(Action):
    """A rolling change under way waits for the member it just restarted (its pod going and coming back, then Ready
    and caught up): the expected pause between two members, a Normal Event, where an unready member the change has
    not restarted (the cluster not healthy) is an UpdatePostponed Warning."""
    event = 'UpdateInProgress'
    changes = False


@dataclasses.dataclass(frozen=True)
class ApplyComponents(Action):
    """Create or patch these components (not the StatefulSet): (component, name) keys of `desired`."""
    keys: Tuple[Tuple[str, str], ...] = ()
    event = 'ComponentsApplied'


@dataclasses.dataclass(frozen=True)
class CreateStatefulSet(Action):
    replicas: int = 0
    event = 'StatefulSetCreated'


@dataclasses.dataclass(frozen=True)
class ScaleUp(Action):
    """Set replicas to `to`; `learners` are the new members (their Leases carry create-as-learner);
    `multi_node`: from a single member (gardener.cloud/scaled-to-multi-node on the StatefulSet, ETCD-42);
    `with_template`: a wake from 0 replicas whose pod template changed while hibernated: the whole StatefulSet is
    written (replicas and template at once), so the members start on the template its ConfigMap belongs with."""
    current: int = 0
    to: int = 0
    learners: Tuple[str, ...] = ()
    multi_node: bool = False
    with_template: bool = False
    event = 'ScaledUp'


@dataclasses.dataclass(frozen=True)
class ScaleDown(Action):
    current: int = 0
    to: int = 0
    event = 'ScaledDown'


@dataclasses.dataclass(frozen=True)
class MarkLeaving(Action):
    """Mark the member Leases `names` with scale_down.LEAVING (`to`: the new replica count), so the leading member's
    program removes those members from etcd while they still run; `to` None clears the marks of ordinals a later
    spec keeps (a scale-down reverted before it finished). `at`: when (scale_down.LEAVING_SINCE, the removal's
    deadline counts from it)."""
    names: Tuple[str, ...] = ()
    to: Optional[int] = None
    at: float = 0.0
    event = 'MembersLeaving'


@dataclasses.dataclass(frozen=True)
class AwaitRemoval(Action):
    """A scale-down waits until the leading member's program has removed the going members from etcd (each
    going Lease marked scale_down.REMOVED); then the StatefulSet shrinks."""
    names: Tuple[str, ...] = ()
    event = 'MembersRemoving'
    changes = False


@dataclasses.dataclass(frozen=True)
class RemoveMembers(Action):
    """The leading member's program did not remove the going members `names` within the removal timeout (`waited`
    seconds since they were marked): the loop says so and takes one removal step itself, with the program's
    decision (scale_down.plan_removal over etcd's member list), on the members it can prove are the going pods'
    (scale_down.provable_leases); it refuses, naming why, when that step would break quorum or nothing is provable."""
    names: Tuple[str, ...] = ()
    waited: float = 0.0
    timeout: float = 0.0
    event = 'MemberRemovalOverdue'
    warning = True


@dataclasses.dataclass(frozen=True)
class UpdateStatefulSet(Action):
    """Write the new pod template (OnDelete: no pod restarts by itself); members restart through RestartMember.
    A new template (`template`, its hash; '' when only labels/annotations change) is recorded with the change's
    start `at` (UPDATE_SNAPSHOT): a verified full snapshot taken after it is the one a rolling change needs."""
    template: str = ''
    at: float = 0.0
    event = 'StatefulSetUpdated'


@dataclasses.dataclass(frozen=True)
class RestartMember(Action):
    """Delete one pod running an older template; its StatefulSet brings it back on the new one."""
    pod: str = ''
    leader: bool = False
    event = 'MemberRestarted'


@dataclasses.dataclass(frozen=True)
class TakeSnapshot(Action):
    """Before the first member restarts onto pod template `template`: record the request on the StatefulSet
    (UPDATE_SNAPSHOT) and ask the member programs of `pods`, in this order (the leader's first, its data is the
    newest), for a full snapshot (GET /snapshot/full, the OnDemandSnaphotTask's path)."""
    template: str = ''
    pods: Tuple[str, ...] = ()
    requested_at: float = 0.0
    event = 'FullSnapshotRequested'


@dataclasses.dataclass(frozen=True)
class AwaitSnapshot(Action):
    """The requested full snapshot is not yet on the full-snap Lease as verified; nothing restarts meanwhile."""
    event = 'FullSnapshotPending'
    changes = False


@dataclasses.dataclass(frozen=True)
class DeletePod(Action):
    """Delete a member pod NotReady longer than the grace (row 9), so it is rescheduled."""
    pod: str = ''
    event = 'UnreadyMemberDeleted'
    warning = True


@dataclasses.dataclass(frozen=True)
class DeleteLeases(Action):
    names: Tuple[str, ...] = ()
    event = 'SuperfluousLeasesDeleted'


@dataclasses.dataclass(frozen=True)
class RecoverQuorum(Action):
    """Quorum is lost for good: recover from `source` ('member': `member`'s data, revision `member_revision`;
    'snapshot': the verified full snapshot at `snapshot_revision`). `loss_window` is how many revisions the
    newest known revision is ahead of what the source holds (0: nothing is lost)."""
    source: str = ''
    member: str = ''
    member_revision: int = 0
    snapshot_revision: int = 0
    newest_revision: int = 0
    loss_window: int = 0
    event = 'QuorumLossRecoveryPlanned'   # (the loop posts recovery.RecoveryStarted when it executes it)
    warning = True


@dataclasses.dataclass(frozen=True)
class NeedsRecovery(Action):
    """Quorum is lost for good and no source is known (no surviving member's revision, no verified snapshot):
    an operator must act (docs/etcd-druid.md, recovery). Nothing is destroyed."""
    event = 'QuorumLossNeedsOperator'
    warning = True
    changes = False


class Plan(NamedTuple):
    """The pass's one action; the desired components it refers to (keys as in components.desired); whether the
    spec is fully applied (spec_in_sync: the reconcile is done, so observedGeneration is written and the operation
    annotation removed)."""
    action: Action
    desired: Dict[Tuple[str, str], Any]
    spec_in_sync: bool = False


def _revision(lease: Optional[Mapping[str, Any]]) -> Optional[int]:
    text = (((lease or {}).get('metadata') or {}).get('annotations') or {}).get(MEMBER_REVISION) or ''
    return int(text) if text.isdigit() else None


def _fresh_verified(spec: EtcdSpec, observed: st.Observed, now: float, options: Options) -> Tuple[bool, str]:
    """(ok, why not): a verified full snapshot younger than max_backup_age; always ok without a store (there is
    nothing to verify: the user chose no backups, and the gates on Ready members still hold)."""
    if not spec.backups_enabled:
        return True, ''
    verified = st.verified_backup(observed)
    if verified is None:
        return False, 'no verified full snapshot is recorded on Lease %s' % c.snapshot_lease_name(spec, c.FULL_SNAP)
    age = now - verified['at']
    if age > options.max_backup_age:
        return False, 'the newest verified full snapshot (revision %d) is %ds old, more than %ds' % (
            verified['revision'], int(age), int(options.max_backup_age))
    return True, ''


def _alive(lease: Optional[Mapping[str, Any]], now: float, options: Options) -> bool:
    """The member's sidecar renewed its Lease within the unknown grace (it renews only while its etcd answers)."""
    renewed = renewed_at(lease)
    return renewed is not None and now - renewed <= options.unknown_grace


def _not_ready_since(member: Mapping[str, Any], now: float) -> float:
    since = parse_micro(member.get('lastTransitionTime'))
    return now - since if since is not None else 0.0


def _start_allowance(pod: Mapping[str, Any]) -> float:
    """Seconds a new pod needs before it can be Ready at all: its containers' readiness probes' initialDelaySeconds
    (the backup-restore container's, 15 s as druid renders it)."""
    delays = [((ct.get('readinessProbe') or {}).get('initialDelaySeconds') or 0)
              for ct in ((pod.get('spec') or {}).get('containers') or [])]
    return float(max([d for d in delays if isinstance(d, (int, float)) and not isinstance(d, bool)] or [0]))


def _pod_settled(pod: Mapping[str, Any], now: float, options: Options) -> bool:
    """A pod has had its chance once it is older than its start allowance plus the not-ready grace. The member's
    NotReady time counts from its last transition, which a recreated pod does not reset (a replacement member is
    NotReady until it has joined and caught up): without this a pod would be deleted again and again while it
    starts, and the member never rejoin."""
    created = parse_micro((pod.get('metadata') or {}).get('creationTimestamp'))
    return created is None or now - created >= _start_allowance(pod) + options.notready_grace


def _quorum_loss(spec: EtcdSpec, status: Mapping[str, Any], observed: st.Observed, now: float,
                 options: Options) -> Action:
    members = status.get('members') or []
    size = int(status.get('clusterSize') or spec.replicas)
    ready = [m for m in members if m.get('status') == st.MEMBER_READY]
    lost = [m for m in members if m.get('status') != st.MEMBER_READY]
    # Evidence that a member is gone: its sidecar no longer renews its Lease (its etcd does not answer), past the
    # grace. A member whose Lease is renewed is alive, only unready (a new cluster's pods before their readiness
    # probe's first success, a partition): never evidence, whatever its pod says.
    evidence = [m for m in lost if not _alive(observed.member_leases.get(m['name']), now, options) and (
        options.recovery_requested or m.get('reason') == st.UNKNOWN_GRACE_EXCEEDED
        or (m.get('status') == st.MEMBER_NOT_READY and _not_ready_since(m, now) >= options.notready_grace))]
    # Transient until so many members are gone for good that the rest can never form a quorum again.
    if size - len(evidence) >= size // 2 + 1:
        return Wait('quorum lost: %d of %d members Ready (%s); waiting for the lost members to come back or to be '
                    'NotReady (their Leases unrenewed) longer than %ds before any recovery' % (
                        len(ready), size, ', '.join('%s %s' % (m['name'], m.get('reason')) for m in lost) or 'none reporting',
                        int(options.notready_grace)))
    # Survivors: members whose sidecar still renews their Lease, so their etcd answers and their revision is current.
    # Not "Ready": without quorum druid's readiness probe (a linearizable read) fails on every member, so a survivor's
    # pod turns NotReady too. The newest revision ever reported counts the lost members' last reports too: that is
    # what a recovery may lose.
    revisions = {m['name']: _revision(observed.member_leases.get(m['name'])) for m in members}
    survivors = [(revisions[m['name']], m['name']) for m in members if revisions[m['name']] is not None
                 and _alive(observed.member_leases.get(m['name']), now, options)]
    best = max(survivors) if survivors else None
    verified = st.verified_backup(observed) if spec.backups_enabled else None
    known = [r for r in revisions.values() if r is not None] + ([verified['revision']] if verified else [])
    if best is None and verified is None:
        return NeedsRecovery('quorum lost for good: %d of %d members Ready, and neither a surviving member\'s '
                             'revision nor a verified full snapshot is known; nothing was changed' % (len(ready), size))
    newest = max(known)
    if best and (verified is None or best[0] > verified['revision']):
        return RecoverQuorum('quorum lost for good (%d of %d Ready): recover from member %s\'s data at revision %d%s; '
                             'loss window %d revision(s)' % (
                                 len(ready), size, best[1], best[0],
                                 '' if verified is None else ', newer than the verified snapshot at revision %d'
                                 % verified['revision'], newest - best[0]),
                             source='member', member=best[1], member_revision=best[0],
                             snapshot_revision=verified['revision'] if verified else 0, newest_revision=newest,
                             loss_window=newest - best[0])
    return RecoverQuorum('quorum lost for good (%d of %d Ready): recover from the verified full snapshot at revision '
                         '%d; loss window %d revision(s)' % (len(ready), size, verified['revision'], newest - verified['revision']),
                         source='snapshot', snapshot_revision=verified['revision'], newest_revision=newest,
                         member=best[1] if best else '', member_revision=best[0] if best else 0,
                         loss_window=newest - verified['revision'])


def _unready_pods(spec: EtcdSpec, status: Mapping[str, Any], observed: st.Observed, now: float,
                  options: Options) -> Optional[Action]:
    members = status.get('members') or []
    size = int(status.get('clusterSize') or 0)
    ready = [m for m in members if m.get('status') == st.MEMBER_READY]
    long_unready = [m for m in members if m.get('status') == st.MEMBER_NOT_READY
                    and _not_ready_since(m, now) >= options.notready_grace and m['name'] in observed.pods
                    and c.ordinal_of(m['name']) < spec.replicas   # a going member is not brought back
                    and not ((observed.pods[m['name']].get('metadata') or {}).get('deletionTimestamp'))
                    and _pod_settled(observed.pods[m['name']], now, options)]
    if not long_unready:
        return None
    deleting = [p for p in observed.pods.values() if (p.get('metadata') or {}).get('deletionTimestamp')]
    if len(deleting) >= options.max_unready_deletions:
        return Wait('%d member pod(s) are being deleted already (limit %d); %s wait' % (
            len(deleting), options.max_unready_deletions, ', '.join(m['name'] for m in long_unready)))
    if not len(ready) > size // 2:
        return None
    ok, why = _fresh_verified(spec, observed, now, options)
    victim = sorted(long_unready, key=lambda m: c.ordinal_of(m['name']))[0]
    if not ok:
        return Postponed('member %s is NotReady (%s) for %ds, but its pod is not deleted: %s' % (
            victim['name'], victim.get('reason'), int(_not_ready_since(victim, now)), why), gate='VerifiedBackup')
    return DeletePod('member %s is NotReady (%s) for %ds, longer than %ds; %d of %d members Ready keep quorum: '
                     'deleting its pod so it is recreated' % (
                         victim['name'], victim.get('reason'), int(_not_ready_since(victim, now)),
                         int(options.notready_grace), len(ready), size), pod=victim['name'])


def _differs(desired: Mapping[str, Any], actual: Optional[Mapping[str, Any]]) -> bool:
    """Whether applying `desired` as a merge patch would change `actual` (fields absent from desired are left)."""
    if actual is None:
        return True
    return not _contains(actual, desired)


def _contains(actual: Any, desired: Any) -> bool:
    """desired's fields are all in actual (an API server adds defaults, also inside list items)."""
    if isinstance(desired, Mapping):
        return isinstance(actual, Mapping) and all(_contains(actual.get(k), v) for k, v in desired.items())
    if isinstance(desired, list):
        return isinstance(actual, list) and len(actual) == len(desired) and all(
            _contains(a, d) for a, d in zip(actual, desired))
    return actual == desired


def plan(spec: EtcdSpec, status: Mapping[str, Any], observed: st.Observed, existing: Mapping[Tuple[str, str], Any],
         now: float, spec_allowed: bool, options: Options = Options(),
         snapshot_request: Optional[SnapshotRequest] = None) -> Plan:
    """The one action of this pass (a Plan).

    status: this pass's computed status (status.compute_status); existing: our objects as read, by the same keys
    (absent ones missing); spec_allowed: the gate said RECONCILE this pass; snapshot_request: the pre-update full
    snapshot this loop asked for (none asked, or not known since a restart: None)."""
    members = status.get('members') or []
    sts = observed.statefulset
    current = int(((sts or {}).get('spec') or {}).get('replicas') or 0)
    all_ready = st.condition_true(status, st.ALL_MEMBERS_READY)
    backup_ready = st.condition_true(status, st.BACKUP_READY) if spec.backups_enabled else True
    ready_members = len([m for m in members if m.get('status') == st.MEMBER_READY])
    learners: Tuple[str, ...] = ()
    no_peer_tls: Tuple[str, ...] = ()
    if sts is not None and 0 < current < spec.replicas:
        learners = member_names(spec.name, spec.replicas)[current:]
        # ETCD-42 step 2: no member is added before the running ones speak peer TLS; until then everything is
        # desired for the current members (the bootstrap member list, the StatefulSet's replicas), with the new
        # pod template that turns peer TLS on
        no_peer_tls = pt.members_without_peer_tls(spec, observed.member_leases, current)
    size = current if no_peer_tls else spec.replicas
    quorum_size = int(status.get('clusterSize') or 0)
    min_available = c.pdb_min_available(quorum_size if members else spec.replicas, all_ready, ready_members)
    # woken from 0 with peer TLS newly asked: the members wake on the peer URLs their data names, and the components
    # stay without peer TLS until every member of the template without it runs Ready (peer_tls.py)
    build = pt.without_peer_tls(spec) if sts is not None and pt.wakes_over_http(spec, status) and not \
        c.template_has_peer_tls(sts) and (current == 0 or not _all_current_ready(status, current)) else spec
    desired = c.desired(build, size, min_available, scaled_to_multi_node=current == 1 and size > 1,
                        learners=() if no_peer_tls else learners)

    # 1. quorum lost (only once members have reported: a cluster that never had quorum is bootstrapping), and 2. long
    # NotReady members while quorate; neither while the StatefulSet has 0 replicas (hibernated, or being woken): no
    # pod is meant to run, the members' Leases left over are no evidence of a fault, and the rows below must go on
    # (row 3 deletes them, row 4 wakes the members on their data). An operator's explicit recovery request still counts.
    if sts is None or current > 0 or options.recovery_requested:
        if members and not st.quorate(ready_members, quorum_size):
            return Plan(_quorum_loss(spec, status, observed, now, options), desired)
        action = _unready_pods(spec, status, observed, now, options)
        if action is not None:
            return Plan(action, desired)
    # 3. superfluous member Leases once the StatefulSet has shrunk
    if sts is not None and current <= spec.replicas:
        extra = tuple(sorted((n for n in observed.member_leases if c.ordinal_of(n) >= current and
                              c.ordinal_of(n) >= spec.replicas and n not in observed.pods), key=c.ordinal_of))
        if extra:
            return Plan(DeleteLeases('the member Leases of removed ordinals go: %s' % ', '.join(extra), names=extra), desired)
    # 4. the spec
    in_sync = False
    if spec_allowed:
        action = _spec_action(spec, status, observed, existing, desired, current, all_ready, backup_ready, learners,
                              now, options, no_peer_tls)
        if action is None and build is not spec:
            # woken over http: the spec is not applied until the members run and the template with peer TLS follows
            ready = {m['name'] for m in members if m.get('status') == st.MEMBER_READY}
            action = Postponed(pt.WOKEN_OVER_HTTP % ', '.join(n for n in member_names(spec.name, current) if n not in ready),
                               gate=PEER_TLS)
        if isinstance(action, Postponed) and action.gate == PEER_TLS:
            # the members on an older template go onto the one with peer TLS through the rolling plan (row 5), gated
            # on the running members being Ready (AllMembersReady counts the members wanted after the scale-up)
            current_ready = st.condition_true(status, st.READY) and _all_current_ready(status, current)
            action = _restart(spec, status, observed, now, options, current_ready, backup_ready,
                              snapshot_request) or action
        if action is not None:
            return Plan(action, desired)
        in_sync = True
    # 5. pods on an older template
    if sts is not None:
        action = _restart(spec, status, observed, now, options, all_ready, backup_ready, snapshot_request)
        if action is not None:
            return Plan(action, desired, in_sync)
    # 6. the PDB follows AllMembersReady
    key = ('poddisruptionbudget', spec.name)
    if existing.get(key) is not None and _differs(desired[key], existing.get(key)):
        return Plan(ApplyComponents('PodDisruptionBudget %s: minAvailable %d (%s)' % (
            spec.name, min_available, 'AllMembersReady' if all_ready else '%d Ready members' % ready_members),
            keys=(key,)), desired, in_sync)
    if sts is not None and current == 0 and spec.replicas > 0:
        # (row 4 would have woken it: the spec may not be reconciled this pass)
        return Plan(Nothing('the StatefulSet has 0 replicas, spec.replicas %d: the members wake on their data when the '
                            'spec is next reconciled (%s: %s)' % (spec.replicas, OPERATION_ANNOTATION, OPERATION_RECONCILE)),
                    desired, in_sync)
    return Plan(Nothing('in sync: %d/%d members Ready' % (ready_members, spec.replicas)), desired, in_sync)


def _spec_action(spec: EtcdSpec, status: Mapping[str, Any], observed: st.Observed,
                 existing: Mapping[Tuple[str, str], Any], desired: Mapping[Tuple[str, str], Any], current: int,
                 all_ready: bool, backup_ready: bool, learners: Tuple[str, ...], now: float,
                 options: Options, no_peer_tls: Tuple[str, ...] = ()) -> Optional[Action]:
    sts_key = ('statefulset', spec.name)
    # (a Lease's desired spec is empty: applying it never touches what its member renews)
    stale = tuple(k for k in desired if k != sts_key and _differs(desired[k], existing.get(k)))
    if stale:
        return ApplyComponents('applying %s' % ', '.join('%s %s' % k for k in stale), keys=stale)
    sts = observed.statefulset
    want = desired[sts_key]
    kept = tuple(sorted((n for n, lease in observed.member_leases.items() if 0 <= c.ordinal_of(n) < spec.replicas
                         and sd.leaving_size(lease) is not None), key=c.ordinal_of))
    if kept:
        return MarkLeaving('%s stay (replicas %d): their leaving marks are cleared' % (', '.join(kept), spec.replicas),
                           names=kept, to=None, at=now)
    if sts is None:
        return CreateStatefulSet('creating StatefulSet %s with %d replica(s)' % (spec.name, spec.replicas),
                                 replicas=spec.replicas)
    if spec.replicas > current:
        if current > 0 and not (st.condition_true(status, st.READY) and _all_current_ready(status, current)):
            return Postponed('scale-up %d -> %d waits: the %d current member(s) are not all Ready' % (
                current, spec.replicas, current), gate='AllMembersReady')
        if no_peer_tls:
            # (the running members are all Ready, checked above: AllMembersReady counts the ones to come)
            return _template_update(spec, want, sts, True, backup_ready, now, ' (peer TLS first, ETCD-42: '
                                    'the scale-up %d -> %d waits)' % (current, spec.replicas)) or Postponed(
                pt.waiting_message(current, spec.replicas, no_peer_tls, observed.member_leases), gate=PEER_TLS)
        if current == 0:
            return _wake(spec, status, want, sts)
        return ScaleUp('scaling up %d -> %d; %s join as learners' % (current, spec.replicas, ', '.join(learners) or 'all'),
                       current=current, to=spec.replicas, learners=learners, multi_node=current == 1)
    if spec.replicas < current:
        if spec.replicas == 0:
            ok, why = _fresh_verified(spec, observed, now, options)
            if not ok or not backup_ready:
                return Postponed('scale to 0 waits for a fresh verified backup: %s' % (why or 'BackupReady is not True'),
                                 gate='VerifiedBackup')
        elif not all_ready:
            return Postponed('scale-down %d -> %d waits for AllMembersReady' % (current, spec.replicas),
                             gate='AllMembersReady')
        going = member_names(spec.name, current)[spec.replicas:]
        gate = sd.scale_down_gate(going, observed.member_leases, spec.replicas, now, options.removal_timeout)
        if gate.to_mark:
            return MarkLeaving('scaling down %d -> %d: %s leave etcd first, removed by the leading member while they '
                               'still run (quorum is kept), then the StatefulSet shrinks' % (
                                   current, spec.replicas, ', '.join(gate.to_mark)), names=gate.to_mark,
                               to=spec.replicas, at=now)
        if gate.overdue:
            return RemoveMembers('scale-down %d -> %d: the leading member\'s program has not removed %s from etcd %ds '
                                 'after they were marked leaving (timeout %ds); the loop removes them itself, one per '
                                 'pass, where safe' % (current, spec.replicas, ', '.join(gate.overdue), int(gate.waited),
                                                       int(options.removal_timeout)),
                                 names=gate.overdue, waited=gate.waited, timeout=options.removal_timeout)
        if gate.waiting:
            return AwaitRemoval('scale-down %d -> %d waits until the leading member has removed %s from etcd' % (
                current, spec.replicas, ', '.join(gate.waiting)), names=gate.waiting)
        return ScaleDown('scaling down %d -> %d; the Leases of %s go once their pods are gone' % (
            current, spec.replicas, ', '.join(member_names(spec.name, current)[spec.replicas:]) or 'none'),
            current=current, to=spec.replicas)
    return _template_update(spec, want, sts, all_ready, backup_ready, now)


def _template_update(spec: EtcdSpec, want: Mapping[str, Any], sts: Mapping[str, Any], all_ready: bool,
                     backup_ready: bool, now: float, why: str = '') -> Optional[Action]:
    """The StatefulSet written when it differs from `want` (a new pod template only while AllMembersReady and
    BackupReady, ETCD-21); None when it does not."""
    if not _differs(c.statefulset_patch(want), sts):
        return None
    template_changed = c.template_hash_of(want) != c.template_hash_of(sts)
    if template_changed and (not all_ready or not backup_ready):
        gate = 'AllMembersReady' if not all_ready else 'BackupReady'
        return Postponed('the new pod template waits for %s (ETCD-21)%s' % (gate, why), gate=gate)
    return UpdateStatefulSet('StatefulSet %s: %s%s' % (
        spec.name, 'new pod template %s; members restart one at a time' % c.template_hash_of(want)
        if template_changed else 'labels/annotations', why),
        template=c.template_hash_of(want) if template_changed else '', at=now)


def _wake(spec: EtcdSpec, status: Mapping[str, Any], want: Mapping[str, Any], sts: Mapping[str, Any]) -> Action:
    """Waking from 0 replicas: the members start on their data, none as a learner. A pod template changed while
    hibernated is written with the replicas (no pod runs, so nothing waits for AllMembersReady, and the members must
    start on the template the ConfigMap already applied belongs with: one without the volumes a new config names
    would never start), held only by the version path from the etcd image the members last ran (the StatefulSet's
    template as it is) to the new one."""
    changed = c.template_hash_of(want) != c.template_hash_of(sts)
    if changed:
        refused = _refusals({'the members\' last template': _etcd_image(sts)}, _etcd_image(want))
        if refused:
            return Postponed('waking from 0 replicas waits: %s' % '; '.join(refused), gate='VersionPath')
    return ScaleUp('waking from 0 replicas: scaling up to %d%s; the members start on their data%s' % (
        spec.replicas, ' with pod template %s' % c.template_hash_of(want) if changed else '',
        pt.WAKING_OVER_HTTP if pt.wakes_over_http(spec, status) else ''),
        current=0, to=spec.replicas, with_template=changed)


def _all_current_ready(status: Mapping[str, Any], current: int) -> bool:
    members = {m['name']: m for m in status.get('members') or []}
    names = [n for n in members if 0 <= c.ordinal_of(n) < current]
    return len(names) == current and all(members[n].get('status') == st.MEMBER_READY for n in names)


def _restart(spec: EtcdSpec, status: Mapping[str, Any], observed: st.Observed, now: float, options: Options,
             all_ready: bool, backup_ready: bool, request: Optional[SnapshotRequest] = None) -> Optional[Action]:
    """Row 5 on THE rolling plan of the etcd engine (etcd/upgrade/plan.py, shared with steward.cluster.etcd_upgrade):
    its order (followers first, the leader last) and its gate between members (none restarting, every member Ready -
    a member's readiness includes having caught up with the leader, revision and HashKV, the member-side program's
    /healthz - then BackupReady and a fresh verified snapshot), and, once those hold, a full snapshot taken for this
    change (_update_snapshot)."""
    target = c.template_hash_of(observed.statefulset)
    if not target:
        return None
    by_name = {m['name']: m for m in status.get('members') or []}
    path = _version_path(observed, target)
    turn = rolling.next_member([{
        'name': name, 'pending': c.template_hash_of(pod) != target,
        'leader': (by_name.get(name) or {}).get('role') == st.ROLE_LEADER,
        'ready': (by_name.get(name) or {}).get('status') == st.MEMBER_READY,
        'restarting': bool((pod.get('metadata') or {}).get('deletionTimestamp'))} for name, pod in observed.pods.items()
    ], [(rolling.ALL_MEMBERS_READY, all_ready, ''), ('VersionPath', not path, '; '.join(path)),
        ('BackupReady', backup_ready, ''), ('VerifiedBackup',) + _fresh_verified(spec, observed, now, options)])
    if turn.member is None:
        return None
    pod = turn.member
    # under way: a member is already on the new template, and every member not Ready is one already restarted onto
    # it (this wait is for the member just restarted; a member the change has not touched being unready is a Warning)
    on_target = {name for name, p in observed.pods.items() if c.template_hash_of(p) == target}
    unready = {name for name in observed.pods if (by_name.get(name) or {}).get('status') != st.MEMBER_READY}
    under_way = bool(on_target) and unready <= on_target
    if turn.hold == rolling.IN_FLIGHT:
        return Rolling('a member pod is restarting; %s waits' % pod)
    if turn.hold == rolling.ALL_MEMBERS_READY and under_way:
        return Rolling('restart of %s on the new template waits until the restarted member is Ready and caught up '
                       '(%d left)' % (pod, turn.left))
    if turn.hold is not None:
        return Postponed('restart of %s on the new template waits%s' % (
            pod, ': ' + turn.why if turn.hold in ('VerifiedBackup', 'VersionPath') else ' for %s' % turn.hold),
            gate=turn.hold)
    action = _update_snapshot(spec, status, observed, target, pod, request, now, options)
    if action is not None:
        return action
    return RestartMember('restarting %s on pod template %s (%d left%s)' % (
        pod, target, turn.left, ', the leader last' if turn.leader else ''), pod=pod, leader=turn.leader)


def update_snapshot_record(sts: Optional[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    """The StatefulSet's UPDATE_SNAPSHOT record {'template': str, 'after': seconds}; None when absent or unreadable
    (then a snapshot is asked for: the safe side)."""
    text = (((sts or {}).get('metadata') or {}).get('annotations') or {}).get(UPDATE_SNAPSHOT)
    try:
        record = json.loads(text) if text else None
    except ValueError:
        return None
    after = parse_micro(record.get('after')) if isinstance(record, dict) else None
    if after is None or not isinstance(record.get('template'), str):
        return None
    return {'template': record['template'], 'after': after}


def update_snapshot_annotation(template: str, after: float) -> str:
    return json.dumps({'template': template, 'after': format_micro(after)}, sort_keys=True)


def _update_snapshot(spec: EtcdSpec, status: Mapping[str, Any], observed: st.Observed, target: str, pod: str,
                     request: Optional[SnapshotRequest], now: float, options: Options) -> Optional[Action]:
    """Issue 25: a change that restarts members takes a verified full snapshot first and refuses without one. None
    (go on) once the full-snap Lease shows a verified full snapshot of this change: at least the revision the
    requested snapshot answered with, or verified after the change's recorded start or request (UPDATE_SNAPSHOT:
    what a restarted controller still knows). Without a store there is nothing to take (the user chose no backups)."""
    if not spec.backups_enabled:
        return None
    verified = st.verified_backup(observed)
    record = update_snapshot_record(observed.statefulset)
    # the loop's request counts for this change only: the same template, asked after the change's recorded start (a
    # request of an earlier change to the same template, A -> B -> A, is older than the record UpdateStatefulSet wrote)
    ours = request if request is not None and request.template == target and (
        record is None or record['template'] != target or request.requested_at >= record['after']) else None
    if verified is not None:
        if ours is not None and ours.revision is not None and verified['revision'] >= ours.revision:
            return None
        if record is not None and record['template'] == target and verified['at'] >= record['after']:
            return None
    lease = c.snapshot_lease_name(spec, c.FULL_SNAP)
    if ours is not None:
        if ours.error:
            return Postponed('restart of %s on the new template waits: the full snapshot taken before the change '
                             'failed: %s; it is asked for again at the next pass' % (pod, ours.error),
                             gate=PRE_UPDATE_SNAPSHOT)
        if now - ours.requested_at > options.update_snapshot_timeout:
            return Postponed('restart of %s on the new template waits: Lease %s showed no verified full snapshot '
                             '%swithin %ds of the request; it is asked for again at the next pass' % (
                                 pod, lease, 'at revision %d or newer ' % ours.revision if ours.revision else '',
                                 int(options.update_snapshot_timeout)), gate=PRE_UPDATE_SNAPSHOT)
        return AwaitSnapshot('restart of %s on pod template %s waits for the full snapshot requested %s to show '
                             'verified on Lease %s' % (pod, target, format_micro(ours.requested_at), lease))
    by_name = {m['name']: m for m in status.get('members') or []}
    pods = sorted((n for n, p in observed.pods.items() if not (p.get('metadata') or {}).get('deletionTimestamp')),
                  key=lambda n: ((by_name.get(n) or {}).get('role') != st.ROLE_LEADER, c.ordinal_of(n)))
    return TakeSnapshot('a full snapshot before the first member restarts on pod template %s (asked of %s; '
                        'verified on Lease %s before %s restarts)' % (target, pods[0] if pods else 'no pod', lease, pod),
                        template=target, pods=tuple(pods), requested_at=now)


def _etcd_image(obj: Optional[Mapping[str, Any]]) -> Optional[str]:
    spec = ((obj or {}).get('spec') or {})
    spec = (spec.get('template') or {}).get('spec') or spec   # a StatefulSet's pod template, or a pod
    return next((c.get('image') for c in spec.get('containers') or [] if c.get('name') == 'etcd'), None)


def _version_path(observed: st.Observed, target: str) -> List[str]:
    """The etcd_upgrade pre-flight's version-path refusals (a skipped minor, a downgrade, a patch below etcd's
    minimum before a minor) between the etcd image tag each pod on an older template runs and the StatefulSet's:
    a rolling restart onto such a tag would leave members that cannot join. Tags without an etcd version pass."""
    return _refusals({name: _etcd_image(pod) for name, pod in observed.pods.items() if c.template_hash_of(pod) != target},
                     _etcd_image(observed.statefulset))


def _refusals(running: Mapping[str, Optional[str]], image: Optional[str]) -> List[str]:
    """The version-path refusals from the etcd images `running` (by member, or by what ran) to `image`."""
    to = versions.image_version(image)
    if to is None:
        return []
    found = {name: versions.image_version(each) for name, each in running.items()}
    return [r['message'] for r in rolling.version_path_refusals(
        {n: versions.format_version(v) if v else None for n, v in found.items()}, versions.format_version(to))]


def learner_names(action: Action) -> List[str]:
    return list(getattr(action, 'learners', ()) or ())
