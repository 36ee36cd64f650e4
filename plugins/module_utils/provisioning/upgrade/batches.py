# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which workers' kubelets move together: batches of at most `max_unavailable` nodes, pure over plain data.

A batch is drained (by the playbook's kubelet step, or by a node-maintenance profile's drain trigger) all at once,
so three limits bound it, the smallest wins:

  max_unavailable   the operator's `cluster_upgrade_max_unavailable`;
  maxMaintenance    with the workers walked through the node-maintenance state machine, the profile's
                    `maxMaintenance` checks on the way into `in-maintenance` (the smallest `max`), less the nodes
                    already in maintenance that are not ours: a batch larger than that would leave one of its nodes
                    waiting for a slot its own batch holds until the window's wait times out;
  PodDisruptionBudgets  a batch never holds more of a budget's pods than the budget allows to be disrupted now
                    (`status.disruptionsAllowed`, else computed from the spec as the disruption controller does):
                    the drain respects budgets pod by pod anyway (an eviction answered 429 is retried), but a batch
                    that needs more evictions than allowed would only wait, with its nodes cordoned, for pods
                    that cannot leave. A node whose pods alone exceed a budget is a batch of its own (the drain
                    then waits as it does for one node).

Batches keep the workers' order, except that nodes already under way (a Node record before `done`, or in
maintenance) come first: a resumed run finishes them before it takes new ones, and they hold maintenance slots.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.kube.drain import classify_pods
from ansible_collections.steward.cluster.plugins.module_utils.kube.intstr import scaled
from ansible_collections.steward.cluster.plugins.module_utils.kube.selectors import selector_matches
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.checks_cluster import MaxMaintenance
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.constants import IN_MAINTENANCE


@dataclasses.dataclass(frozen=True)
class Budget:
    """One PodDisruptionBudget: its selector and how many of its pods may be disrupted now."""
    namespace: str
    name: str
    selector: Mapping[str, Any]
    allowed: int

    @property
    def ref(self) -> str:
        return '%s/%s' % (self.namespace, self.name)


@dataclasses.dataclass(frozen=True)
class Limits:
    """What bounds a batch (see the module docstring). `pods`: each node's pods a drain would evict, as
    (namespace, labels). `max_maintenance` None: the workers are not walked through node maintenance."""
    max_unavailable: int = 1
    max_maintenance: Optional[int] = None
    budgets: Tuple[Budget, ...] = ()
    pods: Mapping[str, Tuple[Tuple[str, Mapping[str, str]], ...]] = dataclasses.field(default_factory=dict)


def _ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get('status') or {}).get('conditions') or []
    return any(c.get('type') == 'Ready' and c.get('status') == 'True' for c in conditions)


def budget_of(pdb: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> Budget:
    """A Budget from a policy/v1 PodDisruptionBudget: `status.disruptionsAllowed` when the disruption controller
    has written it, else computed from the spec over `pods` (the namespace's pods) the way that controller does:
    expected = the pods the selector matches, healthy = those Ready, allowed = healthy - desired, where desired is
    minAvailable (a percentage of expected, rounded up) or expected - maxUnavailable (rounded up); never below 0."""
    meta = pdb.get('metadata') or {}
    spec = pdb.get('spec') or {}
    status = pdb.get('status') or {}
    namespace = meta.get('namespace') or 'default'
    name = meta.get('name') or ''
    selector = spec.get('selector')
    where = 'PodDisruptionBudget %s/%s' % (namespace, name)
    if isinstance(status.get('disruptionsAllowed'), int) and 'observedGeneration' in status:
        return Budget(namespace, name, selector or {}, max(0, status['disruptionsAllowed']))
    matching = [p for p in pods if ((p.get('metadata') or {}).get('namespace') or 'default') == namespace
                and selector_matches(selector, (p.get('metadata') or {}).get('labels') or {})]
    expected = len(matching)
    healthy = sum(1 for p in matching if _ready(p))
    try:
        if 'minAvailable' in spec:
            desired = scaled(spec['minAvailable'], expected, True, where + ' spec.minAvailable')
        else:
            desired = expected - scaled(spec.get('maxUnavailable', 0), expected, True,
                                        where + ' spec.maxUnavailable')
    except InvalidInput:
        desired = expected   # a budget we cannot read allows nothing: every pod of it in its own batch
    return Budget(namespace, name, selector or {}, max(0, healthy - max(0, desired)))


def evictable_pods(pods: Sequence[Mapping[str, Any]], nodes: Sequence[str]) -> Dict[str, Tuple[Tuple[str, Mapping[str, str]], ...]]:
    """Each node's pods a drain evicts (kube/drain's rules: no mirror, DaemonSet or finished pods), as
    (namespace, labels)."""
    out = {}
    for node in nodes:
        classified = classify_pods(pods, node, force=True)
        out[node] = tuple(((p.get('metadata') or {}).get('namespace') or 'default',
                           dict((p.get('metadata') or {}).get('labels') or {})) for p in classified.evict)
    return out


def max_maintenance_of(config: Any, profile: str) -> Optional[int]:
    """The smallest `max` of the maxMaintenance checks on the profile's transitions into `in-maintenance`
    (maintenance/config.Config); None when the profile has none (nothing bounds the batch there) or is unknown."""
    chosen = (getattr(config, 'profiles', None) or {}).get(profile)
    if chosen is None:
        return None
    found = []
    for chains in chosen.states.values():
        for transition in chains.transitions:
            if transition.next != IN_MAINTENANCE:
                continue
            found += [i.plugin.max for i in transition.check.instances if isinstance(i.plugin, MaxMaintenance)]
    return min(found) if found else None


def in_maintenance_elsewhere(nodes: Mapping[str, Mapping[str, Any]], ours: Sequence[str],
                             state_label: str) -> List[str]:
    """Nodes in maintenance that are not ours: they hold maxMaintenance slots our batches cannot use."""
    return sorted(name for name, obj in nodes.items() if name not in ours and
                  ((obj.get('metadata') or {}).get('labels') or {}).get(state_label) == IN_MAINTENANCE)


def batches(pending: Sequence[str], limits: Limits, in_flight: Sequence[str] = ()) -> Tuple[List[Tuple[str, ...]], Dict[str, Any]]:
    """The batches, in order, and what bounded them (shown in check mode): `size` the largest a batch may be,
    `limited_by` which limit gave it, `splits` each place a budget closed a batch early."""
    order = [n for n in pending if n in in_flight] + [n for n in pending if n not in in_flight]
    size, limited_by = max(1, limits.max_unavailable), 'max_unavailable'
    if limits.max_maintenance is not None and max(1, limits.max_maintenance) < size:
        size, limited_by = max(1, limits.max_maintenance), 'maxMaintenance'
    out: List[Tuple[str, ...]] = []
    splits: List[Dict[str, Any]] = []
    current: List[str] = []
    used: Dict[str, int] = {}
    for node in order:
        needs = {b.ref: sum(1 for ns, labels in limits.pods.get(node, ()) if ns == b.namespace
                            and selector_matches(b.selector, labels)) for b in limits.budgets}
        over = [b for b in limits.budgets if current and needs[b.ref] and used.get(b.ref, 0) + needs[b.ref] > b.allowed]
        if current and (len(current) >= size or over):
            if over and len(current) < size:
                splits.append({'node': node, 'budget': over[0].ref, 'allowed': over[0].allowed,
                               'message': 'batch %d closed before %s: %s allows %d disruption(s), the batch would '
                                          'evict %d of its pods' % (len(out) + 1, node, over[0].ref, over[0].allowed,
                                                                    used.get(over[0].ref, 0) + needs[over[0].ref])})
            out.append(tuple(current))
            current, used = [], {}
        current.append(node)
        for ref, count in needs.items():
            used[ref] = used.get(ref, 0) + count
    if current:
        out.append(tuple(current))
    info = {'max_unavailable': limits.max_unavailable, 'max_maintenance': limits.max_maintenance, 'size': size,
            'limited_by': limited_by, 'splits': splits, 'in_flight': [n for n in order if n in in_flight],
            'budgets': {b.ref: b.allowed for b in limits.budgets}}
    return out, info
