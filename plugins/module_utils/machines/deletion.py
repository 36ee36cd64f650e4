# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One Machine being deleted: MCM's deletion flow with a typed step.

Terminating -> GetVMStatus -> InitiateDrain -> (DelVolumesAttachments, forced drains and a Node that is gone) ->
InitiateVMDeletion -> InitiateNodeDeletion -> InitiateFinalizerRemoval. Before the drain, the Node gets the
condition `Terminating=True` (MCM's UpdateNodeTerminationCondition; other controllers read it). MCM keeps the step inside the
free-text `lastOperation.description` and finds it with strings.Contains; here it is `status.lastOperation.step`
(constants.Step), written with every transition, and the description is for people.

`plan_deletion` says what the current step needs (a status write, a driver call or a cluster action);
`after_step` turns the outcome of that call or action into the next step. The shell may chain steps within
one pass; every transition is written before the next step starts, so a crash resumes where it stopped.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common.durations import format_duration
from ansible_collections.steward.cluster.plugins.module_utils.common.golang import parse_bool
from ansible_collections.steward.cluster.plugins.module_utils.machines import health as health_mod
from ansible_collections.steward.cluster.plugins.module_utils.machines import objects as o
from ansible_collections.steward.cluster.plugins.module_utils.machines.codes import Call, Code, Next, Retry, next_step
from ansible_collections.steward.cluster.plugins.module_utils.machines.config import MachineTimeouts, Settings
from ansible_collections.steward.cluster.plugins.module_utils.machines.constants import (
    LABEL_FORCE_DELETION,
    NODE_READY,
    NODE_TERMINATING,
    READONLY_FILESYSTEM,
    TERMINATING_SCALE_DOWN,
    TERMINATING_UNHEALTHY,
    OpState,
    OpType,
    Phase,
    Step,
)
from ansible_collections.steward.cluster.plugins.module_utils.kube.mcm import LABEL_NODE
from ansible_collections.steward.cluster.plugins.module_utils.machines.drain import DrainPlan
from ansible_collections.steward.cluster.plugins.module_utils.machines.errors import DriverError
from ansible_collections.steward.cluster.plugins.module_utils.machines.inventory import Lookup
from ansible_collections.steward.cluster.plugins.module_utils.machines.plan import (
    ClusterAction,
    Event,
    MachinePlan,
    current_status,
    last_operation,
)


@dataclasses.dataclass(frozen=True)
class DeletionView:
    machine: Mapping[str, Any]
    node: Optional[Mapping[str, Any]]
    lookup: Optional[Lookup]
    timeouts: MachineTimeouts


def current_step(machine: Mapping[str, Any]) -> Step:
    """The typed step; a machine written by MCM (no step field) or a fresh deletion starts at GetVMStatus."""
    step = Step.from_key(o.last_operation(machine).get('step'))
    if o.phase(machine) != Phase.TERMINATING or step is None:
        return Step.GET_VM_STATUS
    return step


def _to(plan: MachinePlan, step: Step, description: str, now: float, state: OpState = OpState.PROCESSING,
        error_code: str = '', retry: Retry = Retry.SHORT) -> MachinePlan:
    plan.status = dict(plan.status or {})
    plan.status['lastOperation'] = last_operation(OpType.DELETE, state, description, now, error_code, step)
    plan.retry = retry
    return plan


def plan_deletion(view: DeletionView, now: float) -> MachinePlan:
    m = view.machine
    plan = MachinePlan(key=o.key(m), uid=o.uid(m))
    if not o.has_finalizer(m):
        return plan      # nothing of ours holds it; the API server removes it
    if o.phase(m) != Phase.TERMINATING:
        plan.status = {'currentStatus': current_status(Phase.TERMINATING, now)}
        plan.events.append(Event('MachineTerminating', 'deleting machine %s (VM %s, node %s)' % (
            o.name(m), o.provider_id(m) or 'none', o.node_name(m) or 'none')))
        return _to(plan, Step.GET_VM_STATUS, Step.GET_VM_STATUS.value, now)
    step = current_step(m)
    if step == Step.GET_VM_STATUS:
        return _get_vm_status(view, plan, now)
    if step == Step.INITIATE_DRAIN:
        if not o.node_name(m):
            return _to(plan, Step.INITIATE_VM_DELETION, 'Skipping drain as nodeName is not a valid one for machine. %s'
                       % Step.INITIATE_VM_DELETION.value, now)
        if view.node is None:
            # Its pods are gone with it, but volumes may still be attached to the name: their VolumeAttachments go
            # before the VM (as after a forced drain), or a volume's next attach waits on the stale one
            return _to(plan, Step.DELETE_VOLUME_ATTACHMENTS, 'Node %s does not exist; skipping drain. %s' % (
                o.node_name(m), Step.DELETE_VOLUME_ATTACHMENTS.value), now)
        plan.action, plan.step = ClusterAction.DRAIN, step
        return plan
    if step == Step.DELETE_VOLUME_ATTACHMENTS:
        plan.action, plan.step = ClusterAction.DELETE_VOLUME_ATTACHMENTS, step
        return plan
    if step == Step.INITIATE_VM_DELETION:
        plan.call, plan.step = Call.DELETE, step
        return plan
    if step == Step.INITIATE_NODE_DELETION:
        plan.action, plan.step = ClusterAction.DELETE_NODE, step
        return plan
    plan.action, plan.step = ClusterAction.REMOVE_FINALIZER, Step.INITIATE_FINALIZER_REMOVAL
    return plan


def _get_vm_status(view: DeletionView, plan: MachinePlan, now: float) -> MachinePlan:
    m = view.machine
    lookup = view.lookup
    if lookup is None:
        plan.retry = Retry.SHORT
        plan.waiting = 'waiting for a cloud listing of the class'
        return plan
    step, retry = next_step(Call.STATUS, lookup.code)
    if step == Next.CREATE:     # NotFound (or no status call)
        return _to(plan, Step.INITIATE_DRAIN, 'VM was not found at provider. Moving forward to node drain. %s' %
                   Step.INITIATE_DRAIN.value, now)
    if step == Next.RETRY:
        return _to(plan, Step.GET_VM_STATUS, 'Error while getting VM status (%s), retrying. %s' % (
            lookup.code.mcm_name, Step.GET_VM_STATUS.value), now, OpState.FAILED, lookup.code.mcm_name, retry)
    vm = lookup.vm
    if vm is not None and vm.node_name and not o.node_name(m):
        plan.metadata = {'labels': {LABEL_NODE: vm.node_name}}
    return _to(plan, Step.INITIATE_DRAIN, Step.INITIATE_DRAIN.value, now)


def force_reason(view: DeletionView, settings: Settings, now: float) -> str:
    """Why the drain is forced ('' when it is not): the force-deletion label, the drain timeout (from the
    deletionTimestamp), the Node NotReady or ReadonlyFilesystem for longer than the limit, or the cloud saying
    the VM is stopped or gone (its pods can never be evicted gracefully)."""
    m = view.machine
    if parse_bool(str(o.labels(m).get(LABEL_FORCE_DELETION, ''))) is True:
        return 'label %s=%s' % (LABEL_FORCE_DELETION, o.labels(m)[LABEL_FORCE_DELETION])
    deleted = o.deletion_time(m)
    if deleted is not None and now - deleted > view.timeouts.drain:
        return 'drain timeout %s passed' % format_duration(view.timeouts.drain)
    lookup = view.lookup
    if lookup is not None and lookup.code == Code.OK and lookup.vm is not None and lookup.vm.state.halted:
        return 'the cloud reports VM %s %s' % (lookup.vm.provider_id, lookup.vm.state.value)
    for kind, bad in ((NODE_READY, ('False', 'Unknown')), (READONLY_FILESYSTEM, ('True', 'Unknown'))):
        since = health_mod.condition_since(view.node, kind, bad)
        when = o.parse_time(since) if since else None
        if when is not None and now - when > settings.node_not_ready_force_after:
            return 'node %s %s for more than %s' % (o.node_name(m), 'NotReady' if kind == NODE_READY else kind,
                                                    format_duration(settings.node_not_ready_force_after))
    return ''


def termination_patch(view: DeletionView, now: float) -> Optional[Dict[str, Any]]:
    """The Node status patch that sets condition Terminating=True (MCM's UpdateNodeTerminationCondition), None when
    the Node has it already. A condition someone set before keeps its reason and message; otherwise the reason
    follows the machine's phase as MCM's does (Failed: Unhealthy, else ScaleDown). The patch replaces the condition
    list, so it carries the Node's resourceVersion (a Conflict if the kubelet wrote in between; retried)."""
    node = view.node
    if node is None:
        return None
    conditions = list(health_mod.node_conditions(node))
    old = next((c for c in conditions if c.get('type') == NODE_TERMINATING), None)
    if old is not None and old.get('status') == 'True':
        return None
    phase = o.phase(view.machine)
    if old is not None and phase == Phase.TERMINATING:
        reason, message = old.get('reason') or '', old.get('message') or ''
    elif phase == Phase.FAILED:
        reason, message = TERMINATING_UNHEALTHY, 'Machine Controller is terminating failed machine'
    else:
        reason, message = TERMINATING_SCALE_DOWN, 'Machine Controller is scaling down machine'
    condition = {'type': NODE_TERMINATING, 'status': 'True', 'reason': reason, 'message': message,
                 'lastHeartbeatTime': o.stamp(now), 'lastTransitionTime': o.stamp(now)}
    conditions = [c for c in conditions if c.get('type') != NODE_TERMINATING] + [condition]
    patch: Dict[str, Any] = {'status': {'conditions': conditions}}
    if o.resource_version(node):
        patch['metadata'] = {'resourceVersion': o.resource_version(node)}
    return patch


def after_termination_mark_failed(view: DeletionView, error: Exception, now: float) -> MachinePlan:
    """The Node could not be marked Terminating and the drain is not forced: MCM does not drain then, and retries."""
    m = view.machine
    plan = MachinePlan(key=o.key(m), uid=o.uid(m))
    return _to(plan, Step.INITIATE_DRAIN, 'Drain failed due to failure in update of node conditions - %s. Will retry in '
               'next sync. %s' % (error, Step.INITIATE_DRAIN.value), now, OpState.FAILED)


def drain_deadline(view: DeletionView) -> Optional[float]:
    deleted = o.deletion_time(view.machine)
    return None if deleted is None else deleted + view.timeouts.drain


def after_drain(view: DeletionView, result: DrainPlan, forced: str, now: float) -> MachinePlan:
    m = view.machine
    plan = MachinePlan(key=o.key(m), uid=o.uid(m))
    if result.done:
        if forced:
            plan.events.append(Event('MachineDrainForced', 'forced drain of node %s (%s)' % (o.node_name(m), forced), warning=True))
            return _to(plan, Step.DELETE_VOLUME_ATTACHMENTS, 'Force Drain successful (%s). %s' % (
                forced, Step.DELETE_VOLUME_ATTACHMENTS.value), now)
        plan.status = {'conditions': [_drained(True, 'DrainComplete', 'node %s drained' % o.node_name(m), now)]}
        return _to(plan, Step.INITIATE_VM_DELETION, 'Drain successful. %s' % Step.INITIATE_VM_DELETION.value, now)
    deadline = drain_deadline(view)
    until = ' until the drain timeout at %s' % o.stamp(deadline) if deadline is not None else ''
    if result.blocked:
        message = 'Drain blocked: %s; evictions are retried%s. %s' % (
            '; '.join(result.blocked), until, Step.INITIATE_DRAIN.value)
        reason = 'PodDisruptionBudget'
    else:
        message = 'Drain in progress: %s. %s' % (result.message, Step.INITIATE_DRAIN.value)
        reason = 'Draining'
    old = o.last_operation(m).get('description')
    plan.status = {'conditions': [_drained(False, reason, message, now)]}
    if old != message and result.blocked:
        plan.events.append(Event('MachineDrainBlocked', message, warning=True))
    return _to(plan, Step.INITIATE_DRAIN, message, now)


def _drained(ok: bool, reason: str, message: str, now: float) -> dict:
    """The machine's `Drained` condition (ours; a deleting machine no longer mirrors its Node's conditions)."""
    return {'type': 'Drained', 'status': 'True' if ok else 'False', 'reason': reason, 'message': message[:1024],
            'lastTransitionTime': o.stamp(now)}


def after_step(view: DeletionView, step: Step, error: Optional[Exception], now: float) -> MachinePlan:
    """The next step after a cluster action (volume attachments, node deletion, finalizer) or DeleteMachine."""
    m = view.machine
    plan = MachinePlan(key=o.key(m), uid=o.uid(m))
    if step == Step.INITIATE_VM_DELETION:
        return _after_delete_vm(plan, error, now)
    if error is not None:
        return _to(plan, step, 'Failed: %s. Retrying. %s' % (error, step.value), now, OpState.FAILED)
    if step == Step.DELETE_VOLUME_ATTACHMENTS:
        return _to(plan, Step.INITIATE_VM_DELETION, 'Deleted volume attachments of node %s. %s' % (
            o.node_name(m), Step.INITIATE_VM_DELETION.value), now)
    if step == Step.INITIATE_NODE_DELETION:
        return _to(plan, Step.INITIATE_FINALIZER_REMOVAL, 'Deletion of Node Object %r is successful. %s' % (
            o.node_name(m), Step.INITIATE_FINALIZER_REMOVAL.value), now)
    return plan


def _after_delete_vm(plan: MachinePlan, error: Optional[Exception], now: float) -> MachinePlan:
    if error is None:
        plan.events.append(Event('MachineVMDeleted', 'VM deleted'))
        return _to(plan, Step.INITIATE_NODE_DELETION, 'VM deletion was successful. %s' % Step.INITIATE_NODE_DELETION.value, now)
    code = error.code if isinstance(error, DriverError) else Code.INTERNAL
    step, retry = next_step(Call.DELETE, code)
    if step == Next.DONE:
        return _to(plan, Step.INITIATE_NODE_DELETION, 'VM not found. Continuing deletion flow. %s' %
                   Step.INITIATE_NODE_DELETION.value, now)
    text = error.args[0] if error.args else str(error)
    if step == Next.RETRY:
        plan = _to(plan, Step.INITIATE_VM_DELETION, 'VM deletion failed due to - %s. However, will re-try in the next '
                   'resync. %s' % (text, Step.INITIATE_VM_DELETION.value), now, OpState.FAILED, code.mcm_name, retry)
        if isinstance(error, DriverError) and error.retry_after is not None:
            plan.retry_after = error.retry_after
        return plan
    plan.events.append(Event('MachineVMDeletionFailed', 'VM deletion failed: %s' % error, warning=True))
    return _to(plan, Step.INITIATE_VM_DELETION, 'VM deletion failed due to - %s. Aborting operation. %s' % (
        text, Step.INITIATE_VM_DELETION.value), now, OpState.FAILED, code.mcm_name, Retry.LONG)
