# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""RepairEntry objects as seed 001's repair queue: names, translation both ways, and the limits."""

from __future__ import annotations

from typing import Any, Dict

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.repair_queue import (
    API_VERSION, entry_name, entry_object, entry_problem, plan_repair_entries, queue_entry,
)

NOW = '2026-01-01T00:00:00Z'


def failed(serial: str, address: str, state: str, duration: float = 60, bmc: str = 'IPMI-2.0') -> Dict[str, Any]:
    return {'spec': {'serial': serial, 'ipv4': [address], 'bmc': {'bmcType': bmc}},
            'status': {'state': state, 'duration': duration}}


def existing(address: str, status: str = 'queued', integration: str = 'infra/other') -> Dict[str, Any]:
    obj = entry_object({'address': address, 'machine_type': 'IPMI-2.0', 'operation': 'unhealthy'},
                       integration=integration)
    obj['status'] = {'status': status}
    return obj


@pytest.mark.parametrize('address, name', [
    ('10.0.0.1', 'repair-10-0-0-1'),
    ('192.168.100.254', 'repair-192-168-100-254'),
    ('fd00::1', 'repair-fd00-1'),
    ('FD00:0:0::A', 'repair-fd00-0-0-a'),
])
def test_entry_name_is_deterministic_and_valid(address, name):
    assert entry_name(address) == name


def test_entry_object_and_back():
    obj = entry_object({'address': '10.0.0.1', 'machine_type': 'IPMI-2.0', 'operation': 'unreachable'},
                       serial='abc', integration='infra/dc1')
    assert obj == {'apiVersion': API_VERSION, 'kind': 'RepairEntry', 'metadata': {'name': 'repair-10-0-0-1'},
                   'spec': {'address': '10.0.0.1', 'machineType': 'IPMI-2.0', 'operation': 'unreachable',
                            'serial': 'abc', 'integration': 'infra/dc1'}}
    assert queue_entry(obj) == {'address': '10.0.0.1', 'machine_type': 'IPMI-2.0', 'operation': 'unreachable',
                                'status': 'queued', 'name': 'repair-10-0-0-1'}
    assert queue_entry(dict(obj, status={'status': 'failed'}))['status'] == 'failed'


CLUSTER = {'nodes': [{'address': '10.0.0.1'}, {'address': '10.0.0.2'}, {'address': '10.0.0.3'}]}
CONSTRAINTS = {'maximum-repair-queue-entries': 3, 'wait-seconds-to-repair-rebooting': 300}


@pytest.mark.parametrize('machines, objects, created, blocked', [
    # within the limit: one entry per failed machine, named from its address
    ([failed('a', '10.0.0.1', 'UNHEALTHY'), failed('b', '10.0.0.2', 'UNREACHABLE')], [],
     ['repair-10-0-0-1', 'repair-10-0-0-2'], False),
    # exactly at the limit (3)
    ([failed('a', '10.0.0.1', 'UNHEALTHY'), failed('b', '10.0.0.2', 'UNHEALTHY'), failed('c', '10.0.0.3', 'UNHEALTHY')],
     [], ['repair-10-0-0-1', 'repair-10-0-0-2', 'repair-10-0-0-3'], False),
    # a storm: 4 new > 3, nothing at all
    ([failed(s, '10.0.0.%d' % i, 'UNHEALTHY') for i, s in enumerate('abcd', 1)], [], [], True),
    # entries of other integrations count: 2 existing + 2 new > 3
    ([failed('a', '10.0.0.1', 'UNHEALTHY'), failed('b', '10.0.0.2', 'UNHEALTHY')],
     [existing('10.9.0.1'), existing('10.9.0.2', 'succeeded')], [], True),
    # a machine with an entry (finished or not) gets none: 1 existing + 1 new = 2
    ([failed('a', '10.0.0.1', 'UNHEALTHY'), failed('b', '10.0.0.2', 'UNHEALTHY')],
     [existing('10.0.0.1', 'failed')], ['repair-10-0-0-2'], False),
    # an UNREACHABLE machine outside the cluster waits wait-seconds-to-repair-rebooting
    ([failed('z', '10.5.0.1', 'UNREACHABLE', duration=30)], [], [], False),
    ([failed('z', '10.5.0.1', 'UNREACHABLE', duration=301)], [], ['repair-10-5-0-1'], False),
])
def test_plan_repair_entries(machines, objects, created, blocked):
    plan = plan_repair_entries(machines, objects, CLUSTER, CONSTRAINTS, now=NOW, integration='infra/dc1')
    assert [o['metadata']['name'] for o in plan.objects] == created
    assert plan.existing == len(objects)
    assert bool(plan.blocked) == blocked
    if blocked:
        assert 'maximum-repair-queue-entries=3' in plan.blocked
        assert plan.objects == []


def test_new_objects_carry_serial_type_operation_and_integration():
    plan = plan_repair_entries([failed('abc', '10.0.0.2', 'UNREACHABLE', bmc='iDRAC-9')], [], CLUSTER, CONSTRAINTS,
                               now=NOW, integration='infra/dc1')
    assert plan.objects[0]['spec'] == {'address': '10.0.0.2', 'machineType': 'iDRAC-9', 'operation': 'unreachable',
                                       'serial': 'abc', 'integration': 'infra/dc1'}


def test_zero_limit_means_no_automatic_repair():
    plan = plan_repair_entries([failed('a', '10.0.0.1', 'UNHEALTHY')], [], CLUSTER, {}, now=NOW)
    assert plan.objects == [] and 'maximum-repair-queue-entries=0' in plan.blocked


# --- a RepairEntry that is not what the CRD describes (made by hand): named, never acted on ----------------
GOOD_ENTRY = {'metadata': {'name': 'repair-10-0-0-1'}, 'spec': {'address': '10.0.0.1', 'operation': 'unhealthy'},
              'status': {'status': 'queued'}}


@pytest.mark.parametrize('spec, status, field, rule', [
    ({'address': 'rack3-n4', 'operation': 'unhealthy'}, None, 'spec.address', 'ip-address'),
    ({'address': '10.0.0.1\n', 'operation': 'unhealthy'}, None, 'spec.address', 'one-line'),
    ({'address': '10.0.0.1', 'operation': 'reboot-please'}, None, 'spec.operation', 'choice'),
    ({'address': '10.0.0.1', 'operation': 'UNHEALTHY'}, None, 'spec.operation', 'choice'),
    ({'address': '10.0.0.1', 'operation': 'unhealthy', 'serial': ['x']}, None, 'spec.serial', 'string'),
    ({'address': '10.0.0.1', 'operation': 'unhealthy'}, 'done', 'status.status', 'choice'),
    ('10.0.0.1', None, 'spec', 'object'),
])
def test_entry_problem_names_field_value_and_rule(spec, status, field, rule):
    obj = {'metadata': {'name': 'x'}, 'spec': spec, 'status': {'status': status} if status else {}}
    problem = entry_problem(obj)
    assert (problem.field, problem.rule) == (field, rule), problem
    assert problem.explained().endswith('(rule: %s)' % rule)


def test_good_entries_have_no_problem_and_every_entry_counts():
    assert entry_problem(GOOD_ENTRY) is None
    assert entry_problem(entry_object({'address': 'fd00::1', 'machine_type': 'IPMI-2.0', 'operation': 'unreachable'},
                                      serial='s1', integration='ns/dc1')) is None
    bad = {'metadata': {'name': 'by-hand'}, 'spec': {'address': 'rack3-n4', 'operation': 'unhealthy'}}
    plan = plan_repair_entries([], [GOOD_ENTRY, bad], None, {})
    assert plan.existing == 2   # the wrong entry still counts toward maximum-repair-queue-entries
