# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Applying the engine's plans: one home for the order of writes, calls and actions.

The controller applies plans against the Kubernetes API and the drivers; tests and benchmarks apply the
same plans against an in-memory world. Both implement `Target` (object writes, driver access, the few
cluster actions a deletion needs), so the order below is the only one there is:

* a machine: metadata, then spec, then its Node (the node template), then the driver call or cluster action,
  then status; a new VM's providerID and node are written before InitializeMachine (MCM's order). A deleting machine goes through as many deletion
  steps as it can in one go (each transition written before the next step);
* a set: adopt orphans, create machines in slow-start batches (1, 2, 4, ... stop at the first failure),
  delete machines, update machines in place (node template, timeouts), then status and finalizer;
* a deployment: create its new set, patch sets, delete sets, patch itself, status, finalizer.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.kube.conditions import set_condition
from ansible_collections.steward.cluster.plugins.module_utils.kube.objects import merge_patch
from ansible_collections.steward.cluster.plugins.module_utils.machines import objects as o
from ansible_collections.steward.cluster.plugins.module_utils.machines.codes import Call, Code, Next, next_step
from ansible_collections.steward.cluster.plugins.module_utils.machines.config import MachineTimeouts, Settings
from ansible_collections.steward.cluster.plugins.module_utils.machines.constants import (
    ANNOTATION_UPDATE_FAILED_REASON,
    FINALIZER,
    LABEL_UPDATE_RESULT,
    NODE_CONDITION_IN_PLACE,
    REASON_READY_FOR_UPDATE,
    REASON_SELECTED,
    REASON_UPDATE_FAILED,
    REASON_UPDATE_SUCCESSFUL,
    UPDATE_FAILED,
    UPDATE_SUCCESSFUL,
    OpState,
    OpType,
    Phase,
)
from ansible_collections.steward.cluster.plugins.module_utils.kube.mcm import (
    KIND_DEPLOYMENT,
    KIND_MACHINE,
    KIND_SET,
)
from ansible_collections.steward.cluster.plugins.module_utils.machines.deletion import (
    DeletionView,
    after_drain,
    after_step,
    after_termination_mark_failed,
    force_reason,
    plan_deletion,
    termination_patch,
)
from ansible_collections.steward.cluster.plugins.module_utils.machines.deployment import DeploymentPlan
from ansible_collections.steward.cluster.plugins.module_utils.machines.drain import DrainMemory, DrainPlan
from ansible_collections.steward.cluster.plugins.module_utils.machines.driver import (
    ClassContext,
    CreateResult,
    Driver,
    machine_context,
)
from ansible_collections.steward.cluster.plugins.module_utils.machines.errors import ClassNotReady, DriverError
from ansible_collections.steward.cluster.plugins.module_utils.machines.machine import after_call
from ansible_collections.steward.cluster.plugins.module_utils.machines.machineset import SetPlan
from ansible_collections.steward.cluster.plugins.module_utils.machines.plan import (
    ClusterAction,
    Event,
    MachinePlan,
    current_status,
    last_operation,
)

log = logging.getLogger('steward.machines')
Obj = Mapping[str, Any]
MAX_DELETION_STEPS = 8


class Target:
    """Where plans land. Object writes return the object as stored (None when it is gone)."""

    def create(self, kind: str, obj: Dict[str, Any]) -> Dict[str, Any]:
        raise NotImplementedError

    def patch(self, kind: str, namespace: str, name: str, patch: Dict[str, Any], status: bool = False,
              resource_version: Optional[str] = None) -> Optional[Dict[str, Any]]:
        raise NotImplementedError

    def delete(self, kind: str, namespace: str, name: str) -> Optional[Dict[str, Any]]:
        raise NotImplementedError

    def event(self, obj: Obj, event: Event) -> None:
        raise NotImplementedError

    def driver(self, machine: Obj) -> Tuple[Driver, ClassContext]:
        """The driver and class context for a machine; raises ClassNotReady."""
        raise NotImplementedError

    def node(self, name: str) -> Optional[Obj]:
        raise NotImplementedError

    def vm_gone(self, provider_id: str) -> bool:
        """Whether the cloud's latest listing shows this VM terminated (positive evidence; False when unknown)."""
        return False

    def delete_node(self, name: str) -> None:
        raise NotImplementedError

    def patch_node(self, name: str, patch: Dict[str, Any], status: bool = False) -> None:
        """Merge-patch the Node (`status`: its status subresource). The patch carries metadata.resourceVersion (the
        API server's precondition: a Conflict if the Node moved on since the patch was computed, as the patch
        replaces a whole list: the taints, the conditions)."""
        raise NotImplementedError

    def drain_round(self, machine: Obj, node: Obj, force: str, timeouts: MachineTimeouts, memory: DrainMemory,
                    settings: Settings, now: float) -> DrainPlan:
        """Cordon the node, read its pods and budgets, plan one round (drain.plan_round), evict or delete."""
        raise NotImplementedError

    def delete_volume_attachments(self, node_name: str) -> None:
        raise NotImplementedError

    def drain_node(self, name: str, timeout: float) -> Dict[str, Any]:
        """Cordon the node and evict its pods (PodDisruptionBudgets respected) within `timeout`, for an in-place
        update; raises on a drain that does not finish."""
        raise NotImplementedError

    def update_machine(self, machine: Obj, class_name: str) -> None:
        """The driver's UpdateMachine to the class `class_name` (MCM's hot-update call); raises DriverError."""
        raise NotImplementedError

    def created(self, machine: Obj, result: CreateResult) -> None:
        """Called between a successful CreateMachine and the status write (metrics; tests inject crashes here)."""

    def driver_call(self, call: Call, code: Code, provider: str) -> None:
        """Called after every driver call with its outcome (metrics)."""


# --- machines -------------------------------------------------------------------------------------

def _write(t: Target, machine: Obj, plan: MachinePlan) -> Optional[Obj]:
    ns, name = o.namespace(machine), o.name(machine)
    current: Optional[Obj] = machine
    body: Dict[str, Any] = {}
    if plan.metadata:
        body['metadata'] = plan.metadata
    if plan.spec:
        body['spec'] = plan.spec
    if body:
        version = o.resource_version(machine) if 'finalizers' in (plan.metadata or {}) else None
        current = t.patch(KIND_MACHINE, ns, name, body, resource_version=version)
        if current is None:
            return None
    if plan.node:
        _sync_node(t, current or machine, plan.node)
    if plan.status:
        current = t.patch(KIND_MACHINE, ns, name, {'status': plan.status}, status=True) or current
    for event in plan.events:
        t.event(current or machine, event)
    return current


def _sync_node(t: Target, machine: Obj, patch: Dict[str, Any]) -> None:
    """Put the node template on the machine's Node. A failure (the Node changed since it was read, the API
    refused) does not hold up the machine's own writes: the next pass computes the patch again from the Node
    as it is then (MCM retries the sync the same way, after a short or conflict retry)."""
    name = o.node_name(machine)
    try:
        t.patch_node(name, patch)
    except Exception as exc:  # pylint: disable=broad-except
        log.info('node template of machine %s not synced to node %s yet: %s', o.key(machine), name, exc)


def _call(t: Target, call: Call, machine: Obj) -> Tuple[Any, str]:
    """Make a driver call; returns (result or DriverError, provider)."""
    try:
        driver, cls = t.driver(machine)
    except ClassNotReady as exc:
        return DriverError(Code.INVALID_ARGUMENT, str(exc), call), ''
    ctx = machine_context(machine)
    try:
        if call == Call.CREATE:
            result: Any = driver.create_machine(cls, ctx)
        elif call == Call.INITIALIZE:
            result = driver.initialize_machine(cls, ctx)
        else:
            result = driver.delete_machine(cls, ctx)
        code = Code.OK
    except DriverError as exc:
        result, code = exc, exc.code
    t.driver_call(call, code, driver.provider)
    return result, driver.provider


@dataclasses.dataclass
class MachineRun:
    """What applying a machine's plan left: the object as stored (None when gone) and the plan applied last,
    whose `retry` / `retry_after` say when the machine should be looked at again."""
    obj: Optional[Obj]
    last: MachinePlan


def run_machine(t: Target, machine: Obj, plan: MachinePlan, view: Any, settings: Settings,
                now: Callable[[], float], drain_memory: Optional[DrainMemory] = None) -> MachineRun:
    """Apply a machine's plan. `view` is the MachineView or DeletionView the plan came from."""
    if isinstance(view, DeletionView):
        return _run_deletion(t, machine, plan, view, settings, now, drain_memory or DrainMemory())
    if plan.action == ClusterAction.DELETE_MACHINE:
        current = _write(t, machine, plan)
        t.delete(KIND_MACHINE, o.namespace(machine), o.name(machine))
        return MachineRun(current, plan)
    if plan.call is None:
        return MachineRun(_write(t, machine, plan), plan)
    current = _write(t, machine, MachinePlan(plan.key, plan.uid, metadata=plan.metadata, spec=plan.spec,
                                             node=plan.node, status=plan.status, events=plan.events))
    if current is None:
        return MachineRun(None, plan)
    outcome, _provider = _call(t, plan.call, current)
    stale = None
    if isinstance(outcome, CreateResult):
        t.created(current, outcome)
        node = t.node(outcome.node_name) if outcome.node_name else None
        other = str(o.spec(node).get('providerID') or '') if node is not None else ''
        # MCM's stale-node guard: a Node already has the new VM's name. Not when the cloud says that Node's own VM
        # is terminated (EC2 reused its private IP): that Node goes with its machine, and this machine waits for
        # its own (o.owns_node), instead of losing VM after VM to the same name.
        if other and other != outcome.provider_id and not t.vm_gone(other):
            stale = node
    after = after_call(dataclasses.replace(view, machine=current), plan.call, outcome, now(), stale_node=stale)
    if after.call == Call.DELETE and isinstance(outcome, CreateResult):
        gone = dict(current, spec=dict(o.spec(current), providerID=outcome.provider_id))
        _call(t, Call.DELETE, gone)
        after.call = None
    stored = _write(t, current, after)
    if after.call == Call.INITIALIZE and plan.call == Call.CREATE and stored is not None:
        # MCM: the new VM's providerID and node are written, then InitializeMachine, in the same reconcile
        outcome, _provider = _call(t, Call.INITIALIZE, stored)
        after = after_call(dataclasses.replace(view, machine=stored), Call.INITIALIZE, outcome, now())
        stored = _write(t, stored, after)
    return MachineRun(stored, after)


class _Deletion:
    """A deleting machine as stored (`stored`, for resourceVersion checks) and as planned (`local`: stored plus
    the status transitions not written yet). Steps that succeed one after another are written once, when the
    chain stops: every step is idempotent, so a crash in between only repeats steps."""

    def __init__(self, t: Target, machine: Obj):
        self.t = t
        self.stored: Optional[Obj] = machine
        self.local: Obj = machine
        self.pending: Dict[str, Any] = {}

    def apply(self, plan: MachinePlan) -> bool:
        """Metadata/spec now, status later; events now. False when the machine is gone."""
        body: Dict[str, Any] = {}
        if plan.metadata:
            body['metadata'] = plan.metadata
        if plan.spec:
            body['spec'] = plan.spec
        if body and self.stored is not None:
            self.stored = self.t.patch(KIND_MACHINE, o.namespace(self.local), o.name(self.local), body)
            if self.stored is None:
                return False
            self.local = merge_patch(self.stored, {'status': self.pending}) if self.pending else self.stored
        if plan.status:
            self.pending = merge_patch(self.pending, plan.status)
            self.local = merge_patch(self.local, {'status': plan.status})
        for event in plan.events:
            self.t.event(self.local, event)
        return True

    def flush(self, plan: MachinePlan) -> MachineRun:
        if self.pending and self.stored is not None:
            self.stored = self.t.patch(KIND_MACHINE, o.namespace(self.local), o.name(self.local), {'status': self.pending},
                                       status=True) or self.stored
            self.pending = {}
        return MachineRun(self.stored, plan)


def _run_deletion(t: Target, machine: Obj, plan: MachinePlan, view: DeletionView, settings: Settings,
                  now: Callable[[], float], memory: DrainMemory) -> MachineRun:
    d = _Deletion(t, machine)
    for _step in range(MAX_DELETION_STEPS):
        if not d.apply(plan):
            return MachineRun(None, plan)
        current = d.local
        view = dataclasses.replace(view, machine=current)
        if plan.call == Call.DELETE:
            outcome, _provider = _call(t, Call.DELETE, current)
            plan = after_step(view, plan.step, outcome if isinstance(outcome, DriverError) else None, now())
        elif plan.action == ClusterAction.DRAIN:
            node = o.node_of(current, t.node)
            if node is None:    # gone since the plan: its volume attachments go before the VM, as after a forced drain
                plan = after_drain(view, DrainPlan(done=True, message='node gone'), 'node %s gone' % o.node_name(current),
                                   now())
            else:
                view = dataclasses.replace(view, node=node)
                forced = force_reason(view, settings, now())
                marking = _attempt(lambda: _mark_terminating(t, view, now()))
                if marking is not None and not forced:
                    plan = after_termination_mark_failed(view, marking, now())
                    d.apply(plan)
                    return d.flush(plan)
                result = t.drain_round(current, node, forced, view.timeouts, memory, settings, now())
                plan = after_drain(view, result, forced, now())
                if not result.done:
                    d.apply(plan)
                    return d.flush(plan)
        elif plan.action == ClusterAction.DELETE_VOLUME_ATTACHMENTS:
            plan = after_step(view, plan.step, _attempt(lambda: t.delete_volume_attachments(o.node_name(current))), now())
        elif plan.action == ClusterAction.DELETE_NODE:
            mine = o.node_of(current, t.node)    # a Node of that name that another VM registered since is not deleted
            plan = after_step(view, plan.step, _attempt(lambda: t.delete_node(o.name(mine)) if mine else None), now())
        elif plan.action == ClusterAction.REMOVE_FINALIZER:
            finalizers = [f for f in o.meta(current).get('finalizers') or [] if f != FINALIZER]
            t.event(current, Event('MachineDeleted', 'machine %s deleted (VM and node gone)' % o.name(current)))
            stored = d.stored or current
            return MachineRun(t.patch(KIND_MACHINE, o.namespace(current), o.name(current),
                                      {'metadata': {'finalizers': finalizers}}, resource_version=o.resource_version(stored)), plan)
        else:
            return d.flush(plan)
        if not d.apply(plan):
            return MachineRun(None, plan)
        if plan.status and (plan.status.get('lastOperation') or {}).get('state') == 'Failed':
            return d.flush(plan)
        plan = plan_deletion(dataclasses.replace(view, machine=d.local), now())
    return d.flush(plan)


def _mark_terminating(t: Target, view: DeletionView, now: float) -> None:
    patch = termination_patch(view, now)
    if patch is not None and view.node is not None:
        t.patch_node(o.name(view.node), patch, status=True)


def _attempt(fn: Callable[[], Any]) -> Optional[Exception]:
    try:
        fn()
    except Exception as exc:  # reported in status; the step is retried
        return exc
    return None


# --- sets -----------------------------------------------------------------------------------------

def machine_from_template(ms: Obj) -> Dict[str, Any]:
    """A new Machine of a set: template labels/annotations/spec, owner reference, MCM's finalizer, and a
    generated name prefixed with the set's name (MCM: `<set>-<random>`)."""
    template = o.spec(ms).get('template') or {}
    tmeta = template.get('metadata') or {}
    spec = copy.deepcopy(dict(template.get('spec') or {}))
    spec.pop('providerID', None)
    return {'apiVersion': 'machine.sapcloud.io/v1alpha1', 'kind': KIND_MACHINE,
            'metadata': {'generateName': o.name(ms) + '-', 'namespace': o.namespace(ms),
                         'labels': dict(tmeta.get('labels') or {}), 'annotations': dict(tmeta.get('annotations') or {}),
                         'ownerReferences': [o.owner_reference(ms, KIND_SET)], 'finalizers': [FINALIZER]},
            'spec': spec}


def run_set(t: Target, ms: Obj, plan: SetPlan) -> Tuple[int, List[str]]:
    """Returns (machines created, errors)."""
    ns = o.namespace(ms)
    errors: List[str] = []
    for name in plan.adopt:
        try:
            t.patch(KIND_MACHINE, ns, name, {'metadata': {'ownerReferences': [o.owner_reference(ms, KIND_SET)]}})
        except Exception as exc:
            errors.append('adopt %s: %s' % (name, exc))
    created = 0
    batch = 1
    remaining = plan.create
    while remaining > 0 and not errors:
        size = min(batch, remaining)
        for _machine in range(size):
            try:
                t.create(KIND_MACHINE, machine_from_template(ms))
                created += 1
            except Exception as exc:
                errors.append('create machine: %s' % exc)
                break
        remaining -= size
        batch *= 2
    if created:
        t.event(ms, Event('SuccessfulCreate', 'Created %d machine(s)' % created))
    for name in plan.delete:
        try:
            t.delete(KIND_MACHINE, ns, name)
            t.event(ms, Event('SuccessfulDelete', 'Deleted machine %s (%s)' % (name, plan.delete_reasons.get(name, ''))))
        except Exception as exc:
            errors.append('delete machine %s: %s' % (name, exc))
    for name, patch in plan.machine_patches.items():
        if name in plan.delete:
            continue
        try:
            t.patch(KIND_MACHINE, ns, name, patch)
        except Exception as exc:
            errors.append('update machine %s in place: %s' % (name, exc))
    if plan.metadata:
        t.patch(KIND_SET, ns, o.name(ms), {'metadata': plan.metadata}, resource_version=o.resource_version(ms))
    if plan.status:
        t.patch(KIND_SET, ns, o.name(ms), {'status': plan.status}, status=True)
    if plan.remove_finalizer:
        t.patch(KIND_SET, ns, o.name(ms), {'metadata': {'finalizers': [
            f for f in o.meta(ms).get('finalizers') or [] if f != FINALIZER]}}, resource_version=o.resource_version(ms))
    for event in plan.events:
        t.event(ms, event)
    if errors:
        t.event(ms, Event('FailedCreate' if plan.create else 'SetError', '; '.join(errors)[:1000], warning=True))
    return created, errors


# --- deployments ----------------------------------------------------------------------------------

def run_deployment(t: Target, md: Obj, plan: DeploymentPlan) -> List[str]:
    ns = o.namespace(md)
    errors: List[str] = []
    for name in plan.adopt_sets:
        try:
            t.patch(KIND_SET, ns, name, {'metadata': {'ownerReferences': [o.owner_reference(md, KIND_DEPLOYMENT)]}})
        except Exception as exc:
            errors.append('adopt %s: %s' % (name, exc))
    if plan.create_set is not None:
        try:
            t.create(KIND_SET, plan.create_set)
        except Exception as exc:
            errors.append('create machine set %s: %s' % (plan.create_set['metadata']['name'], exc))
    for name, patch in plan.set_patches.items():
        try:
            t.patch(KIND_SET, ns, name, patch)
        except Exception as exc:
            errors.append('patch machine set %s: %s' % (name, exc))
    moved: Dict[str, int] = {}
    planned: Dict[str, int] = {}
    for transfer in plan.transfers:       # the machine first, then its old set's replicas (inplace.Transfer)
        planned[transfer.from_set] = transfer.from_replicas
        try:
            t.patch(KIND_MACHINE, ns, transfer.machine, transfer.patch)
            moved[transfer.from_set] = moved.get(transfer.from_set, 0) + 1
        except Exception as exc:
            errors.append('move machine %s: %s' % (transfer.machine, exc))
    for name, count in moved.items():
        try:
            t.patch(KIND_SET, ns, name, {'spec': {'replicas': max(0, planned[name] - count)}})
        except Exception as exc:
            errors.append('scale machine set %s: %s' % (name, exc))
    for name, patch in plan.machine_patches.items():
        try:
            t.patch(KIND_MACHINE, ns, name, patch)
        except Exception as exc:
            errors.append('patch machine %s: %s' % (name, exc))
    for name, patch in plan.node_patches.items():
        try:
            t.patch_node(name, patch)
        except Exception as exc:
            errors.append('patch node %s: %s' % (name, exc))
    for name in plan.delete_sets:
        try:
            t.delete(KIND_SET, ns, name)
        except Exception as exc:
            errors.append('delete machine set %s: %s' % (name, exc))
    if plan.patch:
        version = o.resource_version(md) if 'finalizers' in (plan.patch.get('metadata') or {}) else None
        t.patch(KIND_DEPLOYMENT, ns, o.name(md), plan.patch, resource_version=version)
    if plan.status:
        t.patch(KIND_DEPLOYMENT, ns, o.name(md), {'status': plan.status}, status=True)
    if plan.remove_finalizer:
        t.patch(KIND_DEPLOYMENT, ns, o.name(md), {'metadata': {'finalizers': [
            f for f in o.meta(md).get('finalizers') or [] if f != FINALIZER]}}, resource_version=o.resource_version(md))
    for event in plan.events:
        t.event(md, event)
    if errors:
        t.event(md, Event('MachineDeploymentError', '; '.join(errors)[:1000], warning=True))
    return errors


# --- in-place updates ------------------------------------------------------------------------------

def _node_condition(t: Target, node_name: str, reason: str, message: str, now: float) -> None:
    node = t.node(node_name) or {}
    conditions = set_condition((node.get('status') or {}).get('conditions'), NODE_CONDITION_IN_PLACE, 'True', reason,
                               message, now)
    t.patch_node(node_name, {'status': {'conditions': conditions}}, status=True)


def run_in_place(t: Target, machine: Obj, node_name: str, class_name: str, timeouts: MachineTimeouts,
                 clock: Callable[[], float]) -> bool:
    """Update one machine where it stands (MCM's in-place flow, with our driver in the node agent's place):
    phase InPlaceUpdating, the Node's InPlaceUpdate condition SelectedForUpdate, drain (cordon, evictions,
    PodDisruptionBudgets; the machine's drainTimeout), DrainSuccessful / ReadyForUpdate, the driver's
    UpdateMachine to `class_name`, then the Node's `update-result` label: successful (condition UpdateSuccessful,
    phase Running) or failed (the reason in `update-failed-reason`, condition UpdateFailed, phase
    InPlaceUpdateFailed, left for the operator). A drain that does not finish raises: the machine stays
    InPlaceUpdating and the next pass runs this again (the drain then evicts only what is left). True on success."""
    ns, name = o.namespace(machine), o.name(machine)
    t.patch(KIND_MACHINE, ns, name, {'status': {
        'currentStatus': current_status(Phase.IN_PLACE_UPDATING, clock()),
        'lastOperation': last_operation(OpType.IN_PLACE_UPDATE, OpState.PROCESSING,
                                        'Machine %s is undergoing an in-place update' % name, clock())}}, status=True)
    _node_condition(t, node_name, REASON_SELECTED, 'Node is selected for in-place update', clock())
    drained = t.drain_node(node_name, timeouts.drain)
    _node_condition(t, node_name, REASON_READY_FOR_UPDATE, 'Node drained (%d pod(s) evicted); ready for in-place '
                    'update' % len(drained.get('evicted') or []), clock())
    try:
        t.update_machine(machine, class_name)
    except (DriverError, ClassNotReady) as exc:
        if isinstance(exc, DriverError) and next_step(Call.UPDATE, exc.code)[0] == Next.RETRY:
            raise      # transient (unavailable, throttled, ...): the next pass runs the update again
        reason = str(exc)[:1000]
        t.patch_node(node_name, {'metadata': {'labels': {LABEL_UPDATE_RESULT: UPDATE_FAILED},
                                              'annotations': {ANNOTATION_UPDATE_FAILED_REASON: reason}}})
        _node_condition(t, node_name, REASON_UPDATE_FAILED, 'Node in-place update failed: %s' % reason, clock())
        t.patch(KIND_MACHINE, ns, name, {'status': {
            'currentStatus': current_status(Phase.IN_PLACE_UPDATE_FAILED, clock()),
            'lastOperation': last_operation(OpType.IN_PLACE_UPDATE, OpState.FAILED,
                                            'in-place update to class %s failed: %s' % (class_name, reason), clock(),
                                            error_code=getattr(getattr(exc, 'code', None), 'mcm_name', ''))}},
                status=True)
        t.event(machine, Event('InPlaceUpdateFailed', 'in-place update to class %s failed: %s' % (class_name, reason),
                               warning=True))
        return False
    t.patch_node(node_name, {'metadata': {'labels': {LABEL_UPDATE_RESULT: UPDATE_SUCCESSFUL}}})
    _node_condition(t, node_name, REASON_UPDATE_SUCCESSFUL, 'Node in-place update successful', clock())
    t.patch(KIND_MACHINE, ns, name, {'status': {
        'currentStatus': current_status(Phase.RUNNING, clock()),
        'lastOperation': last_operation(OpType.IN_PLACE_UPDATE, OpState.SUCCESSFUL,
                                        'updated in place to class %s' % class_name, clock())}}, status=True)
    t.event(machine, Event('InPlaceUpdateSuccessful', 'updated in place to class %s' % class_name))
    return True
