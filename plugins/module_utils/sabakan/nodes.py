# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Machine → cluster node (labels, annotations, taints per seed 000) and the taint rules around it."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.times import format_rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import MachineError
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.machines import (
    RETIRED, RETIRING, Machine, TimeLike, format_month, parse_machine, parse_time,
)

STATE_TAINT_KEY = 'cke.cybozu.com/state'
MASTER_TAINT_KEY = 'cke.cybozu.com/master'
SYSTEM_TAINT_PREFIX = 'node.kubernetes.io/'

# Seed 000, "Taint nodes": only these states carry a state taint; for every other state it is removed.
STATE_TAINTS: Dict[str, Dict[str, str]] = {
    RETIRING: {'key': STATE_TAINT_KEY, 'value': 'retiring', 'effect': 'NoExecute'},
    RETIRED: {'key': STATE_TAINT_KEY, 'value': 'retired', 'effect': 'NoExecute'},
}


_FORMATTED: Dict[Tuple[datetime, Any], Tuple[str, str]] = {}


def _formatted(value: datetime) -> Tuple[str, str]:
    """(RFC 3339, yyyy-MM) of a date; memoised because sabakan dates repeat and every run renders every node.

    Keyed with the UTC offset too: equal instants in different zones are equal datetimes but print differently.
    """
    key = (value, value.utcoffset())
    result = _FORMATTED.get(key)
    if result is None:
        if len(_FORMATTED) >= 65536:
            _FORMATTED.clear()
        result = _FORMATTED[key] = (format_rfc3339(value), format_month(value))
    return result


def machine_labels(machine: Machine, template_labels: Mapping[str, str], control_plane: bool) -> Dict[str, str]:
    """Sabakan labels (prefixed), then the template's, then the fixed keys of seed 000's table."""
    labels = {'sabakan.cke.cybozu.com/' + name: value for name, value in machine.labels}
    labels.update(template_labels)
    rack = str(machine.rack)
    zone = 'rack' + rack
    labels.update({
        'cke.cybozu.com/rack': rack,
        'cke.cybozu.com/index-in-rack': str(machine.index_in_rack),
        'cke.cybozu.com/role': machine.role,
        'cke.cybozu.com/register-month': _formatted(machine.register_date)[1],
        'cke.cybozu.com/retire-month': _formatted(machine.retire_date)[1],
        'node-role.kubernetes.io/' + machine.role: 'true',
    })
    if control_plane:
        labels['node-role.kubernetes.io/master'] = 'true'
    labels['topology.kubernetes.io/zone'] = zone
    labels['failure-domain.beta.kubernetes.io/zone'] = zone
    return labels


def machine_annotations(machine: Machine, template_annotations: Mapping[str, str]) -> Dict[str, str]:
    annotations = dict(template_annotations)
    annotations['cke.cybozu.com/serial'] = machine.serial
    annotations['cke.cybozu.com/register-date'] = _formatted(machine.register_date)[0]
    annotations['cke.cybozu.com/retire-date'] = _formatted(machine.retire_date)[0]
    return annotations


def _copy_taint(taint: Mapping[str, Any]) -> Dict[str, Any]:
    """A copy the caller may change; taints are flat string maps, so a deep copy is rarely needed."""
    copied = dict(taint)
    for key, value in copied.items():
        if not isinstance(value, str):
            copied[key] = copy.deepcopy(value)
    return copied


class NodeRenderer:
    """MachineToNode for one template node, with the template's parts looked up once.

    The generator renders thousands of nodes from two or three template nodes per run.
    """

    def __init__(self, template_node: Mapping[str, Any], control_plane: bool) -> None:
        self.control_plane = bool(control_plane)
        self.user = template_node.get('user', '')
        self.labels = dict(template_node.get('labels') or {})
        self.annotations = dict(template_node.get('annotations') or {})
        self.taints = list(template_node.get('taints') or ())

    def render(self, m: Machine) -> Dict[str, Any]:
        if not m.address:
            raise MachineError(f'machine {m.serial}', 'required', 'spec.ipv4 is empty, so it cannot become a node')
        taints: List[Dict[str, Any]] = [_copy_taint(t) for t in self.taints]
        extra = STATE_TAINTS.get(m.state)
        if extra:
            taints.append(dict(extra))
        return {
            'address': m.address,
            'user': self.user,
            'control_plane': self.control_plane,
            'labels': machine_labels(m, self.labels, self.control_plane),
            'annotations': machine_annotations(m, self.annotations),
            'taints': taints,
        }


def machine_to_node(machine: Any, template_node: Mapping[str, Any], *, control_plane: Optional[bool] = None,
                    now: TimeLike = None) -> Dict[str, Any]:
    """CKE's MachineToNode: a node for `machine` rendered from `template_node`.

    `control_plane` defaults to the template node's flag; `now` is only used to derive a
    state duration from status.timestamp when a raw machine lacks status.duration.
    """
    m = parse_machine(machine, parse_time(now) if now is not None else None)
    is_cp = bool(template_node.get('control_plane')) if control_plane is None else bool(control_plane)
    return NodeRenderer(template_node, is_cp).render(m)


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
