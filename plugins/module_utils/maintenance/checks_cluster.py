# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check plugins that read other nodes: clusterSemver, maxMaintenance, nodeCount, anyLabel, affinity.

They read `params.cluster_nodes()`, one list per reconcile phase; inside the gate that list is a fresh
read (see state.reconcile), which is what makes maxMaintenance hold with many nodes reconciled at once
(upstream warns it may not). Semantics and info keys follow upstream's plugin/impl.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.constants import (
    DATA_ANNOTATION, OPERATIONAL, PROFILE_LABEL, REQUIRED, STATE_LABEL, contains_profile)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.data import node_data, parse_data
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.environment import (
    PluginParams, labels_of, name_of)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import DataError, PluginError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.fields import Fields
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.gotime import NS
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.plugin_base import (
    CheckPlugin, CheckResult, failed, passed)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.semver import Version, parse_version


@dataclasses.dataclass(frozen=True)
class ClusterSemver(CheckPlugin):
    """Passes if this node's version label is lower than the highest one in the cluster (or profile)."""

    key: str
    profile_scoped: bool
    type_name = 'clusterSemver'
    cluster_scoped = True

    @classmethod
    def from_config(cls, fields: Fields) -> 'ClusterSemver':
        return cls(fields.string('key', required=True), fields.boolean('profileScoped'))

    def check(self, params: PluginParams) -> CheckResult:
        own_text = params.labels.get(self.key)
        if own_text is None:
            raise PluginError('node does not have label %s containing a version' % self.key)
        try:
            own = parse_version(own_text)
        except ValueError as exc:
            raise PluginError('failed to parse the node\'s version label %s: %s' % (self.key, exc)) from None
        highest = Version(0, 1, 0)
        for node in params.cluster_nodes():
            labels = labels_of(node)
            if self.key not in labels:
                continue
            if self.profile_scoped and not contains_profile(labels.get(PROFILE_LABEL, ''), params.profile):
                continue
            try:
                version = parse_version(labels[self.key])
            except ValueError:
                continue
            highest = max(highest, version)
        return CheckResult(own < highest, {'version': str(own), 'highest': str(highest)})


def _most_recent_transition(node: Mapping[str, Any], profile: str) -> Optional[int]:
    """The node's latest transition (of `profile`, if set); unreadable data is an error, as upstream: a node
    in maintenance whose data cannot be read must not silently drop out of the count."""
    md = node.get('metadata') or {}
    try:
        profiles = parse_data((md.get('annotations') or {}).get(DATA_ANNOTATION), md.get('labels') or {}).profiles
    except DataError as exc:
        raise PluginError('cannot read the data of in-maintenance node %s: %s' % (name_of(node), exc)) from None
    if profile:
        entry = profiles.get(profile)
        return entry.transition if entry else None
    return max((p.transition for p in profiles.values()), default=None)


@dataclasses.dataclass(frozen=True)
class MaxMaintenance(CheckPlugin):
    """Passes while fewer than `max` nodes are in-maintenance, optionally counting only nodes with
    `profile`, with the same values of the `groupBy` labels, or that transitioned within `skipAfter`."""

    max: int
    profile: str
    group_by: Tuple[str, ...]
    skip_after: float
    type_name = 'maxMaintenance'
    cluster_scoped = True

    @classmethod
    def from_config(cls, fields: Fields) -> 'MaxMaintenance':
        group_by = fields.string_list('groupBy')
        legacy = fields.string('groupLabel')  # deprecated upstream: appended to groupBy
        if legacy and legacy not in group_by:
            group_by.append(legacy)
        return cls(fields.integer('max', required=True, minimum=0), fields.string('profile'), tuple(group_by),
                   fields.duration('skipAfter'))

    def check(self, params: PluginParams) -> CheckResult:
        nodes = params.cluster_in_maintenance()   # counted once per node list, not walked per node checked
        if self.profile:
            nodes = [n for n in nodes if contains_profile(labels_of(n).get(PROFILE_LABEL, ''), self.profile)]
        scope = []
        own = params.labels
        for label in self.group_by:
            if own.get(label):
                nodes = [n for n in nodes if labels_of(n).get(label) == own[label]]
                scope.append('%s=%s' % (label, own[label]))
        if self.skip_after:
            now_ns = int(params.now * NS)
            recent = []
            for node in nodes:
                last = _most_recent_transition(node, self.profile)
                if last is not None and now_ns - last < self.skip_after * NS:
                    recent.append(node)
            nodes = recent
        info = {'scope': 'nodes matching the %s label selector' % ','.join(scope) if scope else 'all nodes in the cluster',
                'maintained': len(nodes), 'max': self.max, 'nodes': sorted(name_of(n) for n in nodes)}
        return CheckResult(len(nodes) < self.max, info)


@dataclasses.dataclass(frozen=True)
class NodeCount(CheckPlugin):
    """Passes if the cluster has at least `count` nodes."""

    count: int
    type_name = 'nodeCount'
    cluster_scoped = True

    @classmethod
    def from_config(cls, fields: Fields) -> 'NodeCount':
        return cls(fields.integer('count', required=True, minimum=0))

    def check(self, params: PluginParams) -> CheckResult:
        present = len(params.cluster_nodes())
        return CheckResult(present >= self.count, {'nodes': present, 'count': self.count})


@dataclasses.dataclass(frozen=True)
class AnyLabel(CheckPlugin):
    """Passes if at least one node of the cluster has the label (with `value`, if set)."""

    key: str
    value: str
    type_name = 'anyLabel'
    cluster_scoped = True

    @classmethod
    def from_config(cls, fields: Fields) -> 'AnyLabel':
        return cls(fields.string('key', required=True), fields.string('value'))

    def check(self, params: PluginParams) -> CheckResult:
        for node in params.cluster_nodes():
            labels = labels_of(node)
            if self.key in labels and (not self.value or labels[self.key] == self.value):
                return passed(node=name_of(node))
        return failed()


def has_operational_affinity(pod: Mapping[str, Any]) -> bool:
    """A preferred node affinity to `cloud.sap/maintenance-state In [operational]` (exactly that value)."""
    affinity = ((pod.get('spec') or {}).get('affinity') or {}).get('nodeAffinity') or {}
    for term in affinity.get('preferredDuringSchedulingIgnoredDuringExecution') or []:
        for expr in (term.get('preference') or {}).get('matchExpressions') or []:
            if expr.get('key') == STATE_LABEL and expr.get('operator') == 'In' and list(expr.get('values') or []) == [OPERATIONAL]:
                return True
    return False


@dataclasses.dataclass(frozen=True)
class Affinity(CheckPlugin):
    """Only for maintenance-required: prefer maintaining nodes without pods that asked for operational
    nodes, so those pods land on nodes that stay up. `minOperational` > 0 passes outright while at least
    that many nodes of the profile are operational."""

    min_operational: int
    type_name = 'affinity'
    cluster_scoped = True

    @classmethod
    def from_config(cls, fields: Fields) -> 'Affinity':
        return cls(fields.integer('minOperational', minimum=0))

    def _has_affinity_pod(self, params: PluginParams, node_name: str) -> bool:
        return any(has_operational_affinity(pod) for pod in params.env.pods_on_node(node_name))

    def check(self, params: PluginParams) -> CheckResult:
        if params.state != REQUIRED:
            raise PluginError('affinity check plugin failed, node %s is not in maintenance-required but %s state'
                              % (params.node_name, params.state))
        states: Dict[str, str] = {}
        for node in params.cluster_nodes():
            entry = node_data(node).profiles.get(params.profile)
            if entry is not None:
                states[name_of(node)] = entry.current
        if self.min_operational > 0:
            operational = sum(1 for state in states.values() if state == OPERATIONAL)
            if operational >= self.min_operational:
                return passed(reason='minOperational exceeded', operational=operational)
        if not self._has_affinity_pod(params, params.node_name):
            return passed(reason='no pods with affinity')
        others: List[str] = sorted(name for name, state in states.items() if name != params.node_name and state == REQUIRED)
        for other in others:
            if not self._has_affinity_pod(params, other):
                return failed(reason='pods without affinity on: ' + other)
        return passed()


CLUSTER_CHECKS: List[type] = [ClusterSemver, MaxMaintenance, NodeCount, AnyLabel, Affinity]
