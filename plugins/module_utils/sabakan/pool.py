# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The unused machines, indexed so that picking the best one costs O(racks), not O(machines).

A machine's score is a rack term (the same for every machine of a rack) plus a lifetime term
(fixed for a given `now`), so the best machine of a rack is always the head of that rack's
list sorted by lifetime; only the heads of the racks need comparing. Without this, generating
thousands of workers from tens of thousands of machines is quadratic.
"""

from __future__ import annotations

import bisect
from typing import Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Set, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.machines import Machine
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.score import rack_score

_Entry = Tuple[int, Tuple[int, int, str]]  # (-lifetime score, address sort key)


class MachinePool:
    """A set of machines with `best(role, rack_count, accept)` selection.

    Ties are broken by address (numerically lowest wins), which makes every pick
    deterministic where CKE's unstable sort leaves it to chance.
    """

    def __init__(self, machines: Iterable[Machine], days_score: Mapping[str, int]) -> None:
        self._days = days_score
        self._members: Dict[str, Machine] = {}
        self._lists: Dict[str, Dict[int, List[_Entry]]] = {}
        self._heads: Dict[Tuple[str, int], int] = {}
        self._listed: Set[str] = set()
        for machine in machines:
            self._members[machine.address] = machine
            self._lists.setdefault(machine.role, {}).setdefault(machine.rack, []).append(self._entry(machine))
            self._listed.add(machine.address)
        for racks in self._lists.values():
            for entries in racks.values():
                entries.sort()

    def _entry(self, machine: Machine) -> _Entry:
        return (-self._days[machine.address], machine.sort_key)

    def __contains__(self, machine: Machine) -> bool:
        return machine.address in self._members

    def __len__(self) -> int:
        return len(self._members)

    def __iter__(self) -> Iterator[Machine]:
        return iter(list(self._members.values()))

    def add(self, machine: Machine) -> None:
        self._members[machine.address] = machine
        if machine.address in self._listed:
            return
        entries = self._lists.setdefault(machine.role, {}).setdefault(machine.rack, [])
        head = self._heads.get((machine.role, machine.rack), 0)
        bisect.insort(entries, self._entry(machine), lo=head)
        self._listed.add(machine.address)

    def discard(self, machine: Machine) -> None:
        self._members.pop(machine.address, None)

    def _live_head(self, role: str, rack: int, entries: List[_Entry]) -> int:
        """Drop discarded machines from the front of a rack list, for good."""
        head = self._heads.get((role, rack), 0)
        while head < len(entries) and entries[head][1][2] not in self._members:
            self._listed.discard(entries[head][1][2])
            head += 1
        if head > 64 and head * 2 > len(entries):
            del entries[:head]
            head = 0
        self._heads[(role, rack)] = head
        return head

    def best(self, role: str, rack_count: Mapping[int, int],
             accept: Optional[Callable[[Machine], bool]] = None) -> Optional[Machine]:
        """The HEALTHY machine of `role` ('' = any) with the highest selection score, or None."""
        roles = list(self._lists) if role == '' else [role]
        best: Optional[Machine] = None
        best_key: Optional[Tuple[int, Tuple[int, int, str]]] = None
        for each_role in roles:
            for rack, entries in self._lists.get(each_role, {}).items():
                head = self._live_head(each_role, rack, entries)
                bonus = rack_score(rack, rack_count)
                for index in range(head, len(entries)):
                    machine = self._members.get(entries[index][1][2])
                    if machine is None or not machine.healthy or (accept is not None and not accept(machine)):
                        continue
                    key = (-(bonus + self._days[machine.address]), machine.sort_key)
                    if best_key is None or key < best_key:
                        best, best_key = machine, key
                    break
        return best
