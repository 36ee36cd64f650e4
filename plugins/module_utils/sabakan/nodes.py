# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Machine → cluster node (labels, annotations, taints per seed 000) and the taint rules around it."""

from __future__ import annotations

import copy
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.machines import (
    RETIRED, RETIRING, Machine, TimeLike, format_rfc3339, parse_machine, parse_time,
)

STATE_TAINT_KEY = 'cke.cybozu.com/state'
MASTER_TAINT_KEY = 'cke.cybozu.com/master'
SYSTEM_TAINT_PREFIX = 'node.kubernetes.io/'

# Seed 000, "Taint nodes": only these states carry a state taint; for every other state it is removed.
STATE_TAINTS: Dict[str, Dict[str, str]] = {
    RETIRING: {'key': STATE_TAINT_KEY, 'value': 'retiring', 'effect': 'NoExecute'},
    RETIRED: {'key': STATE_TAINT_KEY, 'value': 'retired', 'effect': 'NoExecute'},
}


def state_taint(state: str) -> Optional[Dict[str, str]]:
    taint = STATE_TAINTS.get(state)
    return dict(taint) if taint else None


def machine_labels(machine: Machine, template_labels: Mapping[str, str], control_plane: bool) -> Dict[str, str]:
    """Sabakan labels (prefixed), then the template's, then the fixed keys of seed 000's table."""
    labels = {f'sabakan.cke.cybozu.com/{name}': value for name, value in machine.labels}
    labels.update(template_labels)
    rack = str(machine.rack)
    labels['cke.cybozu.com/rack'] = rack
    labels['cke.cybozu.com/index-in-rack'] = str(machine.index_in_rack)
    labels['cke.cybozu.com/role'] = machine.role
    labels['cke.cybozu.com/register-month'] = machine.register_date.strftime('%Y-%m')
    labels['cke.cybozu.com/retire-month'] = machine.retire_date.strftime('%Y-%m')
    labels[f'node-role.kubernetes.io/{machine.role}'] = 'true'
    if control_plane:
        labels['node-role.kubernetes.io/master'] = 'true'
    labels['topology.kubernetes.io/zone'] = 'rack' + rack
    labels['failure-domain.beta.kubernetes.io/zone'] = 'rack' + rack
    return labels


def machine_annotations(machine: Machine, template_annotations: Mapping[str, str]) -> Dict[str, str]:
    annotations = dict(template_annotations)
    annotations['cke.cybozu.com/serial'] = machine.serial
    annotations['cke.cybozu.com/register-date'] = format_rfc3339(machine.register_date)
    annotations['cke.cybozu.com/retire-date'] = format_rfc3339(machine.retire_date)
    return annotations


def machine_to_node(machine: Any, template_node: Mapping[str, Any], *, control_plane: Optional[bool] = None,
                    now: TimeLike = None) -> Dict[str, Any]:
    """CKE's MachineToNode: a node for `machine` rendered from `template_node`.

    `control_plane` defaults to the template node's flag; `now` is only used to derive a
    state duration from status.timestamp when a raw machine lacks status.duration.
    """
    m = parse_machine(machine, parse_time(now) if now is not None else None)
    if not m.address:
        raise ValueError(f'machine {m.serial} has no IPv4 address and cannot become a node')
    is_cp = bool(template_node.get('control_plane')) if control_plane is None else bool(control_plane)
    taints: List[Dict[str, Any]] = [copy.deepcopy(dict(t)) for t in template_node.get('taints') or []]
    extra = state_taint(m.state)
    if extra:
        taints.append(extra)
    return {
        'address': m.address,
        'user': template_node.get('user', ''),
        'control_plane': is_cp,
        'labels': machine_labels(m, template_node.get('labels') or {}, is_cp),
        'annotations': machine_annotations(m, template_node.get('annotations') or {}),
        'taints': taints,
    }


def first_state_taint(taints: Iterable[Mapping[str, Any]]) -> Optional[Mapping[str, Any]]:
    for taint in taints or []:
        if taint.get('key') == STATE_TAINT_KEY:
            return taint
    return None


def has_valid_state_taint(node: Mapping[str, Any], machine: Machine) -> bool:
    """Whether the node's `cke.cybozu.com/state` taint is the one its machine state calls for."""
    current = first_state_taint(node.get('taints') or [])
    wanted = STATE_TAINTS.get(machine.state)
    if wanted is None:
        return current is None
    return (current is not None and (current.get('value') or '') == wanted['value']
            and current.get('effect') == wanted['effect'])


def tainted_beyond_tolerations(taints: Optional[Sequence[Mapping[str, Any]]], tolerations: Sequence[str]) -> bool:
    """True when a Kubernetes Node carries a taint a control plane must not have.

    Tolerated: transitional `node.kubernetes.io/*`, CKE's own state and master taints, and the
    template's `control_plane_tolerations`. Unknown (None) taints count as untainted, as in CKE.
    """
    for taint in taints or []:
        key = taint.get('key') or ''
        if key.startswith(SYSTEM_TAINT_PREFIX) or key in (STATE_TAINT_KEY, MASTER_TAINT_KEY) or key in tolerations:
            continue
        return True
    return False

