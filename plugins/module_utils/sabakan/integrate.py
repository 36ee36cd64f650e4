# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One integration cycle (CKE's integrate.go): generate, update, or regenerate on template change,
plus a node-level diff so operators see what a cycle would do before it does it. `plan_checked_cluster`
adds CKE's constraint check: the one planner of the sabakan_cluster module and the controller."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.constraints import check_cluster
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import (
    ConstraintViolation, GeneratorError, MissingMachine, NotAvailable,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.generator import (
    DEFAULT_WAIT_RETIRED_SECONDS, OP_REGENERATE, Generator,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.machines import TimeLike
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.nodes import STATE_TAINT_KEY


@dataclass
class NodeChange:
    address: str
    change: str  # added | removed | promoted | demoted | retainted | updated
    detail: str = ''

    def as_dict(self) -> Dict[str, str]:
        return {'address': self.address, 'change': self.change, 'detail': self.detail}


@dataclass
class Plan:
    """The cluster a cycle wants (None = keep the current one) and why."""

    cluster: Optional[Dict[str, Any]]
    operation: str = ''
    changes: List[str] = field(default_factory=list)
    node_changes: List[NodeChange] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.cluster is not None


def _state_taint(node: Mapping[str, Any]) -> str:
    for taint in node.get('taints') or []:
        if taint.get('key') == STATE_TAINT_KEY:
            return f'{taint.get("value") or ""}:{taint.get("effect")}'
    return 'none'


def diff_clusters(old: Optional[Mapping[str, Any]], new: Optional[Mapping[str, Any]]) -> List[NodeChange]:
    """Node-level differences: added, removed, promoted, demoted, retainted (state taint), updated."""
    before = {n['address']: n for n in (old or {}).get('nodes') or []}
    after = {n['address']: n for n in (new or {}).get('nodes') or []}
    changes: List[NodeChange] = []
    for address, node in after.items():
        role = 'control plane' if node.get('control_plane') else 'worker'
        prior = before.get(address)
        if prior is None:
            changes.append(NodeChange(address, 'added', role))
            continue
        if bool(prior.get('control_plane')) != bool(node.get('control_plane')):
            changes.append(NodeChange(address, 'promoted' if node.get('control_plane') else 'demoted', role))
        if _state_taint(prior) != _state_taint(node):
            changes.append(NodeChange(address, 'retainted', f'{_state_taint(prior)} -> {_state_taint(node)}'))
        elif {k: v for k, v in prior.items() if k != 'control_plane'} != {k: v for k, v in node.items() if k != 'control_plane'}:
            if bool(prior.get('control_plane')) == bool(node.get('control_plane')):
                changes.append(NodeChange(address, 'updated', 'labels, annotations, taints or user'))
    for address, node in before.items():
        if address not in after:
            changes.append(NodeChange(address, 'removed', 'control plane' if node.get('control_plane') else 'worker'))
    return changes


def plan_cluster(current: Optional[Mapping[str, Any]], template: Mapping[str, Any], constraints: Any,
                 machines: Sequence[Any], *, now: TimeLike = None,
                 node_taints: Optional[Mapping[str, Sequence[Mapping[str, Any]]]] = None,
                 wait_retired_seconds: float = DEFAULT_WAIT_RETIRED_SECONDS) -> Plan:
    """Generate when there is no cluster; otherwise update; when update has nothing to do but the
    template (or a machine's labels) no longer matches the cluster, regenerate.

    Generator errors propagate unchanged: the caller keeps the current cluster.
    """
    generator = Generator(template, constraints, machines, now=now, node_taints=node_taints,
                          wait_retired_seconds=wait_retired_seconds)
    if current is None:
        outcome = generator.generate()
    else:
        outcome = generator.update(current)
        if outcome.cluster is None:
            try:
                outcome = generator.regenerate(current)
            except (MissingMachine, NotAvailable):
                return Plan(cluster=None)
            if outcome.cluster == current:
                return Plan(cluster=None)
            outcome.operation.name = OP_REGENERATE  # type: ignore[union-attr]
    op = outcome.operation
    return Plan(cluster=outcome.cluster, operation=op.name if op else '', changes=list(op.changes) if op else [],
                node_changes=diff_clusters(current, outcome.cluster))


def plan_checked_cluster(current: Optional[Mapping[str, Any]], template: Mapping[str, Any], constraints: Any,
                         machines: Sequence[Any], *, now: TimeLike = None,
                         node_taints: Optional[Mapping[str, Sequence[Mapping[str, Any]]]] = None,
                         wait_retired_seconds: float = DEFAULT_WAIT_RETIRED_SECONDS) -> Tuple[Plan, Dict[str, Any]]:
    """plan_cluster, then CKE's Constraints.Check on the cluster that stands afterwards (the new one, or the
    current one when nothing changes): (plan, that cluster). Raises GeneratorError, ConstraintViolation
    included, and then nothing may be written."""
    plan = plan_cluster(current, template, constraints, machines, now=now, node_taints=node_taints,
                        wait_retired_seconds=wait_retired_seconds)
    effective = plan.cluster if plan.changed else current
    if effective is None:  # plan_cluster generates when there is no current cluster; never None here
        raise GeneratorError('the generator produced no cluster')
    violation = check_cluster(constraints, effective)
    if violation:
        raise ConstraintViolation(f'the cluster does not satisfy the constraints: {violation}')
    return plan, dict(effective)
