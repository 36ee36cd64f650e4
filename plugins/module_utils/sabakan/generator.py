# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""CKE's sabakan cluster generator (the LEGACY weighted generation of seed 000).

`generate` builds a first cluster, `regenerate` re-applies a changed template to the same
machines, and `update` makes the smallest change the current cluster needs: the first step of
remove non-existent → increase CP → decrease CP → replace CP → increase workers → decrease
workers → re-taint that finds something to do wins, then `fill` tops the cluster up to the
constraints. Everything is pure: plain dicts in, plain dicts out, `now` passed in.
"""

from __future__ import annotations

import functools
import gc
import itertools
import operator
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.constraints import load_constraints
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import (
    MissingMachine, NotAvailable, TemplateError, TooManyNonExistent,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.machines import (
    HEALTHY, RETIRED, UNINITIALIZED, UPDATING, Machine, TimeLike, machines_by_address, parse_machines, resolve_now,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.nodes import (
    STATE_TAINTS, NodeRenderer, has_valid_state_taint, tainted_beyond_tolerations,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.pool import MachinePool, RackCount
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.score import (
    score_by_days, rack_score, HEALTHY_BONUS,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.template import (
    NodeTemplate, Templates, check_template_shape, cluster_from_template, ip_address_problem, label_value_problem, qualified_name_problem,
    split_templates,
)

# The public API of the generator (what its siblings define is imported from them, never through here).
__all__ = [
    'generate', 'regenerate', 'update', 'update_with_reason', 'Generator', 'Operation', 'Outcome',
    'DEFAULT_WAIT_RETIRED_SECONDS', 'GOOD_CONTROL_PLANE_STATES', 'OP_NEW', 'OP_REGENERATE',
    'OP_REMOVE_NON_EXISTENT', 'OP_INCREASE_CP', 'OP_DECREASE_CP', 'OP_REPLACE_CP', 'OP_INCREASE_WORKER',
    'OP_DECREASE_WORKER', 'OP_TAINT_NODES',
]

DEFAULT_WAIT_RETIRED_SECONDS = 300.0
# States in which a control plane is kept; any other state gets it replaced.
GOOD_CONTROL_PLANE_STATES = (HEALTHY, UPDATING, UNINITIALIZED)

OP_NEW = 'new'
OP_REGENERATE = 'regenerate'
OP_REMOVE_NON_EXISTENT = 'remove non-existent node'
OP_INCREASE_CP = 'increase control plane'
OP_DECREASE_CP = 'decrease control plane'
OP_REPLACE_CP = 'replace control plane'
OP_INCREASE_WORKER = 'increase worker'
OP_DECREASE_WORKER = 'decrease worker'
OP_TAINT_NODES = 'taint nodes'

# Machine fields read in C (map) where a run goes over every node
_STATE_OF = operator.attrgetter('state')
_RACK_OF = operator.attrgetter('rack')
_ROLE_OF = operator.attrgetter('role')
_ROLE_RACK_OF = operator.attrgetter('role', 'rack')
_GET_ADDRESS = operator.methodcaller('get', 'address')
_ADDRESS_ITEM = operator.itemgetter('address')
_GET_CONTROL_PLANE = operator.methodcaller('get', 'control_plane')
_DICT_TYPE = {dict}
_STR_TYPE = {str}

# CKE's change records (sabakan/op.go), word for word: logs and status read the same as CKE's.
CHANGE_PROMOTE = 'promote a worker: '
CHANGE_DEMOTE = 'demote a control plane: '


@dataclass
class Operation:
    """What one generator run did and why; `name` is the step that fired."""

    name: str
    changes: List[str] = field(default_factory=list)

    def record(self, change: str) -> None:
        self.changes.append(change)


@dataclass
class Outcome:
    cluster: Optional[Dict[str, Any]]
    operation: Optional[Operation]


class _DaysScore(dict):  # type: ignore[type-arg]
    """Address → lifetime score, computed on first use: a run looks at the healthy and the used
    machines only, often half of the inventory."""

    def __init__(self, by_address: Mapping[str, Machine], now: datetime) -> None:
        super().__init__()
        self._by_address = by_address
        self._now = now

    def __missing__(self, address: str) -> int:
        score = self[address] = score_by_days(self._by_address[address].days_to_retire(self._now))
        return score


def _gc_paused(method: Callable[..., Any]) -> Callable[..., Any]:
    """Run `method` with the cyclic garbage collector paused.

    A run over 10,000 machines allocates some 100,000 short-lived containers, none of them in
    reference cycles, so reference counting frees them all; the collector would only re-scan the
    caller's live objects (often the machine JSON itself) dozens of times, about a tenth of the run.
    The previous state is restored, so a caller that disabled the collector keeps it disabled.
    """
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return method(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()
    return wrapper


class Generator:
    """One run of the generator over a fixed machine list and clock."""

    @_gc_paused
    def __init__(self, template: Mapping[str, Any], constraints: Any, machines: Sequence[Any], *, now: TimeLike,
                 node_taints: Optional[Mapping[str, Sequence[Mapping[str, Any]]]] = None,
                 wait_retired_seconds: float = DEFAULT_WAIT_RETIRED_SECONDS) -> None:
        check_template_shape(template)
        self.template = template
        self.templates: Templates = split_templates(template)
        self.constraints = load_constraints(constraints)
        self.now = resolve_now(now)
        self.machines: List[Machine] = parse_machines(machines, self.now)
        self.by_address = machines_by_address(self.machines)
        self.roles_in_sabakan = set(map(_ROLE_OF, self.by_address.values()))
        self.days_score: Dict[str, int] = _DaysScore(self.by_address, self.now)
        self.tolerations = list(template.get('control_plane_tolerations') or [])
        self.node_taints = node_taints or {}
        self.wait_retired_seconds = float(wait_retired_seconds)

    # ---- working state -------------------------------------------------------------------
    def _reset(self, used: Sequence[str] = ()) -> None:
        self.cps: List[Machine] = []
        self.workers: List[Machine] = []
        self.cp_racks: Counter = RackCount()
        self.worker_roles: Counter = Counter()
        self.worker_racks: Dict[str, Counter] = {}
        self.worker_racks_all: Counter = RackCount()
        self._taken = set(used)
        self._unused: Optional[MachinePool] = None

    @property
    def unused(self) -> MachinePool:
        """Healthy machines outside the cluster; indexed on first use (most updates never pick one)."""
        if self._unused is None:
            taken = self._taken
            self._unused = MachinePool((m for a, m in self.by_address.items() if m.state == HEALTHY and a not in taken),
                                       self.days_score)
        return self._unused

    def _load(self, cps: List[Machine], workers: List[Machine]) -> None:
        """The existing control planes and workers, in order, counted in bulk (same as _add_* one by one)."""
        self.cps = cps          # the caller's fresh lists, kept (no copy)
        self.workers = workers
        # Counted in plain Counters (C) and handed over whole: RackCount's own __setitem__ would be called
        # once per machine otherwise, and nothing listens to a new RackCount yet. The workers are counted once,
        # by (role, rack); the counts by role and by rack are summed from those few pairs, keys in the same
        # first-seen order as counting the workers again would give.
        self.cp_racks = RackCount(Counter(map(_RACK_OF, cps)))
        by_role_rack = Counter(map(_ROLE_RACK_OF, workers))
        per_role: Dict[str, Counter] = {}
        all_racks: Counter = Counter()
        for (role, rack), count in by_role_rack.items():
            per_role.setdefault(role, Counter())[rack] = count
            all_racks[rack] += count
        self.worker_roles = Counter({role: sum(counts.values()) for role, counts in per_role.items()})
        self.worker_racks_all = RackCount(all_racks)
        self.worker_racks = {role: RackCount(counts) for role, counts in per_role.items()}

    def _add_cp(self, machine: Machine) -> None:
        self.cps.append(machine)
        self.cp_racks[machine.rack] += 1

    def _remove_cp(self, machine: Machine) -> None:
        self.cps.remove(machine)
        self.cp_racks[machine.rack] -= 1

    def _add_worker(self, machine: Machine) -> None:
        self.workers.append(machine)
        self.worker_roles[machine.role] += 1
        self.worker_racks.setdefault(machine.role, RackCount())[machine.rack] += 1
        self.worker_racks_all[machine.rack] += 1

    def _remove_worker(self, machine: Machine) -> None:
        self.workers.remove(machine)
        self.worker_roles[machine.role] -= 1
        self.worker_racks[machine.role][machine.rack] -= 1
        self.worker_racks_all[machine.rack] -= 1

    # ---- selection -----------------------------------------------------------------------
    def _tainted(self, machine: Machine) -> bool:
        return tainted_beyond_tolerations(self.node_taints.get(machine.address), self.tolerations)

    def _untainted(self, machine: Machine) -> bool:
        return not self._tainted(machine)

    def _best_of(self, candidates: Sequence[Machine], rack_count: Mapping[int, int]) -> Optional[Machine]:
        best: Optional[Machine] = None
        best_key: Optional[Tuple[int, Tuple[int, int, str]]] = None
        for machine in candidates:
            key = (-(rack_score(machine.rack, rack_count) + self.days_score[machine.address]), machine.sort_key)
            if best_key is None or key < best_key:
                best, best_key = machine, key
        return best

    def _choose_worker_template(self) -> Optional[NodeTemplate]:
        """The worker template furthest below its weight; roles sabakan has no machine of are skipped (CKE #784)."""
        chosen: Optional[NodeTemplate] = None
        least = 0.0
        for tmpl in self.templates.workers:
            if tmpl.role and tmpl.role not in self.roles_in_sabakan:
                continue
            ratio = self.worker_roles[tmpl.role] / tmpl.weight
            if chosen is None or ratio < least:
                chosen, least = tmpl, ratio
        return chosen

    def _select_worker(self) -> Optional[Machine]:
        tmpl = self._choose_worker_template()
        if tmpl is None:
            return None
        racks = self.worker_racks_all if tmpl.role == '' else self.worker_racks.setdefault(tmpl.role, RackCount())
        return self.unused.best(tmpl.role, racks)

    def _select_cp_from_unused(self) -> Optional[Machine]:
        return self.unused.best(self.templates.control_plane.role, self.cp_racks,
                                self._untainted if self.node_taints else None)

    def _select_cp_from_workers(self) -> Optional[Machine]:
        role = self.templates.control_plane.role
        candidates = [m for m in self.workers
                      if m.healthy and (role == '' or m.role == role) and not self._tainted(m)]
        return self._best_of(candidates, self.cp_racks)

    def _deselect_cp(self) -> Machine:
        """The current control plane with the lowest removal score (health counts +1000)."""
        def removal_key(machine: Machine) -> Tuple[int, Tuple[int, int, str]]:
            score = rack_score(machine.rack, self.cp_racks) + self.days_score[machine.address]
            return (score + (HEALTHY_BONUS if machine.healthy else 0), machine.sort_key)
        return min(self.cps, key=removal_key)

    # ---- fill and render -----------------------------------------------------------------
    def _fill(self, op: Operation) -> Dict[str, Any]:
        cstr = self.constraints
        while len(self.cps) < cstr.control_plane_count:
            machine = self._select_cp_from_unused()
            if machine is not None:
                op.record('add new control plane: ' + machine.address)
                self._add_cp(machine)
                self.unused.discard(machine)
                continue
            if len(self.workers) > cstr.minimum_workers:
                promote = self._select_cp_from_workers()
                if promote is not None:
                    op.record(CHANGE_PROMOTE + promote.address)
                    self._remove_worker(promote)
                    self._add_cp(promote)
                    continue
            raise NotAvailable(
                f'no healthy machine is available: {op.name} needs {cstr.control_plane_count} control plane(s) '
                f'of role {self.templates.control_plane.role or "(any)"} and has {len(self.cps)}')
        while len(self.workers) < cstr.minimum_workers:
            machine = self._select_worker()
            if machine is None:
                raise NotAvailable(f'no healthy machine is available: {op.name} needs minimum-workers='
                                   f'{cstr.minimum_workers} and has {len(self.workers)}')
            op.record('add new worker: ' + machine.address)
            self._add_worker(machine)
            self.unused.discard(machine)
        return self._render()

    def _render(self) -> Dict[str, Any]:
        _check_node_sources(self.cps + self.workers)
        control_plane = NodeRenderer(self.templates.control_plane.node, True)
        nodes = [control_plane.render(m) for m in self.cps]
        renderers: Dict[str, NodeRenderer] = {}
        for m in self.workers:
            renderer = renderers.get(m.role)
            if renderer is None:
                renderer = renderers[m.role] = NodeRenderer(self.templates.for_worker_role(m.role).node, False)
            nodes.append(renderer.render(m))
        return cluster_from_template(self.template, nodes)

    # ---- entry points --------------------------------------------------------------------
    @_gc_paused
    def generate(self) -> Outcome:
        self._reset()
        op = Operation(OP_NEW, ['generate new cluster'])
        return Outcome(self._fill(op), op)

    @_gc_paused
    def regenerate(self, current: Mapping[str, Any]) -> Outcome:
        cps, workers = _split_nodes(current)
        self._reset([n['address'] for n in cps + workers])
        missing = [n['address'] for n in cps + workers if n['address'] not in self.by_address]
        if missing:
            raise MissingMachine(f'failed to apply new template due to missing machines: {", ".join(missing)}')
        self._load([self.by_address[node['address']] for node in cps],
                   [self.by_address[node['address']] for node in workers])
        op = Operation(OP_REGENERATE, ['regenerate with new template'])
        return Outcome(self._fill(op), op)

    @_gc_paused
    def update(self, current: Mapping[str, Any]) -> Outcome:
        cps, workers = _split_nodes(current)
        op = self._remove_non_existent(cps, workers)
        for step in (self._increase_cp, self._decrease_cp, self._replace_cp, self._increase_worker,
                     self._decrease_worker, lambda: self._taint_nodes(cps + workers)):
            if op is not None:
                break
            op = step()
        if op is None:
            return Outcome(None, None)
        return Outcome(self._fill(op), op)

    # ---- update steps --------------------------------------------------------------------
    def _remove_non_existent(self, cps: List[Dict[str, Any]], workers: List[Dict[str, Any]]) -> Optional[Operation]:
        cp_addresses = list(map(_ADDRESS_ITEM, cps))
        worker_addresses = list(map(_ADDRESS_ITEM, workers))
        self._reset(cp_addresses + worker_addresses)
        by_address = self.by_address
        if cps and by_address.keys() >= self._taken:
            # every node is a machine of sabakan (the usual case): nothing to record, the machines looked up in C
            self._load(list(map(by_address.__getitem__, cp_addresses)), list(map(by_address.__getitem__, worker_addresses)))
            return None
        op = Operation(OP_REMOVE_NON_EXISTENT)
        existing = [self.by_address[n['address']] for n in cps if n['address'] in self.by_address]
        if len(existing) * 2 <= len(cps):
            gone = [n['address'] for n in cps if n['address'] not in self.by_address]
            raise TooManyNonExistent(
                f'too many non-existent control plane nodes: {len(gone)} of {len(cps)} '
                f'({", ".join(gone) or "none defined"}) are not in sabakan')
        for node in cps:
            if node['address'] not in by_address:
                op.record('remove non-existent control plane: ' + node['address'])
        for node in workers:
            if node['address'] not in by_address:
                op.record('remove non-existent worker: ' + node['address'])
        self._load(existing, [by_address[n['address']] for n in workers if n['address'] in by_address])
        return op if op.changes else None

    def _increase_cp(self) -> Optional[Operation]:
        if len(self.cps) >= self.constraints.control_plane_count:
            return None
        return Operation(OP_INCREASE_CP)

    def _decrease_cp(self) -> Optional[Operation]:
        cstr = self.constraints
        if len(self.cps) <= cstr.control_plane_count:
            return None
        op = Operation(OP_DECREASE_CP)
        while len(self.cps) > cstr.control_plane_count:
            machine = self._deselect_cp()
            self._remove_cp(machine)
            if cstr.maximum_workers == 0 or len(self.workers) < cstr.maximum_workers:
                op.record(CHANGE_DEMOTE + machine.address)
                self._add_worker(machine)
                continue
            op.record('remove excessive control plane: ' + machine.address)
            self.unused.add(machine)
        return op

    def _replace_cp(self) -> Optional[Operation]:
        if len(self.cps) < 2:
            return None
        bad = next((m for m in self.cps if m.state not in GOOD_CONTROL_PLANE_STATES or self._tainted(m)), None)
        if bad is None:
            return None
        op = Operation(OP_REPLACE_CP)
        self._remove_cp(bad)
        cstr = self.constraints
        if cstr.maximum_workers == 0 or len(self.workers) < cstr.maximum_workers:
            op.record(CHANGE_DEMOTE + bad.address)
            self._add_worker(bad)
            return op
        promote = self._select_cp_from_workers()
        if promote is None:
            op.record('remove bad control plane: ' + bad.address)
            return op
        # CKE records only the promotion here; the swapped-out control plane shows in the node diff.
        op.record(CHANGE_PROMOTE + promote.address)
        self._remove_worker(promote)
        self._add_cp(promote)
        self._add_worker(bad)
        return op

    def _increase_worker(self) -> Optional[Operation]:
        cstr = self.constraints
        healthy = list(map(_STATE_OF, self.workers)).count(HEALTHY)  # Machine.healthy, counted in C
        if healthy >= cstr.minimum_workers:
            return None
        op = Operation(OP_INCREASE_WORKER)
        for _count in range(healthy, cstr.minimum_workers):
            if cstr.maximum_workers and len(self.workers) >= cstr.maximum_workers:
                break
            machine = self._select_worker()
            if machine is None:
                break
            op.record('add new worker: ' + machine.address)
            self._add_worker(machine)
            self.unused.discard(machine)
        return op if op.changes else None

    def _decrease_worker(self) -> Optional[Operation]:
        retired = next((m for m in self.workers
                        if m.state == RETIRED and m.duration > self.wait_retired_seconds), None)
        if retired is None:
            return None
        if self._select_worker() is None and len(self.workers) - 1 < self.constraints.minimum_workers:
            # Removing it would break minimum-workers and nothing can replace it: leave it.
            return None
        op = Operation(OP_DECREASE_WORKER, ['remove retired worker: ' + retired.address])
        self._remove_worker(retired)
        return op

    def _taint_nodes(self, nodes: List[Dict[str, Any]]) -> Optional[Operation]:
        op = Operation(OP_TAINT_NODES)
        by_address = self.by_address
        for node in nodes:
            machine = by_address[node['address']]
            if not node.get('taints') and machine.state not in STATE_TAINTS:
                continue  # no state taint wanted and none there: has_valid_state_taint's answer, without the call
            if not has_valid_state_taint(node, machine):
                op.record('change taint of ' + node['address'])
        return op if op.changes else None


def _check_node_sources(machines: Sequence[Machine]) -> None:
    """What a rendered node takes from its machine must make a valid CKE node (the template's part
    was checked by validate_template): the address, and the label keys and values built from the
    machine's role, rack, index and sabakan labels. Each distinct value is checked once, which is
    much cheaper than validating the whole generated cluster (that costs more than generating it).
    """
    if _sources_known_good(machines):
        return
    roles: Dict[str, Optional[str]] = {}
    racks: Dict[int, Optional[str]] = {}
    indexes: Dict[int, Optional[str]] = {}
    label_sets: Dict[Tuple[Tuple[str, str], ...], Optional[str]] = {}
    for machine in machines:
        role, rack, index, labels = machine.role, machine.rack, machine.index_in_rack, machine.labels
        # rack and index-in-rack are checked apart: together they are one key per machine, apart a few dozen
        if role not in roles:
            roles[role] = _labels_problem([('cke.cybozu.com/role', role), ('node-role.kubernetes.io/' + role, 'true')])
        if rack not in racks:
            racks[rack] = _labels_problem([('cke.cybozu.com/rack', str(rack))])
        if index not in indexes:
            indexes[index] = _labels_problem([('cke.cybozu.com/index-in-rack', str(index))])
        if labels not in label_sets:
            label_sets[labels] = _labels_problem([('sabakan.cke.cybozu.com/' + name, value) for name, value in labels])
        problem = (ip_address_problem(machine.address) or roles[role] or racks[rack] or indexes[index]
                   or label_sets[labels])
        if problem:
            raise TemplateError('', 'generated', f'the generated cluster is invalid (check the sabakan labels of its machines): '
                                f'machine {machine.serial} ({machine.address}): {problem}')


# Values _check_node_sources found valid, per kind (bounded; a value is valid or not for good): the next run over
# the same inventory checks every machine with set lookups in C instead of a Python loop over them.
_GOOD_ADDRESSES: set = set()
_GOOD_SOURCES: Dict[str, set] = {'role': set(), 'rack': set(), 'index': set(), 'labels': set()}
_KNOWN_GOOD_LIMIT = 65536
_ADDRESS_OF = operator.attrgetter('address')
_SOURCE_FIELDS = tuple((kind, operator.attrgetter(name)) for kind, name in
                       (('role', 'role'), ('rack', 'rack'), ('index', 'index_in_rack'), ('labels', 'labels')))


def _sources_known_good(machines: Sequence[Machine]) -> bool:
    """Whether every address, role, rack, index in rack and label set of `machines` is known valid.

    Each distinct value not yet known is checked as _check_node_sources checks it and remembered when valid;
    any problem (or a value that is not hashable) answers False, and the caller's loop names the first
    machine at fault exactly as before."""
    try:
        if (_GOOD_ADDRESSES.issuperset(map(_ADDRESS_OF, machines))
                and all(_GOOD_SOURCES[kind].issuperset(map(get, machines)) for kind, get in _SOURCE_FIELDS)):
            return True
        new_addresses = set(map(_ADDRESS_OF, machines)) - _GOOD_ADDRESSES
        new_sources = {kind: set(map(get, machines)) - _GOOD_SOURCES[kind] for kind, get in _SOURCE_FIELDS}
    except TypeError:
        return False
    if any(ip_address_problem(address) for address in new_addresses):
        return False
    for kind, values in new_sources.items():
        for value in values:
            if kind == 'role':
                labels = [('cke.cybozu.com/role', value), ('node-role.kubernetes.io/' + value, 'true')]
            elif kind == 'rack':
                labels = [('cke.cybozu.com/rack', str(value))]
            elif kind == 'index':
                labels = [('cke.cybozu.com/index-in-rack', str(value))]
            else:
                labels = [('sabakan.cke.cybozu.com/' + name, label) for name, label in value]
            if _labels_problem(labels):
                return False
    for known, new in [(_GOOD_ADDRESSES, new_addresses)] + [(_GOOD_SOURCES[k], v) for k, v in new_sources.items()]:
        if len(known) + len(new) > _KNOWN_GOOD_LIMIT:
            known.clear()
        known.update(new)
    return True


def _labels_problem(labels: Sequence[Tuple[str, str]]) -> Optional[str]:
    for key, value in labels:
        problem = qualified_name_problem(key)
        if problem:
            return f'label key {key!r} {problem}'
        problem = label_value_problem(value)
        if problem:
            return f'label {key} value {value!r} {problem}'
    return None


def _split_nodes(current: Any) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """Control plane and worker nodes of the current cluster, in file order."""
    if not isinstance(current, Mapping):
        raise TemplateError('cluster', 'type', f'current cluster must be a mapping (CKE cluster.yml), got {type(current).__name__}')
    nodes = current.get('nodes') or []
    if not isinstance(nodes, list):
        raise TemplateError('cluster.nodes', 'type', 'must be a list')
    if set(map(type, nodes)) <= _DICT_TYPE:
        # every node a dict: the addresses checked in C; any problem and the loop below names the node
        addresses = list(map(_GET_ADDRESS, nodes))
        if set(map(type, addresses)) <= _STR_TYPE and '' not in addresses and len(set(addresses)) == len(nodes):
            flags = list(map(_GET_CONTROL_PLANE, nodes))
            return (list(itertools.compress(nodes, flags)),
                    list(itertools.compress(nodes, map(operator.not_, flags))))
    seen = set()
    for index, node in enumerate(nodes):
        address = node.get('address') if isinstance(node, (dict, Mapping)) else None
        if not address or not isinstance(address, str):
            raise TemplateError(f'cluster.nodes[{index}]', 'required', 'every node needs an address')
        if address in seen:
            raise TemplateError(f'cluster.nodes[{index}].address', 'unique', f'duplicate node address {address}')
        seen.add(address)
    cps = [n for n in nodes if n.get('control_plane')]
    return cps, [n for n in nodes if not n.get('control_plane')]


# ---- public API (plain data in and out) ------------------------------------------------------
def generate(template: Mapping[str, Any], constraints: Any, machines: Sequence[Any], *, now: TimeLike = None,
             node_taints: Optional[Mapping[str, Sequence[Mapping[str, Any]]]] = None) -> Dict[str, Any]:
    """A new cluster: control-plane-count control planes, then minimum-workers workers."""
    outcome = Generator(template, constraints, machines, now=now, node_taints=node_taints).generate()
    return outcome.cluster  # type: ignore[return-value]


def regenerate(current: Mapping[str, Any], template: Mapping[str, Any], constraints: Any, machines: Sequence[Any], *,
               now: TimeLike = None, node_taints: Optional[Mapping[str, Sequence[Mapping[str, Any]]]] = None
               ) -> Dict[str, Any]:
    """The same machines in the same roles and order, rendered from a new template (and topped up)."""
    outcome = Generator(template, constraints, machines, now=now, node_taints=node_taints).regenerate(current)
    return outcome.cluster  # type: ignore[return-value]


def update(current: Mapping[str, Any], template: Mapping[str, Any], constraints: Any, machines: Sequence[Any], *,
           now: TimeLike = None, node_taints: Optional[Mapping[str, Sequence[Mapping[str, Any]]]] = None,
           wait_retired_seconds: float = DEFAULT_WAIT_RETIRED_SECONDS) -> Optional[Dict[str, Any]]:
    """The next cluster, or None when nothing needs to change."""
    return update_with_reason(current, template, constraints, machines, now=now, node_taints=node_taints,
                              wait_retired_seconds=wait_retired_seconds).cluster


def update_with_reason(current: Mapping[str, Any], template: Mapping[str, Any], constraints: Any,
                       machines: Sequence[Any], *, now: TimeLike = None,
                       node_taints: Optional[Mapping[str, Sequence[Mapping[str, Any]]]] = None,
                       wait_retired_seconds: float = DEFAULT_WAIT_RETIRED_SECONDS) -> Outcome:
    """`update`, plus the step that fired and the changes it recorded (for diffs, logs and status)."""
    generator = Generator(template, constraints, machines, now=now, node_taints=node_taints,
                          wait_retired_seconds=wait_retired_seconds)
    return generator.update(current)
