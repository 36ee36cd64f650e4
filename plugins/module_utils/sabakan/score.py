# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Machine scores of seed 000: spread over racks first, then prefer machines far from retirement."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import MachineError
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.machines import (
    Machine, TimeLike, parse_machine, resolve_now,
)

# Rack counts are kept below this, so the rack term always outweighs the lifetime term.
MAX_COUNT_PER_RACK = 100
HEALTHY_BONUS = 1000


def score_by_days(days: int) -> int:
    """±1 beyond 250 days, ±2 beyond 500, ±3 beyond 1000 (days to retireDate, truncated toward zero)."""
    if days > 250:
        return 3 if days > 1000 else 2 if days > 500 else 1
    if days < -250:
        return -3 if days < -1000 else -2 if days < -500 else -1
    return 0


def rack_score(rack: int, rack_count: Mapping[int, int]) -> int:
    return (MAX_COUNT_PER_RACK - rack_count.get(rack, 0)) * 10


def _rack_counts(rack_count: Optional[Mapping[Any, int]]) -> Dict[int, int]:
    """Rack → count, from a mapping keyed by int or, as JSON gives it, by string; None = no machines."""
    counts: Dict[int, int] = {}
    for key, value in (rack_count or {}).items():
        try:
            counts[int(key)] = int(value)
        except (TypeError, ValueError):
            raise MachineError('rack_count', 'type', f'{key!r}: {value!r} is not a rack number and a count') from None
    return counts


def score_machine(machine: Any, rack_count: Optional[Mapping[Any, int]], *, now: TimeLike = None) -> int:
    """Selection score: (100 − machines of the same kind already in the rack) × 10 + lifetime score."""
    current = resolve_now(now)
    m: Machine = parse_machine(machine, current)
    return rack_score(m.rack, _rack_counts(rack_count)) + score_by_days(m.days_to_retire(current))


def score_machine_with_health(machine: Any, rack_count: Optional[Mapping[Any, int]], *, now: TimeLike = None) -> int:
    """Removal score: the selection score plus 1000 for a HEALTHY machine; the lowest is removed."""
    current = resolve_now(now)
    m: Machine = parse_machine(machine, current)
    return score_machine(m, rack_count, now=current) + (HEALTHY_BONUS if m.healthy else 0)
