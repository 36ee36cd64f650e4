# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""CKE's ValidateTemplate (seed 000 "Cluster template", "Roles and weights") and the template split."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import GeneratorError, TemplateError
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.template import (
    split_templates,
    validate_cluster,
    validate_template,
)

ROLE = 'cke.cybozu.com/role'
WEIGHT = 'cke.cybozu.com/weight'


def template(*workers: dict, cp: dict = None, **top) -> dict:
    """A template with one control plane node and the given worker nodes (user filled in)."""
    nodes = [dict({'user': 'cybozu', 'control_plane': True}, **(cp or {}))]
    nodes += [dict({'user': 'cybozu'}, **w) for w in workers]
    return dict({'name': 'cluster', 'nodes': nodes, 'service_subnet': '10.68.0.0/16'}, **top)


def worker(role: str = None, weight: str = None, **extra) -> dict:
    labels = dict(extra.pop('labels', {}))
    if role is not None:
        labels[ROLE] = role
    if weight is not None:
        labels[WEIGHT] = weight
    return dict({'labels': labels} if labels else {}, **extra)


SEED_MINIMAL = {
    'name': 'cluster',
    'nodes': [{'user': 'cybozu', 'control_plane': True}, {'user': 'cybozu', 'control_plane': False}],
    'service_subnet': '10.68.0.0/16',
}

SEED_WEIGHTED = {
    'name': 'cluster',
    'nodes': [
        {'user': 'cybozu', 'control_plane': True, 'labels': {ROLE: 'compute'}},
        {'user': 'cybozu', 'labels': {ROLE: 'compute', WEIGHT: '6.0'}},
        {'user': 'cybozu', 'labels': {ROLE: 'storage', WEIGHT: '3.0'},
         'taints': [{'key': ROLE, 'value': 'storage', 'effect': 'NoExecute'}]},
        {'user': 'cybozu', 'labels': {ROLE: 'gpu', WEIGHT: '1.0'},
         'taints': [{'key': ROLE, 'value': 'gpu', 'effect': 'PreferNoSchedule'}]},
    ],
    'service_subnet': '10.68.0.0/16',
}


# --- valid templates ------------------------------------------------------------------------------
@pytest.mark.parametrize('tmpl', [
    SEED_MINIMAL,
    SEED_WEIGHTED,
    template(worker()),
    template(worker('role1'), worker('role2')),
    template(worker(weight='1.0')),
    template(worker('cs', '0.1'), worker('ss', '0.3')),
    template(worker('cs', '3')),
    template(worker(), cp={'labels': {ROLE: 'cs'}}),
    template(worker(annotations={'example.com/anything': 'any text, even with spaces'})),
    template(worker(taints=[{'key': 'a', 'value': 'b', 'effect': 'NoSchedule'},
                            {'key': 'example.com/c', 'effect': 'PreferNoSchedule'},
                            {'key': 'd', 'value': '', 'effect': 'NoExecute'}])),
    template(worker(), control_plane_tolerations=['example.com/transient', 'node.cybozu.io/spare']),
    template(worker(), service_subnet='10.0.0.0/14'),
    template(worker(), options={'kubelet': {'cri_endpoint': '/var/run/k8s-containerd.sock'}}),
], ids=['seed-minimal', 'seed-weighted', 'one-worker', 'unique-roles', 'weight', 'fraction-weights',
        'integer-weight', 'cp-role', 'annotation', 'taint-effects', 'tolerations', 'slash-14', 'options'])
def test_valid_templates(tmpl):
    before = copy.deepcopy(tmpl)
    validate_template(tmpl)
    assert tmpl == before, 'validation must not change the template'


# --- invalid templates: TemplateError that says where ------------------------------------------------
@pytest.mark.parametrize('tmpl, message', [
    (template(), 'at least two nodes'),
    ({'name': 'c', 'nodes': [], 'service_subnet': '10.68.0.0/16'}, 'at least two nodes'),
    ({'name': 'c', 'service_subnet': '10.68.0.0/16'}, 'at least two nodes'),
    (template(worker(), cp={'control_plane': False}), r'only one control plane node \(found 0\)'),
    (template(worker(), {'control_plane': True}), r'only one control plane node \(found 2\)'),
    (template(worker('role1'), worker('role1')), 'unique roles'),
    (template(worker('role1'), worker()), 'unique roles'),
    (template(worker(), worker()), 'unique roles'),
    (template(worker('a'), worker('b'), worker('a')), 'unique roles'),
    (template(worker(), cp={'address': '10.0.0.1'}), r'template.nodes\[0\].address: a template node must not have'),
    (template(worker(address='10.0.0.2')), r'template.nodes\[1\].address'),
    (template(worker(user='')), r'template.nodes\[1\].user: user name is empty'),
    (template({'control_plane': False, 'user': None}), r'template.nodes\[1\].user'),
    (template(worker(labels={'bad key': 'x'})), r"template.nodes\[1\].labels: key 'bad key'"),
    (template(worker(labels={'-starts-with-dash': 'x'})), r'template.nodes\[1\].labels: key'),
    (template(worker(labels={'UPPER.example.com/x': 'x'})), 'prefix must be a DNS subdomain'),
    (template(worker(labels={'example.com/' + 'n' * 64: 'x'})), 'name must be 1-63'),
    (template(worker(labels={'ok': 'has space'})), r'template.nodes\[1\].labels\[ok\]: value'),
    (template(worker(labels={'ok': 'v' * 64})), r'labels\[ok\]: value'),
    (template(worker(labels={'ok': 3})), r'labels\[ok\]: value 3 must be a string'),
    (template(worker(annotations={'bad key': 'x'})), r'template.nodes\[1\].annotations: key'),
    (template(worker(annotations={'ok': 3})), r'annotations\[ok\]: value 3 must be a string'),
    (template(worker(taints=[{'key': 'a', 'effect': 'NoWay'}])), r"taints\[0\].effect: 'NoWay' is not one of"),
    (template(worker(taints=[{'key': 'a'}])), r'taints\[0\].effect: None'),
    (template(worker(taints=[{'key': 'bad key', 'effect': 'NoSchedule'}])), r'taints\[0\].key'),
    (template(worker(taints=[{'key': 'a', 'value': 'bad value', 'effect': 'NoSchedule'}])), r'taints\[0\].value'),
    (template(worker(taints={'key': 'a'})), r'taints: must be a list'),
    (template(worker(weight='0')), 'weight must be a positive number'),
    (template(worker(weight='-1.0')), 'weight'),
    (template(worker(weight='weight')), "'weight' is not a number"),
    (template(worker(weight='nan')), 'weight must be a positive number'),
    (template(worker(weight='inf')), 'weight must be a positive number'),
    (template(worker('a', '2'), worker('b', '0')), r'template.nodes\[2\].labels\[cke.cybozu.com/weight\]'),
    (template(worker(), service_subnet=None), 'service_subnet'),
    (template(worker(), service_subnet='x'), "service_subnet: 'x' is not a CIDR"),
    (template(worker(), service_subnet='10.68.0.1'), 'service_subnet'),
    (template(worker(), service_subnet='10.68.0.0/33'), 'service_subnet'),
    (template(worker(), name=''), 'template.name: cluster name is empty'),
    (template(worker(), control_plane_tolerations='example.com/x'), 'control_plane_tolerations: must be a list'),
    (template(worker(), control_plane_tolerations=['bad key']), r'control_plane_tolerations\[0\]'),
    (template(worker(), cp={'control_plane': 'yes'}), r'template.nodes\[0\].control_plane: must be true or false'),
    (['not', 'a', 'mapping'], 'template: must be a mapping'),
    (template(worker(), nodes=[{'user': 'u', 'control_plane': True}, 'worker']), r'template.nodes\[1\]: a node must be'),
], ids=lambda value: value if isinstance(value, str) else None)
def test_invalid_templates(tmpl, message):
    with pytest.raises(TemplateError, match=message):
        validate_template(tmpl)


def test_template_error_is_a_generator_error():
    assert issubclass(TemplateError, GeneratorError)


# --- the split: control plane template, worker templates in order, weights ---------------------------
def test_split_reads_roles_and_weights_in_template_order():
    templates = split_templates(SEED_WEIGHTED)
    assert templates.control_plane.role == 'compute'
    assert [(t.role, t.weight) for t in templates.workers] == [('compute', 6.0), ('storage', 3.0), ('gpu', 1.0)]


def test_missing_weight_is_one_and_missing_role_is_any():
    templates = split_templates(template(worker()))
    assert (templates.control_plane.role, templates.workers[0].role, templates.workers[0].weight) == ('', '', 1.0)


def test_single_worker_template_renders_every_role():
    templates = split_templates(template(worker('cs')))
    assert templates.for_worker_role('ss') is templates.workers[0]


def test_worker_template_by_role_when_there_are_several():
    templates = split_templates(SEED_WEIGHTED)
    assert templates.for_worker_role('gpu').node['taints'][0]['value'] == 'gpu'
    with pytest.raises(TemplateError, match="no worker template has role 'boot'"):
        templates.for_worker_role('boot')


# --- cluster validation (generated clusters have addresses) ---------------------------------------
def test_cluster_nodes_need_valid_unique_addresses():
    nodes = [{'address': '10.0.0.1', 'user': 'u', 'control_plane': True}, {'address': 'fd00::1', 'user': 'u'}]
    validate_cluster({'name': 'c', 'service_subnet': '10.68.0.0/16', 'nodes': nodes})
    for bad, message in ((dict(nodes[1], address='10.0.0.256'), 'invalid IP address'),
                         (dict(nodes[1], address='010.0.0.1'), 'invalid IP address'),
                         (dict(nodes[1], address=''), 'invalid IP address'),
                         (dict(nodes[1], address='10.0.0.1'), 'duplicate node address 10.0.0.1')):
        with pytest.raises(TemplateError, match=message):
            validate_cluster({'name': 'c', 'service_subnet': '10.68.0.0/16', 'nodes': [nodes[0], bad]})
