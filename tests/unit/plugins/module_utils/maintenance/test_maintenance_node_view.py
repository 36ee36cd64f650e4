# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The read side of node_maintenance_info (maintenance/node_view.py): pending literals of check chains,
the waiting_for lines and the data annotation view."""

from __future__ import annotations

import json

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.chain import parse_check_chain
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config import load_config
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.environment import Environment
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.node_view import (
    literals, node_view, pending_checks, waiting_line)

from support.maintenance import APPROVED, FLATCAR, REBOOT_NEEDED, T0, make_node

PROFILE = 'cloud.sap/maintenance-profile'
STATE = 'cloud.sap/maintenance-state'
DATA = 'cloud.sap/maintenance-data'


def data_of(**states):
    return json.dumps({'Profiles': {name: {'Transition': '2025-12-31T12:00:00Z', 'Current': state, 'Previous': state}
                                    for name, state in states.items()}, 'Notifications': {}})


def checks(**passed):
    return {name: {'type': 'hasLabel', 'passed': value, 'info': {}} for name, value in passed.items()}


@pytest.mark.parametrize('chain, wanted', [
    ('a', {'a': {True}}),
    ('!a', {'a': {False}}),
    ('a && !(b || c)', {'a': {True}, 'b': {False}, 'c': {False}}),
    ('!!a', {'a': {True}}),
    ('a && !a', {'a': {True, False}}),
    ('(a || b) && !c', {'a': {True}, 'b': {True}, 'c': {False}}),
], ids=['name', 'not', 'precedence', 'double-not', 'both-polarities', 'or-and'])
def test_literals(chain, wanted):
    assert literals(parse_check_chain(chain)) == wanted


@pytest.mark.parametrize('chain, results, pending', [
    ('a', dict(a=False), ['a']),
    ('a', dict(a=True), []),
    ('!a', dict(a=True), ['!a']),
    ('!a', dict(a=False), []),
    ('a && !(b || c)', dict(a=False, b=True, c=False), ['a', '!b']),
    ('a || b', dict(a=False, b=False), ['a', 'b']),
    ('a && !a', dict(a=True), ['!a']),
    ('', {}, []),
], ids=['missing', 'passes', 'negated-passes', 'negated-fails', 'mixed', 'or-lists-both', 'contradiction', 'empty'])
def test_pending_checks(chain, results, pending):
    assert pending_checks(parse_check_chain(chain), checks(**results)) == pending


def test_an_errored_check_is_pending_either_way():
    errored = {'a': {'type': 'condition', 'passed': False, 'info': {}, 'error': 'boom'}}
    assert pending_checks(parse_check_chain('!a'), errored) == ['!a']


def flatcar_node(state, annotations=None, profile='flatcar'):
    labels = {PROFILE: profile, STATE: state}
    return make_node('w1', labels, dict({DATA: data_of(flatcar=state)}, **(annotations or {})))


def test_view_of_a_node_waiting_for_approval():
    view = node_view(flatcar_node('maintenance-required', {REBOOT_NEEDED: 'true'}), load_config(FLATCAR), T0, Environment())
    assert view['name'] == 'w1' and view['state'] == 'maintenance-required' and view['profile_names'] == ['flatcar']
    [profile] = view['profiles']
    assert profile['state'] == 'maintenance-required' and profile['next'] is None
    [transition] = profile['transitions']
    assert transition['pending'] == ['check_approval'] and transition['next'] == 'in-maintenance'
    assert view['waiting_for'] == ['profile flatcar is maintenance-required; to in-maintenance: waiting for check_approval '
                                   '(hasAnnotation: cloud.sap/maintenance-approved is not set)']
    assert view['data']['profiles']['flatcar'] == {'current': 'maintenance-required', 'previous': 'maintenance-required',
                                                   'transition': '2025-12-31T12:00:00Z'}
    assert view['data']['version'] == 2 and view['error'] == '' and view['computed_state'] == 'maintenance-required'


def test_view_of_a_node_in_maintenance_waits_for_the_negated_check():
    view = node_view(flatcar_node('in-maintenance', {REBOOT_NEEDED: 'true'}), load_config(FLATCAR), T0, Environment())
    assert view['profiles'][0]['transitions'][0]['pending'] == ['!reboot_needed']
    assert view['waiting_for'] == ['profile flatcar is in-maintenance; to operational: waiting for !reboot_needed '
                                   '(hasAnnotation: passes)']


def test_view_of_a_node_that_moves_next():
    view = node_view(flatcar_node('maintenance-required', {APPROVED: 'true'}), load_config(FLATCAR), T0, Environment())
    assert view['profiles'][0]['next'] == 'in-maintenance'
    assert view['profiles'][0]['transitions'][0]['pending'] == []
    assert view['waiting_for'] == ['profile flatcar is maintenance-required; moves to in-maintenance at the next reconcile']


def test_view_without_config_reports_the_data():
    view = node_view(flatcar_node('in-maintenance'), None, T0)
    assert [(p['name'], p['state'], p['transitions']) for p in view['profiles']] == [('flatcar', 'in-maintenance', [])]
    assert view['waiting_for'] == [] and view['computed_state'] == ''


def test_view_of_unknown_profiles_and_no_profile():
    view = node_view(flatcar_node('operational', profile='flatcar--nosuch'), load_config(FLATCAR), T0)
    assert view['unknown_profiles'] == ['nosuch']
    assert view['waiting_for'][-1] == 'profile nosuch is not defined in the config: the controller ignores it'
    bare = node_view(make_node('w2'), load_config(FLATCAR), T0)
    assert bare['profile_names'] == ['default'] and bare['data'] is None and bare['state'] == ''
    assert bare['waiting_for'] == ['profile default is operational; this state has no transitions']


def test_view_of_an_unreadable_data_annotation():
    node = make_node('w3', {PROFILE: 'flatcar', STATE: 'in-maintenance'}, {DATA: '{not json'})
    view = node_view(node, load_config(FLATCAR), T0)
    assert view['data'] is None and view['profiles'] == [] and 'is not JSON' in view['data_error']
    assert view['error'] == view['data_error']


def test_waiting_line_for_blocked_and_errored_transitions():
    profile = {'name': 'p', 'state': 'maintenance-required', 'next': None, 'transitions': [
        {'next': 'in-maintenance', 'check': 'a', 'passed': False, 'blocked': 'another profile of this node is in-maintenance',
         'checks': {}, 'pending': []},
        {'next': 'operational', 'check': 'b', 'passed': False, 'error': 'check b (condition) failed: boom', 'checks': {},
         'pending': ['b']},
        {'next': 'operational', 'check': 'm', 'passed': False, 'pending': ['m'],
         'checks': {'m': {'type': 'maxMaintenance', 'passed': False, 'info': {'max': 1, 'maintained': 1}}}}]}
    assert waiting_line(profile) == (
        'profile p is maintenance-required; to in-maintenance: blocked, another profile of this node is in-maintenance; '
        'to operational: check b (condition) failed: boom; to operational: waiting for m (maxMaintenance: maintained=1, max=1)')
