# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deciding without acting: which profiles a node has, their states, and which transitions pass.

Shared by `state.reconcile` (which then acts) and `info.describe_node` (which only reports).
Semantics of upstream's state.transitionDefault and Transition.Execute: every transition of the current
state is evaluated, all its check instances run (so the info is complete), a check that errors fails
its transition and stops the profile from moving this time, and the first passing transition in
config order wins. A transition into in-maintenance is blocked while any profile of the node is
in-maintenance (only one profile in maintenance at a time).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.chain import evaluate
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config import Config, Profile, Transition
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.constants import (
    IN_MAINTENANCE, OPERATIONAL, SEVERITY, split_profiles)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.data import NodeData, ProfileData
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.environment import ClusterView, Environment, PluginParams
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import PluginError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.gotime import ns_to_seconds
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.plugin_base import CheckResult

BLOCKED_EXCLUSIVE = 'another profile of this node is in-maintenance'


@dataclasses.dataclass
class ChainEvaluation:
    """One transition's verdict; `checks` is what the info view and the logs show."""

    next: str
    check: str
    passed: bool
    checks: Dict[str, Dict[str, Any]]
    trigger: List[str]
    error: str = ''
    blocked: str = ''
    results: Dict[str, CheckResult] = dataclasses.field(default_factory=dict, repr=False)

    def as_dict(self) -> Dict[str, Any]:
        out = {'next': self.next, 'check': self.check, 'passed': self.passed, 'checks': self.checks, 'trigger': self.trigger}
        if self.error:
            out['error'] = self.error
        if self.blocked:
            out['blocked'] = self.blocked
        return out


def plugin_failure(exc: BaseException) -> str:
    """PluginError texts stand alone; anything else (a bug, a library error) keeps its type."""
    return str(exc) if isinstance(exc, PluginError) else '%s: %s' % (type(exc).__name__, exc)


def attached_profiles(label_value: str, config: Config) -> List[Profile]:
    """The label's profiles that the config defines, in label order (unknown names are skipped, as upstream)."""
    return [config.profiles[name] for name in split_profiles(label_value) if name in config.profiles]


def maintain_profiles(data: NodeData, label_value: str, config: Config, now_ns: int) -> None:
    """Drop data of profiles no longer in the label; start newly attached ones as operational now."""
    listed = split_profiles(label_value)
    for name in [n for n in data.profiles if n not in listed]:
        del data.profiles[name]
    for profile in attached_profiles(label_value, config):
        if profile.name not in data.profiles:
            data.profiles[profile.name] = ProfileData(now_ns, OPERATIONAL, OPERATIONAL)


def last_profile(data: NodeData) -> str:
    """The profile whose state changed most recently (templates' `.Profile.Last`)."""
    if not data.profiles:
        return ''
    return max(sorted(data.profiles), key=lambda name: data.profiles[name].transition)


def any_in_maintenance(data: NodeData, profiles: List[Profile]) -> bool:
    return any(data.profiles[p.name].current == IN_MAINTENANCE for p in profiles if p.name in data.profiles)


def node_state(data: NodeData, profiles: List[Profile]) -> str:
    """The label value: the most critical state over the attached profiles (operational if none)."""
    states = [data.profiles[p.name].current for p in profiles if p.name in data.profiles]
    return max(states, key=lambda s: SEVERITY[s], default=OPERATIONAL)


def make_params(node: Dict[str, Any], profile: Profile, entry: ProfileData, state: str, in_maintenance: bool, now: float,
                env: Environment, last: str, cluster: Optional[ClusterView]) -> PluginParams:
    return PluginParams(node=node, profile=profile.name, state=state, last_transition=ns_to_seconds(entry.transition),
                        in_maintenance=in_maintenance, now=now, env=env, last_profile=last, cluster=cluster)


def evaluate_transition(transition: Transition, params: PluginParams) -> ChainEvaluation:
    checks: Dict[str, Dict[str, Any]] = {}
    results: Dict[str, CheckResult] = {}
    errors = []
    for instance in transition.check.instances:
        try:
            result = instance.plugin.check(params)  # type: ignore[attr-defined]
        except Exception as exc:  # a failing plugin fails its transition, never the reconcile
            errors.append('check %s (%s) failed: %s' % (instance.name, instance.type, plugin_failure(exc)))
            checks[instance.name] = {'type': instance.type, 'passed': False, 'info': {}, 'error': plugin_failure(exc)}
            continue
        results[instance.name] = result
        checks[instance.name] = {'type': instance.type, 'passed': result.passed, 'info': dict(result.info)}
    evaluation = ChainEvaluation(transition.next, transition.check.text, False, checks, [t.name for t in transition.trigger],
                                 results=results)
    if errors:
        evaluation.error = '; '.join(errors)
        return evaluation
    evaluation.passed = evaluate(transition.check.expr, lambda name: results[name].passed)
    if evaluation.passed and transition.next == IN_MAINTENANCE and params.in_maintenance:
        evaluation.passed = False
        evaluation.blocked = BLOCKED_EXCLUSIVE
    return evaluation


def evaluate_transitions(transitions: List[Transition], params: PluginParams) -> List[ChainEvaluation]:
    return [evaluate_transition(t, params) for t in transitions]


def choose(evaluations: List[ChainEvaluation]) -> Optional[int]:
    """Index of the transition to take: none if any check errored (upstream), else the first that passed."""
    if any(e.error for e in evaluations):
        return None
    for index, evaluation in enumerate(evaluations):
        if evaluation.passed:
            return index
    return None
