# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The LEGACY CKE generator of seed 000 as tables: generate, regenerate and every Update step.

Expectations are derived from the rules (scores: (100 - same-rack count) * 10 + lifetime score,
+1000 for HEALTHY when removing; ties to the lowest address), not from running the code.
"""

from __future__ import annotations

import copy
import random
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Dict, List, Sequence

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import (
    GeneratorError,
    MachineError,
    MissingMachine,
    NotAvailable,
    TemplateError,
    TooManyNonExistent,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.generator import (
    OP_DECREASE_CP,
    OP_DECREASE_WORKER,
    OP_INCREASE_CP,
    OP_INCREASE_WORKER,
    OP_REMOVE_NON_EXISTENT,
    OP_REPLACE_CP,
    OP_TAINT_NODES,
    generate,
    regenerate,
    update,
    update_with_reason,
)

NOW = datetime(2018, 12, 2, tzinfo=timezone.utc)
ROLE = 'cke.cybozu.com/role'
WEIGHT = 'cke.cybozu.com/weight'
STATE = 'cke.cybozu.com/state'
RETIRING_TAINT = {'key': STATE, 'value': 'retiring', 'effect': 'NoExecute'}
RETIRED_TAINT = {'key': STATE, 'value': 'retired', 'effect': 'NoExecute'}


def at(days: float) -> str:
    return (NOW + timedelta(days=days)).strftime('%Y-%m-%dT%H:%M:%SZ')


F250, F500, F1000 = at(365), at(548), at(1096)   # lifetime scores +1, +2, +3


def m(rack: int, retire: str, state: str, ip: str, role: str = 'cs', duration: float = 600.0) -> dict:
    """A machine as sabakan returns it (searchMachines element)."""
    return {'spec': {'serial': 'sn-' + ip, 'labels': [], 'rack': rack, 'indexInRack': int(ip.rsplit('.', 1)[1]),
                     'role': role, 'ipv4': [ip], 'registerDate': '2017-01-01T00:00:00Z', 'retireDate': retire,
                     'bmc': {'bmcType': 'IPMI-2.0'}},
            'status': {'state': state, 'timestamp': '2018-12-01T23:50:00Z', 'duration': duration}}


# The update table's inventory (index = last octet - 1).
MACHINES = [
    m(0, F500, 'HEALTHY', '10.0.0.1'),          # [0]
    m(0, F250, 'RETIRING', '10.0.0.2'),         # [1]
    m(1, F250, 'UNHEALTHY', '10.0.0.3'),        # [2]
    m(1, F250, 'UNREACHABLE', '10.0.0.4'),      # [3]
    m(2, F250, 'UNREACHABLE', '10.0.0.5'),      # [4]
    m(2, F500, 'HEALTHY', '10.0.0.6'),          # [5]
    m(3, F1000, 'HEALTHY', '10.0.0.7'),         # [6]
    m(3, F500, 'HEALTHY', '10.0.0.8'),          # [7]
    m(4, F500, 'UPDATING', '10.0.0.9'),         # [8]
    m(4, F500, 'RETIRED', '10.0.0.10'),         # [9]  retired 600 s ago
    m(5, F250, 'UNINITIALIZED', '10.0.0.11'),   # [10]
]
GONE = ['10.100.0.12', '10.100.0.13']           # addresses with no machine


def addr(i) -> str:
    return i if isinstance(i, str) else '10.0.0.%d' % (i + 1)


def cp(i, taints=None) -> dict:
    node = {'address': addr(i), 'control_plane': True}
    if taints is not None:
        node['taints'] = taints
    return node


def w(i, taints=None) -> dict:
    node = {'address': addr(i), 'control_plane': False}
    if taints is not None:
        node['taints'] = taints
    elif i == 1:
        node['taints'] = [RETIRING_TAINT]
    elif i == 9:
        node['taints'] = [RETIRED_TAINT]
    return node


def cluster(*nodes: dict) -> dict:
    return {'name': 'old', 'nodes': list(nodes)}


TEMPLATE = {
    'name': 'tmpl',
    'nodes': [{'user': 'cybozu', 'control_plane': True}, {'user': 'cybozu', 'control_plane': False}],
    'service_subnet': '10.68.0.0/16',
    'control_plane_tolerations': ['foo.cybozu.com/transient'],
}

USER_TAINT = [{'key': 'foo', 'value': 'bar', 'effect': 'NoSchedule'}]
SYSTEM_TAINTS = [{'key': 'node.kubernetes.io/not-ready', 'effect': 'NoSchedule'},
                 {'key': 'node.kubernetes.io/unreachable', 'effect': 'NoExecute'},
                 {'key': 'cke.cybozu.com/master', 'effect': 'NoSchedule'},
                 {'key': STATE, 'value': 'retiring', 'effect': 'NoExecute'},
                 {'key': 'foo.cybozu.com/transient', 'effect': 'NoSchedule'}]


def pick(*indexes) -> List[dict]:
    return [MACHINES[i] for i in indexes]


def roles_of(result: dict) -> tuple:
    """({control plane addresses}, {worker addresses})."""
    return ({n['address'] for n in result['nodes'] if n['control_plane']},
            {n['address'] for n in result['nodes'] if not n['control_plane']})


def expect(cps: Sequence, workers: Sequence) -> tuple:
    return ({addr(i) for i in cps}, {addr(i) for i in workers})


# ==== Update: one table row per rule --------------------------------------------------------------
UPDATE_CASES = [
    # name, current, constraints, machines, node_taints, expected (cps, workers) or error, operation
    ('remove non-existent', cluster(cp(0), cp(1), cp(GONE[0]), w(2), w(3), w(GONE[1])),
     {'control-plane-count': 3}, MACHINES, None,
     # new CP: unused healthy 5 (rack 2, +2) 6 (rack 3, +3) 7 (rack 3, +2); no CP in racks 2/3 -> 6 by lifetime
     expect([0, 1, 6], [2, 3]), OP_REMOVE_NON_EXISTENT),
    ('remove non-existent worker only', cluster(cp(0), w(5), w(GONE[0])),
     {'control-plane-count': 1}, MACHINES, None, expect([0], [5]), OP_REMOVE_NON_EXISTENT),
    ('too many non-existent: exactly half', cluster(cp(0), cp(5), cp(GONE[0]), cp(GONE[1]), w(6)),
     {'control-plane-count': 4}, MACHINES, None, TooManyNonExistent, None),
    ('too many non-existent: more than half', cluster(cp(0), cp(3), cp(4), w(5)),
     {'control-plane-count': 3}, pick(3, 5), None, TooManyNonExistent, None),
    ('too many non-existent: the only control plane', cluster(cp(GONE[0]), w(5)),
     {'control-plane-count': 1}, MACHINES, None, TooManyNonExistent, None),
    ('less than half non-existent is fine', cluster(cp(0), cp(5), cp(GONE[0]), w(7)),
     {'control-plane-count': 3}, MACHINES, None, expect([0, 5, 6], [7]), OP_REMOVE_NON_EXISTENT),
    ('not available', cluster(cp(0), cp(3), cp(5), w(6)),
     {'control-plane-count': 3}, pick(0, 3, 6), None, NotAvailable, None),
    ('increase control plane', cluster(cp(0), cp(5), w(6)),
     {'control-plane-count': 3}, MACHINES, None, expect([0, 5, 7], [6]), OP_INCREASE_CP),
    ('increase control plane by promoting workers', cluster(cp(0), w(5), w(6), w(7)),
     {'control-plane-count': 3}, pick(0, 5, 6, 7), None,
     # no unused machine, 3 workers > minimum 1: promote 6 (rack 3, +3 beats 5's +2), then 5 (empty rack 2)
     expect([0, 5, 6], [7]), OP_INCREASE_CP),
    ('no promotion down to minimum-workers', cluster(cp(0), w(5), w(6)),
     {'control-plane-count': 2, 'minimum-workers': 2}, pick(0, 5, 6), None, NotAvailable, None),
    ('promotion skips unhealthy workers', cluster(cp(0), w(2), w(5)),
     {'control-plane-count': 2}, pick(0, 2, 5), None, expect([0, 5], [2]), OP_INCREASE_CP),
    ('increase ignores long-lived but user-tainted machine', cluster(cp(0), cp(5), w(8)),
     {'control-plane-count': 3}, MACHINES, {addr(6): USER_TAINT, addr(7): SYSTEM_TAINTS},
     expect([0, 5, 7], [8]), OP_INCREASE_CP),
    ('decrease control plane: demote', cluster(cp(0), cp(6), cp(7), w(5)),
     {'control-plane-count': 2}, MACHINES, None,
     # removal scores (rack counts 0:1, 3:2): 0 -> 1992, 6 -> 1983, 7 -> 1982: 7 goes
     expect([0, 6], [5, 7]), OP_DECREASE_CP),
    ('decrease control plane: remove at maximum-workers', cluster(cp(0), cp(6), cp(7), w(5)),
     {'control-plane-count': 2, 'maximum-workers': 1}, MACHINES, None, expect([0, 6], [5]), OP_DECREASE_CP),
    ('decrease control plane: unhealthy first', cluster(cp(2), cp(6), cp(7), w(5)),
     {'control-plane-count': 2}, MACHINES, None, expect([6, 7], [5, 2]), OP_DECREASE_CP),
    ('decrease control plane by two', cluster(cp(0), cp(5), cp(6), cp(7), w(9)),
     {'control-plane-count': 2}, MACHINES, None,
     # first 7 (1982); then 0, 5, 6 score 1992, 1992, 1993: tie 0/5 -> the lower address goes
     expect([5, 6], [9, 7, 0]), OP_DECREASE_CP),
    ('replace control plane: demote and add', cluster(cp(0), cp(2), cp(7), w(5)),
     {'control-plane-count': 3}, MACHINES, None, expect([0, 6, 7], [2, 5]), OP_REPLACE_CP),
    ('replace control plane: swap with a worker at maximum-workers', cluster(cp(2), cp(5), cp(6), w(7), w(0)),
     {'control-plane-count': 3, 'minimum-workers': 2, 'maximum-workers': 2}, MACHINES, None,
     # promote the best untainted healthy worker: 0 (empty rack 0) beats 7 (rack 3 has CP 6)
     expect([5, 6, 0], [7, 2]), OP_REPLACE_CP),
    ('replace control plane: remove bad control plane', cluster(cp(0), cp(2), cp(7), w(1)),
     {'control-plane-count': 3, 'maximum-workers': 1}, MACHINES, None,
     # worker 1 is RETIRING: nothing to promote; the bad CP is dropped and 5 (empty rack 2) is added
     expect([0, 5, 7], [1]), OP_REPLACE_CP),
    ('replace control plane: nothing to add', cluster(cp(0), cp(2), cp(7), w(1)),
     {'control-plane-count': 3, 'maximum-workers': 1}, pick(0, 1, 2, 7), None, NotAvailable, None),
    ('replace control plane: intolerable taint', cluster(cp(0), cp(5), cp(7), w(2)),
     {'control-plane-count': 3}, MACHINES, {addr(5): USER_TAINT, addr(6): []},
     expect([0, 6, 7], [2, 5]), OP_REPLACE_CP),
    ('replace control plane: tainted one demoted, untainted worker promoted', cluster(cp(0), cp(5), cp(7), w(6)),
     {'control-plane-count': 3}, pick(0, 5, 6, 7), {addr(5): USER_TAINT},
     expect([0, 6, 7], [5]), OP_REPLACE_CP),
    ('replace control plane: first bad one in order', cluster(cp(3), cp(2), cp(0), w(5)),
     {'control-plane-count': 3}, MACHINES, None,
     # 3 (UNREACHABLE) goes first; racks with CPs: 1 (2), 0 (0): 6 (rack 3, +3) beats 7 (+2)
     expect([2, 0, 6], [5, 3]), OP_REPLACE_CP),
    ('increase worker', cluster(cp(0), cp(5), w(1)),
     {'control-plane-count': 2, 'minimum-workers': 2}, MACHINES, None,
     # no healthy worker: add two; 6 (+3) first, then 7
     expect([0, 5], [1, 6, 7]), OP_INCREASE_WORKER),
    ('increase worker up to maximum-workers', cluster(cp(0), cp(5), w(1)),
     {'control-plane-count': 2, 'minimum-workers': 2, 'maximum-workers': 2}, MACHINES, None,
     expect([0, 5], [1, 6]), OP_INCREASE_WORKER),
    ('decrease worker: retired long enough', cluster(cp(0), cp(5), w(9), w(7), w(6)),
     {'control-plane-count': 2}, MACHINES, None, expect([0, 5], [7, 6]), OP_DECREASE_WORKER),
    ('decrease worker: replaced by an unused machine', cluster(cp(0), cp(5), w(9), w(7)),
     {'control-plane-count': 2, 'minimum-workers': 2, 'maximum-workers': 2}, MACHINES, None,
     expect([0, 5], [7, 6]), OP_DECREASE_WORKER),
    ('decrease worker: kept when nothing replaces it', cluster(cp(0), cp(5), w(9), w(7)),
     {'control-plane-count': 2, 'minimum-workers': 2, 'maximum-workers': 2}, pick(0, 5, 7, 9), None,
     None, None),
    ('retiring worker is not removed', cluster(cp(0), cp(5), w(1), w(7), w(6)),
     {'control-plane-count': 2}, MACHINES, None, None, None),
    ('taint nodes', cluster(cp(5), w(2), w(7), cp(0, [RETIRING_TAINT])),
     {'control-plane-count': 2, 'minimum-workers': 2, 'maximum-workers': 2}, pick(0, 2, 5, 7), None,
     expect([0, 5], [2, 7]), OP_TAINT_NODES),
    ('taint nodes: retiring worker without taint', cluster(cp(0), w(1, []), w(5)),
     {'control-plane-count': 1}, MACHINES, None, expect([0], [1, 5]), OP_TAINT_NODES),
    ('taint nodes: retired worker with the retiring taint', cluster(cp(0), w(9, [RETIRING_TAINT]), w(5)),
     {'control-plane-count': 1, 'minimum-workers': 2, 'maximum-workers': 2}, pick(0, 5, 9), None,
     expect([0], [9, 5]), OP_TAINT_NODES),
    ('no state taint for unreachable, unhealthy, updating, uninitialized',
     cluster(cp(0), w(3), w(2), w(8), w(10), w(5)), {'control-plane-count': 1}, MACHINES, None, None, None),
    ('updating and uninitialized control planes are kept', cluster(cp(0), cp(8), cp(10), w(5)),
     {'control-plane-count': 3}, MACHINES, None, None, None),
    ('tolerated taints on control planes', cluster(cp(0), cp(5), cp(7), w(6)),
     {'control-plane-count': 3}, pick(0, 5, 6, 7), {addr(i): SYSTEM_TAINTS for i in (0, 5, 7)}, None, None),
    ('a single bad control plane is not replaced', cluster(cp(2), w(5)),
     {'control-plane-count': 1}, MACHINES, None, None, None),
    ('nothing to do', cluster(cp(0), cp(5), cp(7), w(6)),
     {'control-plane-count': 3}, MACHINES, None, None, None),
]


@pytest.mark.parametrize('name, current, constraints, machines, node_taints, expected, operation', UPDATE_CASES,
                         ids=[case[0] for case in UPDATE_CASES])
def test_update(name, current, constraints, machines, node_taints, expected, operation):
    before = copy.deepcopy((current, machines, node_taints))
    if isinstance(expected, type):
        with pytest.raises(expected):
            update(current, TEMPLATE, constraints, machines, now=NOW, node_taints=node_taints)
        assert (current, machines, node_taints) == before, 'a failed update must change nothing'
        return
    outcome = update_with_reason(current, TEMPLATE, constraints, machines, now=NOW, node_taints=node_taints)
    assert (current, machines, node_taints) == before, 'the inputs must not change'
    if expected is None:
        assert outcome.cluster is None and outcome.operation is None
        return
    assert roles_of(outcome.cluster) == expected
    assert outcome.operation.name == operation
    assert outcome.operation.changes


def test_update_result_is_the_template_with_new_nodes_control_planes_first():
    result = update(cluster(w(6), cp(0), cp(5)), TEMPLATE, {'control-plane-count': 3}, MACHINES, now=NOW)
    assert {k: v for k, v in result.items() if k != 'nodes'} == {k: v for k, v in TEMPLATE.items() if k != 'nodes'}
    assert [(n['address'], n['control_plane']) for n in result['nodes']] == \
        [('10.0.0.1', True), ('10.0.0.6', True), ('10.0.0.8', True), ('10.0.0.7', False)]


def test_update_records_what_changed():
    outcome = update_with_reason(cluster(cp(2), cp(5), cp(6), w(7), w(0)), TEMPLATE,
                                 {'control-plane-count': 3, 'minimum-workers': 2, 'maximum-workers': 2},
                                 MACHINES, now=NOW)
    assert outcome.operation.changes == ['promote a worker: 10.0.0.1']  # CKE records only the promotion
    outcome = update_with_reason(cluster(cp(0), cp(2), cp(7), w(1)), TEMPLATE,
                                 {'control-plane-count': 3, 'maximum-workers': 1}, MACHINES, now=NOW)
    assert outcome.operation.changes == ['remove bad control plane: 10.0.0.3', 'add new control plane: 10.0.0.6']


def test_taint_step_rewrites_the_taints():
    result = update(cluster(cp(0), w(1, []), w(9, [RETIRING_TAINT]), w(5, [RETIRED_TAINT])), TEMPLATE,
                    {'control-plane-count': 1, 'minimum-workers': 3, 'maximum-workers': 3}, pick(0, 1, 5, 9), now=NOW)
    taints = {n['address']: n['taints'] for n in result['nodes']}
    assert taints == {addr(0): [], addr(1): [RETIRING_TAINT], addr(9): [RETIRED_TAINT], addr(5): []}
    assert update(result, TEMPLATE, {'control-plane-count': 1, 'minimum-workers': 3, 'maximum-workers': 3},
                  pick(0, 1, 5, 9), now=NOW) is None


def test_no_promotion_at_minimum_workers_even_when_a_worker_could_be_refilled():
    """Promotion needs #workers > minimum-workers, not >=: here promoting 10.0.0.7 and refilling the
    worker with the unused storage machine would work, but the rule forbids it."""
    template = {'name': 'c', 'service_subnet': '10.68.0.0/16',
                'nodes': [{'user': 'u', 'control_plane': True, 'labels': {ROLE: 'cs'}}, {'user': 'u'}]}
    machines = pick(0, 5, 6) + [m(5, F250, 'HEALTHY', '10.0.0.20', 'ss')]
    cstr = {'control-plane-count': 2, 'minimum-workers': 2}
    with pytest.raises(NotAvailable):
        update(cluster(cp(0), w(5), w(6)), template, cstr, machines, now=NOW)
    result = update(cluster(cp(0), w(5), w(6)), template, dict(cstr, **{'minimum-workers': 1}), machines, now=NOW)
    assert roles_of(result) == expect([0, 6], [5])


# --- decrease worker: RETIRED for longer than the wait ------------------------------------------------------
@pytest.mark.parametrize('duration, wait, removed', [
    (600, None, True), (301, None, True), (300, None, False), (299, None, False), (0, None, False),
    (200, 100, True), (100, 100, False), (599, 600, False), (601, 600, True), (1, 0, True),
])
def test_retired_worker_waits(duration, wait, removed):
    machines = pick(0, 5, 6, 7) + [m(4, F500, 'RETIRED', '10.0.0.10', duration=duration)]
    current = cluster(cp(0), w(9), w(6), w(7))
    kwargs = {} if wait is None else {'wait_retired_seconds': wait}
    result = update(current, TEMPLATE, {'control-plane-count': 1}, machines, now=NOW, **kwargs)
    if removed:
        assert roles_of(result) == expect([0], [6, 7])
    else:
        assert result is None


def test_retired_workers_go_one_per_update_in_order():
    machines = pick(0, 5, 6) + [m(4, F500, 'RETIRED', '10.0.0.10'), m(4, F500, 'RETIRED', '10.0.0.12')]
    current = cluster(cp(0), w('10.0.0.12', [RETIRED_TAINT]), w(9), w(5), w(6))
    first = update_with_reason(current, TEMPLATE, {'control-plane-count': 1}, machines, now=NOW)
    assert first.operation.changes == ['remove retired worker: 10.0.0.12']
    second = update_with_reason(first.cluster, TEMPLATE, {'control-plane-count': 1}, machines, now=NOW)
    assert second.operation.changes == ['remove retired worker: 10.0.0.10']
    assert update(second.cluster, TEMPLATE, {'control-plane-count': 1}, machines, now=NOW) is None


def test_retired_worker_kept_at_minimum_then_replaced_when_a_machine_appears():
    cstr = {'control-plane-count': 1, 'minimum-workers': 2}
    current = cluster(cp(0), w(9), w(7))
    assert update(current, TEMPLATE, cstr, pick(0, 7, 9), now=NOW) is None
    # a machine appears: increase worker comes before decrease worker (one healthy worker < 2) ...
    grown = update_with_reason(current, TEMPLATE, cstr, pick(0, 5, 7, 9), now=NOW)
    assert grown.operation.name == OP_INCREASE_WORKER and roles_of(grown.cluster) == expect([0], [9, 7, 5])
    # ... and the next update removes the retired worker
    shrunk = update_with_reason(grown.cluster, TEMPLATE, cstr, pick(0, 5, 7, 9), now=NOW)
    assert shrunk.operation.name == OP_DECREASE_WORKER and roles_of(shrunk.cluster) == expect([0], [7, 5])
    assert update(shrunk.cluster, TEMPLATE, cstr, pick(0, 5, 7, 9), now=NOW) is None


# ==== Generate ---------------------------------------------------------------------------------------
GENERATE_TEMPLATE = {
    'name': 'test', 'service_subnet': '10.0.0.0/14',
    'nodes': [{'user': 'cybozu', 'control_plane': True, 'labels': {'foo': 'bar'}, 'annotations': {'hoge': 'fuga'},
               'taints': [{'key': 'foo', 'effect': 'NoSchedule'}]},
              {'user': 'cybozu', 'control_plane': False, 'labels': {'foo': 'aaa'}, 'annotations': {'hoge': 'bbb'},
               'taints': [{'key': 'foo', 'effect': 'NoExecute'}]}],
    'options': {'kubelet': {'cri_endpoint': '/var/run/k8s-containerd.sock'}},
}
GENERATE_MACHINES = [m(0, F250, 'HEALTHY', '10.0.0.1'), m(1, F250, 'RETIRED', '10.0.0.2'),
                     m(0, F250, 'UNHEALTHY', '10.0.0.3', 'ss'), m(1, F250, 'HEALTHY', '10.0.0.4', 'ss')]


def test_generate_with_no_machine_is_not_available():
    with pytest.raises(NotAvailable, match='no healthy machine is available'):
        generate(GENERATE_TEMPLATE, None, [], now=NOW)


def test_generate_default_constraints():
    result = generate(GENERATE_TEMPLATE, None, GENERATE_MACHINES, now=NOW)
    assert {k: v for k, v in result.items() if k != 'nodes'} == \
        {k: v for k, v in GENERATE_TEMPLATE.items() if k != 'nodes'}
    # CP: 10.0.0.1 and .4 tie (empty racks, +1 each): the lower address; the worker is the other healthy one
    assert [(n['address'], n['control_plane']) for n in result['nodes']] == [('10.0.0.1', True), ('10.0.0.4', False)]
    assert result['nodes'][0]['labels']['foo'] == 'bar' and result['nodes'][1]['labels']['foo'] == 'aaa'
    assert result['nodes'][1]['taints'] == [{'key': 'foo', 'effect': 'NoExecute'}]


def test_generate_uses_only_healthy_machines():
    with pytest.raises(NotAvailable):
        generate(GENERATE_TEMPLATE, {'control-plane-count': 1, 'minimum-workers': 2}, GENERATE_MACHINES, now=NOW)


def test_generate_minimum_workers_zero():
    result = generate(GENERATE_TEMPLATE, {'control-plane-count': 2, 'minimum-workers': 0}, GENERATE_MACHINES, now=NOW)
    assert roles_of(result) == expect([0, 3], [])


def test_generate_does_not_change_its_inputs():
    template, machines = copy.deepcopy(GENERATE_TEMPLATE), copy.deepcopy(GENERATE_MACHINES)
    result = generate(template, None, machines, now=NOW)
    assert template == GENERATE_TEMPLATE and machines == GENERATE_MACHINES
    result['nodes'][1]['taints'][0]['effect'] = 'NoSchedule'
    assert template == GENERATE_TEMPLATE


def test_machines_without_ipv4_are_ignored():
    machines = copy.deepcopy(GENERATE_MACHINES) + [{'spec': {'serial': 'no-ip', 'rack': 9, 'role': 'cs'},
                                                    'status': {'state': 'HEALTHY'}}]
    assert roles_of(generate(GENERATE_TEMPLATE, None, machines, now=NOW)) == expect([0], [3])


# --- weights (seed 000 "Roles and weights") ---------------------------------------------------------------
SEED_WEIGHTED = {
    'name': 'cluster', 'service_subnet': '10.68.0.0/16',
    'nodes': [
        {'user': 'cybozu', 'control_plane': True, 'labels': {ROLE: 'compute'}},
        {'user': 'cybozu', 'labels': {ROLE: 'compute', WEIGHT: '6.0'}},
        {'user': 'cybozu', 'labels': {ROLE: 'storage', WEIGHT: '3.0'},
         'taints': [{'key': ROLE, 'value': 'storage', 'effect': 'NoExecute'}]},
        {'user': 'cybozu', 'labels': {ROLE: 'gpu', WEIGHT: '1.0'},
         'taints': [{'key': ROLE, 'value': 'gpu', 'effect': 'PreferNoSchedule'}]},
    ],
}


def datacenter(spec: Dict[str, int], racks: int = 4, retire: str = F250) -> List[dict]:
    """`spec` = role -> machines, dealt round-robin over `racks` racks, addresses 10.<role>.<rack>.<n>."""
    machines = []
    for role_index, (role, count) in enumerate(spec.items()):
        for n in range(count):
            machines.append(m(n % racks, retire, 'HEALTHY', '10.%d.%d.%d' % (role_index, n % racks, n // racks + 1),
                              role))
    return machines


def worker_roles(result: dict) -> Counter:
    return Counter(n['labels'][ROLE] for n in result['nodes'] if not n['control_plane'])


@pytest.mark.parametrize('minimum, expected', [
    (10, {'compute': 6, 'storage': 3, 'gpu': 1}),
    (20, {'compute': 12, 'storage': 6, 'gpu': 2}),
    (1, {'compute': 1}),
    (2, {'compute': 1, 'storage': 1}),
    (3, {'compute': 1, 'storage': 1, 'gpu': 1}),
    (5, {'compute': 3, 'storage': 1, 'gpu': 1}),
])
def test_seed_6_3_1_weights(minimum, expected):
    machines = datacenter({'compute': 20, 'storage': 10, 'gpu': 5})
    result = generate(SEED_WEIGHTED, {'control-plane-count': 3, 'minimum-workers': minimum}, machines, now=NOW)
    assert worker_roles(result) == expected
    assert {n['labels'][ROLE] for n in result['nodes'] if n['control_plane']} == {'compute'}
    storage = [n for n in result['nodes'] if n['labels'][ROLE] == 'storage']
    assert all(n['taints'] == [{'key': ROLE, 'value': 'storage', 'effect': 'NoExecute'}] for n in storage)
    assert all(n['labels'][WEIGHT] == '3.0' for n in storage)


@pytest.mark.parametrize('name, cp_labels, workers, constraints, expected_cp, expected_workers', [
    # one machine per role except rack 3's "new" role with the longest life
    ('blank', {}, [{}], None, '10.0.0.7', {'cs': 1}),
    ('control plane role', {ROLE: 'cs'}, [{}], None, '10.0.0.1', {'new': 1}),
    ('worker role', {}, [{ROLE: 'ss'}], None, '10.0.0.7', {'ss': 1}),
    ('weight 3:1 for 2', {}, [{ROLE: 'cs', WEIGHT: '3'}, {ROLE: 'ss'}], {'minimum-workers': 2}, '10.0.0.7',
     {'cs': 1, 'ss': 1}),
    ('weight 3:1 for 4', {}, [{ROLE: 'cs', WEIGHT: '3'}, {ROLE: 'ss'}], {'minimum-workers': 4}, '10.0.0.7',
     {'cs': 3, 'ss': 1}),
    ('fraction weights', {}, [{ROLE: 'cs', WEIGHT: '0.1'}, {ROLE: 'ss', WEIGHT: '0.3'}], {'minimum-workers': 4},
     '10.0.0.7', {'cs': 1, 'ss': 3}),
    ('ties go to the first template', {}, [{ROLE: 'ss'}, {ROLE: 'cs'}], {'minimum-workers': 1}, '10.0.0.7',
     {'ss': 1}),
])
def test_weighted_generation(name, cp_labels, workers, constraints, expected_cp, expected_workers):
    machines = [m(0, F500, 'HEALTHY', '10.0.0.1', 'cs'), m(0, F250, 'HEALTHY', '10.0.0.2', 'ss'),
                m(1, F250, 'HEALTHY', '10.0.0.3', 'cs'), m(1, F250, 'HEALTHY', '10.0.0.4', 'ss'),
                m(2, F250, 'HEALTHY', '10.0.0.5', 'cs'), m(2, F250, 'HEALTHY', '10.0.0.6', 'ss'),
                m(3, F1000, 'HEALTHY', '10.0.0.7', 'new')]
    nodes = [dict({'user': 'cybozu'}, labels=labels) for labels in workers]
    template = {'name': 'test', 'service_subnet': '10.68.0.0/16',
                'nodes': nodes + [{'user': 'cybozu', 'control_plane': True, 'labels': cp_labels}]}
    cstr = dict({'control-plane-count': 1}, **(constraints or {}))
    result = generate(template, cstr, machines, now=NOW)
    assert [n['address'] for n in result['nodes'] if n['control_plane']] == [expected_cp]
    assert worker_roles(result) == expected_workers


# --- CKE PR #784: templates whose role has no sabakan machine are skipped -----------------------------------
TWO_ROLES = {'name': 'c', 'service_subnet': '10.68.0.0/16',
             'nodes': [{'user': 'u', 'control_plane': True, 'labels': {ROLE: 'cs'}},
                       {'user': 'u', 'labels': {ROLE: 'cs'}}, {'user': 'u', 'labels': {ROLE: 'gpu'}}]}


def test_role_without_any_machine_is_skipped():
    result = generate(TWO_ROLES, {'control-plane-count': 1, 'minimum-workers': 4}, datacenter({'cs': 6}), now=NOW)
    assert worker_roles(result) == {'cs': 4}


def test_role_without_any_machine_does_not_block_increase_worker():
    machines = datacenter({'cs': 6})
    first = generate(TWO_ROLES, {'control-plane-count': 1, 'minimum-workers': 2}, machines, now=NOW)
    more = update_with_reason(first, TWO_ROLES, {'control-plane-count': 1, 'minimum-workers': 5}, machines, now=NOW)
    assert more.operation.name == OP_INCREASE_WORKER and worker_roles(more.cluster) == {'cs': 5}


def test_role_with_only_unhealthy_machines_is_not_skipped():
    machines = datacenter({'cs': 6}) + [m(0, F250, 'UNHEALTHY', '10.9.0.1', 'gpu')]
    with pytest.raises(NotAvailable):
        generate(TWO_ROLES, {'control-plane-count': 1, 'minimum-workers': 2}, machines, now=NOW)


# --- rack spreading ---------------------------------------------------------------------------------------
SPREAD = {'name': 'test', 'service_subnet': '10.0.0.0/14',
          'nodes': [{'user': 'cybozu', 'control_plane': True, 'labels': {ROLE: 'cs'}},
                    {'user': 'cybozu', 'labels': {ROLE: 'cs'}}, {'user': 'cybozu', 'labels': {ROLE: 'ss'}}]}


def make_rack(rack: int, kind: str, state: str = 'HEALTHY') -> List[dict]:
    """CKE's rack types: standard = 18 cs + 10 ss, storage = 19 ss; all retire today (no lifetime score)."""
    cs, ss = (18, 10) if kind == 'standard' else (0, 19)
    today = at(0)
    return ([m(rack, today, state, '10.0.%d.%d' % (rack, i + 1), 'cs') for i in range(cs)]
            + [m(rack, today, state, '10.0.%d.%d' % (rack, i + 1), 'ss') for i in range(cs, cs + ss)])


def by_rack(result: dict, control_plane: bool = False) -> Dict[str, Dict[str, int]]:
    count: Dict[str, Counter] = {}
    for n in result['nodes']:
        if n['control_plane'] == control_plane:
            count.setdefault(n['labels']['cke.cybozu.com/rack'], Counter())[n['labels'][ROLE]] += 1
    return {rack: dict(roles) for rack, roles in count.items()}


def test_control_planes_spread_over_racks():
    machines = make_rack(0, 'standard') + make_rack(1, 'standard') + make_rack(2, 'standard')
    result = generate(SPREAD, {'control-plane-count': 3, 'minimum-workers': 0}, machines, now=NOW)
    assert by_rack(result, control_plane=True) == {'0': {'cs': 1}, '1': {'cs': 1}, '2': {'cs': 1}}
    # all scores equal within a rack: the lowest address of each rack
    assert [n['address'] for n in result['nodes']] == ['10.0.0.1', '10.0.1.1', '10.0.2.1']


def test_five_control_planes_over_three_racks():
    machines = make_rack(0, 'standard') + make_rack(1, 'standard') + make_rack(2, 'standard')
    result = generate(SPREAD, {'control-plane-count': 5, 'minimum-workers': 0}, machines, now=NOW)
    assert sorted(Counter(n['labels']['cke.cybozu.com/rack'] for n in result['nodes']).values()) == [1, 2, 2]


def test_workers_of_each_role_spread_over_racks():
    machines = make_rack(0, 'standard') + make_rack(1, 'standard') + make_rack(2, 'standard')
    result = generate(SPREAD, {'control-plane-count': 3, 'minimum-workers': 54}, machines, now=NOW)
    assert by_rack(result) == {'0': {'cs': 9, 'ss': 9}, '1': {'cs': 9, 'ss': 9}, '2': {'cs': 9, 'ss': 9}}


def test_spreading_with_a_storage_rack():
    machines = make_rack(0, 'standard') + make_rack(1, 'standard') + make_rack(2, 'standard') + make_rack(3, 'storage')
    result = generate(SPREAD, {'control-plane-count': 3, 'minimum-workers': 40}, machines, now=NOW)
    assert by_rack(result) == {'0': {'cs': 7, 'ss': 5}, '1': {'cs': 7, 'ss': 5}, '2': {'cs': 6, 'ss': 5},
                               '3': {'ss': 5}}


def test_an_unhealthy_rack_gets_nothing():
    machines = make_rack(0, 'standard', 'UNHEALTHY') + make_rack(1, 'standard') + make_rack(2, 'standard') \
        + make_rack(3, 'standard')
    result = generate(SPREAD, {'control-plane-count': 3, 'minimum-workers': 30}, machines, now=NOW)
    assert '0' not in by_rack(result) and '0' not in by_rack(result, control_plane=True)
    assert by_rack(result) == {'1': {'cs': 5, 'ss': 5}, '2': {'cs': 5, 'ss': 5}, '3': {'cs': 5, 'ss': 5}}


def test_a_vanished_rack_is_refilled_evenly():
    machines = [mm for rack in range(4) for mm in make_rack(rack, 'standard')]
    first = generate(SPREAD, {'control-plane-count': 3, 'minimum-workers': 24}, machines, now=NOW)
    assert by_rack(first, control_plane=True) == {'0': {'cs': 1}, '1': {'cs': 1}, '2': {'cs': 1}}
    outcome = update_with_reason(first, SPREAD, {'control-plane-count': 3, 'minimum-workers': 24}, machines[28:],
                                 now=NOW)
    assert outcome.operation.name == OP_REMOVE_NON_EXISTENT
    assert by_rack(outcome.cluster, control_plane=True) == {'1': {'cs': 1}, '2': {'cs': 1}, '3': {'cs': 1}}
    assert by_rack(outcome.cluster) == {'1': {'cs': 4, 'ss': 4}, '2': {'cs': 4, 'ss': 4}, '3': {'cs': 4, 'ss': 4}}


def test_worker_template_without_role_counts_all_workers_of_the_rack():
    template = {'name': 'c', 'service_subnet': '10.68.0.0/16',
                'nodes': [{'user': 'u', 'control_plane': True}, {'user': 'u'}]}
    machines = [m(0, F250, 'HEALTHY', '10.0.0.%d' % i, 'cs') for i in range(1, 4)] + \
               [m(0, F250, 'HEALTHY', '10.0.0.%d' % i, 'ss') for i in range(4, 7)] + \
               [m(1, F250, 'HEALTHY', '10.0.1.%d' % i, 'ss') for i in range(1, 4)]
    result = generate(template, {'control-plane-count': 1, 'minimum-workers': 4}, machines, now=NOW)
    assert Counter(n['labels']['cke.cybozu.com/rack'] for n in result['nodes'] if not n['control_plane']) == \
        {'0': 2, '1': 2}


# --- lifetime preference -------------------------------------------------------------------------------
def test_longer_life_wins_within_the_rack_spread():
    machines = [m(0, at(-300), 'HEALTHY', '10.0.0.1'), m(0, at(0), 'HEALTHY', '10.0.0.2'),
                m(0, F500, 'HEALTHY', '10.0.0.3'), m(0, F1000, 'HEALTHY', '10.0.0.4'),
                m(0, F250, 'HEALTHY', '10.0.0.5')]
    result = generate(TEMPLATE, {'control-plane-count': 1, 'minimum-workers': 3}, machines, now=NOW)
    assert [n['address'] for n in result['nodes']] == ['10.0.0.4', '10.0.0.3', '10.0.0.5', '10.0.0.2']


def test_emptier_rack_beats_longer_life():
    machines = [m(0, F1000, 'HEALTHY', '10.0.0.1'), m(0, F1000, 'HEALTHY', '10.0.0.2'),
                m(1, at(-2000), 'HEALTHY', '10.0.1.1')]
    result = generate(TEMPLATE, {'control-plane-count': 2, 'minimum-workers': 0}, machines, now=NOW)
    assert roles_of(result) == ({'10.0.0.1', '10.0.1.1'}, set())


# --- determinism: the same input gives the same cluster; ties go to the lowest address ----------------------
def test_tie_break_by_lowest_address_numerically():
    machines = [m(i, F250, 'HEALTHY', ip) for i, ip in enumerate(['10.0.0.10', '10.0.0.9', '10.0.0.100'])]
    result = generate(TEMPLATE, {'control-plane-count': 1, 'minimum-workers': 2}, machines, now=NOW)
    assert [n['address'] for n in result['nodes']] == ['10.0.0.9', '10.0.0.10', '10.0.0.100']


def test_same_cluster_whatever_the_machine_order():
    machines = [mm for rack in range(3) for mm in make_rack(rack, 'standard')]
    cstr = {'control-plane-count': 3, 'minimum-workers': 20}
    expected = generate(SPREAD, cstr, machines, now=NOW)
    for seed in range(3):
        shuffled = list(machines)
        random.Random(seed).shuffle(shuffled)
        assert generate(SPREAD, cstr, shuffled, now=NOW) == expected


# ==== Regenerate ------------------------------------------------------------------------------------------
REGEN_MACHINES = [m(0, F250, 'HEALTHY', '10.0.0.1'), m(1, F250, 'RETIRED', '10.0.0.2'),
                  m(0, F250, 'UNHEALTHY', '10.0.0.3', 'ss'), m(1, F250, 'HEALTHY', '10.0.0.4', 'ss')]
NEW_TEMPLATE = {'name': 'new', 'service_subnet': '10.0.0.0/14',
                'nodes': [{'user': 'cybozu', 'control_plane': True, 'labels': {'generation': 'two'}},
                          {'user': 'admin', 'control_plane': False}]}


def test_regenerate_keeps_nodes_roles_and_order():
    current = cluster(cp(3), w(0), w(2))
    result = regenerate(current, NEW_TEMPLATE, None, REGEN_MACHINES, now=NOW,
                        node_taints={addr(3): [{'key': 'regenerate_does_not_care', 'effect': 'NoExecute'}]})
    assert {k: v for k, v in result.items() if k != 'nodes'} == {'name': 'new', 'service_subnet': '10.0.0.0/14'}
    assert [(n['address'], n['control_plane']) for n in result['nodes']] == \
        [('10.0.0.4', True), ('10.0.0.1', False), ('10.0.0.3', False)]
    assert result['nodes'][0]['labels']['generation'] == 'two' and result['nodes'][1]['user'] == 'admin'


def test_regenerate_missing_machine():
    with pytest.raises(MissingMachine, match='10.100.0.12'):
        regenerate(cluster(cp(3), w(0), w(GONE[0])), NEW_TEMPLATE, None, REGEN_MACHINES, now=NOW)


def test_regenerate_tops_up_to_the_constraints():
    result = regenerate(cluster(cp(3)), NEW_TEMPLATE, {'control-plane-count': 1, 'minimum-workers': 1},
                        REGEN_MACHINES, now=NOW)
    assert [(n['address'], n['control_plane']) for n in result['nodes']] == [('10.0.0.4', True), ('10.0.0.1', False)]


def test_regenerate_after_update_has_nothing_to_do():
    machines = [m(0, F250, 'HEALTHY', '10.0.0.1'), m(1, F250, 'RETIRED', '10.0.0.2'),
                m(0, F250, 'UNREACHABLE', '10.0.0.3'), m(1, F250, 'HEALTHY', '10.0.0.4')]
    current = cluster(cp(3), w(0))
    assert update(current, NEW_TEMPLATE, None, machines, now=NOW) is None
    result = regenerate(current, NEW_TEMPLATE, None, machines, now=NOW)
    assert [(n['address'], n['control_plane']) for n in result['nodes']] == [('10.0.0.4', True), ('10.0.0.1', False)]


# ==== errors: stable names, all GeneratorError ----------------------------------------------------------
@pytest.mark.parametrize('error', [NotAvailable, TooManyNonExistent, MissingMachine, TemplateError, MachineError])
def test_errors_are_generator_errors(error):
    assert issubclass(error, GeneratorError)


def test_errors_say_what_to_do():
    with pytest.raises(TooManyNonExistent) as err:
        update(cluster(cp(GONE[0]), cp(GONE[1]), cp(0)), TEMPLATE, {'control-plane-count': 3}, MACHINES, now=NOW)
    assert '2 of 3' in str(err.value) and 'etcd quorum' in str(err.value)
    with pytest.raises(NotAvailable) as err:
        generate(TEMPLATE, {'control-plane-count': 3}, pick(0), now=NOW)
    assert 'control-plane-count' in str(err.value)


def test_bad_template_or_cluster():
    with pytest.raises(TemplateError, match='at least two nodes'):
        generate({'name': 'x', 'nodes': [{'user': 'u', 'control_plane': True}], 'service_subnet': '10.68.0.0/16'},
                 None, MACHINES, now=NOW)
    with pytest.raises(TemplateError, match=r'cluster.nodes\[1\]: every node needs an address'):
        update({'nodes': [cp(0), {'control_plane': False}]}, TEMPLATE, None, MACHINES, now=NOW)
    with pytest.raises(TemplateError, match='duplicate node address 10.0.0.1'):
        update({'nodes': [cp(0), w(0)]}, TEMPLATE, None, MACHINES, now=NOW)


def test_bad_sabakan_label_names_the_machine():
    machines = [m(0, F250, 'HEALTHY', '10.0.0.1'), m(1, F250, 'HEALTHY', '10.0.0.2')]
    machines[1]['spec']['labels'] = [{'name': 'product', 'value': 'has spaces'}]
    with pytest.raises(TemplateError, match=r'machine sn-10.0.0.2 \(10.0.0.2\).*sabakan.cke.cybozu.com/product'):
        generate(TEMPLATE, {'control-plane-count': 1, 'minimum-workers': 1}, machines, now=NOW)


def test_wrong_template_role_for_a_worker_is_a_template_error():
    template = {'name': 'c', 'service_subnet': '10.68.0.0/16',
                'nodes': [{'user': 'u', 'control_plane': True}, {'user': 'u', 'labels': {ROLE: 'cs'}},
                          {'user': 'u', 'labels': {ROLE: 'ss'}}]}
    current = cluster(cp(0), w('10.0.0.20'))
    machines = [m(0, F250, 'HEALTHY', '10.0.0.1'), m(1, F250, 'RETIRED', '10.0.0.20', 'gpu', duration=10)]
    with pytest.raises(TemplateError, match="no worker template has role 'gpu'"):
        regenerate(current, template, {'control-plane-count': 1, 'minimum-workers': 0}, machines, now=NOW)


def test_generator_checks_only_the_template_shape_it_relies_on():
    """Like CKE's NewGenerator, the generator trusts the caller for cluster.yml validation (users,
    service_subnet): modules validate templates when they load them. The shape rules still hold."""
    bare = {'name': 'bare', 'nodes': [{'control_plane': True}, {'control_plane': False}]}
    result = generate(bare, None, GENERATE_MACHINES, now=NOW)
    assert [n['control_plane'] for n in result['nodes']] == [True, False]
    with pytest.raises(TemplateError, match='only one control plane'):
        generate({'name': 'x', 'nodes': [{'control_plane': False}, {'control_plane': False}]}, None,
                 GENERATE_MACHINES, now=NOW)


def test_bad_sabakan_label_is_named_after_runs_over_good_machines():
    """The valid values a run remembers (so the next run checks its sources with set lookups) never hide a bad
    one: a label set, rack or address first seen later is still checked, and the first machine at fault named."""
    good = [m(0, F250, 'HEALTHY', '10.0.0.1'), m(1, F250, 'HEALTHY', '10.0.0.2')]
    constraints = {'control-plane-count': 1, 'minimum-workers': 1}
    first = generate(TEMPLATE, constraints, good, now=NOW)
    assert generate(TEMPLATE, constraints, copy.deepcopy(good), now=NOW) == first
    bad = copy.deepcopy(good)
    bad[1]['spec']['labels'] = [{'name': 'product', 'value': 'has spaces'}]
    with pytest.raises(TemplateError, match=r'machine sn-10.0.0.2 \(10.0.0.2\).*sabakan.cke.cybozu.com/product'):
        generate(TEMPLATE, constraints, bad, now=NOW)
    assert generate(TEMPLATE, constraints, good, now=NOW) == first
