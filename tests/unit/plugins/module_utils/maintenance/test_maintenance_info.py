# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The info view: per profile state, last transition and which checks of each transition pass, without side effects."""

from __future__ import annotations

import copy
import json

from ansible_collections.steward.cluster.plugins.module_utils.kube import drain as kube_drain
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config import load_config
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.environment import Environment
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.info import describe_node
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.leases import MemoryLeaseStore

from support.maintenance import APPROVED, FLATCAR, T0, FakeHttp, make_node

PROFILE = 'cloud.sap/maintenance-profile'
DATA = 'cloud.sap/maintenance-data'


def data_of(**states):
    return json.dumps({'Profiles': {name: {'Transition': '2025-12-31T12:00:00Z', 'Current': state, 'Previous': state}
                                    for name, state in states.items()}, 'Notifications': {}})


def test_flatcar_node_waiting_for_approval():
    node = make_node('w', {PROFILE: 'flatcar', 'cloud.sap/maintenance-state': 'maintenance-required'},
                     {DATA: data_of(flatcar='maintenance-required')})
    http = FakeHttp()
    info = describe_node(node, load_config(FLATCAR), T0, Environment(http=http))
    assert info['node'] == 'w' and info['state'] == 'maintenance-required' and info['error'] == ''
    [profile] = info['profiles']
    assert profile['name'] == 'flatcar' and profile['state'] == 'maintenance-required'
    assert profile['last_transition'] == '2025-12-31T12:00:00Z' and profile['next'] is None
    assert profile['transitions'] == [{
        'next': 'in-maintenance', 'check': 'check_approval', 'passed': False, 'trigger': ['remove_approval', 'reboot-ok'],
        'checks': {'check_approval': {'type': 'hasAnnotation', 'passed': False,
                                      'info': {'reason': 'cloud.sap/maintenance-approved is not set'}}}}]
    assert profile['notify'] == [{'instance': 'approval_required', 'type': 'slack', 'due': True}]   # never sent yet
    assert http.calls == []
    approved = copy.deepcopy(node)
    approved['metadata']['annotations'][APPROVED] = 'true'
    info = describe_node(approved, load_config(FLATCAR), T0, Environment(http=http))
    assert info['profiles'][0]['next'] == 'in-maintenance'
    assert 'reboot-ok' not in json.dumps(approved['metadata']['annotations'])     # triggers did not run


CONFIG = '''
intervals: {requeue: 1m}
instances:
  check:
  - {type: hasLabel, name: go, config: {key: go}}
  - {type: stagger, name: stagger, config: {duration: 1h, leaseName: s, leaseNamespace: ns}}
  trigger: [{type: drain, name: drain}]
profiles:
- name: a
  in-maintenance: {transitions: [{check: "!go", next: operational}]}
- name: b
  maintenance-required: {transitions: [{check: go && stagger, trigger: drain, next: in-maintenance}]}
'''


def must_not_run(*args, **kwargs):
    raise AssertionError('drain must not run in the info view')


def test_nothing_is_taken_or_run_and_exclusivity_is_shown(monkeypatch):
    monkeypatch.setattr(kube_drain, 'drain', must_not_run)
    leases = MemoryLeaseStore()
    node = make_node('w', {PROFILE: 'a--b--gone', 'go': 'y'}, {DATA: data_of(a='in-maintenance', b='maintenance-required')})
    info = describe_node(node, load_config(CONFIG), T0, Environment(leases=leases, kube='CLIENT'))
    assert info['unknown_profiles'] == ['gone'] and info['computed_state'] == 'in-maintenance'
    a, b = info['profiles']
    assert a['transitions'][0]['passed'] is False and a['next'] is None
    assert b['transitions'][0]['checks']['stagger'] == {'type': 'stagger', 'passed': True, 'info': {'lease': 's-0'}}
    assert b['transitions'][0]['blocked'] == 'another profile of this node is in-maintenance'
    assert b['next'] is None
    assert leases.leases == {}                     # the stagger lease was only read


def test_unreadable_data_is_reported():
    node = make_node('w', {PROFILE: 'flatcar'}, {DATA: 'garbage'})
    info = describe_node(node, load_config(FLATCAR), T0)
    assert info['profiles'] == [] and 'is not JSON' in info['error']


def test_new_profiles_show_as_operational_now():
    info = describe_node(make_node('w', {PROFILE: 'flatcar'}), load_config(FLATCAR), T0)
    assert info['profiles'][0]['state'] == 'operational' and info['profiles'][0]['last_transition'] == '2026-01-01T00:00:00Z'
