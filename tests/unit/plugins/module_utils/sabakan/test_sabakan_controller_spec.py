# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""SabakanIntegration spec: CRD defaults applied by the controller, and errors that name the field."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.client import GENERATOR_VARIABLES, REPAIR_VARIABLES
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.cluster_configmap import (
    cluster_from_configmap, configmap_write,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.constraints import Constraints
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import ClusterConfigMapError, SabakanError, SpecError
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.integration_spec import (
    ConfigMapRef, interval_of, is_enabled, parse_spec, parse_template_text, template_hash,
)

TEMPLATE = {'name': 'lab', 'service_subnet': '10.68.0.0/16', 'nodes': [
    {'user': 'cybozu', 'control_plane': True},
    {'user': 'cybozu', 'labels': {'cke.cybozu.com/role': 'cs'}},
]}
MINIMAL = {'url': 'http://sabakan.example:10080', 'template': TEMPLATE}


def with_(**changes):
    spec = copy.deepcopy(MINIMAL)
    for key, value in changes.items():
        if value is None:
            spec.pop(key, None)
        else:
            spec[key] = value
    return spec


def test_defaults_are_the_crds():
    spec = parse_spec(MINIMAL, 'dc1')
    assert spec.url == 'http://sabakan.example:10080/graphql'
    assert (spec.interval, spec.timeout, spec.wait_retired_seconds) == (60.0, 30.0, 300.0)
    assert spec.template == TEMPLATE and spec.template_ref is None
    assert spec.constraints == Constraints()
    assert spec.variables == GENERATOR_VARIABLES
    assert spec.repair_variables == REPAIR_VARIABLES
    assert spec.cluster_config_map == ConfigMapRef('dc1-cluster', 'cluster.yml')
    assert (spec.apply_nodes, spec.delete_removed_nodes, spec.auto_repair) == (True, False, False)


def test_everything_set():
    spec = parse_spec(with_(
        interval='1m30s', timeout='500ms', waitRetiredSeconds=2, template=None,
        templateConfigMapRef={'name': 'tmpl'}, constraints={'control-plane-count': 3, 'minimum-workers': 4},
        variables={'notHaving': {'roles': ['boot']}}, clusterConfigMap={'name': 'cke', 'key': 'c.yml'},
        nodes={'apply': False, 'deleteRemoved': True},
        autoRepair={'enabled': True, 'variables': {'having': {'states': ['UNHEALTHY']}}}), 'dc1')
    assert (spec.interval, spec.timeout, spec.wait_retired_seconds) == (90.0, 0.5, 2.0)
    assert spec.template is None and spec.template_ref == ConfigMapRef('tmpl', 'cluster-template.yml')
    assert (spec.constraints.control_plane_count, spec.constraints.minimum_workers) == (3, 4)
    # CKE: a key given replaces that key of the defaults, a key left out keeps it
    assert spec.variables == {'having': None, 'notHaving': {'roles': ['boot']}}
    assert spec.repair_variables == {'having': {'states': ['UNHEALTHY']}, 'notHaving': {'roles': ['boot']}}
    assert spec.cluster_config_map == ConfigMapRef('cke', 'c.yml')
    assert (spec.apply_nodes, spec.delete_removed_nodes, spec.auto_repair) == (False, True, True)


@pytest.mark.parametrize('spec, message', [
    (with_(url=None), 'spec.url: required'),
    (with_(url='ftp://x'), 'spec.url: '),
    (with_(template=None), 'spec.template, spec.templateConfigMapRef: give exactly one'),
    (with_(templateConfigMapRef={'name': 'x'}), 'spec.template, spec.templateConfigMapRef: give exactly one'),
    (with_(template=None, templateConfigMapRef={'name': 'Bad_Name'}), 'spec.templateConfigMapRef.name: '),
    (with_(template={'name': 'x', 'service_subnet': '10.0.0.0/16', 'nodes': [{'user': 'u', 'control_plane': True}]}),
     'spec.template.nodes: template must contain at least two nodes'),
    (with_(template=dict(TEMPLATE, nodes=[TEMPLATE['nodes'][0], {'user': 'u', 'taints': [{'key': 'k', 'effect': 'Bad'}]}])),
     "spec.template.nodes[1].taints[0].effect: 'Bad' is not one of"),
    (with_(template=dict(TEMPLATE, name='')), 'spec.template.name: cluster name is empty'),
    (with_(constraints={'minimum-workers': 'x'}), "spec.constraints.minimum-workers: expected a whole number, got 'x'"),
    (with_(constraints={'minimum-workers': '4'}), "spec.constraints.minimum-workers: expected a whole number, got '4'"),
    (with_(constraints={'control-plane-count': -1}), 'spec.constraints.control-plane-count: must be at least 0'),
    (with_(constraints={'control-plane-count': 0}), 'spec.constraints.control-plane-count: must be at least 1'),
    (with_(constraints={'minimum-workers': 5, 'maximum-workers': 2}), 'spec.constraints.maximum-workers: (2) is below'),
    (with_(constraints={'minimum-worker': 1}), 'spec.constraints: unknown constraint(s) minimum-worker'),
    (with_(constraints=[1]), 'spec.constraints: constraints must be a mapping'),
    (with_(variables={'having': {'states': ['retired']}}),
     "spec.variables.having.states[0]: 'retired' is not a machine state"),
    (with_(variables={'havin': {}}), "spec.variables: query variables have unknown key(s) 'havin'"),
    (with_(autoRepair={'enabled': True, 'variables': {'notHaving': {'racks': ['a']}}}),
     "spec.autoRepair.variables.notHaving.racks[0]: must be an integer rack number, got 'a'"),
    (with_(autoRepair={'enabled': 'yes'}), "spec.autoRepair.enabled: expected true or false, got 'yes'"),
    (with_(nodes={'deleteRemoved': 1}), 'spec.nodes.deleteRemoved: expected true or false'),
    (with_(nodes=[]), 'spec.nodes: expected an object'),
    (with_(interval='10'), "spec.interval: '10' is not a duration"),
    (with_(interval='0s'), 'spec.interval: must be longer than 0'),
    (with_(timeout='5x'), "spec.timeout: '5x' is not a duration"),
    (with_(waitRetiredSeconds=-1), 'spec.waitRetiredSeconds: must be at least 0, got -1'),
    (with_(waitRetiredSeconds=float('nan')), 'spec.waitRetiredSeconds: must be a finite number'),
    (with_(waitRetiredSeconds=float('inf')), 'spec.waitRetiredSeconds: must be a finite number'),
    (with_(waitRetiredSeconds='300'), "spec.waitRetiredSeconds: expected a number of seconds, got '300'"),
    (with_(url='http://sa bakan:10080'), "spec.url: host 'sa bakan'"),
    (with_(url='http://sabakan:0'), 'spec.url: port 0'),
    (with_(clusterConfigMap={'key': 'a/b'}), "spec.clusterConfigMap.key: expected a ConfigMap key"),
    ('nope', 'spec: expected an object'),
])
def test_invalid_spec_names_the_field(spec, message):
    with pytest.raises(SpecError) as info:
        parse_spec(spec, 'dc1')
    assert str(info.value).startswith(message), str(info.value)
    assert isinstance(info.value, SabakanError) and isinstance(info.value, InvalidInput) and info.value.rule
    assert message.startswith(info.value.field + ':'), (info.value.field, message)


# Durations are read by the one parser (common/durations.py); these rows pin what the CRD's interval takes.
@pytest.mark.parametrize('text, seconds', [('60s', 60.0), ('1m30s', 90.0), ('500ms', 0.5), ('1.5h', 5400.0),
                                           ('2m', 120.0), (5, 5.0)])
def test_intervals(text, seconds):
    assert parse_spec(with_(interval=text), 'dc1').interval == seconds
    assert interval_of({'interval': text}) == seconds


def test_enabled_and_interval_survive_an_invalid_spec():
    assert is_enabled({}) and is_enabled({'enabled': 'no'}) and not is_enabled({'enabled': False})
    assert interval_of({'interval': '2s', 'url': 5}) == 2.0
    assert interval_of({'interval': 'bad'}) == 60.0
    assert interval_of(None) == 60.0


def test_template_from_configmap_text():
    assert parse_template_text('name: lab\nservice_subnet: 10.68.0.0/16\nnodes:\n- {user: a, control_plane: true}\n'
                               '- {user: a}\n', 'ConfigMap x')['name'] == 'lab'
    with pytest.raises(SpecError, match='ConfigMap x: is empty or missing'):
        parse_template_text(None, 'ConfigMap x')
    with pytest.raises(SpecError, match='line 1, column'):
        parse_template_text('nodes: [', 'ConfigMap x')
    with pytest.raises(SpecError, match=r'^ConfigMap x.nodes: template must contain at least two nodes'):
        parse_template_text('name: lab\nservice_subnet: 10.68.0.0/16\nnodes: []\n', 'ConfigMap x')


def test_template_hash_ignores_key_order_and_sees_changes():
    reordered = {'service_subnet': TEMPLATE['service_subnet'], 'nodes': TEMPLATE['nodes'], 'name': 'lab'}
    assert template_hash(TEMPLATE) == template_hash(reordered)
    assert len(template_hash(TEMPLATE)) == 16
    assert template_hash(TEMPLATE) != template_hash(dict(TEMPLATE, name='other'))


# --- the cluster ConfigMap --------------------------------------------------------------------
CLUSTER = {'name': 'lab', 'service_subnet': '10.68.0.0/16', 'nodes': [
    {'address': '10.0.0.1', 'user': 'cybozu', 'control_plane': True, 'labels': {}, 'annotations': {}, 'taints': []}]}


def test_configmap_roundtrip():
    body, patch = configmap_write('dc1-cluster', 'infra', 'cluster.yml', CLUSTER, template_hash='abc',
                                  operation='new', integration='infra/dc1')
    assert body['metadata']['annotations'] == {'cluster.steward.io/template-hash': 'abc',
                                               'cluster.steward.io/operation': 'new',
                                               'cluster.steward.io/sabakan-integration': 'infra/dc1'}
    assert patch['data'] == body['data'] and set(body['data']) == {'cluster.yml'}
    assert body['data']['cluster.yml'].startswith('name: lab\n')
    assert cluster_from_configmap(body, 'cluster.yml') == CLUSTER


@pytest.mark.parametrize('configmap, key, expected', [
    (None, 'cluster.yml', None),                                       # no ConfigMap yet: generate
    ({'metadata': {}, 'data': {'other': 'x'}}, 'cluster.yml', None),   # no key yet: generate
])
def test_configmap_means_generate(configmap, key, expected):
    assert cluster_from_configmap(configmap, key) is expected


@pytest.mark.parametrize('text, message', [
    ('  \n', 'is empty'),
    ('[1, 2]', 'expected a mapping'),
    ('name: [', 'not valid YAML'),
    ('name: lab\nservice_subnet: 10.68.0.0/16\nnodes:\n- {address: nope, user: a}\n', "invalid IP address 'nope'"),
])
def test_configmap_refuses_what_is_not_a_cluster(text, message):
    configmap = {'metadata': {'namespace': 'infra', 'name': 'dc1-cluster'}, 'data': {'cluster.yml': text}}
    with pytest.raises(ClusterConfigMapError, match='ConfigMap infra/dc1-cluster key cluster.yml') as info:
        cluster_from_configmap(configmap, 'cluster.yml')
    assert message in str(info.value)
