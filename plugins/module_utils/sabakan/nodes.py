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


_FORMATTED: Dict[int, Tuple[datetime, str, str]] = {}


def _formatted(value: datetime) -> Tuple[datetime, str, str]:
    """(the date, RFC 3339, yyyy-MM); memoised because every run renders every node again.

    Keyed by identity: machines.py hands out one datetime object per distinct date string for as
    long as its own cache keeps it, so a controller's next cycle over the same inventory finds every
    date here with an id() and one dict lookup (hashing an aware datetime costs a utcoffset() call).
    The entry holds the date itself, so an id is never mistaken for a later object's; equal instants
    in other zones are other objects and print in their own zone.
    """
    entry = _FORMATTED.get(id(value))
    if entry is None or entry[0] is not value:
        if len(_FORMATTED) >= 65536:
            _FORMATTED.clear()
        entry = _FORMATTED[id(value)] = (value, format_rfc3339(value), format_month(value))
    return entry


def machine_labels(machine: Machine, template_labels: Mapping[str, str], control_plane: bool) -> Dict[str, str]:
    """Sabakan labels (prefixed), then the template's, then the fixed keys of seed 000's table."""
    return NodeRenderer({'labels': template_labels}, control_plane).labels_of(machine)


def machine_annotations(machine: Machine, template_annotations: Mapping[str, str]) -> Dict[str, str]:
    return NodeRenderer({'annotations': template_annotations}, False).annotations_of(machine)


def _copy_taint(taint: Mapping[str, Any]) -> Dict[str, Any]:
    """A copy the caller may change; taints are flat string maps, so a deep copy is rarely needed."""
    copied = dict(taint)
    for key, value in copied.items():
        if not isinstance(value, str):
            copied[key] = copy.deepcopy(value)
    return copied


class NodeRenderer:
    """MachineToNode for one template node, with the template's parts looked up once.

    The generator renders thousands of nodes from two or three template nodes per run, and most of
    what a node holds repeats from machine to machine: the sabakan label set (a handful of products
    and data centers) merged with the template's labels, the rack's labels; the printed dates are memoised
    across runs (_formatted). The renderer keeps the rest per run, so a node costs
    a dict copy and a few assignments; the result is the same dict, key order included, as building
    every node from scratch (tests/unit/.../test_sabakan_recorded_decisions.py holds the proof).
    """

    def __init__(self, template_node: Mapping[str, Any], control_plane: bool) -> None:
        self.control_plane = bool(control_plane)
        self.user = template_node.get('user', '')
        self.labels = dict(template_node.get('labels') or {})
        self.annotations = dict(template_node.get('annotations') or {})
        self.taints = list(template_node.get('taints') or ())
        # flat string maps (the usual taint) are copied with dict(); anything nested goes through _copy_taint
        self._flat_taints = all(isinstance(t, Mapping) and all(isinstance(v, str) for v in t.values())
                                for t in self.taints)
        self._bases: Dict[Tuple[Tuple[str, str], ...], Dict[str, str]] = {}
        self._racks: Dict[int, Tuple[str, str]] = {}
        # (sabakan labels, rack, role) -> every label key in its final order, the per-machine ones holding a
        # placeholder: a node's labels are then one copy and three assignments to keys already there (no resize)
        self._label_forms: Dict[Tuple[Tuple[Tuple[str, str], ...], int, str], Dict[str, str]] = {}
        self._annotation_form = self.annotations.copy()
        for key in ('cke.cybozu.com/serial', 'cke.cybozu.com/register-date', 'cke.cybozu.com/retire-date'):
            self._annotation_form[key] = self._annotation_form.get(key, '')

    def labels_of(self, machine: Machine) -> Dict[str, str]:
        """Sabakan labels (prefixed), then the template's, then the fixed keys of seed 000's table."""
        return self._labels(machine, _formatted(machine.register_date)[2], _formatted(machine.retire_date)[2])

    def annotations_of(self, machine: Machine) -> Dict[str, str]:
        return self._annotations(machine, _formatted(machine.register_date)[1], _formatted(machine.retire_date)[1])

    def _labels(self, machine: Machine, register_month: str, retire_month: str) -> Dict[str, str]:
        base = self._bases.get(machine.labels)
        if base is None:
            base = {'sabakan.cke.cybozu.com/' + name: value for name, value in machine.labels}
            base.update(self.labels)
            self._bases[machine.labels] = base
        labels = base.copy()
        rack_names = self._racks.get(machine.rack)
        if rack_names is None:
            rack = str(machine.rack)
            rack_names = self._racks[machine.rack] = (rack, 'rack' + rack)
        rack, zone = rack_names
        # one assignment after another keeps a key's first position, as dict.update does
        labels['cke.cybozu.com/rack'] = rack
        labels['cke.cybozu.com/index-in-rack'] = str(machine.index_in_rack)
        labels['cke.cybozu.com/role'] = machine.role
        labels['cke.cybozu.com/register-month'] = register_month
        labels['cke.cybozu.com/retire-month'] = retire_month
        labels['node-role.kubernetes.io/' + machine.role] = 'true'
        if self.control_plane:
            labels['node-role.kubernetes.io/master'] = 'true'
        labels['topology.kubernetes.io/zone'] = zone
        labels['failure-domain.beta.kubernetes.io/zone'] = zone
        return labels

    def _annotations(self, machine: Machine, register_date: str, retire_date: str) -> Dict[str, str]:
        annotations = self.annotations.copy()
        annotations['cke.cybozu.com/serial'] = machine.serial
        annotations['cke.cybozu.com/register-date'] = register_date
        annotations['cke.cybozu.com/retire-date'] = retire_date
        return annotations

    def _label_form(self, machine: Machine) -> Dict[str, str]:
        """_labels with placeholders where the index in rack and the two months go: assigning a key already
        in a dict keeps its position, so filling them in later gives the same dict, key order included."""
        key = (machine.labels, machine.rack, machine.role)
        form = self._label_forms.get(key)
        if form is None:
            form = self._labels(machine, '', '')
            if len(self._label_forms) >= 65536:
                self._label_forms.clear()
            self._label_forms[key] = form
        return form

    def render(self, m: Machine) -> Dict[str, Any]:
        """The node of `m`; the hot path of every generator run (one call per node), so everything is inline.

        The result equals {address, user, control_plane, labels_of(m), annotations_of(m), taints}, built from
        per-renderer forms that hold every key in its final position."""
        if not m.address:
            raise MachineError(f'machine {m.serial}', 'required', 'spec.ipv4 is empty, so it cannot become a node')
        if not self.taints:
            taints: List[Dict[str, Any]] = []
        elif self._flat_taints:
            taints = list(map(dict, self.taints))
        else:
            taints = [_copy_taint(t) for t in self.taints]
        extra = STATE_TAINTS.get(m.state)
        if extra:
            taints.append(dict(extra))
        register, retire = m.register_date, m.retire_date
        register_text = _FORMATTED.get(id(register))
        if register_text is None or register_text[0] is not register:
            register_text = _formatted(register)
        retire_text = _FORMATTED.get(id(retire))
        if retire_text is None or retire_text[0] is not retire:
            retire_text = _formatted(retire)
        form = self._label_forms.get((m.labels, m.rack, m.role))
        if form is None:
            form = self._label_form(m)
        labels = form.copy()
        labels['cke.cybozu.com/index-in-rack'] = str(m.index_in_rack)
        labels['cke.cybozu.com/register-month'] = register_text[2]
        labels['cke.cybozu.com/retire-month'] = retire_text[2]
        annotations = self._annotation_form.copy()
        annotations['cke.cybozu.com/serial'] = m.serial
        annotations['cke.cybozu.com/register-date'] = register_text[1]
        annotations['cke.cybozu.com/retire-date'] = retire_text[1]
        return {
            'address': m.address,
            'user': self.user,
            'control_plane': self.control_plane,
            'labels': labels,
            'annotations': annotations,
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
