# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""MCM's in-place update strategy (`strategy.type: InPlaceUpdate`): a MachineDeployment whose template changed
moves its machines to the new MachineSet without new VMs. Pure: objects in, writes out.

The deployment's side (plan_deployment_inplace, once per pass, MCM's rolloutInPlace in the same order):
  1. old sets get the label `node.machine.sapcloud.io/scale-up-disabled` (they create no machine while machines
     leave them) and their machines' Nodes `node.machine.sapcloud.io/candidate-for-update=true`;
  2. the new set counts machines that moved in (Machine label `update-result=successful`): its replicas rise to
     them, then the label goes, and their Nodes lose the update labels and are uncordoned;
  3. machines of old sets whose Node says `update-result=successful` move to the new set (ownerReference, the
     new set's selector labels, `spec.class`), each followed by its old set's replicas - 1;
  4. `orchestrationType: Auto` selects old machines' Nodes (`selected-for-update=true`) while at least
     `replicas - maxUnavailable` machines stay available (MCM's budget, counting those being updated); `Manual`
     waits for the operator to label Nodes.
The machine's side (plan_machine_update, by reconcile.py): a machine of an old set whose Node is selected and has
no result yet is drained and updated by its driver (apply.run_in_place); the Node gets the result label.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.machines import objects as o
from ansible_collections.steward.cluster.plugins.module_utils.machines.constants import (
    LABEL_CANDIDATE_FOR_UPDATE,
    LABEL_SCALE_UP_DISABLED,
    LABEL_SELECTED_FOR_UPDATE,
    LABEL_UPDATE_RESULT,
    ORCHESTRATION_MANUAL,
    UPDATE_SUCCESSFUL,
    Phase,
)
from ansible_collections.steward.cluster.plugins.module_utils.kube.mcm import (
    KIND_SET,
    LABEL_NODE,
)

Obj = Mapping[str, Any]


@dataclasses.dataclass
class Transfer:
    """A machine that was updated where it stands moves from `from_set` to the new set: `patch` (merge patch of
    the Machine), then `from_set`'s replicas - 1. In this order: the old set never sees fewer replicas than
    machines (it would delete one), and it creates none meanwhile (scale-up disabled)."""
    machine: str
    from_set: str
    patch: Dict[str, Any]
    from_replicas: int          # the old set's replicas when planned (run_deployment subtracts the moves done)


@dataclasses.dataclass
class InPlacePlan:
    set_patches: Dict[str, Dict[str, Any]] = dataclasses.field(default_factory=dict)
    transfers: List[Transfer] = dataclasses.field(default_factory=list)
    machine_patches: Dict[str, Dict[str, Any]] = dataclasses.field(default_factory=dict)
    node_patches: Dict[str, Dict[str, Any]] = dataclasses.field(default_factory=dict)
    selected: List[str] = dataclasses.field(default_factory=list)      # nodes selected for update in this pass
    waiting: str = ''


def node_labels(node: Optional[Obj]) -> Mapping[str, str]:
    return o.labels(node) if node else {}


def _node_patch(plan: InPlacePlan, name: str, labels: Dict[str, Any], unschedulable: Optional[bool] = None) -> None:
    patch = plan.node_patches.setdefault(name, {})
    patch.setdefault('metadata', {}).setdefault('labels', {}).update(labels)
    if unschedulable is not None:
        patch['spec'] = {'unschedulable': unschedulable}


def _result(node: Optional[Obj]) -> str:
    return node_labels(node).get(LABEL_UPDATE_RESULT, '')


def _selected(node: Optional[Obj]) -> bool:
    return LABEL_SELECTED_FOR_UPDATE in node_labels(node)


def transfer_patch(machine: Obj, old: Obj, new: Obj) -> Dict[str, Any]:
    """The Machine's move: owner, the new set's selector labels instead of the old one's, and the result label
    (the new set keeps it until its replicas count it)."""
    old_keys = set(((o.spec(old).get('selector') or {}).get('matchLabels') or {}))
    new_labels = dict(((o.spec(new).get('selector') or {}).get('matchLabels') or {}))
    labels: Dict[str, Any] = {k: None for k in old_keys if k not in new_labels}
    labels.update(new_labels)
    labels[LABEL_UPDATE_RESULT] = UPDATE_SUCCESSFUL
    # spec.class stays (MCM's transfer keeps it too): the machine's VM is listed under that class (sabakan: its
    # claim's class-uid); what the driver applied is recorded by the driver (sabakan: the claim's applied-class)
    return {'metadata': {'labels': labels, 'ownerReferences': [o.owner_reference(new, KIND_SET)]}}


def plan_deployment_inplace(md: Obj, old: Sequence[Obj], new: Obj, machines_by_set: Mapping[str, Sequence[Obj]],
                            nodes: Mapping[str, Obj], desired: int, max_unavailable: int,
                            orchestration: str) -> InPlacePlan:
    """One pass of an InPlaceUpdate deployment that has its new set (see the module docstring)."""
    plan = InPlacePlan()
    node_of = nodes.get
    old_active = [s for s in old if o.replicas(s) > 0 or machines_by_set.get(o.name(s))]
    for ms in old_active:
        if LABEL_SCALE_UP_DISABLED not in o.labels(ms):
            plan.set_patches.setdefault(o.name(ms), {})['metadata'] = {'labels': {LABEL_SCALE_UP_DISABLED: 'true'}}
        for m in machines_by_set.get(o.name(ms), []):
            name = o.labels(m).get(LABEL_NODE)
            node = node_of(name) if name else None
            if node is not None and not o.deleting(m) and LABEL_CANDIDATE_FOR_UPDATE not in node_labels(node):
                _node_patch(plan, name, {LABEL_CANDIDATE_FOR_UPDATE: 'true'})

    # 2. the new set: count machines that moved in, then drop their label and clean their Nodes
    new_machines = [m for m in machines_by_set.get(o.name(new), []) if not o.deleting(m)]
    moved_in = [m for m in new_machines if o.labels(m).get(LABEL_UPDATE_RESULT) == UPDATE_SUCCESSFUL]
    new_replicas = o.replicas(new)
    if moved_in and len(new_machines) > new_replicas:
        new_replicas += min(len(moved_in), len(new_machines) - new_replicas)
        plan.set_patches.setdefault(o.name(new), {})['spec'] = {'replicas': new_replicas}
    elif moved_in:
        for m in moved_in:
            plan.machine_patches[o.name(m)] = {'metadata': {'labels': {LABEL_UPDATE_RESULT: None}}}
    for m in new_machines:
        name = o.labels(m).get(LABEL_NODE)
        node = node_of(name) if name else None
        if node is not None and _result(node) == UPDATE_SUCCESSFUL:
            _node_patch(plan, name, {LABEL_CANDIDATE_FOR_UPDATE: None, LABEL_SELECTED_FOR_UPDATE: None,
                                     LABEL_UPDATE_RESULT: None}, unschedulable=False)
    if moved_in and len(new_machines) > o.replicas(new):
        return plan        # the count first; transfers and selections wait for the next pass (MCM returns too)

    old_count = sum(o.replicas(s) for s in old_active)
    if new_replicas > desired:
        plan.set_patches.setdefault(o.name(new), {})['spec'] = {'replicas': desired}
        return plan
    if old_count == 0 or old_count + new_replicas < desired:
        target = desired if old_count == 0 else desired - old_count
        if target != new_replicas:
            plan.set_patches.setdefault(o.name(new), {})['spec'] = {'replicas': target}
            return plan

    # 3. machines updated where they stand move to the new set
    for ms in old_active:
        for m in machines_by_set.get(o.name(ms), []):
            name = o.labels(m).get(LABEL_NODE)
            node = node_of(name) if name else None
            if o.deleting(m) or node is None or _result(node) != UPDATE_SUCCESSFUL \
                    or o.phase(m) == Phase.IN_PLACE_UPDATING:
                continue
            plan.transfers.append(Transfer(o.name(m), o.name(ms), transfer_patch(m, ms, new), o.replicas(ms)))
    if plan.transfers:
        return plan

    # 4. selection
    if new_replicas >= desired:
        for ms in old_active:       # left over beyond the replicas: MCM scales old sets to 0
            if o.replicas(ms):
                plan.set_patches.setdefault(o.name(ms), {})['spec'] = {'replicas': 0}
        return plan
    old_machines = [m for ms in old_active for m in machines_by_set.get(o.name(ms), []) if not o.deleting(m)]
    undergoing = sum(1 for m in old_machines if _selected(node_of(o.labels(m).get(LABEL_NODE) or '')))
    if undergoing + new_replicas >= desired:
        return plan
    if orchestration == ORCHESTRATION_MANUAL:
        plan.waiting = ('orchestrationType Manual: %d machine(s) left on the old template; label their Nodes %s=true '
                        'to update them' % (len(old_machines) - undergoing, LABEL_SELECTED_FOR_UPDATE))
        return plan
    min_available = desired - max_unavailable
    available = sum(o.int_field(o.status(s), 'availableReplicas') for s in list(old_active) + [new]) - undergoing
    budget = min(available - min_available, max(desired - new_replicas - undergoing, 0))
    if budget <= 0:
        plan.waiting = ('%d of %d machines available, %d being updated: maxUnavailable %d leaves no room'
                        % (available, desired, undergoing, max_unavailable))
        return plan
    for m in sorted(old_machines, key=lambda m: (o.created_at(m), o.name(m))):
        if len(plan.selected) >= budget:
            break
        name = o.labels(m).get(LABEL_NODE)
        node = node_of(name) if name else None
        if node is None or _selected(node) or _result(node) or o.phase(m) != Phase.RUNNING:
            continue
        _node_patch(plan, name, {LABEL_CANDIDATE_FOR_UPDATE: 'true', LABEL_SELECTED_FOR_UPDATE: 'true'})
        plan.selected.append(name)
    return plan


def needs_update(machine: Obj, node: Optional[Obj], in_old_set: bool) -> bool:
    """A machine of an old set of an InPlaceUpdate deployment whose Node is selected and has no result yet: the
    machines loop drains it and has its driver update it (MCM: the machine controller drains, the node agent
    updates; here the driver does)."""
    return (in_old_set and node is not None and not o.deleting(machine) and _selected(node) and not _result(node)
            and o.phase(machine) in (Phase.RUNNING, Phase.UNKNOWN, Phase.IN_PLACE_UPDATING))
