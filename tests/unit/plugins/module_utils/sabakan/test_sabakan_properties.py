# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Properties of the generator over random data centers and random histories of machine changes.

After `generate`, machines change (sabakan lifecycle transitions, machines, racks and groups of
nodes vanishing, machines appearing, time passing, Kubernetes taints) and `update` is applied
until it returns None. Every step must:
  * drop at most half of the control planes (TooManyNonExistent is the only way out otherwise);
  * return exactly control-plane-count control planes;
  * add no non-HEALTHY machine that was not in the previous cluster, and promote only HEALTHY,
    untainted workers;
  * strictly lower a progress measure (non-existent nodes, control plane count gap, bad control
    planes, healthy worker shortfall, removable retired workers, wrong state taints), so update
    of its own output reaches None within a small bound;
and where update finds nothing to do, no node is missing, the control plane count is right, no
control plane is bad (with two or more) and every state taint is right.
A last property checks that the pool's rack heap picks the same machine as a full scan.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List, Optional, Tuple

from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import NotAvailable, TooManyNonExistent
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.generator import (
    DEFAULT_WAIT_RETIRED_SECONDS,
    GOOD_CONTROL_PLANE_STATES,
    generate,
    update_with_reason,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.machines import parse_machine
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.nodes import (
    has_valid_state_taint,
    tainted_beyond_tolerations,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.pool import MachinePool, RackCount
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.score import score_by_days

NOW = datetime(2025, 1, 15, tzinfo=timezone.utc)
STATES = ('UNINITIALIZED', 'HEALTHY', 'UNHEALTHY', 'UNREACHABLE', 'UPDATING', 'RETIRING', 'RETIRED')
# sabakan's lifecycle (docs/lifecycle.md)
TRANSITIONS = {
    'UNINITIALIZED': ('HEALTHY', 'RETIRING'),
    'HEALTHY': ('UNHEALTHY', 'UNREACHABLE', 'UPDATING', 'RETIRING'),
    'UNHEALTHY': ('HEALTHY', 'UNREACHABLE', 'UPDATING', 'RETIRING'),
    'UNREACHABLE': ('HEALTHY', 'UNHEALTHY', 'UPDATING', 'RETIRING'),
    'UPDATING': ('UNINITIALIZED',),
    'RETIRING': ('RETIRED',),
    'RETIRED': ('UNINITIALIZED',),
}
TOLERATIONS = ['example.com/transient']
TEMPLATES = [
    {'name': 'any', 'service_subnet': '10.68.0.0/16', 'control_plane_tolerations': TOLERATIONS,
     'nodes': [{'user': 'u', 'control_plane': True}, {'user': 'u'}]},
    {'name': 'roles', 'service_subnet': '10.68.0.0/16', 'control_plane_tolerations': TOLERATIONS,
     'nodes': [{'user': 'u', 'control_plane': True, 'labels': {'cke.cybozu.com/role': 'cs'}},
               {'user': 'u', 'labels': {'cke.cybozu.com/role': 'cs', 'cke.cybozu.com/weight': '2'}},
               {'user': 'u', 'labels': {'cke.cybozu.com/role': 'ss'},
                'taints': [{'key': 'cke.cybozu.com/role', 'value': 'storage', 'effect': 'NoExecute'}]}]},
    {'name': 'missing-role', 'service_subnet': '10.68.0.0/16',
     'nodes': [{'user': 'u', 'control_plane': True, 'labels': {'cke.cybozu.com/role': 'cs'}},
               {'user': 'u', 'labels': {'cke.cybozu.com/role': 'cs'}},
               {'user': 'u', 'labels': {'cke.cybozu.com/role': 'gpu'}}]},
]
INTOLERABLE = [{'key': 'example.com/broken', 'effect': 'NoSchedule'}]
TOLERABLE = [{'key': 'node.kubernetes.io/not-ready', 'effect': 'NoSchedule'},
             {'key': 'example.com/transient', 'effect': 'NoSchedule'}]


def rfc3339(moment: datetime) -> str:
    return moment.strftime('%Y-%m-%dT%H:%M:%SZ')


def new_machine(rack: int, index: int, role: str, state: str, retire_days: int, duration: float) -> Dict[str, Any]:
    return {'spec': {'serial': 'sn-%d-%d' % (rack, index), 'labels': [{'name': 'product', 'value': 'R640'}],
                     'rack': rack, 'indexInRack': index, 'role': role, 'ipv4': ['10.%d.0.%d' % (rack, index)],
                     'registerDate': '2019-01-01T00:00:00Z',
                     'retireDate': rfc3339(NOW + timedelta(days=retire_days)), 'bmc': {'bmcType': 'IPMI-2.0'}},
            'status': {'state': state, 'duration': duration}}


@st.composite
def datacenters(draw) -> Tuple[Dict[str, Any], Dict[str, int], List[Dict[str, Any]]]:
    """Racks of machines (mostly HEALTHY, every state and lifetime bucket) and constraints that
    usually fit them, so most examples get past `generate`."""
    racks = draw(st.integers(1, 5))
    machines = []
    for rack in range(racks):
        for index in range(1, draw(st.integers(2, 9)) + 1):
            state = draw(st.sampled_from(STATES + ('HEALTHY',) * 14))
            machines.append(new_machine(rack, index, draw(st.sampled_from(('cs', 'cs', 'ss'))), state,
                                        draw(st.integers(-1200, 1500)), draw(st.sampled_from((0.0, 200.0, 900.0)))))
    template = draw(st.sampled_from(TEMPLATES))
    healthy = sum(1 for m in machines if m['status']['state'] == 'HEALTHY')
    count = draw(st.sampled_from([c for c in (1, 3, 5) if c <= max(1, healthy // 2)]))
    minimum = draw(st.integers(0, max(0, healthy - count)))
    maximum = draw(st.sampled_from((0, 0, minimum, minimum + 2)))
    return template, {'control-plane-count': count, 'minimum-workers': minimum, 'maximum-workers': maximum}, machines


EVENTS = st.lists(st.tuples(st.sampled_from(('transition', 'transition', 'retire', 'retire', 'vanish', 'appear', 'age',
                                             'age', 'taint', 'untaint', 'rack-down', 'nodes-down')),
                            st.integers(0, 10 ** 6)), min_size=1, max_size=12)


def apply_event(event: str, pick: int, machines: List[Dict[str, Any]], taints: Dict[str, list],
                serial: List[int], nodes: List[str]) -> None:
    """Change the inventory (or the Kubernetes taints) the way one real event would; every other
    event hits a machine of the cluster, where changes matter most."""
    if event == 'appear':
        serial[0] += 1
        rack = pick % 6
        machines.append(new_machine(rack, 100 + serial[0], ('cs', 'ss')[pick % 2],
                                    ('HEALTHY', 'UNINITIALIZED')[pick % 3 == 0], pick % 2000 - 500, 0.0))
        return
    if not machines:
        return
    if event == 'rack-down':    # a whole rack leaves sabakan at once
        rack = machines[pick % len(machines)]['spec']['rack']
        machines[:] = [m for m in machines if m['spec']['rack'] != rack]
        return
    if event == 'nodes-down':   # several cluster machines vanish between two updates
        gone = {a for i, a in enumerate(sorted(nodes)) if (pick >> (i % 20)) & 1}
        machines[:] = [m for m in machines if m['spec']['ipv4'][0] not in gone]
        return
    in_cluster = [m for m in machines if m['spec']['ipv4'][0] in nodes]
    candidates = in_cluster if in_cluster and pick % 2 else machines
    machine = candidates[(pick // 2) % len(candidates)]
    address = machine['spec']['ipv4'][0]
    if event == 'transition':
        choices = TRANSITIONS[machine['status']['state']]
        machine['status'] = {'state': choices[pick % len(choices)], 'duration': 0.0}
    elif event == 'retire':   # one step along the way out: ... -> RETIRING -> RETIRED
        state = machine['status']['state']
        if 'RETIRING' in TRANSITIONS[state] or state == 'RETIRING':
            machine['status'] = {'state': 'RETIRING' if state != 'RETIRING' else 'RETIRED', 'duration': 0.0}
    elif event == 'vanish':
        machines.remove(machine)
    elif event == 'age':
        for each in machines:
            each['status'] = dict(each['status'], duration=each['status']['duration'] + 400.0)
    elif event == 'taint':
        taints[address] = INTOLERABLE if pick % 2 else TOLERABLE
    else:
        taints.pop(address, None)


def split(cluster: Dict[str, Any]) -> Tuple[List[str], List[str]]:
    return ([n['address'] for n in cluster['nodes'] if n['control_plane']],
            [n['address'] for n in cluster['nodes'] if not n['control_plane']])


def progress(cluster: Dict[str, Any], constraints: Dict[str, int], machines: List[Dict[str, Any]],
             taints: Dict[str, list], template: Dict[str, Any]) -> Tuple[int, ...]:
    """A measure every update step must lower (compared as a tuple, most important first)."""
    tolerations = template.get('control_plane_tolerations') or []
    by_address = {m['spec']['ipv4'][0]: parse_machine(m, NOW) for m in machines}
    cps, workers = split(cluster)
    nonexistent = sum(1 for a in cps + workers if a not in by_address)
    cps = [by_address[a] for a in cps if a in by_address]
    workers = [by_address[a] for a in workers if a in by_address]
    gap = abs(len(cps) - constraints['control-plane-count'])
    bad = sum(1 for m in cps if m.state not in GOOD_CONTROL_PLANE_STATES
              or tainted_beyond_tolerations(taints.get(m.address), tolerations)) if len(cps) >= 2 else 0
    healthy = sum(1 for m in workers if m.healthy)
    shortfall = max(0, constraints['minimum-workers'] - healthy)
    retired = sum(1 for m in workers if m.state == 'RETIRED' and m.duration > DEFAULT_WAIT_RETIRED_SECONDS)
    wrong = sum(1 for n in cluster['nodes'] if n['address'] in by_address
                and not has_valid_state_taint(n, by_address[n['address']]))
    return (nonexistent, gap, bad, shortfall, retired, wrong)


def check_step(before: Dict[str, Any], after: Dict[str, Any], constraints: Dict[str, int],
               machines: List[Dict[str, Any]], taints: Dict[str, list], template: Dict[str, Any]) -> None:
    states = {m['spec']['ipv4'][0]: m['status']['state'] for m in machines}
    old_cps, old_workers = split(before)
    new_cps, new_workers = split(after)
    dropped = [a for a in old_cps if a not in new_cps]
    assert len(dropped) * 2 <= len(old_cps), f'dropped {dropped} of control planes {old_cps}'
    assert len(new_cps) == constraints['control-plane-count']
    assert len(set(new_cps + new_workers)) == len(new_cps + new_workers)
    for address in new_cps + new_workers:
        assert address in states, f'{address} has no machine'
        if address not in old_cps + old_workers:
            assert states[address] == 'HEALTHY', f'new node {address} is {states[address]}'
    tolerations = template.get('control_plane_tolerations') or []
    for address in new_cps:
        if address in old_workers:
            assert states[address] == 'HEALTHY' and not tainted_beyond_tolerations(taints.get(address), tolerations), \
                f'promoted {address} is {states[address]} / {taints.get(address)}'
    maximum = constraints['maximum-workers']
    if maximum and len(old_workers) <= maximum:
        assert len(new_workers) <= maximum
    assert progress(after, constraints, machines, taints, template) \
        < progress(before, constraints, machines, taints, template)


def settle(cluster: Dict[str, Any], template: Dict[str, Any], constraints: Dict[str, int],
           machines: List[Dict[str, Any]], taints: Dict[str, list]) -> Optional[Dict[str, Any]]:
    """Update until None, checking every step; None when the generator (rightly) gives up."""
    start = progress(cluster, constraints, machines, taints, template)
    bound = sum(start) + 1
    for _step in range(bound + 1):
        try:
            outcome = update_with_reason(cluster, template, constraints, machines, now=NOW, node_taints=taints)
        except TooManyNonExistent:
            present = {m['spec']['ipv4'][0] for m in machines}
            cps = split(cluster)[0]
            assert sum(1 for a in cps if a in present) * 2 <= len(cps)
            return None
        except NotAvailable:
            return None
        if outcome.cluster is None:
            nonexistent, gap, bad, _shortfall, _retired, wrong = progress(cluster, constraints, machines, taints,
                                                                          template)
            assert (nonexistent, gap, bad, wrong) == (0, 0, 0, 0), \
                'update found nothing to do but the cluster has missing nodes, a wrong control plane count, ' \
                'a bad control plane or a wrong state taint'
            return cluster
        check_step(cluster, outcome.cluster, constraints, machines, taints, template)
        cluster = outcome.cluster
    raise AssertionError(f'no fixed point within {bound} updates (progress started at {start})')


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(datacenters(), EVENTS)
def test_update_is_safe_and_settles(dc, events):
    template, constraints, machines = dc
    try:
        cluster = generate(template, constraints, machines, now=NOW)
    except NotAvailable:
        return
    assert len(split(cluster)[0]) == constraints['control-plane-count']
    assert all(m['status']['state'] == 'HEALTHY' for m in machines
               if m['spec']['ipv4'][0] in split(cluster)[0] + split(cluster)[1])
    taints: Dict[str, list] = {}
    serial = [0]
    cluster = settle(cluster, template, constraints, machines, taints)
    for event, pick in events:
        if cluster is None:
            return
        apply_event(event, pick, machines, taints, serial, [n['address'] for n in cluster['nodes']])
        cluster = settle(cluster, template, constraints, machines, taints)


@settings(max_examples=40, deadline=None)
@given(datacenters(), st.integers(0, 10 ** 6))
def test_update_of_a_settled_cluster_is_none_and_stays_none(dc, seed):
    template, constraints, machines = dc
    try:
        cluster = generate(template, constraints, machines, now=NOW)
    except NotAvailable:
        return
    settled = settle(cluster, template, constraints, machines, {})
    if settled is None:
        return
    # same input, same answer: a settled cluster stays settled, whatever the machine order
    shuffled = list(machines)
    random.Random(seed).shuffle(shuffled)
    assert update_with_reason(settled, template, constraints, shuffled, now=NOW).cluster is None


# --- the pool's rack heap picks what a full scan picks ------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.sampled_from(('cs', 'ss')), st.integers(-1200, 1500)),
                min_size=1, max_size=60),
       st.lists(st.tuples(st.sampled_from(('pick', 'count', 'uncount', 'add-back')), st.sampled_from(('', 'cs', 'ss')),
                          st.integers(0, 6)), min_size=1, max_size=40))
def test_rack_heap_matches_a_full_scan(specs, operations):
    machines = [parse_machine(new_machine(rack, index + 1, role, 'HEALTHY', days, 0.0), NOW)
                for index, (rack, role, days) in enumerate(specs)]
    days = {m.address: score_by_days(m.days_to_retire(NOW)) for m in machines}
    pool = MachinePool(machines, days)
    counts = {'': RackCount(), 'cs': RackCount(), 'ss': RackCount()}
    removed: List[Any] = []
    for operation, role, rack in operations:
        if operation == 'count':
            counts[role][rack] += 1
            continue
        if operation == 'uncount':
            counts[role][rack] -= 1
            continue
        if operation == 'add-back' and removed:
            pool.add(removed.pop(rack % len(removed)))
            continue
        indexed = pool.best(role, counts[role])
        scanned = pool.best(role, dict(counts[role]))
        assert indexed is scanned
        if indexed is not None:
            pool.discard(indexed)
            removed.append(indexed)


# --- an update's single pick by one pass over the pool picks what the rack lists and heap pick ------------------
@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.sampled_from(('cs', 'ss')), st.integers(-1200, 1500),
                          st.sampled_from(('HEALTHY', 'HEALTHY', 'UNHEALTHY'))), min_size=1, max_size=60),
       st.lists(st.tuples(st.sampled_from(('', 'cs', 'ss')), st.integers(0, 6)), max_size=12),
       st.sampled_from(('', 'cs', 'ss')), st.sampled_from((None, 'even', 'none')), st.booleans())
def test_first_pick_by_scan_matches_the_rack_heap(specs, counted, role, accept_kind, plain_counts):
    machines = [parse_machine(new_machine(rack, index + 1, kind, state, days, 0.0), NOW)
                for index, (rack, kind, days, state) in enumerate(specs)]
    days = {m.address: score_by_days(m.days_to_retire(NOW)) for m in machines}
    counts = RackCount()
    for count_role, rack in counted:
        if count_role in ('', role):
            counts[rack] += 1
    accept = {None: None, 'even': lambda m: m.index_in_rack % 2 == 0, 'none': lambda m: False}[accept_kind]
    rack_count = dict(counts) if plain_counts else counts
    scanned = MachinePool(machines, days).best(role, rack_count, accept)   # the first pick: one pass (_scan)
    indexed = MachinePool(machines, days, scan_picks=0).best(role, rack_count, accept)
    assert scanned is indexed
    if accept_kind == 'none':
        assert scanned is None


def test_pool_scans_the_first_pick_only():
    machines = [parse_machine(new_machine(rack, 1, 'cs', 'HEALTHY', 400, 0.0), NOW) for rack in range(3)]
    pool = MachinePool(machines, {m.address: 1 for m in machines})
    counts = RackCount()
    first = pool.best('cs', counts)
    assert first is machines[0] and not pool._indexes      # lowest address wins the tie; no index built
    pool.discard(first)
    counts[first.rack] += 1
    assert pool.best('cs', counts) is machines[1] and pool._indexes   # the second pick builds the rack heap
