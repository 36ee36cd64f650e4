# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The unused machines, indexed so that picking the best one costs O(log racks), not O(machines).

A machine's score is a rack term (the same for every machine of a rack) plus a lifetime term
(fixed for a given `now`), so the best machine of a rack is always the head of that rack's
list sorted by lifetime; only the heads of the racks need comparing. Those heads sit in a heap
per (role, rack counter); a rack's heap entry is replaced whenever its count or its head changes
(`RackCount` reports count changes), so a pick costs a heap operation instead of a pass over
every rack. Without this, generating thousands of workers from tens of thousands of machines
is quadratic.

Building that index costs a score, an address key and a sort for every machine of the role, which
only pays off over many picks; an update usually picks one machine or none. So the first pick of a
pool is one pass over its members (`_scan`, the same answer), and the index is built from the
second pick on.
"""

from __future__ import annotations

import bisect
import heapq
import operator
from collections import Counter
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Set, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.machines import HEALTHY, Machine
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.score import MAX_COUNT_PER_RACK, rack_score

_Entry = Tuple[int, Tuple[int, int, str]]  # (-lifetime score, address sort key)
_SORT_KEY = operator.attrgetter('sort_key')


class RackCount(Counter):  # type: ignore[type-arg]
    """Machines per rack (a Counter) that tells the pool's indexes which racks changed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._listeners: List[Set[int]] = []
        super().__init__(*args, **kwargs)

    def __setitem__(self, rack: int, count: int) -> None:
        super().__setitem__(rack, count)
        for dirty in self._listeners:
            dirty.add(rack)

    def __delitem__(self, rack: int) -> None:
        super().__delitem__(rack)
        for dirty in self._listeners:
            dirty.add(rack)


class _Index:
    """Heap of the best machine of each rack for one role and one rack counter."""

    def __init__(self, role: str, counts: RackCount, racks: Iterable[int]) -> None:
        self.role = role
        self.counts = counts  # held, so its id() cannot be reused while this index lives
        self.heap: List[Tuple[int, Tuple[int, int, str], int, int, Machine]] = []
        self.version: Dict[int, int] = {}
        self.dirty: Set[int] = set(racks)
        counts._listeners.append(self.dirty)


class MachinePool:
    """A set of machines with `best(role, rack_count, accept)` selection.

    Ties are broken by address (numerically lowest wins), which makes every pick
    deterministic where CKE's unstable sort leaves it to chance.
    """

    def __init__(self, machines: Iterable[Machine], days_score: Mapping[str, int], *, scan_picks: int = 1) -> None:
        self._days = days_score
        self._members: Dict[str, Machine] = {machine.address: machine for machine in machines}
        self._lists: Dict[str, Dict[int, List[_Entry]]] = {}
        self._heads: Dict[Tuple[str, int], int] = {}
        self._listed: Set[str] = set()
        self._indexes: Dict[Tuple[str, int], _Index] = {}
        # Rack lists are sorted per role on first use: a run often picks from one role only, or from none.
        # None until then: the members are grouped by role only when a rack list is first needed.
        self._pending: Optional[Dict[str, List[Machine]]] = None
        # The first `scan_picks` picks are answered by one pass over the members (_scan) instead of sorting every
        # rack list of the role: an update picks one machine or none, a new cluster thousands.
        self._scans_left = scan_picks

    def _grouped(self) -> Dict[str, List[Machine]]:
        """Role → machines not yet in a rack list; built from the members on first use."""
        if self._pending is None:
            self._pending = {}
            for machine in self._members.values():
                self._pending.setdefault(machine.role, []).append(machine)
        return self._pending

    def _role_lists(self, role: str) -> Dict[int, List[_Entry]]:
        """Rack → entries sorted best first, for one role (built on first use)."""
        pending = self._grouped().pop(role, None)
        if pending is not None:
            racks = self._lists.setdefault(role, {})
            for machine in pending:
                if machine.address in self._members and machine.address not in self._listed:
                    racks.setdefault(machine.rack, []).append(self._entry(machine))
                    self._listed.add(machine.address)
            for entries in racks.values():
                entries.sort()
        return self._lists.get(role, {})

    def _roles(self, role: str) -> List[str]:
        return sorted(set(self._lists) | set(self._grouped())) if role == '' else [role]

    def _entry(self, machine: Machine) -> _Entry:
        return (-self._days[machine.address], machine.sort_key)

    def __contains__(self, machine: Machine) -> bool:
        return machine.address in self._members

    def __len__(self) -> int:
        return len(self._members)

    def __iter__(self) -> Iterator[Machine]:
        return iter(list(self._members.values()))

    def _touch(self, machine: Machine) -> None:
        for index in self._indexes.values():
            if index.role == '' or index.role == machine.role:
                index.dirty.add(machine.rack)

    def add(self, machine: Machine) -> None:
        self._members[machine.address] = machine
        self._touch(machine)
        if machine.address in self._listed:
            return
        if machine.role not in self._lists:
            if self._pending is not None:   # else the grouping finds it among the members
                self._pending.setdefault(machine.role, []).append(machine)
            return
        entries = self._lists[machine.role].setdefault(machine.rack, [])
        head = self._heads.get((machine.role, machine.rack), 0)
        bisect.insort(entries, self._entry(machine), lo=head)
        self._listed.add(machine.address)

    def discard(self, machine: Machine) -> None:
        if self._members.pop(machine.address, None) is not None:
            self._touch(machine)

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

    def _rack_head(self, role: str, rack: int) -> Optional[Machine]:
        """The best HEALTHY member of `role` ('' = any) in `rack`, or None."""
        best: Optional[Machine] = None
        best_entry: Optional[_Entry] = None
        for each_role in self._roles(role):
            entries = self._role_lists(each_role).get(rack)
            if not entries:
                continue
            for index in range(self._live_head(each_role, rack, entries), len(entries)):
                machine = self._members.get(entries[index][1][2])
                if machine is not None and machine.healthy:
                    if best_entry is None or entries[index] < best_entry:
                        best, best_entry = machine, entries[index]
                    break
        return best

    def _best_indexed(self, role: str, rack_count: RackCount) -> Optional[Machine]:
        key = (role, id(rack_count))
        index = self._indexes.get(key)
        if index is None:
            racks = {rack for each_role in self._roles(role) for rack in self._role_lists(each_role)}
            index = self._indexes[key] = _Index(role, rack_count, racks)
        heap = index.heap
        for rack in index.dirty:
            version = index.version[rack] = index.version.get(rack, 0) + 1
            machine = self._rack_head(role, rack)
            if machine is not None:
                score = rack_score(rack, rack_count) + self._days[machine.address]
                heapq.heappush(heap, (-score, machine.sort_key, rack, version, machine))
        index.dirty.clear()
        while heap:
            top = heap[0]
            if index.version.get(top[2]) == top[3]:
                return top[4]
            heapq.heappop(heap)
        return None

    def best(self, role: str, rack_count: Mapping[int, int],
             accept: Optional[Callable[[Machine], bool]] = None) -> Optional[Machine]:
        """The HEALTHY machine of `role` ('' = any) with the highest selection score, or None.

        Ties go to the lowest address. With a RackCount and no `accept` filter the rack heap answers;
        otherwise every rack head is compared (same result, O(racks)).
        """
        if self._scans_left > 0 and not self._indexes:
            self._scans_left -= 1
            return self._scan(role, rack_count, accept)
        if accept is None and isinstance(rack_count, RackCount):
            return self._best_indexed(role, rack_count)
        best: Optional[Machine] = None
        best_key: Optional[Tuple[int, Tuple[int, int, str]]] = None
        for each_role in self._roles(role):
            for rack, entries in self._role_lists(each_role).items():
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

    def _scan(self, role: str, rack_count: Mapping[int, int],
              accept: Optional[Callable[[Machine], bool]]) -> Optional[Machine]:
        """`best` by one pass over the members: the highest score, ties to the lowest address.

        Same answer as the rack lists and the heap, without building them: an O(members) pass that reads a
        machine's address key only when it ties for the highest score, where the lists need every machine's
        key and a sort of every rack. Cheaper for a single pick, which is all an update usually makes.
        """
        days = self._days
        counts = rack_count.get
        best_score: Optional[int] = None
        tied: List[Machine] = []
        for machine in self._members.values():
            if machine.state != HEALTHY or (role and machine.role != role) or (accept is not None and not accept(machine)):
                continue
            score = (MAX_COUNT_PER_RACK - counts(machine.rack, 0)) * 10 + days[machine.address]   # score.rack_score
            if best_score is None or score > best_score:
                best_score, tied = score, [machine]
            elif score == best_score:
                tied.append(machine)
        return min(tied, key=_SORT_KEY) if tied else None
