# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The write side of node_maintenance (maintenance/node_edit.py): key and value rules, the state shortcuts,
profile label editing and the merge patch with its before/after."""

from __future__ import annotations

import json

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.args import connection_settings, describe_target
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import OptionError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.node_edit import (
    as_value, changes_from, check_key, edit_profile_label, plan_node_change, shortcut_changes)

PROFILE = 'cloud.sap/maintenance-profile'
STATE = 'cloud.sap/maintenance-state'
DATA = 'cloud.sap/maintenance-data'
APPROVED = 'cloud.sap/maintenance-approved'
REBOOT_NEEDED = 'flatcar-linux-update.v1.flatcar-linux.net/reboot-needed'


def node(labels=None, annotations=None):
    return {'metadata': {'name': 'w1', 'labels': dict(labels or {}), 'annotations': dict(annotations or {})}}


@pytest.mark.parametrize('key', ['a', 'cloud.sap/maintenance-approved', 'x.y/A_b-c.9', 'a' * 63, 'k8s.io/' + 'a' * 63])
def test_valid_keys(key):
    assert check_key(key, 'annotations') == key


@pytest.mark.parametrize('key, problem', [
    ('', 'non-empty'), ('bad key', 'name part'), ('-a', 'name part'), ('a' * 64, 'name part'), ('Upper.Case/x', 'prefix'),
    ('/x', 'prefix'), ('a/', 'name part'), ('a/b/c', 'prefix'), (5, 'non-empty strings'),
], ids=['empty', 'space', 'leading-dash', 'too-long', 'upper-prefix', 'empty-prefix', 'empty-name', 'two-slashes', 'number'])
def test_invalid_keys(key, problem):
    with pytest.raises(OptionError, match=problem):
        check_key(key, 'annotations')


@pytest.mark.parametrize('value, text', [('x', 'x'), (True, 'true'), (False, 'false'), (3, '3'), (None, None), ('', '')])
def test_values(value, text):
    assert as_value(value, 'annotations[k]') == text


def test_value_errors():
    with pytest.raises(OptionError, match=r'annotations\[k\]: values must be strings \(or null to remove\), got dict'):
        as_value({'a': 1}, 'annotations[k]')
    with pytest.raises(OptionError, match=r"labels\[k\]: 'a b' is not a valid label value"):
        changes_from('labels', {'k': 'a b'}, labels=True)
    assert changes_from('annotations', {'k': 'a b', 'gone': None}) == {'k': 'a b', 'gone': None}


@pytest.mark.parametrize('state, expect', [
    (None, ({}, {})),
    ('requested', ({REBOOT_NEEDED: 'true'}, {'example.com/maint': 'yes'})),
    ('approved', ({APPROVED: 'true'}, {})),
    ('released', ({REBOOT_NEEDED: None, APPROVED: None}, {'example.com/maint': None})),
])
def test_shortcuts(state, expect):
    assert shortcut_changes(state, {REBOOT_NEEDED: True}, {'example.com/maint': 'yes'}) == expect


def test_shortcut_with_own_approval_and_errors():
    assert shortcut_changes('approved', approval_annotation={'example.com/ok': 'yes'}) == ({'example.com/ok': 'yes'}, {})
    assert shortcut_changes('released', {REBOOT_NEEDED: 'true'}, approval_annotation={}) == ({REBOOT_NEEDED: None}, {})
    with pytest.raises(OptionError, match='state=requested: give request_annotation'):
        shortcut_changes('requested')
    with pytest.raises(OptionError, match='state=released: give request_annotation'):
        shortcut_changes('released')
    with pytest.raises(OptionError, match='approval_annotation is empty'):
        shortcut_changes('approved', approval_annotation={})
    with pytest.raises(OptionError, match="state: 'done' is not one of"):
        shortcut_changes('done')


@pytest.mark.parametrize('current, profiles, mode, result', [
    ('', ['flatcar'], 'add', 'flatcar'),
    ('flatcar', ['flatcar'], 'add', 'flatcar'),
    ('a--b', ['c', 'a'], 'add', 'a--b--c'),
    ('a--b', ['c'], 'replace', 'c'),
    ('a--b--c', ['b'], 'remove', 'a--c'),
    ('a', ['a'], 'remove', None),
    ('a----b', ['c'], 'add', 'a--b--c'),
    ('a', ['b', 'b'], 'replace', 'b'),
], ids=['empty', 'present', 'append-keeps-order', 'replace', 'remove-middle', 'remove-last', 'empty-segments', 'dedupe'])
def test_edit_profile_label(current, profiles, mode, result):
    assert edit_profile_label(current, profiles, mode) == result


@pytest.mark.parametrize('profiles, mode, problem', [
    (['a--b'], 'add', 'not a valid profile name'), (['a b'], 'add', 'not a valid profile name'),
    ([''], 'add', 'not a valid profile name'), (['x' * 40, 'y' * 40], 'replace', 'longer than 63'),
    (['a'], 'merge', "profile_mode: 'merge' is not one of"),
])
def test_edit_profile_label_errors(profiles, mode, problem):
    with pytest.raises(OptionError, match=problem):
        edit_profile_label('', profiles, mode)


def test_plan_sets_and_removes_only_what_differs():
    before = node({'keep': 'x', 'old': 'y'}, {APPROVED: 'false', 'other': 'z'})
    plan = plan_node_change(before, {APPROVED: 'true', 'absent': None, 'other': 'z'}, {'old': None, 'new': 'n'})
    assert plan.patch == {'metadata': {'labels': {'old': None, 'new': 'n'}, 'annotations': {APPROVED: 'true'}}}
    assert plan.after == {'labels': {'keep': 'x', 'new': 'n'}, 'annotations': {APPROVED: 'true', 'other': 'z'}}
    assert plan.before == {'labels': {'keep': 'x', 'old': 'y'}, 'annotations': {APPROVED: 'false', 'other': 'z'}}
    assert plan.changes == ["remove label old (was 'y')", "set label new='n'", "set annotation %s='true' (was 'false')" % APPROVED]
    assert plan.changed and before['metadata']['labels'] == {'keep': 'x', 'old': 'y'}   # input untouched


def test_plan_is_idempotent():
    plan = plan_node_change(node({}, {APPROVED: 'true'}), {APPROVED: 'true', 'absent': None}, {})
    assert plan.patch == {} and not plan.changed and plan.changes == []


def test_plan_empty_value_is_a_value():
    plan = plan_node_change(node(), {'flag': ''}, {})
    assert plan.patch == {'metadata': {'annotations': {'flag': ''}}}


def test_plan_with_profiles():
    plan = plan_node_change(node({PROFILE: 'flatcar'}), {}, {}, ['kernel'])
    assert plan.patch == {'metadata': {'labels': {PROFILE: 'flatcar--kernel'}}}
    plan = plan_node_change(node({PROFILE: 'flatcar'}), {}, {}, ['flatcar'], 'remove')
    assert plan.patch == {'metadata': {'labels': {PROFILE: None}}}
    with pytest.raises(OptionError, match='profile and labels'):
        plan_node_change(node(), {}, {PROFILE: 'a'}, ['b'])


def test_plan_warns_when_detaching_a_profile_in_maintenance():
    data = json.dumps({'Profiles': {'flatcar': {'Transition': '2026-01-01T00:00:00Z', 'Current': 'in-maintenance',
                                                'Previous': 'in-maintenance'}}, 'Notifications': {}})
    plan = plan_node_change(node({PROFILE: 'flatcar--kernel'}, {DATA: data}), {}, {}, ['kernel'], 'replace')
    assert len(plan.warnings) == 1 and plan.warnings[0].startswith('profile flatcar is in-maintenance on node w1')
    assert plan_node_change(node({PROFILE: 'flatcar'}, {DATA: data}), {}, {}, ['kernel']).warnings == []


def test_controller_keys_may_be_removed_not_set():
    plan = plan_node_change(node({STATE: 'in-maintenance'}, {DATA: '{bad'}), {DATA: None}, {STATE: None})
    assert plan.patch == {'metadata': {'labels': {STATE: None}, 'annotations': {DATA: None}}}
    with pytest.raises(OptionError, match='the controller sets this label'):
        plan_node_change(node(), {}, {STATE: 'operational'})
    with pytest.raises(OptionError, match='the controller writes this annotation'):
        plan_node_change(node(), {DATA: '{}'}, {})


def test_connection_settings_environment_fallbacks():
    environ = {'K8S_AUTH_KUBECONFIG': '~/kc', 'K8S_AUTH_CONTEXT': 'ctx', 'K8S_AUTH_VERIFY_SSL': 'no', 'K8S_AUTH_API_KEY': 't'}
    settings = connection_settings({'context': 'mine'}, environ)
    assert settings['kubeconfig'].endswith('/kc') and not settings['kubeconfig'].startswith('~')
    assert settings['context'] == 'mine' and settings['validate_certs'] is False and settings['api_key'] == 't'
    assert settings['request_timeout'] == 30.0
    assert connection_settings({}, {}) == {'kubeconfig': None, 'context': None, 'host': None, 'api_key': None,
                                           'validate_certs': None, 'ca_cert': None, 'request_timeout': 30.0}
    with pytest.raises(KubeError, match='K8S_AUTH_VERIFY_SSL'):
        connection_settings({}, {'K8S_AUTH_VERIFY_SSL': 'maybe'})
    assert describe_target({'host': 'https://h', 'kubeconfig': None}) == 'host https://h'
    assert describe_target({'kubeconfig': '/k', 'context': 'c'}) == 'kubeconfig /k context c'
