# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`Etcd.status` as druid writes it, from what the API shows: (spec, observed objects, previous status, now) -> status.

Members come from the member Leases (ETCD-16): a Lease whose `holderIdentity` is `<hex member id>:Leader|Member` is
a member (an empty one is an ordinal whose sidecar has not started yet: not a member). With `renew` its renewTime,
`unknown` --etcd-member-unknown-threshold (1m) and `notready` --etcd-member-notready-threshold (5m):

  renew + unknown + notready < now      NotReady  UnknownGracePeriodExceeded
  renew + unknown < now, pod Ready      Unknown   LeaseExpired
  renew + unknown < now, pod not Ready  NotReady  PodNotReady
  fresh lease, pod missing or not Ready NotReady  PodNotReady        (druid says Ready here; a pod that is not
                                                                      Ready serves no client: stricter)
  fresh lease, pod Ready                Ready     LeaseSucceeded

clusterSize (ETCD-17): while quorate the number of members, else (bootstrap, quorum lost) spec.replicas.
Conditions (ETCD-10): `Ready` (Quorate | QuorumLost), `AllMembersReady` (AllMembersReady | NotAllMembersReady; every
ordinal of spec.replicas must be a Ready member), `BackupReady` from the snapshot Leases (ETCD-30; only with a store),
`DataVolumesReady` from the member pods' PVCs.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.druid import components as c
from ansible_collections.steward.cluster.plugins.module_utils.druid import peer_tls as pt
from ansible_collections.steward.cluster.plugins.module_utils.druid.spec import EtcdSpec, member_names
from ansible_collections.steward.cluster.plugins.module_utils.druid.spec import (
    OPERATION_ANNOTATION, OPERATION_RECONCILE, SUSPEND_ANNOTATION)
from ansible_collections.steward.cluster.plugins.module_utils.kube.conditions import (
    FALSE, TRUE, UNKNOWN, get_condition, rfc3339, set_condition)
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import parse_micro, renewed_at

READY = 'Ready'
ALL_MEMBERS_READY = 'AllMembersReady'
BACKUP_READY = 'BackupReady'
DATA_VOLUMES_READY = 'DataVolumesReady'

MEMBER_READY = 'Ready'
MEMBER_NOT_READY = 'NotReady'
MEMBER_UNKNOWN = 'Unknown'
LEASE_SUCCEEDED = 'LeaseSucceeded'
LEASE_EXPIRED = 'LeaseExpired'
UNKNOWN_GRACE_EXCEEDED = 'UnknownGracePeriodExceeded'
POD_NOT_READY = 'PodNotReady'
ROLE_LEADER = 'Leader'
ROLE_MEMBER = 'Member'

# Where the seed gives no value (ETCD-25: a full snapshot is due when the newest is older than 24h).
FULL_SNAPSHOT_MAX_AGE = 24 * 3600.0 + 15 * 60.0
DELTA_PERIODS_LATE = 3          # a delta Lease not renewed for this many deltaSnapshotPeriods (at least 1m) is stale
# The member-side program annotates the full-snap Lease when it has verified that snapshot by restoring it
# (the etcd engine's restore verification): the evidence the planner needs before a destructive step.
VERIFIED_REVISION = 'cluster.steward.io/verified-revision'
VERIFIED_AT = 'cluster.steward.io/verified-at'

_HOLDER = re.compile(r'^([0-9a-fA-F]+):(Leader|Member)$')


@dataclasses.dataclass(frozen=True)
class Thresholds:
    """--etcd-member-unknown-threshold and --etcd-member-notready-threshold, seconds."""
    unknown: float = 60.0
    notready: float = 300.0


@dataclasses.dataclass(frozen=True)
class Observed:
    """What the loop read for one Etcd: its StatefulSet (None when absent), pods, member Leases and PVCs by name,
    the snapshot Leases by kind (`full-snap`, `delta-snap`). Only objects that are ours (components.is_ours /
    is_our_pod) belong here."""
    statefulset: Optional[Mapping[str, Any]] = None
    pods: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    member_leases: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    snapshot_leases: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    pvcs: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)


def parse_holder(holder: Optional[str]) -> Optional[Dict[str, str]]:
    """`272e204152:Leader` -> {'id': '272e204152', 'role': 'Leader'}; None for an empty or foreign holder."""
    match = _HOLDER.match(holder or '')
    return {'id': match.group(1), 'role': match.group(2)} if match else None


def pod_ready(pod: Optional[Mapping[str, Any]]) -> bool:
    if not pod or (pod.get('metadata') or {}).get('deletionTimestamp'):
        return False
    cond = get_condition(((pod.get('status') or {}).get('conditions')), 'Ready')
    return bool(cond and cond.get('status') == TRUE)


def member_state(lease: Mapping[str, Any], pod: Optional[Mapping[str, Any]], now: float,
                 thresholds: Thresholds) -> tuple:
    """(status, reason) of one member (the table above)."""
    renew = renewed_at(lease)
    ready = pod_ready(pod)
    if renew is None or renew + thresholds.unknown < now:
        if renew is not None and renew + thresholds.unknown + thresholds.notready < now:
            return MEMBER_NOT_READY, UNKNOWN_GRACE_EXCEEDED
        return (MEMBER_UNKNOWN, LEASE_EXPIRED) if ready else (MEMBER_NOT_READY, POD_NOT_READY)
    return (MEMBER_READY, LEASE_SUCCEEDED) if ready else (MEMBER_NOT_READY, POD_NOT_READY)


def members(spec: EtcdSpec, observed: Observed, previous: Sequence[Mapping[str, Any]], now: float,
            thresholds: Thresholds) -> List[Dict[str, Any]]:
    """status.members, ordered by ordinal; lastTransitionTime kept while a member's status stays the same."""
    before = {m.get('name'): m for m in previous or []}
    out = []
    for name in sorted(observed.member_leases, key=c.ordinal_of):
        lease = observed.member_leases[name]
        holder = parse_holder(((lease.get('spec') or {}).get('holderIdentity')))
        if holder is None:
            continue
        status, reason = member_state(lease, observed.pods.get(name), now, thresholds)
        old = before.get(name) or {}
        transition = old.get('lastTransitionTime') if old.get('status') == status and old.get('lastTransitionTime') \
            else rfc3339(now)
        out.append({'name': name, 'id': holder['id'], 'role': holder['role'], 'status': status, 'reason': reason,
                    'lastTransitionTime': transition})
    return out


def replaced_members(previous: Sequence[Mapping[str, Any]], current: Sequence[Mapping[str, Any]]) -> List[str]:
    """What changed identity since the last status: a member (by name) whose etcd member id is new lost its data
    and rejoined as a new member (its Lease now names the new id). One line per member, for an Event."""
    before = {m.get('name'): m.get('id') for m in previous or [] if m.get('id')}
    return ['%s is a new etcd member %s (was %s): it came back without its data and rejoined from the others' % (
        m['name'], m['id'], before[m['name']]) for m in current
        if m.get('id') and before.get(m['name']) and before[m['name']] != m['id']]


def is_learner(lease: Optional[Mapping[str, Any]]) -> bool:
    """The member program's word on its Lease that its etcd is a learner (components.MEMBER_LEARNER)."""
    annotations = ((lease or {}).get('metadata') or {}).get('annotations') or {}
    return str(annotations.get(c.MEMBER_LEARNER, '')).lower() == 'true'


def quorate(ready: int, size: int) -> bool:
    return size > 0 and ready > size // 2


def backup_condition(spec: EtcdSpec, observed: Observed, now: float) -> Optional[tuple]:
    """(status, reason, message) of BackupReady from the snapshot Leases; None without a store (no condition)."""
    if not spec.backups_enabled:
        return None
    full = observed.snapshot_leases.get(c.FULL_SNAP)
    delta = observed.snapshot_leases.get(c.DELTA_SNAP)
    full_at, delta_at = renewed_at(full), renewed_at(delta)
    full_rev = ((full or {}).get('spec') or {}).get('holderIdentity')
    delta_rev = ((delta or {}).get('spec') or {}).get('holderIdentity')
    if full_at is None and delta_at is None:
        return UNKNOWN, 'Unknown', 'no snapshot has been taken yet'
    if full_at is None or now - full_at > FULL_SNAPSHOT_MAX_AGE:
        return FALSE, 'FullBackupFailed', 'the newest full snapshot is %s' % (
            'missing' if full_at is None else 'from %s, older than %dh' % (rfc3339(full_at), FULL_SNAPSHOT_MAX_AGE // 3600))
    period = spec.backup.delta_snapshot_period
    if period > 0 and (delta_at or full_at) < now - max(DELTA_PERIODS_LATE * period, 60.0):
        return FALSE, 'IncrementalBackupFailed', 'no delta snapshot since %s (deltaSnapshotPeriod %ds)' % (
            rfc3339(delta_at or full_at), int(period))
    if delta_at is not None and delta_at >= full_at and delta_rev:
        return TRUE, 'IncrementalBackupSucceeded', 'delta snapshot at revision %s, %s' % (delta_rev, rfc3339(delta_at))
    return TRUE, 'FullBackupSucceeded', 'full snapshot at revision %s, %s' % (full_rev, rfc3339(full_at))


def verified_backup(observed: Observed) -> Optional[Dict[str, Any]]:
    """The newest verified full snapshot the full-snap Lease records: {'revision': int, 'at': seconds}; None when
    none is recorded (then no destructive step is planned)."""
    full = observed.snapshot_leases.get(c.FULL_SNAP) or {}
    annotations = (full.get('metadata') or {}).get('annotations') or {}
    revision, at = annotations.get(VERIFIED_REVISION), parse_micro(annotations.get(VERIFIED_AT))
    if not (revision or '').isdigit() or at is None:
        return None
    return {'revision': int(revision), 'at': at}


def volumes_condition(spec: EtcdSpec, observed: Observed) -> tuple:
    """DataVolumesReady: every member pod's PVC `<volumeClaimTemplate>-<pod>` exists and is not Lost."""
    missing, lost = [], []
    for pod in sorted(observed.pods, key=c.ordinal_of):
        claim = '%s-%s' % (spec.volume_claim_template, pod)
        pvc = observed.pvcs.get(claim)
        if pvc is None:
            missing.append(claim)
        elif (pvc.get('status') or {}).get('phase') == 'Lost':
            lost.append(claim)
    if lost:
        return FALSE, 'PersistentVolumeClaimLost', 'lost: %s' % ', '.join(lost)
    if missing:
        return FALSE, 'PersistentVolumeClaimMissing', 'missing for running pods: %s' % ', '.join(missing)
    return TRUE, 'NoErrorsFound', 'the data volumes of %d pod(s) are in place' % len(observed.pods)


def compute_status(spec: EtcdSpec, observed: Observed, previous: Optional[Mapping[str, Any]], now: float,
                   thresholds: Thresholds = Thresholds()) -> Dict[str, Any]:
    """The status the status sync writes. observedGeneration, lastOperation and lastErrors are kept from `previous`
    (the reconcile writes them)."""
    previous = previous or {}
    found = members(spec, observed, previous.get('members') or [], now, thresholds)
    ready_members = [m for m in found if m['status'] == MEMBER_READY]
    # a learner (a scale-up's member joining) does not vote: it is not counted toward the quorum either way
    learners = sorted((m['name'] for m in found if is_learner(observed.member_leases.get(m['name']))), key=c.ordinal_of)
    voters = [m for m in found if m['name'] not in learners]
    ready_voters = [m for m in voters if m['status'] == MEMBER_READY]
    size = len(voters) if quorate(len(ready_voters), len(voters)) else max(spec.replicas - len(learners), 1)
    is_quorate = quorate(len(ready_voters), size)
    joining = ' (%s joining as learner%s)' % (', '.join(learners), 's' if len(learners) > 1 else '') \
        if learners else ''
    conditions = list(previous.get('conditions') or [])
    if is_quorate:
        conditions = set_condition(conditions, READY, TRUE, 'Quorate', 'the cluster is quorate: %d of %d members Ready%s'
                                   % (len(ready_voters), size, joining), now)
    else:
        conditions = set_condition(conditions, READY, FALSE, 'QuorumLost', 'the cluster has lost quorum: %d of %d '
                                   'members Ready%s' % (len(ready_voters), size, joining) if found else
                                   'no member has reported yet (0 of %d)' % spec.replicas, now)
    wanted = set(member_names(spec.name, spec.replicas))
    not_ready = sorted((wanted - {m['name'] for m in ready_members}), key=c.ordinal_of)
    if spec.replicas > 0 and not not_ready:
        conditions = set_condition(conditions, ALL_MEMBERS_READY, TRUE, 'AllMembersReady', 'all %d members are Ready'
                                   % spec.replicas, now)
    else:
        reporting = {m['name']: m for m in found}
        parts = ['%s %s' % (n, reporting[n]['reason']) if n in reporting else '%s not reporting' % n for n in not_ready]
        message = 'not Ready: %s' % ', '.join(parts) if parts else 'no members wanted (replicas 0)'
        conditions = set_condition(conditions, ALL_MEMBERS_READY, FALSE, 'NotAllMembersReady', message, now)
    backup = backup_condition(spec, observed, now)
    if backup is None:
        conditions = [cond for cond in conditions if cond.get('type') != BACKUP_READY]
    else:
        conditions = set_condition(conditions, BACKUP_READY, backup[0], backup[1], backup[2], now)
    volumes = volumes_condition(spec, observed)
    conditions = set_condition(conditions, DATA_VOLUMES_READY, volumes[0], volumes[1], volumes[2], now)
    sts_status = (observed.statefulset or {}).get('status') or {}
    ready_replicas = int(sts_status.get('readyReplicas') or 0)
    status: Dict[str, Any] = {
        'etcd': {'apiVersion': 'apps/v1', 'kind': 'StatefulSet', 'name': c.statefulset_name(spec)},
        'serviceName': c.client_service_name(spec),
        'members': found,
        'clusterSize': size,
        'replicas': int(sts_status.get('replicas') or 0),
        'readyReplicas': ready_replicas,
        'currentReplicas': int(sts_status.get('currentReplicas') or 0),
        'updatedReplicas': int(sts_status.get('updatedReplicas') or 0),
        'ready': spec.replicas > 0 and ready_replicas == spec.replicas and is_quorate,
        'labelSelector': c.label_selector(spec),
        'selector': c.selector_string(spec),
        'peerUrlTLSEnabled': _peer_tls_enabled(spec, observed, previous),
        'conditions': conditions,
    }
    for key in ('observedGeneration', 'lastOperation', 'lastErrors', 'lastError'):
        if key in previous:
            status[key] = previous[key]
    return status


def _peer_tls_enabled(spec: EtcdSpec, observed: Observed, previous: Mapping[str, Any]) -> bool:
    """druid: "the status of enabling TLS for peer communication across all etcd-members": asked for, and every
    running member's Lease says etcd lists https peer URLs for it (peer_tls.py). While the StatefulSet has 0 replicas
    (hibernated) no member runs to say it: the value the members left is kept, the evidence of what their data's
    membership names when they wake (peer_tls.wakes_over_http)."""
    current = int(((observed.statefulset or {}).get('spec') or {}).get('replicas') or 0)
    if observed.statefulset is not None and current == 0 and isinstance(previous.get('peerUrlTLSEnabled'), bool):
        return previous['peerUrlTLSEnabled']
    return spec.peer_tls_enabled and not pt.members_without_peer_tls(spec, observed.member_leases, current)


def condition_true(status: Mapping[str, Any], type_: str) -> bool:
    cond = get_condition(status.get('conditions'), type_)
    return bool(cond and cond.get('status') == TRUE)


# --- The read side: one Etcd's status as an operator reads it (steward.cluster.etcd_druid_info) ---------------------

def _reported_condition(cond: Mapping[str, Any]) -> Dict[str, Any]:
    return dict(status=cond.get('status'), reason=cond.get('reason'), message=cond.get('message'),
                last_transition_time=cond.get('lastTransitionTime'), last_update_time=cond.get('lastUpdateTime'))


def etcd_problems(etcd: Mapping[str, Any], status: Mapping[str, Any], conditions: Mapping[str, Any]) -> List[str]:
    """Why an Etcd is not healthy, in the order an operator looks: lifecycle, reconcile, readiness, conditions.
    Ready and AllMembersReady must be True, BackupReady too when the spec has a store (druid sets it only then)."""
    md, spec = etcd.get('metadata') or {}, etcd.get('spec') or {}
    found = []
    if md.get('deletionTimestamp'):
        found.append('being deleted')
    if spec.get('replicas') == 0:
        found.append('hibernated (replicas 0)')
    observed, generation = status.get('observedGeneration'), md.get('generation')
    if observed is None:
        found.append('not reconciled yet')
    elif generation is not None and observed < generation:
        found.append('generation %s not reconciled yet (observed %s)' % (generation, observed))
    if status.get('ready') is not True:
        found.append('not ready (%s of %s replicas ready)' % (status.get('readyReplicas') or 0, spec.get('replicas')))
    wanted = (READY, ALL_MEMBERS_READY) + ((BACKUP_READY,) if ((spec.get('backup') or {}).get('store')) else ())
    for kind in wanted:
        cond = conditions.get(kind)
        if cond is None:
            found.append('%s not reported' % kind)
        elif cond['status'] != TRUE:
            found.append('%s=%s (%s)' % (kind, cond['status'], cond['reason'] or 'no reason'))
    return found


def describe_etcd(etcd: Mapping[str, Any]) -> Dict[str, Any]:
    """One Etcd object as the info module reports it (plain data in, plain data out), with the verdict `healthy`
    and the `problems` behind it."""
    md, spec, status = etcd.get('metadata') or {}, etcd.get('spec') or {}, etcd.get('status') or {}
    conditions = {cond['type']: _reported_condition(cond) for cond in status.get('conditions') or [] if cond.get('type')}
    reported = [dict(name=m.get('name'), id=m.get('id'), role=m.get('role'), status=m.get('status'),
                     reason=m.get('reason'), last_transition_time=m.get('lastTransitionTime'))
                for m in status.get('members') or []]
    last = status.get('lastOperation')
    annotations = md.get('annotations') or {}
    problems = etcd_problems(etcd, status, conditions)
    return dict(
        name=md.get('name'), namespace=md.get('namespace'), replicas=spec.get('replicas'),
        ready=status.get('ready') is True, cluster_size=status.get('clusterSize'),
        current_replicas=status.get('currentReplicas'), ready_replicas=status.get('readyReplicas') or 0,
        conditions=conditions, members=reported,
        leader=next((m['name'] for m in reported if m['role'] == ROLE_LEADER), None),
        last_operation=dict(type=last.get('type'), state=last.get('state'), description=last.get('description'),
                            last_update_time=last.get('lastUpdateTime'), run_id=last.get('runID')) if last else None,
        last_errors=[dict(code=e.get('code'), description=e.get('description'), observed_at=e.get('observedAt'))
                     for e in status.get('lastErrors') or []],
        generation=md.get('generation'), observed_generation=status.get('observedGeneration'),
        reconcile_requested=annotations.get(OPERATION_ANNOTATION) == OPERATION_RECONCILE,
        suspended=SUSPEND_ANNOTATION in annotations,
        healthy=not problems, problems=problems)


def etcd_report(found: Sequence[Mapping[str, Any]], name: Optional[str] = None) -> Dict[str, Any]:
    """The info module's answer for the listed Etcd objects (only `name`, when given), sorted by namespace and
    name: `etcds` described, `healthy` only when there is at least one and every one is healthy."""
    if name is not None:
        found = [e for e in found if (e.get('metadata') or {}).get('name') == name]
    etcds = sorted((describe_etcd(e) for e in found), key=lambda e: (e['namespace'] or '', e['name'] or ''))
    return dict(etcds=etcds, healthy=bool(etcds) and all(e['healthy'] for e in etcds))
