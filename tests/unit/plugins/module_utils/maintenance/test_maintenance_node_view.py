# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The read side of node_maintenance_info (maintenance/ansible_view.py): pending literals of check chains,
the waiting_for lines, the data annotation view, config sources and reading the config."""

from __future__ import annotations

import base64
import json

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.ansible_view import (
    ConfigSource, OptionError, config_text, literals, node_view, parse_config_source, pending_checks, read_config, unset_variables,
    waiting_line)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.chain import parse_check_chain
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config import load_config
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.environment import Environment
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import ConfigError

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


@pytest.mark.parametrize('text, source', [
    ('configmap/steward-system/maintenance', ConfigSource('configmap', 'steward-system', 'maintenance', 'maintenance.yaml')),
    ('secret/ns/mc/config.yaml', ConfigSource('secret', 'ns', 'mc', 'config.yaml')),
    ('ConfigMap/ns/mc', ConfigSource('configmap', 'ns', 'mc', 'maintenance.yaml')),
])
def test_parse_config_source(text, source):
    assert parse_config_source(text) == source


@pytest.mark.parametrize('text', ['configmap/ns', 'deployment/ns/x', 'configmap/ns//key', 'secret/a/b/c/d', ''])
def test_parse_config_source_errors(text):
    with pytest.raises(OptionError, match="^config_source: ('|expected)"):
        parse_config_source(text)


def test_config_text_from_configmap_and_secret():
    cm = parse_config_source('configmap/ns/mc')
    assert config_text({'data': {'maintenance.yaml': 'x: 1'}}, cm) == 'x: 1'
    assert config_text({'binaryData': {'maintenance.yaml': base64.b64encode(b'y: 2').decode()}}, cm) == 'y: 2'
    secret = parse_config_source('secret/ns/mc/m.yaml')
    assert config_text({'data': {'m.yaml': base64.b64encode('z: ü'.encode()).decode()}}, secret) == 'z: ü'
    with pytest.raises(OptionError, match=r'secret/ns/mc/m.yaml: Secret ns/mc has no key "m.yaml" \(keys: other\)'):
        config_text({'data': {'other': ''}}, secret)
    with pytest.raises(OptionError, match='not base64'):
        config_text({'data': {'m.yaml': '***'}}, secret)


def test_read_config_sources(tmp_path):
    assert read_config(None, None, None, None) == (None, '')
    path = tmp_path / 'maintenance.yaml'
    path.write_text(FLATCAR)
    config, where = read_config(None, str(path), None, None)
    assert where == str(path) and 'flatcar' in config.profiles
    with pytest.raises(OptionError, match='config_file .*missing.yaml: cannot read it'):
        read_config(None, str(tmp_path / 'missing.yaml'), None, None)
    with pytest.raises(ConfigError, match=r'^config: intervals.requeue: required'):
        read_config({'profiles': []}, None, None, None)

    class Client:
        def get(self, path):
            assert path == '/api/v1/namespaces/steward-system/configmaps/maintenance'
            return {'data': {'maintenance.yaml': 'intervals: {requeue: 1s}\nprofiles: [{name: p, operational: {transitions: '
                                                 '[{check: nope, next: in-maintenance}]}}]'}}
    with pytest.raises(ConfigError, match=r'^configmap/steward-system/maintenance/maintenance.yaml: profiles\[0\]'
                                          r'.operational.transitions\[0\].check: unknown instance "nope"'):
        read_config(None, None, 'configmap/steward-system/maintenance', Client())


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


def test_unset_variables():
    text = 'a: ${HOOK}\nb: ${WITH:default}\nc: ${STRICT:?say it}\nd: $${LITERAL}\ne: ${SET}\nf: ${HOOK}'
    assert unset_variables(text, {'SET': '1'}) == ['HOOK', 'STRICT']
    assert unset_variables({'x': [{'y': '${A}'}, '${B:}'], 'z': b'${C}'}, {}) == ['A', 'C']


def test_config_with_variables_only_the_controller_has(tmp_path, monkeypatch):
    """The controller gets SLACK_HOOK from a Secret; the info view does not need it and says so."""
    monkeypatch.delenv('SLACK_HOOK', raising=False)
    path = tmp_path / 'maintenance.yaml'
    path.write_text(FLATCAR.replace('https://hooks.example/T000/B000/XXXX', '${SLACK_HOOK}').replace('60s', '${REQUEUE:60s}'))
    config, where = read_config(None, str(path), None, None)
    assert config.requeue == 60.0 and config.instances['notify']['approval_required'].plugin.hook == '${SLACK_HOOK}'
    assert config.warnings[-1] == ('%s: environment variable(s) SLACK_HOOK not set where the module runs: left as ${...} '
                                   '(only the controller needs their values)' % where)
    monkeypatch.setenv('SLACK_HOOK', 'https://hooks.example/real')
    config, where = read_config(None, str(path), None, None)
    assert config.instances['notify']['approval_required'].plugin.hook == 'https://hooks.example/real' and config.warnings == ()
    with pytest.raises(ConfigError, match=r"intervals.requeue: .*'\$\{NOPE\}'"):
        read_config({'intervals': {'requeue': '${NOPE}'}}, None, None, None)
