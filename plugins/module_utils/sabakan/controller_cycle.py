# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One SabakanIntegration cycle as a pure function: from the checked spec, sabakan's machines, the
current cluster and the Nodes, what to write (cluster, Node patches, Node deletions), the status
and the metric values. The controller only reads the inputs and applies the outcome.

Any failure (generator error, constraint violation, and on the controller side sabakan or API
errors) gives an outcome that writes nothing: the last good cluster stays and no Node is touched.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.kube.conditions import FALSE, TRUE, rfc3339, set_condition
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import ConstraintViolation, GeneratorError
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.generator import OP_NEW, OP_REGENERATE
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.integrate import Plan, plan_checked_cluster
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.integration_spec import IntegrationSpec
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.kube_nodes import (
    NodeDeletion, NodePatch, node_taints_by_address, plan_node_deletions, plan_node_patches,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.template import LABEL_ROLE

GENERATED = 'Generated'
UPDATED = 'Updated'
REGENERATED = 'Regenerated'
UNCHANGED = 'Unchanged'
FAILED = 'Failed'
INVALID = 'Invalid'
DISABLED = 'Disabled'
SUCCESSFUL_RESULTS = (GENERATED, UPDATED, REGENERATED, UNCHANGED)

CONDITION_SYNCED = 'Synced'
CONSTRAINT_VIOLATION = ConstraintViolation.__name__


@dataclass(frozen=True)
class ClusterSummary:
    """The numbers in status and in the cke_sabakan_* metrics."""

    nodes: int
    control_planes: int
    workers: Dict[str, int]      # by role (cke.cybozu.com/role)
    unused_machines: int         # machines of the generator query that are not cluster nodes


@dataclass
class CycleOutcome:
    result: str                                  # one of the result names above
    reason: str = ''                             # failure: why; success: empty
    error: str = ''                              # failure: the error's class name (condition reason)
    plan: Optional[Plan] = None
    cluster: Optional[Dict[str, Any]] = None     # to write; None keeps the current one
    node_patches: List[NodePatch] = field(default_factory=list)
    node_deletions: List[NodeDeletion] = field(default_factory=list)
    summary: Optional[ClusterSummary] = None

    @property
    def successful(self) -> bool:
        return self.result in SUCCESSFUL_RESULTS


def failed(error: str, reason: str, result: str = FAILED) -> CycleOutcome:
    return CycleOutcome(result=result, reason=reason, error=error)


def summarize(cluster: Mapping[str, Any], machines: Sequence[Mapping[str, Any]]) -> ClusterSummary:
    nodes = cluster.get('nodes') or []
    workers = Counter((n.get('labels') or {}).get(LABEL_ROLE, '') for n in nodes if not n.get('control_plane'))
    used = {n.get('address') for n in nodes}
    unused = sum(1 for m in machines if ((m.get('spec') or {}).get('ipv4') or [''])[0] not in used)
    return ClusterSummary(nodes=len(nodes), control_planes=len(nodes) - sum(workers.values()),
                          workers=dict(sorted(workers.items())), unused_machines=unused)


def result_of(plan: Plan) -> str:
    if not plan.changed:
        return UNCHANGED
    return {OP_NEW: GENERATED, OP_REGENERATE: REGENERATED}.get(plan.operation, UPDATED)


def plan_cycle(spec: IntegrationSpec, template: Mapping[str, Any], machines: Sequence[Mapping[str, Any]],
               current: Optional[Mapping[str, Any]], kube_nodes: Sequence[Mapping[str, Any]], *,
               integration: str, now: datetime,
               retired_machines: Optional[Sequence[Mapping[str, Any]]] = None) -> CycleOutcome:
    """Generate / update / regenerate and check the constraints (integrate.plan_checked_cluster), then plan the
    Node patches (`spec.apply_nodes`) and deletions (`spec.delete_removed_nodes`, from
    `retired_machines`: sabakan's RETIRED machines) against the resulting cluster."""
    taints = node_taints_by_address(kube_nodes, current)
    try:
        plan, effective = plan_checked_cluster(current, template, spec.constraints, machines, now=now, node_taints=taints,
                                               wait_retired_seconds=spec.wait_retired_seconds)
    except GeneratorError as exc:   # ConstraintViolation's name is the condition reason CONSTRAINT_VIOLATION
        return failed(type(exc).__name__, str(exc))
    patches = plan_node_patches(effective, kube_nodes, integration) if spec.apply_nodes else []
    deletions = []
    if spec.delete_removed_nodes and retired_machines is not None:
        deletions = plan_node_deletions(effective, kube_nodes, retired_machines, integration)
    return CycleOutcome(result=result_of(plan), plan=plan, cluster=plan.cluster if plan.changed else None,
                        node_patches=patches, node_deletions=deletions, summary=summarize(effective, machines))


def integration_status(previous: Optional[Mapping[str, Any]], outcome: CycleOutcome, *, now: float,
                       generation: Optional[int] = None, template_hash: str = '') -> Dict[str, Any]:
    """The status merge patch for one cycle. A failed cycle leaves the last good numbers in place;
    keys set to None are removed by the merge patch."""
    previous = previous or {}
    stamp = rfc3339(now)
    status: Dict[str, Any] = {'lastRun': stamp, 'lastResult': outcome.result}
    if generation is not None:
        status['observedGeneration'] = generation
    if outcome.successful:
        summary = outcome.summary
        plan = outcome.plan
        status.update(lastSuccess=stamp, reason=outcome.reason or None,
                      operation=(plan.operation or None) if plan and plan.changed else None,
                      changes=list(plan.changes) if plan and plan.changed else [])
        if summary is not None:
            workers: Dict[str, Optional[int]] = {role: None for role in previous.get('workers') or {}}
            workers.update(summary.workers)  # a merge patch keeps map keys it does not name: drop gone roles
            status.update(nodes=summary.nodes, controlPlanes=summary.control_planes, workers=workers,
                          unusedMachines=summary.unused_machines)
        if template_hash:
            status['templateHash'] = template_hash
        message = (f'{summary.nodes} nodes ({summary.control_planes} control planes), '
                   f'{summary.unused_machines} unused machines' if summary else outcome.result)
        status['conditions'] = set_condition(previous.get('conditions'), CONDITION_SYNCED, TRUE, outcome.result,
                                             message, now)
    else:
        status['reason'] = outcome.reason
        status['conditions'] = set_condition(previous.get('conditions'), CONDITION_SYNCED, FALSE,
                                             outcome.error or outcome.result, outcome.reason, now)
    return status
