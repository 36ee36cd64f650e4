# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""CKE constraints (the LEGACY set that seed 000 describes), with CKE's keys and defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Sequence, Union

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.validate import integer
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import ConstraintsError

DEFAULT_CONSTRAINTS: Dict[str, int] = {
    'control-plane-count': 1,
    'minimum-workers': 1,
    'maximum-workers': 0,
    'maximum-unreachable-nodes-for-reboot': 0,
    'maximum-repair-queue-entries': 0,
    'wait-seconds-to-repair-rebooting': 0,
}


@dataclass(frozen=True)
class Constraints:
    control_plane_count: int = 1
    minimum_workers: int = 1
    maximum_workers: int = 0  # 0 = unlimited
    maximum_unreachable_nodes_for_reboot: int = 0
    maximum_repair_queue_entries: int = 0
    wait_seconds_to_repair_rebooting: int = 0

    def as_dict(self) -> Dict[str, int]:
        return {key: getattr(self, key.replace('-', '_')) for key in DEFAULT_CONSTRAINTS}


def _as_int(key: str, value: Any) -> int:
    """A constraint is a YAML/JSON integer, as CKE's Go struct reads it: text such as "3" is refused (a quoted
    number is usually a templating slip, and CKE itself would not load it), so is a bool or 2.5."""
    try:
        return integer(value, key, minimum=0)
    except InvalidInput as exc:
        raise exc.recast(ConstraintsError) from None


def load_constraints(data: Union[None, Mapping[str, Any], Constraints]) -> Constraints:
    """Missing keys take CKE's defaults; unknown keys and bad values are errors (a typo must not silently mean 0)."""
    if isinstance(data, Constraints):
        return data
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConstraintsError('', 'type', f'constraints must be a mapping, got {type(data).__name__}')
    unknown = sorted(set(data) - set(DEFAULT_CONSTRAINTS))
    if unknown:
        raise ConstraintsError(
            '', 'known', f'unknown constraint(s) {", ".join(map(str, unknown))}; known: {", ".join(DEFAULT_CONSTRAINTS)}')
    values = dict(DEFAULT_CONSTRAINTS)
    for key, value in data.items():
        values[key] = _as_int(key, value)
    if values['control-plane-count'] < 1:
        raise ConstraintsError('control-plane-count', 'minimum', 'must be at least 1', values['control-plane-count'])
    maximum = values['maximum-workers']
    if maximum and maximum < values['minimum-workers']:
        raise ConstraintsError(
            'maximum-workers', 'minimum', f'({maximum}) is below minimum-workers ({values["minimum-workers"]}); '
            'use 0 for no maximum', maximum)
    return Constraints(**{key.replace('-', '_'): value for key, value in values.items()})


def check_cluster(constraints: Union[None, Mapping[str, Any], Constraints], cluster: Mapping[str, Any]) -> Optional[str]:
    """CKE's Constraints.Check: the reason the cluster violates the constraints, or None."""
    cstr = load_constraints(constraints)
    nodes: Sequence[Mapping[str, Any]] = cluster.get('nodes') or []
    cps = sum(1 for node in nodes if node.get('control_plane'))
    workers = len(nodes) - cps
    if cps != cstr.control_plane_count:
        return 'number of control planes is not equal to the constraint'
    if cstr.maximum_workers and workers > cstr.maximum_workers:
        return 'number of worker nodes exceeds the maximum'
    if workers < cstr.minimum_workers:
        return 'number of worker nodes is less than the minimum'
    return None
