# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a node's maintenance looks like right now, for `node_maintenance_info` and the dashboard.

`describe_node` reads like a reconcile but acts on nothing: check plugins are side-effect free by
contract (stagger only reads its leases), and no enter chain, trigger, after-transition hook or
notification runs. The answer is plain data (JSON-safe), one entry per attached profile.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config import Config
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.constants import (
    DATA_ANNOTATION, PROFILE_LABEL, STATE_LABEL, split_profiles)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.data import parse_data
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.environment import ClusterView, Environment, name_of
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import DataError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.evaluation import (
    any_in_maintenance, attached_profiles, choose, evaluate_transitions, last_profile, maintain_profiles, make_params,
    node_state)
from ansible_collections.steward.cluster.plugins.module_utils.common.times import format_rfc3339_ns
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.gotime import seconds_to_ns
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.schedules import ScheduleInput


def describe_node(node: Mapping[str, Any], config: Config, now: float, env: Optional[Environment] = None) -> Dict[str, Any]:
    """{'node', 'state', 'profile_label', 'profiles': [...], 'unknown_profiles', 'error'}; see the module docstring.

    Each profile: name, state, previous, last_transition (RFC 3339), next (the state it would move to
    now, or None), transitions (next, check, passed, checks {instance: type, passed, info[, error]},
    trigger[, blocked][, error]) and notify (instance, type, due).
    """
    env = env or Environment()
    md = node.get('metadata') or {}
    labels = md.get('labels') or {}
    profile_label = labels.get(PROFILE_LABEL, '')
    out: Dict[str, Any] = {'node': name_of(node), 'state': labels.get(STATE_LABEL, ''), 'profile_label': profile_label,
                           'profiles': [], 'unknown_profiles': [n for n in split_profiles(profile_label) if n not in config.profiles],
                           'error': ''}
    try:
        data = parse_data((md.get('annotations') or {}).get(DATA_ANNOTATION), labels)
    except DataError as exc:
        out['error'] = str(exc)
        return out
    now_ns = seconds_to_ns(now)
    maintain_profiles(data, profile_label, config, now_ns)
    profiles = attached_profiles(profile_label, config)
    cluster = ClusterView(env.nodes, env.nodes_in_maintenance)
    working = {'metadata': dict(md), **{k: v for k, v in node.items() if k != 'metadata'}}
    in_maintenance = any_in_maintenance(data, profiles)
    last = last_profile(data)
    for profile in profiles:
        entry = data.profiles[profile.name]
        params = make_params(working, profile, entry, entry.current, in_maintenance, now, env, last, cluster)
        chains = profile.chains(entry.current)
        evaluations = evaluate_transitions(list(chains.transitions), params)
        index = choose(evaluations)
        notify: List[Dict[str, Any]] = []
        for instance in chains.notify:
            due = instance.schedule is not None and instance.schedule.should_notify(ScheduleInput(
                entry.current, entry.previous, now, data.notifications.get(instance.name), entry.transition))
            notify.append({'instance': instance.name, 'type': instance.type, 'due': due})
        out['profiles'].append({
            'name': profile.name, 'state': entry.current, 'previous': entry.previous,
            'last_transition': format_rfc3339_ns(entry.transition),
            'next': evaluations[index].next if index is not None else None,
            'transitions': [e.as_dict() for e in evaluations], 'notify': notify})
    out['computed_state'] = node_state(data, profiles)
    return out
