# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One Machine that is not being deleted: MCM's creation flow and health checks, as a pure decision.

`plan_machine` looks at the machine, its Node, what the class's latest cloud listing says about its VM and
what the safety gates allow, and returns a MachinePlan:

* creation flow (no providerID, or phase '' / CrashLoopBackOff): the listing answers GetMachineStatus (no
  listing yet: wait for it; a failed one: CrashLoopBackOff with the cloud's message). NotFound -> CreateMachine
  (the shell makes the call and hands the outcome to `after_call`), then InitializeMachine, as MCM does; found ->
  adopt it (providerID, `node` label, Pending); several -> OutOfRange, never a second create; a VM that needs
  it, or whose initialization failed -> InitializeMachine.
* health (phase set and a node label): Node conditions copied into status; Pending/Unknown -> Running when
  healthy (and, for Pending, without the critical-components-not-ready taint); Running -> Unknown when not;
  Pending past creationTimeout -> Failed; Unknown past healthTimeout -> Failed **only if the safety gates
  allow it** (meltdown limit, fleet freeze, watchdog freeze); a VM the cloud reports terminated, or that is
  missing from `missing_confirmations` listings, fails the machine at once (positive evidence).

Descriptions follow MCM's wording so people (and scripts) find what they know; decisions never read them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Union

from ansible_collections.steward.cluster.plugins.module_utils.common.durations import format_duration
from ansible_collections.steward.cluster.plugins.module_utils.machines import health as health_mod
from ansible_collections.steward.cluster.plugins.module_utils.machines import objects as o
from ansible_collections.steward.cluster.plugins.module_utils.machines.codes import Call, Code, Next, Retry, next_step
from ansible_collections.steward.cluster.plugins.module_utils.machines.config import MachineTimeouts
from ansible_collections.steward.cluster.plugins.module_utils.machines.constants import (
    ANNOTATION_TRIGGER_DELETION,
    FINALIZER,
    OpState,
    OpType,
    Phase,
    Step,
)
from ansible_collections.steward.cluster.plugins.module_utils.kube.mcm import LABEL_NODE
from ansible_collections.steward.cluster.plugins.module_utils.machines.driver import CreateResult, VM
from ansible_collections.steward.cluster.plugins.module_utils.machines.errors import DriverError
from ansible_collections.steward.cluster.plugins.module_utils.machines.inventory import Lookup
from ansible_collections.steward.cluster.plugins.module_utils.machines.node_template import node_patch
from ansible_collections.steward.cluster.plugins.module_utils.machines.plan import (
    ClusterAction,
    Event,
    MachinePlan,
    current_status,
    last_operation,
)

CREATING = (Phase.CREATING, Phase.CRASH_LOOP_BACK_OFF)
RECHECK_MIN = 1.0     # never plan a timeout re-check sooner than this


@dataclasses.dataclass(frozen=True)
class MachineView:
    """Everything `plan_machine` looks at for one machine."""
    machine: Mapping[str, Any]
    node: Optional[Mapping[str, Any]]
    lookup: Optional[Lookup]                 # the class's latest listing about this VM; None: no listing yet
    timeouts: MachineTimeouts
    class_problem: str = ''                  # the MachineClass or its Secret is missing or invalid
    vm_missing: bool = False                 # absent from `missing_confirmations` consecutive listings
    may_fail: bool = True                    # the safety gates allow Unknown -> Failed now
    gate: str = ''                           # why they do not (names the rule)
    frozen: str = ''                         # API-server freeze: only deletions proceed (names the rule)


def plan_machine(view: MachineView, now: float) -> MachinePlan:
    m = view.machine
    plan = MachinePlan(key=o.key(m), uid=o.uid(m))
    if not o.has_finalizer(m):
        plan.metadata = {'finalizers': list(o.meta(m).get('finalizers') or []) + [FINALIZER]}
    if view.frozen:
        plan.waiting = view.frozen
        plan.retry = Retry.SHORT
        return plan
    if _deletion_requested_by_node(view.node):
        plan.action = ClusterAction.DELETE_MACHINE
        plan.events.append(Event('MachineDeletionRequested', 'node %s has %s=true: deleting machine %s' % (
            o.name(view.node or {}), ANNOTATION_TRIGGER_DELETION, o.name(m))))
        return plan
    phase = o.phase(m)
    if view.node is not None and phase != Phase.CREATING:
        # MCM's syncNodeTemplates: the node template's labels, annotations and taints on the machine's Node
        plan.node = node_patch(m, view.node)
    if phase == Phase.FAILED:
        # Final: the MachineSet replaces it. Checked before the creation flow, so a Failed machine without a
        # providerID (its VM deleted as stale, or gone before it joined) is not failed again on every pass.
        plan.retry = Retry.SHORT
        return plan
    if not o.provider_id(m) or phase in CREATING:
        return _creation_flow(view, plan, phase, now)
    return _health(view, plan, phase, now)


def _deletion_requested_by_node(node: Optional[Mapping[str, Any]]) -> bool:
    return bool(node) and str(o.annotations_of(node or {}).get(ANNOTATION_TRIGGER_DELETION, '')).lower() == 'true'


# --- creation ------------------------------------------------------------------------------------

def _failure_phase(machine: Mapping[str, Any], timeouts: MachineTimeouts, now: float) -> Phase:
    """MCM's getCreateFailurePhase: Failed once creationTimeout has passed since creation, else CrashLoopBackOff."""
    return Phase.FAILED if now - o.created_at(machine) > timeouts.creation else Phase.CRASH_LOOP_BACK_OFF


def _create_failed(plan: MachinePlan, view: MachineView, description: str, code: Code, retry: Retry,
                   now: float, step: Optional[Step] = None) -> MachinePlan:
    m = view.machine
    phase = _failure_phase(m, view.timeouts, now)
    old = o.last_operation(m)
    status = {'lastOperation': last_operation(OpType.CREATE, OpState.FAILED, description, now, code.mcm_name, step)}
    if phase != o.phase(m) or old.get('description') != description:
        status['currentStatus'] = current_status(phase, now)
    plan.status = status
    plan.retry = retry
    if phase == Phase.FAILED:
        plan.failed = 'creation-timeout'
        plan.events.append(Event('MachineFailed', '%s: creation did not succeed within %s: %s' % (
            o.name(m), format_duration(view.timeouts.creation), description), warning=True))
    elif old.get('description') != description:
        plan.events.append(Event('MachineCreateFailed', description, warning=True))
    return plan


def _creation_flow(view: MachineView, plan: MachinePlan, phase: Phase, now: float) -> MachinePlan:
    m = view.machine
    if view.class_problem:
        return _create_failed(plan, view, view.class_problem, Code.INVALID_ARGUMENT, Retry.MEDIUM, now)
    lookup = view.lookup
    if lookup is None:
        # GetMachineStatus first, always (MCM): even a driver whose CreateMachine is idempotent for its own VMs
        # (a ClientToken) would make a second VM for one made by someone else (MCM's, found by its Name tag).
        plan.retry = Retry.SHORT      # no listing of the class yet: the next pass has one
        plan.waiting = 'waiting for the first cloud listing of the class'
        return plan
    step, retry = next_step(Call.STATUS, lookup.code)
    if step == Next.SEVERAL_VMS:
        return _create_failed(plan, view, 'Cloud provider message - %d VMs found for machine %s; refusing to create '
                              'another (the extra VMs are for orphan collection or an operator)' % (lookup.candidates, o.name(m)),
                              Code.OUT_OF_RANGE, retry, now)
    if step in (Next.RETRY, Next.FAIL):
        # MCM's GetMachineStatus error: CrashLoopBackOff with the cloud's message (Failed after creationTimeout);
        # nothing is created without an answer.
        return _create_failed(plan, view, 'Cloud provider message - %s' % (lookup.message or 'listing the class\'s VMs failed'),
                              lookup.code, retry, now)
    if step == Next.CREATE:
        if o.provider_id(m) and phase == Phase.CRASH_LOOP_BACK_OFF:
            # MCM: a providerID means a VM was made; go on with it. If its initialization failed, that is retried.
            if Step.from_key(o.last_operation(m).get('step')) == Step.INSTANCE_INITIALIZATION:
                plan.call = Call.INITIALIZE
                plan.retry = Retry.SHORT
                return plan
            return _adopted(plan, view, VM(provider_id=o.provider_id(m), node_name=o.node_name(m)), now)
        plan.call = Call.CREATE
        plan.retry = Retry.SHORT
        return plan
    vm = lookup.vm
    if vm is None:
        raise AssertionError('machine_step: a VM lookup without a VM reached the existing-VM branch')
    if vm.state.gone:
        plan.status = {'currentStatus': current_status(Phase.FAILED, now),
                       'lastOperation': last_operation(OpType.CREATE, OpState.FAILED, 'VM %s of machine %s is %s: the '
                                                       'cloud ended it before it joined' % (vm.provider_id, o.name(m), vm.state.value),
                                                       now)}
        plan.failed = 'vm-gone'
        plan.events.append(Event('MachineFailed', 'VM %s is %s before the machine joined' % (vm.provider_id, vm.state.value),
                                 warning=True))
        plan.retry = Retry.SHORT
        return plan
    if vm.needs_init or step == Next.INITIALIZE:
        _adopt_fields(plan, m, vm)
        plan.call = Call.INITIALIZE
        plan.retry = Retry.SHORT
        return plan
    return _adopted(plan, view, vm, now)


def _adopt_fields(plan: MachinePlan, machine: Mapping[str, Any], vm: VM) -> None:
    if vm.provider_id and o.provider_id(machine) != vm.provider_id:
        plan.spec = {'providerID': vm.provider_id}
    if vm.node_name and o.node_name(machine) != vm.node_name:
        meta = dict(plan.metadata or {})
        meta['labels'] = {LABEL_NODE: vm.node_name}
        plan.metadata = meta


def _adopted(plan: MachinePlan, view: MachineView, vm: VM, now: float) -> MachinePlan:
    """The VM exists: record it and move to Pending (MCM's end of triggerCreationFlow)."""
    m = view.machine
    if not vm.node_name and not o.node_name(m):
        return _create_failed(plan, view, 'machine %s: VM %s has no node name yet' % (o.name(m), vm.provider_id),
                              Code.INTERNAL, Retry.SHORT, now)
    _adopt_fields(plan, m, vm)
    if o.phase(m) in CREATING:
        plan.status = {'currentStatus': current_status(Phase.PENDING, now, timeout_active=True),
                       'lastOperation': last_operation(OpType.CREATE, OpState.PROCESSING, Step.CREATE_VM.value, now,
                                                       step=Step.CREATE_VM)}
        if vm.last_known_state:
            plan.status['lastKnownState'] = vm.last_known_state
    plan.retry = Retry.SHORT
    return plan


Outcome = Union[CreateResult, DriverError]


def after_call(view: MachineView, call: Call, outcome: Outcome, now: float,
               stale_node: Optional[Mapping[str, Any]] = None) -> MachinePlan:
    """The machine's status after CreateMachine or InitializeMachine answered.

    `stale_node` is a Node that already carries the new VM's node name but another providerID: MCM's stale-node
    guard (the new VM would inherit an old Node's identity) fails the machine and deletes the new VM.
    """
    m = view.machine
    plan = MachinePlan(key=o.key(m), uid=o.uid(m))
    if isinstance(outcome, DriverError):
        step, retry = next_step(call, outcome.code)
        if call == Call.INITIALIZE:
            if step == Next.SKIP:
                return _adopted(plan, view, VM(provider_id=o.provider_id(m), node_name=o.node_name(m)), now)
            return _create_failed(plan, view, 'Provider error: %s. %s (InstanceInitialization)' % (
                outcome.args[0], Step.INSTANCE_INITIALIZATION.value), outcome.code, Retry.SHORT, now,
                step=Step.INSTANCE_INITIALIZATION)
        if outcome.retry_after is not None:
            plan.retry_after = outcome.retry_after
        return _create_failed(plan, view, 'Cloud provider message - %s' % outcome.args[0], outcome.code, retry, now)
    if stale_node is not None and call == Call.CREATE:
        plan.status = {'currentStatus': current_status(Phase.FAILED, now),
                       'lastOperation': last_operation(OpType.CREATE, OpState.FAILED, 'VM using old node obj %s' % o.name(stale_node), now)}
        plan.call = Call.DELETE
        plan.failed = 'stale-node'
        plan.retry = Retry.SHORT          # MCM: ShortRetry (the MachineSet replaces it at once)
        plan.events.append(Event('MachineFailed', 'VM %s was given node name %s, which an existing Node (%s) already '
                                 'has: the VM is deleted and the machine replaced' % (
                                     outcome.provider_id, o.name(stale_node), o.spec(stale_node).get('providerID') or 'no providerID'),
                                 warning=True))
        return plan
    vm = VM(provider_id=outcome.provider_id, node_name=outcome.node_name, last_known_state=outcome.last_known_state)
    if call == Call.CREATE:
        plan.events.append(Event('MachineCreated', 'VM %s created for machine %s (node %s)' % (
            outcome.provider_id, o.name(m), outcome.node_name or '?')))
        # MCM's triggerCreationFlow: record providerID and node, then InitializeMachine (Unimplemented: nothing to
        # do), and only then Pending.
        _adopt_fields(plan, m, vm)
        plan.call = Call.INITIALIZE
        plan.retry = Retry.SHORT
        return plan
    return _adopted(plan, view, vm, now)


# --- health ---------------------------------------------------------------------------------------

def _health(view: MachineView, plan: MachinePlan, phase: Phase, now: float) -> MachinePlan:
    m = view.machine
    lookup = view.lookup
    vm = lookup.vm if lookup is not None and lookup.code == Code.OK else None
    if (vm is not None and vm.state.gone) or view.vm_missing:
        what = 'is %s' % vm.state.value if vm is not None and vm.state.gone else 'is missing from the cloud listing'
        description = 'VM %s of machine %s %s: replacing it without waiting for the health timeout' % (
            o.provider_id(m), o.name(m), what)
        plan.status = {'currentStatus': current_status(Phase.FAILED, now),
                       'lastOperation': last_operation(OpType.HEALTH_CHECK, OpState.FAILED, description, now)}
        plan.failed = 'vm-gone'
        plan.events.append(Event('MachineFailed', description, warning=True))
        plan.retry = Retry.SHORT
        return plan
    node = view.node
    verdict = health_mod.judge(node, view.timeouts.node_conditions)
    status = {}
    if node is not None:
        conditions = health_mod.status_conditions(node)
        if not health_mod.same_conditions(conditions, o.status(m).get('conditions') or []):
            status['conditions'] = conditions
    changed = False
    if node is None and phase == Phase.RUNNING:
        description = 'Node object went missing. Machine %s is unhealthy - changing MachinePhase to Unknown' % o.name(m)
        status['currentStatus'] = current_status(Phase.UNKNOWN, now, timeout_active=True)
        status['lastOperation'] = last_operation(OpType.HEALTH_CHECK, OpState.PROCESSING, description, now)
        plan.events.append(Event('MachineUnknown', description, warning=True))
        changed = True
    elif node is not None and verdict.healthy:
        if phase != Phase.RUNNING and not (phase == Phase.PENDING and health_mod.has_critical_components_taint(node)):
            old = o.last_operation(m)
            if old.get('type') == OpType.CREATE.value and old.get('state') != OpState.SUCCESSFUL.value:
                description = 'Machine is now ready: %s joined the cluster in %s' % (
                    o.name(m), format_duration(round(max(0.0, now - o.created_at(m)))))
                op = OpType.CREATE
            else:
                description = 'Machine %s successfully re-joined the cluster' % o.name(m)
                op = OpType.HEALTH_CHECK
            status['currentStatus'] = current_status(Phase.RUNNING, now)
            status['lastOperation'] = last_operation(op, OpState.SUCCESSFUL, description, now)
            plan.events.append(Event('MachineRunning', description))
            changed = True
    elif node is not None and phase == Phase.RUNNING:
        description = 'Machine %s is unhealthy - changing MachinePhase to Unknown. Node conditions: %s' % (
            o.name(m), verdict.describe())
        status['currentStatus'] = current_status(Phase.UNKNOWN, now, timeout_active=True)
        status['lastOperation'] = last_operation(OpType.HEALTH_CHECK, OpState.PROCESSING, description, now)
        plan.events.append(Event('MachineUnknown', description, warning=True))
        changed = True
    if not changed and phase in (Phase.PENDING, Phase.UNKNOWN):
        _timeouts(view, plan, phase, status, now)
    plan.status = status or None
    if plan.retry == Retry.LONG and plan.retry_after is None and changed:
        plan.retry = Retry.SHORT
    return plan


def _timeouts(view: MachineView, plan: MachinePlan, phase: Phase, status: dict, now: float) -> None:
    m = view.machine
    t = view.timeouts
    if phase == Phase.PENDING:
        elapsed, limit = now - o.created_at(m), t.creation
    else:
        elapsed, limit = now - (o.phase_time(m) or now), t.health
    if elapsed <= limit:
        plan.retry_after = max(RECHECK_MIN, limit - elapsed)
        return
    if phase == Phase.PENDING:
        description = 'Machine %s failed to join the cluster in %s minutes.' % (o.name(m), format_duration(limit))
        plan.failed = 'creation-timeout'
        op = OpType(o.last_operation(m).get('type') or OpType.CREATE.value)
    else:
        if t.disable_health_timeout:
            return
        if not view.may_fail:
            plan.waiting = view.gate
            plan.retry = Retry.SHORT
            return
        description = 'Machine %s health checks failing since last %s minutes. Updating machine phase to Failed. ' \
                      'Node Conditions: %s' % (o.name(m), format_duration(limit),
                                               health_mod.judge(view.node, t.node_conditions).describe())
        plan.failed = 'health-timeout'
        op = OpType.HEALTH_CHECK
    status['currentStatus'] = current_status(Phase.FAILED, now)
    status['lastOperation'] = last_operation(op, OpState.FAILED, description, now)
    plan.events.append(Event('MachineFailed', description, warning=True))
    plan.retry = Retry.SHORT
