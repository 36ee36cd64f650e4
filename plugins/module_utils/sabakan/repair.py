# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sabakan-triggered repair (seed 001): which failed machines get a repair queue entry.

The limits exist because sabakan can report false failures and because a rack-wide power cut
must not turn into dozens of destructive repairs: a machine with any persisting entry gets no
new one, and when existing entries plus new reports exceed `maximum-repair-queue-entries`
nothing at all is queued.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.constraints import load_constraints
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.machines import (
    UNREACHABLE, Machine, TimeLike, parse_machines, resolve_now,
)

REBOOT_STATUS_REBOOTING = 'rebooting'


@dataclass
class RepairDecision:
    """Every failed machine with what happened to it, so operators can see why nothing was queued."""

    entries: List[Dict[str, str]]
    skipped: List[Dict[str, str]]
    blocked: Optional[str] = None


def _addresses_of(items: Any, key: str) -> Set[str]:
    """Addresses from entries given as dicts (`key`), plain strings, or a mapping keyed by address."""
    if not items:
        return set()
    if isinstance(items, Mapping):
        if 'nodes' in items and isinstance(items['nodes'], list):
            return _addresses_of(items['nodes'], key)
        return {str(k) for k in items}
    found = set()
    for item in items:
        if item is None:
            continue
        if isinstance(item, str):
            found.add(item)
        elif isinstance(item, Mapping) and item.get(key):
            found.add(str(item[key]))
    return found


def _rebooting(reboot_entries: Optional[Iterable[Any]]) -> Set[str]:
    return {str(e.get('node')) for e in reboot_entries or []
            if isinstance(e, Mapping) and str(e.get('status', '')).lower() == REBOOT_STATUS_REBOOTING}


def decide_repairs(machines: Sequence[Any], repair_entries: Optional[Sequence[Any]],
                   reboot_entries: Optional[Sequence[Any]], cluster: Any, constraints: Any, *,
                   now: TimeLike = None) -> RepairDecision:
    """`plan_repairs` with the reasons kept (for module output, events and metrics)."""
    cstr = load_constraints(constraints)
    parsed: List[Machine] = parse_machines(machines, resolve_now(now))
    existing = [e for e in repair_entries or [] if e is not None]
    recent = _addresses_of(existing, 'address')
    rebooting = _rebooting(reboot_entries)
    members = _addresses_of(cluster, 'address')
    wait = cstr.wait_seconds_to_repair_rebooting
    chosen: List[Machine] = []
    skipped: List[Dict[str, str]] = []
    for machine in parsed:
        reason = None
        if not machine.address:
            reason = 'no IPv4 address'
        elif machine.address in recent:
            reason = 'a repair entry for this address already exists'
        elif machine.state == UNREACHABLE and machine.duration < wait:
            if machine.address in rebooting:
                reason = f'rebooting; unreachable for {machine.duration:.0f}s < wait-seconds-to-repair-rebooting={wait}'
            elif machine.address not in members:
                reason = f'not a cluster node; unreachable for {machine.duration:.0f}s < wait-seconds-to-repair-rebooting={wait}'
        if reason:
            skipped.append({'serial': machine.serial, 'address': machine.address or '', 'reason': reason})
            continue
        chosen.append(machine)
    if len(existing) + len(chosen) > cstr.maximum_repair_queue_entries:
        blocked = (f'too many repair requests: {len(existing)} existing entries + {len(chosen)} new failures > '
                   f'maximum-repair-queue-entries={cstr.maximum_repair_queue_entries}; nothing queued')
        skipped.extend({'serial': m.serial, 'address': m.address or '', 'reason': blocked} for m in chosen)
        return RepairDecision(entries=[], skipped=skipped, blocked=blocked)
    entries = [{'address': m.address or '', 'machine_type': m.bmc_type, 'operation': m.state.lower()} for m in chosen]
    return RepairDecision(entries=entries, skipped=skipped)


def plan_repairs(machines: Sequence[Any], repair_entries: Optional[Sequence[Any]],
                 reboot_entries: Optional[Sequence[Any]], cluster: Any, constraints: Any, *,
                 now: TimeLike = None) -> List[Dict[str, str]]:
    """New repair entries `{address, machine_type, operation}` for the failed `machines` (seed 001).

    `repair_entries` are the persisting queue entries (finished or not), `reboot_entries` the reboot
    queue (`{node, status}`), `cluster` the current cluster (or its node addresses).
    """
    return decide_repairs(machines, repair_entries, reboot_entries, cluster, constraints, now=now).entries
