# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sabakan-triggered repair (seed 001): which failed machines get a repair queue entry, and when none do."""

from __future__ import annotations

from typing import Optional

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import MachineError
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.repair import decide_repairs, plan_repairs

NOW = '2024-05-01T00:00:00Z'
CONSTRAINTS = {'maximum-repair-queue-entries': 3, 'wait-seconds-to-repair-rebooting': 300}


def failed(serial: str, address: Optional[str], state: str, duration: float, bmc: str = None) -> dict:
    """A failed machine as CKE's repairer tests have them: serial, ipv4, bmc type and status only."""
    spec = {'serial': serial}
    if address:
        spec['ipv4'] = [address]
    if bmc:
        spec['bmc'] = {'bmcType': bmc}
    return {'spec': spec, 'status': {'state': state, 'duration': duration}}


MACHINES = [
    failed('0000', None, 'UNHEALTHY', 30),                      # [0] no IPv4 address
    failed('1111', '1.1.1.1', 'UNREACHABLE', 30, 'type1'),      # [1] unreachable for 30 s
    failed('2222', '2.2.2.2', 'UNHEALTHY', 30, 'type2'),        # [2] unhealthy
    failed('3333', '3.3.3.3', 'UNREACHABLE', 3000, 'type3'),    # [3] unreachable for long (stale)
    failed('4444', '4.4.4.4', 'UNREACHABLE', 30, 'type4'),      # [4] unreachable for 30 s
]


def entry(operation: str, machine_type: str, address: str) -> dict:
    return {'address': address, 'machine_type': machine_type, 'operation': operation}


ENTRIES = [
    None,
    entry('unreachable', 'type1', '1.1.1.1'),
    entry('unhealthy', 'type2', '2.2.2.2'),
    entry('unreachable', 'type3', '3.3.3.3'),
    entry('unreachable', 'type4', '4.4.4.4'),
]

REBOOTS = [
    None,
    {'node': '1.1.1.1', 'status': 'rebooting'},
    {'node': '2.2.2.2', 'status': 'rebooting'},
    {'node': '3.3.3.3', 'status': 'rebooting'},
    {'node': '4.4.4.4', 'status': 'draining'},
]

IN_CLUSTER = {'nodes': [{'address': a} for a in ('1.1.1.1', '2.2.2.2', '3.3.3.3', '4.4.4.4')]}


@pytest.mark.parametrize('name, machines, queued, reboots, cluster, expected', [
    ('no failed machine', [], [ENTRIES[2]], None, IN_CLUSTER, []),
    ('one failed machine', [MACHINES[1]], [ENTRIES[2]], None, IN_CLUSTER, [ENTRIES[1]]),
    ('no IPv4 address is ignored', [MACHINES[0], MACHINES[1]], [ENTRIES[2]], None, IN_CLUSTER, [ENTRIES[1]]),
    ('recently repaired is ignored', MACHINES[1:4], [ENTRIES[2]], None, IN_CLUSTER, [ENTRIES[1], ENTRIES[3]]),
    ('recently repaired with another operation is ignored', MACHINES[1:4],
     [entry('unreachable', 'type2', '2.2.2.2')], None, IN_CLUSTER, [ENTRIES[1], ENTRIES[3]]),
    ('recent entry of another machine type still counts', MACHINES[1:4],
     [entry('unhealthy', 'other', '2.2.2.2')], None, IN_CLUSTER, [ENTRIES[1], ENTRIES[3]]),
    ('too many: existing plus new over the limit', MACHINES[1:4], [ENTRIES[2], ENTRIES[4]], None, IN_CLUSTER, []),
    ('exactly the limit is fine', MACHINES[1:3], [ENTRIES[4]], None, IN_CLUSTER, [ENTRIES[1], ENTRIES[2]]),
    ('one over the limit queues nothing', MACHINES[1:4], [ENTRIES[4]], None, IN_CLUSTER, []),
    ('new failures alone over the limit', MACHINES[1:5], [], None, IN_CLUSTER, []),
    ('rebooting unreachable waits', [MACHINES[1]], [], [REBOOTS[1]], IN_CLUSTER, []),
    ('rebooting but unhealthy does not wait', [MACHINES[2]], [], [REBOOTS[2]], IN_CLUSTER, [ENTRIES[2]]),
    ('rebooting but stale is repaired', [MACHINES[3]], [], [REBOOTS[3]], IN_CLUSTER, [ENTRIES[3]]),
    ('queued for reboot but not rebooting', [MACHINES[4]], [], [REBOOTS[4]], IN_CLUSTER, [ENTRIES[4]]),
    ('out of cluster unreachable waits', [MACHINES[1]], [], [REBOOTS[1]], None, []),
    ('out of cluster unreachable waits without reboot', [MACHINES[4]], [], None, {'nodes': []}, []),
    ('out of cluster but unhealthy does not wait', [MACHINES[2]], [], [REBOOTS[2]], None, [ENTRIES[2]]),
    ('out of cluster but stale is repaired', [MACHINES[3]], [], [REBOOTS[3]], None, [ENTRIES[3]]),
    ('skipped machines do not count toward the limit', MACHINES, [ENTRIES[2]], [REBOOTS[1]], IN_CLUSTER,
     [ENTRIES[3], ENTRIES[4]]),
])
def test_repairer(name, machines, queued, reboots, cluster, expected):
    assert plan_repairs(machines, queued, reboots, cluster, CONSTRAINTS, now=NOW) == expected


@pytest.mark.parametrize('cluster', [
    IN_CLUSTER,
    {'1.1.1.1': None, '4.4.4.4': None},                 # CKE's node statuses, keyed by address
    ['1.1.1.1', '4.4.4.4'],                             # plain addresses
    [{'address': '1.1.1.1'}, {'address': '4.4.4.4'}],   # node list
], ids=['cluster', 'node-statuses', 'addresses', 'nodes'])
def test_cluster_membership_in_any_shape(cluster):
    assert plan_repairs([MACHINES[4]], [], None, cluster, CONSTRAINTS, now=NOW) == [ENTRIES[4]]
    assert plan_repairs([MACHINES[4]], [], None, None, CONSTRAINTS, now=NOW) == []


@pytest.mark.parametrize('duration, wanted', [(299.9, False), (300, True), (301, True)])
def test_wait_boundary_is_duration_below_the_wait(duration, wanted):
    machine = failed('5555', '5.5.5.5', 'UNREACHABLE', duration, 't')
    assert bool(plan_repairs([machine], [], None, None, CONSTRAINTS, now=NOW)) is wanted


def test_no_wait_by_default():
    machine = failed('5555', '5.5.5.5', 'UNREACHABLE', 1, 't')
    assert plan_repairs([machine], [], None, None, {'maximum-repair-queue-entries': 1}, now=NOW) \
        == [entry('unreachable', 't', '5.5.5.5')]


def test_default_limit_zero_queues_nothing():
    assert plan_repairs([MACHINES[2]], [], None, IN_CLUSTER, None, now=NOW) == []


def test_finished_entries_count_as_recent_and_toward_the_limit():
    finished = dict(entry('unhealthy', 'type9', '9.9.9.9'), status='succeeded')
    assert plan_repairs(MACHINES[2:4], [finished, finished], None, IN_CLUSTER, CONSTRAINTS, now=NOW) == []
    assert plan_repairs(MACHINES[2:4], [finished], None, IN_CLUSTER, CONSTRAINTS, now=NOW) == [ENTRIES[2], ENTRIES[3]]


# --- entry fields: address = ipv4[0], machine_type = bmc.bmcType, operation = state lowercased --------
def test_entry_fields():
    machine = {'spec': {'serial': 's', 'ipv4': ['10.1.0.5', '10.1.0.6'], 'bmc': {'bmcType': 'iDRAC-9', 'ipv4': 'x'},
                        'rack': 1, 'role': 'cs'},
               'status': {'state': 'UNHEALTHY', 'timestamp': '2024-04-30T00:00:00Z'}}
    assert plan_repairs([machine], [], None, None, CONSTRAINTS, now=NOW) \
        == [{'address': '10.1.0.5', 'machine_type': 'iDRAC-9', 'operation': 'unhealthy'}]


def test_entries_keep_the_input_order():
    machines = [failed('b', '10.0.0.20', 'UNHEALTHY', 1, 't'), failed('a', '10.0.0.3', 'UNREACHABLE', 900, 't')]
    assert [e['address'] for e in plan_repairs(machines, [], None, None, CONSTRAINTS, now=NOW)] \
        == ['10.0.0.20', '10.0.0.3']


def test_duration_from_the_status_timestamp_when_absent():
    recent = {'spec': {'serial': 'r', 'ipv4': ['7.7.7.7']},
              'status': {'state': 'UNREACHABLE', 'timestamp': '2024-04-30T23:58:00Z'}}   # 120 s before NOW
    stale = {'spec': {'serial': 's', 'ipv4': ['8.8.8.8']},
             'status': {'state': 'UNREACHABLE', 'timestamp': '2024-04-30T23:50:00Z'}}    # 600 s before NOW
    assert [e['address'] for e in plan_repairs([recent, stale], [], None, None, CONSTRAINTS, now=NOW)] == ['8.8.8.8']


def test_decision_explains_what_was_skipped_and_why():
    decision = decide_repairs(MACHINES, [ENTRIES[2]], [REBOOTS[1]], IN_CLUSTER, CONSTRAINTS, now=NOW)
    reasons = {s['serial']: s['reason'] for s in decision.skipped}
    assert 'no IPv4' in reasons['0000']
    assert 'rebooting' in reasons['1111'] and 'wait-seconds-to-repair-rebooting=300' in reasons['1111']
    assert 'already exists' in reasons['2222']
    assert decision.blocked is None and [e['address'] for e in decision.entries] == ['3.3.3.3', '4.4.4.4']


def test_blocked_decision_names_the_limit_and_queues_nothing():
    decision = decide_repairs(MACHINES[1:4], [ENTRIES[2], ENTRIES[4]], None, IN_CLUSTER, CONSTRAINTS, now=NOW)
    assert decision.entries == []
    assert 'maximum-repair-queue-entries=3' in decision.blocked and '2 existing entries + 2 new failures' in decision.blocked


def test_malformed_machine_is_an_error_naming_it():
    with pytest.raises(MachineError, match=r'machines\[1\] 2222: status.state'):
        plan_repairs([MACHINES[1], {'spec': {'serial': '2222'}, 'status': {'state': 'BROKEN'}}], [], None, None,
                     CONSTRAINTS, now=NOW)
