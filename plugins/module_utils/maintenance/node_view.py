# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What `node_maintenance_info` reports about a node, as pure functions over the node, the config and the
environment the checks read (`node_view`): `info.describe_node` plus what an operator asks next - which
checks each transition still waits for (`pending`: a check chain's literals that do not hold yet, `!x`
meaning x must fail), one readable `waiting_for` line per profile, and the parsed data annotation.
Reading the config and the cluster is maintenance/kube_reads.py."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Set

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.chain import And, Name, Not, Or
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config import Config
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.constants import (
    DATA_ANNOTATION, PROFILE_LABEL, STATE_LABEL, split_profiles)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.data import NodeData, parse_data
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.environment import Environment
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import DataError
from ansible_collections.steward.cluster.plugins.module_utils.common.times import format_rfc3339_ns
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.info import describe_node


def literals(expr: Any, negated: bool = False, out: Optional[Dict[str, Set[bool]]] = None) -> Dict[str, Set[bool]]:
    """Instance name -> the results the chain wants from it (True: must pass, False: must fail, via `!`)."""
    out = {} if out is None else out
    if isinstance(expr, Name):
        out.setdefault(expr.name, set()).add(not negated)
    elif isinstance(expr, Not):
        literals(expr.operand, not negated, out)
    elif isinstance(expr, (And, Or)):
        literals(expr.left, negated, out)
        literals(expr.right, negated, out)
    return out


def pending_checks(expr: Any, checks: Mapping[str, Mapping[str, Any]]) -> List[str]:
    """The chain's literals that do not hold now (`x`: x must pass, `!x`: x must fail), in chain order.

    For `a || b` both are listed while neither passes (either would do); an errored check is listed as is.
    """
    pending: List[str] = []
    for name, wanted in literals(expr).items():
        check = checks.get(name) or {}
        for polarity in sorted(wanted, reverse=True):
            if check.get('error') or bool(check.get('passed')) != polarity:
                pending.append(name if polarity else '!' + name)
    return pending


def _reason(check: Mapping[str, Any], negated: bool) -> str:
    if check.get('error'):
        return 'error: %s' % check['error']
    info = check.get('info') or {}
    if negated and check.get('passed'):
        detail = 'passes'
    elif 'reason' in info:
        detail = str(info['reason'])
    elif info:
        detail = ', '.join('%s=%s' % (k, json.dumps(v, sort_keys=True)) for k, v in sorted(info.items()))
    else:
        detail = 'passes' if check.get('passed') else 'fails'
    return '%s: %s' % (check.get('type', '?'), detail)


def waiting_line(profile: Mapping[str, Any]) -> str:
    """One sentence: what the profile will do next or what it waits for."""
    head = 'profile %s is %s' % (profile['name'], profile['state'])
    transitions = profile.get('transitions') or []
    if profile.get('next'):
        return '%s; moves to %s at the next reconcile' % (head, profile['next'])
    if not transitions:
        return '%s; this state has no transitions' % head
    parts = []
    for transition in transitions:
        if transition.get('error'):
            parts.append('to %s: %s' % (transition['next'], transition['error']))
        elif transition.get('blocked'):
            parts.append('to %s: blocked, %s' % (transition['next'], transition['blocked']))
        else:
            reasons = []
            for literal in transition.get('pending') or []:
                name = literal.lstrip('!')
                reasons.append('%s (%s)' % (literal, _reason((transition.get('checks') or {}).get(name) or {}, literal.startswith('!'))))
            parts.append('to %s: waiting for %s' % (transition['next'], ' and '.join(reasons) or 'check %r' % transition.get('check')))
    return '%s; %s' % (head, '; '.join(parts))


def data_view(data: NodeData) -> Dict[str, Any]:
    return {'profiles': {name: {'current': p.current, 'previous': p.previous, 'transition': format_rfc3339_ns(p.transition)}
                         for name, p in sorted(data.profiles.items())},
            'notifications': {name: format_rfc3339_ns(when) for name, when in sorted(data.notifications.items())},
            'version': data.version}


def node_view(node: Mapping[str, Any], config: Optional[Config], now: float, env: Optional[Environment] = None) -> Dict[str, Any]:
    """Everything node_maintenance_info reports about one node (JSON-safe). Without a config only what the
    node itself says (labels, data annotation) is reported: no transitions, no `waiting_for`."""
    md = node.get('metadata') or {}
    labels = dict(md.get('labels') or {})
    annotations = dict(md.get('annotations') or {})
    profile_label = labels.get(PROFILE_LABEL, '')
    view: Dict[str, Any] = {
        'name': md.get('name') or '', 'state': labels.get(STATE_LABEL, ''), 'profile_label': profile_label,
        'profile_names': split_profiles(profile_label), 'unschedulable': bool((node.get('spec') or {}).get('unschedulable')),
        'labels': labels, 'annotations': annotations, 'data': None, 'data_error': '', 'profiles': [], 'unknown_profiles': [],
        'computed_state': '', 'waiting_for': [], 'error': ''}
    try:
        data = parse_data(annotations.get(DATA_ANNOTATION), labels)
        view['data'] = data_view(data) if annotations.get(DATA_ANNOTATION) else None
    except DataError as exc:
        view['data_error'] = view['error'] = str(exc)
        return view
    if config is None:
        for name in view['profile_names']:
            entry = data.profiles.get(name)
            if entry is not None:
                view['profiles'].append({'name': name, 'state': entry.current, 'previous': entry.previous,
                                         'last_transition': format_rfc3339_ns(entry.transition), 'next': None,
                                         'transitions': [], 'notify': []})
        return view
    described = describe_node(node, config, now, env)
    view['unknown_profiles'] = described['unknown_profiles']
    view['computed_state'] = described.get('computed_state', '')
    view['error'] = described['error']
    for profile in described['profiles']:
        chains = config.profiles[profile['name']].chains(profile['state'])
        for transition, spec in zip(profile['transitions'], chains.transitions):
            transition['pending'] = [] if transition['passed'] else pending_checks(spec.check.expr, transition['checks'])
        view['profiles'].append(profile)
        view['waiting_for'].append(waiting_line(profile))
    for name in view['unknown_profiles']:
        view['waiting_for'].append('profile %s is not defined in the config: the controller ignores it' % name)
    return view
