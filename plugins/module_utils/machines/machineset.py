# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One MachineSet: keep `replicas` machines, pick scale-down victims in MCM's order, report status.

* too few machines (not being deleted): create the difference (at most `burst_replicas` per pass; the shell
  creates them in slow-start batches 1, 2, 4, ... and stops at the first failure) unless the set is frozen;
* too many: delete the first `diff` machines in MCM's order: `machinepriority.machine.sapcloud.io` (lower
  first, default 3), then the `marked-for-deletion-time` annotation (older first), then phase (Terminating,
  Failed, CrashLoopBackOff, Unknown, Pending, Available, Running), then oldest;
* machines a scaler marked (priority 1, marked-for-deletion-time at or before the set's
  `last-deployment-replica-change-by-scaler-time`) are deleted even when the count matches (MCM); not while the
  set is short of machines;
* Failed machines are deleted (the set then creates their replacements);
* every active machine gets the template's in-place fields (node template, timeouts) without a rollout;
* a set being deleted deletes its machines and drops its finalizer when none is left.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.kube.conditions import get_condition, set_condition
from ansible_collections.steward.cluster.plugins.module_utils.machines import objects as o
from ansible_collections.steward.cluster.plugins.module_utils.machines.constants import (
    ANNOTATION_MARKED_FOR_DELETION,
    ANNOTATION_PRIORITY,
    ANNOTATION_SCALER_CHANGE_TIME,
    COND_FROZEN,
    FINALIZER,
    IN_PLACE_FIELDS,
    LABEL_FREEZE,
    LABEL_SCALE_UP_DISABLED,
    LABEL_UPDATE_RESULT,
    PHASE_DELETE_RANK,
    PRIORITY_MARKED,
    UPDATE_SUCCESSFUL,
    Phase,
)
from ansible_collections.steward.cluster.plugins.module_utils.machines.plan import Event

Obj = Mapping[str, Any]


@dataclasses.dataclass
class SetPlan:
    key: str
    uid: str
    create: int = 0                                       # machines to create from the template
    delete: List[str] = dataclasses.field(default_factory=list)        # machine names to delete
    delete_reasons: Dict[str, str] = dataclasses.field(default_factory=dict)
    adopt: List[str] = dataclasses.field(default_factory=list)         # orphan machines to take ownership of
    machine_patches: Dict[str, Dict[str, Any]] = dataclasses.field(default_factory=dict)  # name -> in-place spec
    status: Optional[Dict[str, Any]] = None
    metadata: Optional[Dict[str, Any]] = None             # labels (freeze) / finalizers
    remove_finalizer: bool = False
    events: List[Event] = dataclasses.field(default_factory=list)
    waiting: str = ''

    @property
    def has_work(self) -> bool:
        """Whether applying the plan writes anything (otherwise no job is started for the set)."""
        return bool(self.create or self.delete or self.adopt or self.machine_patches or self.status or self.metadata
                    or self.remove_finalizer or self.events)


def victim_order(machines: Sequence[Obj]) -> List[Obj]:
    """MCM's ActiveMachines sort: the first ones are deleted first."""
    def rank(m: Obj) -> tuple:
        marked = o.parse_time(o.annotations_of(m).get(ANNOTATION_MARKED_FOR_DELETION))
        return (o.priority(m), 0 if marked is not None else 1, marked or 0.0,
                PHASE_DELETE_RANK.get(o.phase(m), 4), o.created_at(m), o.name(m))
    return sorted(machines, key=rank)


def marked_by_scaler(machines: Sequence[Obj], ms: Obj) -> List[Obj]:
    """MCM's getMachinesMarkedForDeletion: machines a scaler chose (priority 1 with a marked-for-deletion time) at or
    before the set's last scaler change. They go even when the replica count already matches: the autoscaler
    lowers replicas and marks its choice, and the set must not keep that machine and delete another."""
    scaled_at = o.parse_time(o.annotations_of(ms).get(ANNOTATION_SCALER_CHANGE_TIME))
    if scaled_at is None:
        return []
    out = []
    for m in machines:
        if str(o.annotations_of(m).get(ANNOTATION_PRIORITY) or '') != PRIORITY_MARKED:
            continue
        marked = o.parse_time(o.annotations_of(m).get(ANNOTATION_MARKED_FOR_DELETION))
        if marked is not None and marked <= scaled_at:
            out.append(m)
    return out


def in_place_patches(ms: Obj, machines: Sequence[Obj]) -> Dict[str, Dict[str, Any]]:
    """Spec patches that give every active machine (not Failed, not Terminating, not deleting) the set template's
    in-place fields: the node template and the per-machine timeouts (MCM's syncMachinesNodeTemplates and
    syncMachinesConfig). No rollout: the machines stay, their Nodes follow (node_template.py)."""
    want = (o.spec(ms).get('template') or {}).get('spec') or {}
    wanted = [(k, want.get(k)) for k in IN_PLACE_FIELDS]
    patches: Dict[str, Dict[str, Any]] = {}
    for m in machines:
        have = o.spec(m)
        if all(have.get(k) == v for k, v in wanted):      # the usual case, checked first: every pass, every machine
            continue
        if o.deleting(m) or o.phase(m) in (Phase.FAILED, Phase.TERMINATING):
            continue
        patches[o.name(m)] = {'spec': {k: o.replacing_patch(have.get(k), v) for k, v in wanted if have.get(k) != v}}
    return patches


def available(machine: Obj, min_ready_seconds: int, now: float) -> bool:
    """Running for at least minReadySeconds (MCM's `Available` in the deletion order)."""
    if o.phase(machine) != Phase.RUNNING:
        return False
    since = o.phase_time(machine)
    return min_ready_seconds <= 0 or (since is not None and now - since >= min_ready_seconds)


def template_labels(ms: Obj) -> Mapping[str, str]:
    return ((o.spec(ms).get('template') or {}).get('metadata') or {}).get('labels') or {}


def set_status(ms: Obj, machines: Sequence[Obj], now: float) -> Dict[str, Any]:
    live = [m for m in machines if not o.deleting(m)]
    labels = template_labels(ms)
    min_ready = o.int_field(o.spec(ms), 'minReadySeconds')
    failed = [{'name': o.name(m), 'providerID': o.provider_id(m), 'ownerRef': o.name(ms),
               'lastOperation': dict(o.last_operation(m))}
              for m in live if o.phase(m) == Phase.FAILED]
    status = {
        'replicas': len(live),
        'fullyLabeledReplicas': sum(1 for m in live if all(o.labels(m).get(k) == v for k, v in labels.items())),
        'readyReplicas': sum(1 for m in live if o.phase(m) == Phase.RUNNING),
        'availableReplicas': sum(1 for m in live if available(m, min_ready, now)),
        'observedGeneration': o.generation(ms),
        'failedMachines': failed or None,
    }
    return status


def plan_set(ms: Obj, machines: Sequence[Obj], orphans: Sequence[Obj], now: float, burst: int,
             frozen: str = '', replace_failed: bool = True) -> SetPlan:
    """`machines`: the set's own machines (deleting ones included); `orphans`: machines without a controller that
    the set's selector matches (adopted). `frozen` names the rule that stops scale-up ('' when none)."""
    plan = SetPlan(key=o.key(ms), uid=o.uid(ms))
    selector = o.spec(ms).get('selector')
    plan.adopt = [o.name(m) for m in orphans if not o.deleting(m) and o.selector_matches(selector, o.labels(m))]
    if o.deleting(ms):
        live = [m for m in machines if not o.deleting(m)]
        plan.delete = [o.name(m) for m in live]
        plan.delete_reasons = {o.name(m): 'machine set deleted' for m in live}
        plan.remove_finalizer = not machines and o.has_finalizer(ms)
        plan.status = _with_status(ms, set_status(ms, machines, now))
        return plan
    if not o.has_finalizer(ms):
        plan.metadata = {'finalizers': list(o.meta(ms).get('finalizers') or []) + [FINALIZER]}
    live = [m for m in machines if not o.deleting(m) and o.phase(m) != Phase.TERMINATING]
    wanted = o.replicas(ms)
    diff = len(live) - wanted
    # In-place updates (inplace.py): a machine that moved in carries update-result=successful until this set's
    # replicas count it; it is not a surplus to delete (MCM's manageReplicas)
    deletable = [m for m in live if o.labels(m).get(LABEL_UPDATE_RESULT) != UPDATE_SUCCESSFUL]
    if diff > 0:
        diff = max(0, min(diff, len(deletable) - wanted))
    if diff < 0 and LABEL_SCALE_UP_DISABLED in o.labels(ms):
        # an old set of an in-place update: its machines leave it before its replicas drop; it creates none
        plan.waiting = 'scale-up disabled (%s): an in-place update moves its machines' % LABEL_SCALE_UP_DISABLED
        diff = 0
    if replace_failed:
        for m in live:
            if o.phase(m) == Phase.FAILED:
                plan.delete.append(o.name(m))
                plan.delete_reasons[o.name(m)] = 'replacing failed machine'
    if diff < 0:
        if frozen:
            plan.waiting = frozen
        else:
            plan.create = min(-diff, burst)
    elif diff > 0:
        for m in victim_order(deletable)[:min(diff, burst)]:
            if o.name(m) not in plan.delete:
                plan.delete.append(o.name(m))
                plan.delete_reasons[o.name(m)] = 'scale down to %d' % wanted
    for m in marked_by_scaler(live, ms) if diff >= 0 else ():
        if o.name(m) not in plan.delete and len(plan.delete) < burst:
            plan.delete.append(o.name(m))
            plan.delete_reasons[o.name(m)] = 'marked for deletion by a scaler (%s=%s, %s=%s)' % (
                ANNOTATION_PRIORITY, PRIORITY_MARKED, ANNOTATION_MARKED_FOR_DELETION,
                o.annotations_of(m).get(ANNOTATION_MARKED_FOR_DELETION))
    plan.machine_patches = in_place_patches(ms, live)
    plan.status = _with_status(ms, set_status(ms, machines, now))
    return plan


def _with_status(ms: Obj, status: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """Only what changed (None when nothing did), so an idle pass writes nothing."""
    current = o.status(ms)
    changed = {k: v for k, v in status.items() if current.get(k) != v and not (v is None and k not in current)}
    return changed or None


def freeze_patch(ms: Obj, frozen: bool, reason: str, message: str, now: float) -> Optional[Dict[str, Any]]:
    """Label `freeze: "True"` and condition Frozen (MCM's MachineSetFrozen), or their removal; None if already so."""
    labelled = o.labels(ms).get(LABEL_FREEZE) == 'True'
    cond = get_condition(o.status(ms).get('machineSetCondition') or [], COND_FROZEN)
    if frozen and labelled and cond is not None:
        return None
    if not frozen and not labelled and cond is None:
        return None
    conditions = [c for c in o.status(ms).get('machineSetCondition') or [] if c.get('type') != COND_FROZEN]
    if frozen:
        conditions = set_condition(conditions, COND_FROZEN, 'True', reason, message, now)
        for c in conditions:
            c.pop('lastUpdateTime', None)   # MachineSetCondition has no lastUpdateTime
    return {'metadata': {'labels': {LABEL_FREEZE: 'True' if frozen else None}},
            'status': {'machineSetCondition': conditions}}
