# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One pass over every machine object: the world in, a plan of typed actions out.

The controller builds a `World` from its caches and the latest cloud listing of each class, calls
`plan_pass`, and applies the plan; benchmarks call it at 5,000 machines. Order inside a pass: the safety
view first (fleet, watchdog and API freezes, missing-VM evidence), then every machine (deleting ones through
deletion.py, others through machine.py, with the meltdown limit counted as the pass goes), then every
MachineSet (overshoot freeze, replicas), then every MachineDeployment (rollout, Frozen condition).

Objects in `busy` (an action on them is still in flight) are skipped: never two actions on one object.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.kube.conditions import get_condition, set_condition
from ansible_collections.steward.cluster.plugins.module_utils.machines import objects as o
from ansible_collections.steward.cluster.plugins.module_utils.machines import rollout as r
from ansible_collections.steward.cluster.plugins.module_utils.machines import safety
from ansible_collections.steward.cluster.plugins.module_utils.machines.codes import Code, Retry
from ansible_collections.steward.cluster.plugins.module_utils.machines.config import Settings, machine_timeouts
from ansible_collections.steward.cluster.plugins.module_utils.machines.constants import (
    COND_FROZEN,
    FREEZE_OVERSHOOT,
    LABEL_FREEZE,
    STRATEGY_IN_PLACE,
    Phase,
)
from ansible_collections.steward.cluster.plugins.module_utils.machines.deletion import DeletionView, plan_deletion
from ansible_collections.steward.cluster.plugins.module_utils.machines.deployment import (
    DeploymentPlan,
    InPlaceView,
    find_new_set,
    plan_deployment,
)
from ansible_collections.steward.cluster.plugins.module_utils.machines.inplace import needs_update
from ansible_collections.steward.cluster.plugins.module_utils.machines.driver import VM, machine_context
from ansible_collections.steward.cluster.plugins.module_utils.machines.inventory import Inventory, Lookup
from ansible_collections.steward.cluster.plugins.module_utils.machines.machine import MachineView, plan_machine
from ansible_collections.steward.cluster.plugins.module_utils.machines.machineset import SetPlan, freeze_patch, plan_set
from ansible_collections.steward.cluster.plugins.module_utils.machines.plan import Event, MachinePlan, current_status
from ansible_collections.steward.cluster.plugins.module_utils.machines.validation import (
    check_machine,
    check_owner,
    check_scalable,
)

Obj = Mapping[str, Any]


@dataclasses.dataclass
class ClassState:
    obj: Optional[Obj]                        # the MachineClass (None: missing)
    problem: str = ''                         # why machines of the class cannot be created ('' when fine)
    inventory: Optional[Inventory] = None     # its latest cloud listing


@dataclasses.dataclass
class World:
    deployments: Sequence[Obj]
    sets: Sequence[Obj]
    machines: Sequence[Obj]
    classes: Mapping[str, ClassState]          # `namespace/name` -> state
    nodes: Mapping[str, Obj]
    watchdog_marked: Mapping[str, Sequence[str]] = dataclasses.field(default_factory=dict)
    api_freeze: Optional[safety.Freeze] = None
    api_thawed: bool = False                  # the API-server freeze ended since the last pass
    busy: Set[str] = dataclasses.field(default_factory=set)
    synced: bool = True


@dataclasses.dataclass
class Memory:
    """What passes remember between each other (the controller keeps one)."""
    missing: safety.MissingMemory = dataclasses.field(default_factory=safety.MissingMemory)
    fleet_frozen: bool = False
    watchdog_frozen: Set[str] = dataclasses.field(default_factory=set)
    # scope ('*' or a namespace) -> when the last freeze over it ended: an Unknown machine whose health clock
    # started before that gets a fresh one, in whichever pass first plans it (not only the pass of the thaw,
    # which may skip it while an action is in flight, or whose write may fail)
    thawed_at: Dict[str, float] = dataclasses.field(default_factory=dict)
    # machine uid -> its meltdown-limit scope, for machines a pass failed: while that status write is in flight
    # (the machine busy) the world still shows them Unknown, and the limit must count them all the same
    failing: Dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class PassPlan:
    machines: List[MachinePlan] = dataclasses.field(default_factory=list)
    sets: List[SetPlan] = dataclasses.field(default_factory=list)
    deployments: List[DeploymentPlan] = dataclasses.field(default_factory=list)
    set_freezes: Dict[str, Dict[str, Any]] = dataclasses.field(default_factory=dict)       # set key -> patch
    deployment_patches: Dict[str, Dict[str, Any]] = dataclasses.field(default_factory=dict)  # md key -> label patch
    freezes: Dict[str, safety.Freeze] = dataclasses.field(default_factory=dict)            # scope -> freeze
    thawed: List[str] = dataclasses.field(default_factory=list)                            # scopes that thawed
    invalid: Dict[str, InvalidInput] = dataclasses.field(default_factory=dict)             # object key -> error
    events: List[Tuple[Obj, Event]] = dataclasses.field(default_factory=list)
    fleet: Optional[safety.FleetView] = None
    in_place: List['InPlaceJob'] = dataclasses.field(default_factory=list)                # machines to update


@dataclasses.dataclass(frozen=True)
class InPlaceJob:
    """A machine of an InPlaceUpdate deployment's old set whose Node is selected: drain it and have its driver
    update it to `class_name` (the new set's class); apply.run_in_place."""
    uid: str
    key: str
    node: str
    class_name: str


def class_key(machine: Obj) -> str:
    return '%s/%s' % (o.namespace(machine), o.class_name(o.spec(machine)))


class _Index:
    def __init__(self, world: World):
        self.sets_by_uid = {o.uid(s): s for s in world.sets}
        self.mds_by_uid = {o.uid(d): d for d in world.deployments}
        self.machines_by_set: Dict[str, List[Obj]] = {}
        self.orphan_machines: Dict[str, List[Obj]] = {}
        for m in world.machines:
            owner = o.owner_uid(m)
            if owner and owner in self.sets_by_uid:
                self.machines_by_set.setdefault(owner, []).append(m)
            elif not owner:
                self.orphan_machines.setdefault(o.namespace(m), []).append(m)
        self.sets_by_md: Dict[str, List[Obj]] = {}
        self.orphan_sets: Dict[str, List[Obj]] = {}
        for s in world.sets:
            owner = o.owner_uid(s)
            if owner and owner in self.mds_by_uid:
                self.sets_by_md.setdefault(owner, []).append(s)
            elif not owner:
                self.orphan_sets.setdefault(o.namespace(s), []).append(s)
        self._new_sets: Dict[str, Optional[Obj]] = {}

    def deployment_of(self, machine: Obj) -> Optional[Obj]:
        ms = self.sets_by_uid.get(o.owner_uid(machine))
        return self.mds_by_uid.get(o.owner_uid(ms)) if ms is not None else None

    def in_place_new_set(self, machine: Obj) -> Tuple[bool, Optional[Obj]]:
        """(whether the machine's deployment updates in place, its new set when the machine is in an old one)."""
        ms = self.sets_by_uid.get(o.owner_uid(machine))
        md = self.mds_by_uid.get(o.owner_uid(ms)) if ms is not None else None
        if md is None or (o.spec(md).get('strategy') or {}).get('type') != STRATEGY_IN_PLACE:
            return False, None
        uid = o.uid(md)
        if uid not in self._new_sets:
            self._new_sets[uid] = find_new_set(md, self.sets_by_md.get(uid, []))
        new = self._new_sets[uid]
        return True, new if new is not None and o.uid(new) != o.uid(ms) else None

    def gate_key(self, machine: Obj) -> str:
        """The meltdown limit's scope: the deployment, else the set, else the machine itself."""
        ms = self.sets_by_uid.get(o.owner_uid(machine))
        if ms is None:
            return o.uid(machine)
        md = self.mds_by_uid.get(o.owner_uid(ms))
        return o.uid(md) if md is not None else o.uid(ms)


def _lookups(world: World, memory: Memory, settings: Settings, plan: PassPlan, now: float
             ) -> Tuple[Dict[str, Optional[Lookup]], Dict[str, Optional[VM]], Set[str]]:
    lookups: Dict[str, Optional[Lookup]] = {}
    vm_of: Dict[str, Optional[VM]] = {}
    missing_by_class: Dict[str, List[str]] = {}
    totals: Dict[str, int] = {}
    for m in world.machines:
        uid = o.uid(m)
        state = world.classes.get(class_key(m))
        inventory = state.inventory if state is not None else None
        if inventory is None:
            lookups[uid] = None
            vm_of[uid] = None
            continue
        lookup = inventory.lookup(machine_context(m))
        lookups[uid] = lookup
        vm_of[uid] = lookup.vm if lookup.code == Code.OK else None
        if inventory.ok and o.provider_id(m) and not o.deleting(m):
            totals[class_key(m)] = totals.get(class_key(m), 0) + 1
            count = memory.missing.observe(uid, inventory.seq, lookup.code == Code.NOT_FOUND, inventory.taken_at, now)
            if count >= settings.missing_confirmations:
                missing_by_class.setdefault(class_key(m), []).append(uid)
    memory.missing.forget(set(lookups))
    missing: Set[str] = set()
    for key, uids in missing_by_class.items():
        suspect = safety.missing_suspect(len(uids), totals.get(key, 0), settings)
        if suspect is not None:
            plan.freezes['class:' + key] = suspect
        else:
            missing.update(uids)
    return lookups, vm_of, missing


def plan_pass(world: World, memory: Memory, settings: Settings, now: float) -> PassPlan:
    plan = PassPlan()
    index = _Index(world)
    lookups, vm_of, missing = _lookups(world, memory, settings, plan, now)
    live_machines = [m for m in world.machines if not o.deleting(m)]
    fleet = safety.fleet(live_machines, world.nodes, vm_of, settings)
    plan.fleet = fleet
    if fleet.freeze is not None:
        plan.freezes['fleet'] = fleet.freeze
    watchdog = safety.watchdog_freezes(world.watchdog_marked)
    for ns, freeze in watchdog.items():
        plan.freezes['namespace:' + ns] = freeze
    if world.api_freeze is not None:
        plan.freezes['api'] = world.api_freeze
    # Freezes that ended: machines still Unknown get a fresh health clock (MCM does this after an API freeze).
    if memory.fleet_frozen and fleet.freeze is None:
        memory.thawed_at['*'] = now
        plan.thawed.append('fleet')
    if world.api_thawed:
        memory.thawed_at['*'] = now
        plan.thawed.append('api')
    for ns in memory.watchdog_frozen - set(watchdog):
        memory.thawed_at[ns] = now
        plan.thawed.append('namespace:' + ns)
    memory.fleet_frozen = fleet.freeze is not None
    memory.watchdog_frozen = set(watchdog)

    progress: Dict[str, int] = {}
    members: Dict[str, List[Obj]] = {}
    for m in world.machines:
        members.setdefault(index.gate_key(m), []).append(m)
    for key, group in members.items():
        progress[key] = safety.in_progress(group)
    # Failures planned by an earlier pass whose writes have not landed yet: once a machine is no longer busy,
    # the world holds the API server's answer (Failed, or its old phase if the write failed).
    memory.failing = {uid: key for uid, key in memory.failing.items() if uid in world.busy}
    by_uid = {o.uid(m): m for m in world.machines}
    for uid, key in memory.failing.items():
        if uid in by_uid and safety.in_progress([by_uid[uid]]) == 0:
            progress[key] = progress.get(key, 0) + 1

    for m in world.machines:
        uid = o.uid(m)
        if uid in world.busy:
            continue
        try:
            timeouts = machine_timeouts(o.spec(m), settings)
            if not o.deleting(m):        # a deletion needs no class to go on: the finalizer holds the VM's deletion
                check_machine(m)
        except InvalidInput as exc:
            plan.invalid[o.key(m)] = exc
            continue
        state = world.classes.get(class_key(m))
        if o.deleting(m):
            view = DeletionView(m, o.node_of(m, world.nodes.get), lookups.get(uid), timeouts)
            plan.machines.append(plan_deletion(view, now))
            continue
        if o.phase(m) == Phase.UNKNOWN and world.api_freeze is None and _clock_before_thaw(m, memory.thawed_at):
            plan.machines.append(MachinePlan(key=o.key(m), uid=uid, status={
                'currentStatus': current_status(Phase.UNKNOWN, now, timeout_active=True)}, retry=Retry.SHORT,
                waiting='health clock restarted after a freeze ended'))
            continue
        in_place, new_set = index.in_place_new_set(m)
        if in_place:
            node = o.node_of(m, world.nodes.get)
            # no drain while a freeze says the network or the API failed rather than the machines
            frozen = world.api_freeze or fleet.freeze or watchdog.get(o.namespace(m))
            if new_set is not None and frozen is None and needs_update(m, node, True):
                plan.in_place.append(InPlaceJob(uid, o.key(m), o.name(node),
                                                o.class_name((o.spec(new_set).get('template') or {}).get('spec') or {})))
                continue
            if o.phase(m) == Phase.IN_PLACE_UPDATE_FAILED:
                continue       # left for the operator (docs/machines.md): no health check replaces it meanwhile
        gate_key = index.gate_key(m)
        frozen_by = fleet.freeze or watchdog.get(o.namespace(m))
        may_fail = progress.get(gate_key, 0) < settings.max_replacements and frozen_by is None
        if frozen_by is not None:
            gate = frozen_by.text()
        elif not may_fail:
            gate = 'MeltdownLimit: %d machine(s) of this deployment are already being replaced (limit %d)' % (
                progress.get(gate_key, 0), settings.max_replacements)
        else:
            gate = ''
        view = MachineView(m, o.node_of(m, world.nodes.get), lookups.get(uid), timeouts,
                           class_problem=_class_problem(state, m), vm_missing=uid in missing, may_fail=may_fail,
                           gate=gate, frozen=world.api_freeze.text() if world.api_freeze else '')
        machine_plan = plan_machine(view, now)
        if machine_plan.failed:
            progress[gate_key] = progress.get(gate_key, 0) + 1
            memory.failing[uid] = gate_key
        plan.machines.append(machine_plan)

    frozen_sets = _plan_sets(world, index, settings, now, plan)
    _plan_deployments(world, index, now, plan, frozen_sets)
    return plan


def _clock_before_thaw(machine: Obj, thawed_at: Mapping[str, float]) -> bool:
    """The machine's health clock started before the last freeze over it ended. Whole seconds, as the clock is
    written: a restarted clock (written at or after the thaw) never counts as before it."""
    ended = max(thawed_at.get('*', 0.0), thawed_at.get(o.namespace(machine), 0.0))
    since = o.phase_time(machine)
    return since is not None and since < math.floor(ended)


def _class_problem(state: Optional[ClassState], machine: Obj) -> str:
    if state is None or state.obj is None:
        return 'MachineClass %s not found' % class_key(machine)
    return state.problem


def _surge_of(md: Optional[Obj]) -> int:
    if md is None:
        return 0
    try:
        kind, surge, unavailable = r.strategy_values(o.spec(md).get('strategy'))
        return r.max_surge(kind, surge, unavailable, o.replicas(md))
    except InvalidInput:
        return 0


def _plan_sets(world: World, index: _Index, settings: Settings, now: float, plan: PassPlan) -> Set[str]:
    """Plans every set; returns the uids of sets frozen by the overshoot limit."""
    frozen_sets: Set[str] = set()
    for ms in world.sets:
        if o.uid(ms) in world.busy:
            # not planned while its job runs, but its freeze (the label) stands: otherwise the deployment's
            # label and Frozen condition would be lifted for this pass and set again in the next
            if o.labels(ms).get(LABEL_FREEZE) == 'True':
                frozen_sets.add(o.uid(ms))
                plan.freezes['set:' + o.key(ms)] = safety.Freeze(FREEZE_OVERSHOOT, 'MachineSet %s is frozen' % o.key(ms))
            continue
        try:
            if o.deleting(ms):
                check_scalable(ms)
            else:
                check_owner(ms)
        except InvalidInput as exc:
            plan.invalid[o.key(ms)] = exc
            continue
        machines = index.machines_by_set.get(o.uid(ms), [])
        md = index.mds_by_uid.get(o.owner_uid(ms))
        verdict = safety.overshoot(ms, machines, md, _surge_of(md), settings)      # deleting ones count too (MCM)
        labelled = o.labels(ms).get(LABEL_FREEZE) == 'True'
        frozen = labelled if verdict is None else verdict
        if verdict is not None:
            limit = (o.replicas(md) + _surge_of(md) if md is not None else 2 * o.replicas(ms)) + settings.safety_up
            freeze = safety.overshoot_message(ms, len(machines), limit)
            patch = freeze_patch(ms, verdict, FREEZE_OVERSHOOT, freeze.message, now)
            if patch:
                plan.set_freezes[o.key(ms)] = patch
                plan.events.append((ms, Event('MachineSetFrozen' if verdict else 'MachineSetUnfrozen',
                                              freeze.message if verdict else 'machine count back under the limit; scale-up resumes',
                                              warning=verdict)))
        if frozen:
            frozen_sets.add(o.uid(ms))
            plan.freezes['set:' + o.key(ms)] = safety.Freeze(FREEZE_OVERSHOOT, 'MachineSet %s is frozen' % o.key(ms))
        reason = ''
        if world.api_freeze is not None:
            reason = world.api_freeze.text()
        elif frozen:
            reason = '%s: MachineSet %s is frozen (label freeze=True)' % (FREEZE_OVERSHOOT, o.name(ms))
        plan.sets.append(plan_set(ms, machines, index.orphan_machines.get(o.namespace(ms), []), now,
                                  settings.burst_replicas, frozen=reason))
    return frozen_sets


def _plan_deployments(world: World, index: _Index, now: float, plan: PassPlan, frozen_sets: Set[str]) -> None:
    for md in world.deployments:
        if o.uid(md) in world.busy:
            continue
        sets = index.sets_by_md.get(o.uid(md), [])
        try:
            if o.deleting(md):
                check_scalable(md)
            else:
                check_owner(md)
            for ms in sets:   # a set read wrongly would be counted as 0 machines: the deployment waits for it
                if o.key(ms) in plan.invalid:
                    raise InvalidInput('MachineSet %s' % o.name(ms), plan.invalid[o.key(ms)].rule,
                                       'owned set is invalid: %s' % plan.invalid[o.key(ms)])
            dplan = _deployment(md, sets, index, now, world.nodes)
        except InvalidInput as exc:
            plan.invalid[o.key(md)] = exc
            continue
        freeze = (world.api_freeze or plan.freezes.get('fleet')
                  or plan.freezes.get('namespace:' + o.namespace(md)))
        overshot = any(o.uid(s) in frozen_sets for s in sets)
        if freeze is None and overshot:
            freeze = safety.Freeze(FREEZE_OVERSHOOT, 'a MachineSet of this deployment is frozen by the overshoot limit')
        _frozen_condition(md, dplan, freeze, now)
        label = o.labels(md).get(LABEL_FREEZE) == 'True'
        if overshot != label:
            plan.deployment_patches[o.key(md)] = {'metadata': {'labels': {LABEL_FREEZE: 'True' if overshot else None}}}
        plan.deployments.append(dplan)


def _deployment(md: Obj, sets: Sequence[Obj], index: _Index, now: float, nodes: Mapping[str, Obj]) -> DeploymentPlan:
    old_left = 0
    if (o.spec(md).get('strategy') or {}).get('type') == 'Recreate':
        new = find_new_set(md, sets)
        for s in sets:
            if new is None or o.uid(s) != o.uid(new):
                old_left += len(index.machines_by_set.get(o.uid(s), []))
    view = None
    if (o.spec(md).get('strategy') or {}).get('type') == STRATEGY_IN_PLACE:
        view = InPlaceView({o.name(s): index.machines_by_set.get(o.uid(s), []) for s in sets}, nodes)
    return plan_deployment(md, sets, index.orphan_sets.get(o.namespace(md), []), old_left, now, view)


def _frozen_condition(md: Obj, dplan: DeploymentPlan, freeze: Optional[safety.Freeze], now: float) -> None:
    """Frozen=True (reason: the rule, message: why) while a freeze stops this deployment's replacements."""
    status = dict(dplan.status or {})
    conditions = list(status.get('conditions') or o.status(md).get('conditions') or [])
    current = get_condition(conditions, COND_FROZEN)
    if freeze is not None and o.replicas(md) > 0:
        if current is None or current.get('status') != 'True' or current.get('reason') != freeze.rule \
                or current.get('message') != freeze.message:
            conditions = set_condition(conditions, COND_FROZEN, 'True', freeze.rule, freeze.message, now)
            dplan.events.append(Event('MachineDeploymentFrozen', freeze.text(), warning=True))
        else:
            return
    elif current is not None:
        conditions = [c for c in conditions if c.get('type') != COND_FROZEN]
        dplan.events.append(Event('MachineDeploymentUnfrozen', 'freeze %s ended' % current.get('reason')))
    else:
        return
    status['conditions'] = conditions
    dplan.status = status
