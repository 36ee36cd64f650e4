# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every module is in the action group of its area (meta/runtime.yml), and says so in its documentation, so
`module_defaults: {group/steward.cluster.<area>: ...}` reaches all of them (kubernetes.core's k8s_taint
missing from group/k8s is the drift this prevents).

The area comes from the module's name: a prefix, or for names without one a small table."""

from __future__ import annotations

import ast
import os

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
MODULES = os.path.join(REPO, 'plugins', 'modules')

# Module name prefix -> action group (the longest matching prefix wins).
PREFIX_GROUPS = {
    'etcd_': 'etcd',
    'sabakan_': 'sabakan',
    'node_maintenance': 'maintenance',
    'machine': 'machines',
    'watchdog_': 'watchdog',
}
# Modules whose names carry no area prefix.
NAME_GROUPS = {
    'cluster_genesis': 'provisioning', 'cluster_authority': 'provisioning', 'node_join': 'provisioning',
    'join_script': 'provisioning', 'node_remove': 'provisioning', 'node_teardown': 'provisioning',
    'node_labels': 'provisioning', 'cert_info': 'provisioning', 'apiserver_lb': 'provisioning',
    'cluster_upgrade': 'provisioning',
}


def module_names():
    return sorted(f[:-3] for f in os.listdir(MODULES) if f.endswith('.py') and not f.startswith('_'))


def expected_group(module):
    if module in NAME_GROUPS:
        return NAME_GROUPS[module]
    matches = [p for p in PREFIX_GROUPS if module.startswith(p)]
    if not matches:
        pytest.fail('module %s has no area: name it with an area prefix (%s) or add it to NAME_GROUPS in %s'
                    % (module, ', '.join(sorted(PREFIX_GROUPS)), __file__))
    return PREFIX_GROUPS[max(matches, key=len)]


def runtime_groups():
    with open(os.path.join(REPO, 'meta', 'runtime.yml')) as f:
        return yaml.safe_load(f).get('action_groups') or {}


def documentation(module):
    tree = ast.parse(open(os.path.join(MODULES, module + '.py')).read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, 'id', None) == 'DOCUMENTATION' for t in node.targets):
            return yaml.safe_load(node.value.value)
    raise AssertionError('%s has no DOCUMENTATION' % module)


@pytest.mark.parametrize('module', module_names())
def test_module_is_in_its_area_group(module):
    group = expected_group(module)
    groups = runtime_groups()
    holding = sorted(g for g, members in groups.items() if module in (members or []))
    assert holding, ('module %s is in no action group: add `- %s` under action_groups.%s in meta/runtime.yml'
                     % (module, module, group))
    assert holding == [group], 'module %s is in action group(s) %s, expected only %s' % (module, holding, group)


@pytest.mark.parametrize('module', module_names())
def test_module_documents_its_group(module):
    doc = documentation(module)
    assert 'ansible.builtin.action_common_attributes.actiongroups' in doc.get('extends_documentation_fragment', []), (
        '%s: add ansible.builtin.action_common_attributes.actiongroups to extends_documentation_fragment' % module)
    attribute = (doc.get('attributes') or {}).get('action_group') or {}
    assert attribute.get('membership') == ['steward.cluster.' + expected_group(module)], (
        '%s: attributes.action_group.membership should be [steward.cluster.%s], is %s'
        % (module, expected_group(module), attribute.get('membership')))


def test_every_group_member_is_a_module_and_every_group_an_area():
    modules = set(module_names())
    areas = set(PREFIX_GROUPS.values()) | set(NAME_GROUPS.values())
    for group, members in runtime_groups().items():
        assert group in areas, 'action group %s is no area (%s)' % (group, sorted(areas))
        stale = sorted(set(members or []) - modules)
        assert not stale, 'action_groups.%s lists %s, which are not modules in plugins/modules' % (group, stale)
        assert len(members) == len(set(members)), 'action_groups.%s lists a module twice' % group


def test_the_area_rule_itself():
    assert expected_group('etcd_snapshot') == 'etcd'
    assert expected_group('node_maintenance_info') == 'maintenance'
    assert expected_group('node_join') == 'provisioning'
    assert expected_group('machine_deployment') == 'machines'
    with pytest.raises(pytest.fail.Exception, match='module foo_bar has no area'):
        expected_group('foo_bar')
