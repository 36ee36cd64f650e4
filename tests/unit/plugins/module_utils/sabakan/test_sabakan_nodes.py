# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""MachineToNode: node labels, annotations and taints exactly as seed 000's tables say."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import GeneratorError, MachineError
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.nodes import (
    has_valid_state_taint,
    machine_to_node,
    tainted_beyond_tolerations,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.machines import parse_machine


def machine(state: str = 'HEALTHY', **spec) -> dict:
    base = {
        'serial': 'abc123',
        'labels': [{'name': 'datacenter', 'value': 'dc1'}, {'name': 'product', 'value': 'R640'}],
        'rack': 3,
        'indexInRack': 7,
        'role': 'cs',
        'ipv4': ['10.3.0.7', '10.3.1.7'],
        'registerDate': '2017-12-02T00:00:00Z',
        'retireDate': '2024-06-30T12:34:56Z',
        'bmc': {'bmcType': 'IPMI-2.0', 'ipv4': '10.3.2.7'},
    }
    base.update(spec)
    return {'spec': base, 'status': {'state': state, 'timestamp': '2018-12-01T00:00:00Z', 'duration': 86400.0}}


EMPTY_TEMPLATE = {'user': 'cybozu'}

SEED_LABELS = {
    'sabakan.cke.cybozu.com/datacenter': 'dc1',
    'sabakan.cke.cybozu.com/product': 'R640',
    'cke.cybozu.com/rack': '3',
    'topology.kubernetes.io/zone': 'rack3',
    'failure-domain.beta.kubernetes.io/zone': 'rack3',
    'cke.cybozu.com/index-in-rack': '7',
    'cke.cybozu.com/role': 'cs',
    'node-role.kubernetes.io/cs': 'true',
    'cke.cybozu.com/register-month': '2017-12',
    'cke.cybozu.com/retire-month': '2024-06',
}

SEED_ANNOTATIONS = {
    'cke.cybozu.com/serial': 'abc123',
    'cke.cybozu.com/register-date': '2017-12-02T00:00:00Z',
    'cke.cybozu.com/retire-date': '2024-06-30T12:34:56Z',
}


# --- the whole node ---------------------------------------------------------------------------------
def test_worker_node_is_exactly_the_seed_tables():
    node = machine_to_node(machine(), EMPTY_TEMPLATE, control_plane=False)
    assert node == {'address': '10.3.0.7', 'user': 'cybozu', 'control_plane': False, 'labels': SEED_LABELS,
                    'annotations': SEED_ANNOTATIONS, 'taints': []}


def test_control_plane_node_adds_only_the_master_label():
    node = machine_to_node(machine(), EMPTY_TEMPLATE, control_plane=True)
    assert node['control_plane'] is True
    assert node['labels'] == dict(SEED_LABELS, **{'node-role.kubernetes.io/master': 'true'})
    assert node['annotations'] == SEED_ANNOTATIONS


@pytest.mark.parametrize('flag', [True, False])
def test_control_plane_defaults_to_the_template_flag(flag):
    node = machine_to_node(machine(), {'user': 'u', 'control_plane': flag})
    assert node['control_plane'] is flag
    assert ('node-role.kubernetes.io/master' in node['labels']) is flag


# --- label rows of seed 000 one by one ------------------------------------------------------------------
@pytest.mark.parametrize('spec, key, value', [
    ({'rack': 0}, 'cke.cybozu.com/rack', '0'),
    ({'rack': 12}, 'topology.kubernetes.io/zone', 'rack12'),
    ({'rack': 12}, 'failure-domain.beta.kubernetes.io/zone', 'rack12'),
    ({'indexInRack': 0}, 'cke.cybozu.com/index-in-rack', '0'),
    ({'indexInRack': 41}, 'cke.cybozu.com/index-in-rack', '41'),
    ({'role': 'gpu'}, 'cke.cybozu.com/role', 'gpu'),
    ({'role': 'gpu'}, 'node-role.kubernetes.io/gpu', 'true'),
    ({'registerDate': '2020-01-31T23:59:59Z'}, 'cke.cybozu.com/register-month', '2020-01'),
    ({'retireDate': '2031-11-01T00:00:00Z'}, 'cke.cybozu.com/retire-month', '2031-11'),
    ({'labels': [{'name': 'foo', 'value': 'foobar'}]}, 'sabakan.cke.cybozu.com/foo', 'foobar'),
    ({'labels': [{'name': 'empty', 'value': ''}]}, 'sabakan.cke.cybozu.com/empty', ''),
])
def test_label_rows(spec, key, value):
    assert machine_to_node(machine(**spec), EMPTY_TEMPLATE)['labels'][key] == value


def test_role_label_is_the_machines_not_the_old_role_one():
    labels = machine_to_node(machine(role='ss'), EMPTY_TEMPLATE)['labels']
    assert 'node-role.kubernetes.io/cs' not in labels and labels['node-role.kubernetes.io/ss'] == 'true'


def test_no_sabakan_labels():
    labels = machine_to_node(machine(labels=None), EMPTY_TEMPLATE)['labels']
    assert not [key for key in labels if key.startswith('sabakan.cke.cybozu.com/')]


# --- dates: RFC 3339 as Go formats it ----------------------------------------------------------------
@pytest.mark.parametrize('given, annotation, month', [
    ('2017-12-02T00:00:00Z', '2017-12-02T00:00:00Z', '2017-12'),
    ('2017-12-02T00:00:00z', '2017-12-02T00:00:00Z', '2017-12'),
    ('2017-12-02T00:00:00+00:00', '2017-12-02T00:00:00Z', '2017-12'),
    ('2017-06-30T22:00:00-05:00', '2017-06-30T22:00:00-05:00', '2017-06'),   # the month where the date is written
    ('2017-07-01T08:30:00+09:00', '2017-07-01T08:30:00+09:00', '2017-07'),   # (UTC would say June)
    ('2017-07-01T08:30:00+05:45', '2017-07-01T08:30:00+05:45', '2017-07'),
    ('2020-01-02T03:04:05.123456789Z', '2020-01-02T03:04:05Z', '2020-01'),   # RFC3339 drops the fraction
    ('2020-01-02T03:04:05.5+01:00', '2020-01-02T03:04:05+01:00', '2020-01'),
    ('0001-01-01T00:00:00Z', '0001-01-01T00:00:00Z', '0001-01'),             # Go's zero time, zero-padded
    ('0999-03-04T00:00:00Z', '0999-03-04T00:00:00Z', '0999-03'),
])
def test_dates_in_rfc3339_with_offsets(given, annotation, month):
    node = machine_to_node(machine(registerDate=given, retireDate=given), EMPTY_TEMPLATE)
    assert node['annotations']['cke.cybozu.com/register-date'] == annotation
    assert node['annotations']['cke.cybozu.com/retire-date'] == annotation
    assert node['labels']['cke.cybozu.com/register-month'] == month
    assert node['labels']['cke.cybozu.com/retire-month'] == month


def test_same_instant_in_two_zones_keeps_each_zone():
    first = machine_to_node(machine(registerDate='2017-07-01T08:30:00+09:00'), EMPTY_TEMPLATE)
    second = machine_to_node(machine(registerDate='2017-06-30T23:30:00Z'), EMPTY_TEMPLATE)
    assert first['annotations']['cke.cybozu.com/register-date'] == '2017-07-01T08:30:00+09:00'
    assert second['annotations']['cke.cybozu.com/register-date'] == '2017-06-30T23:30:00Z'
    assert (first['labels']['cke.cybozu.com/register-month'], second['labels']['cke.cybozu.com/register-month']) \
        == ('2017-07', '2017-06')


def test_missing_dates_are_go_zero_time():
    raw = machine()
    del raw['spec']['registerDate'], raw['spec']['retireDate']
    node = machine_to_node(raw, EMPTY_TEMPLATE)
    assert node['annotations']['cke.cybozu.com/register-date'] == '0001-01-01T00:00:00Z'
    assert node['labels']['cke.cybozu.com/retire-month'] == '0001-01'


# --- the template's labels, annotations and taints are copied --------------------------------------
TEMPLATE = {
    'user': 'admin',
    'control_plane': False,
    'labels': {'foo': 'bar', 'sabakan.cke.cybozu.com/product': 'from-template', 'cke.cybozu.com/rack': 'x',
               'cke.cybozu.com/role': 'storage', 'cke.cybozu.com/weight': '3.0'},
    'annotations': {'hoge': 'fuga', 'cke.cybozu.com/serial': 'from-template'},
    'taints': [{'key': 'foo', 'effect': 'NoSchedule'},
               {'key': 'cke.cybozu.com/role', 'value': 'storage', 'effect': 'NoExecute'}],
}


def test_template_parts_are_copied_and_the_fixed_keys_win():
    template = copy.deepcopy(TEMPLATE)
    node = machine_to_node(machine(role='ss'), template)
    assert node['user'] == 'admin'
    labels = node['labels']
    assert labels['foo'] == 'bar' and labels['cke.cybozu.com/weight'] == '3.0'
    assert labels['sabakan.cke.cybozu.com/product'] == 'from-template'   # template labels override sabakan's
    assert labels['cke.cybozu.com/rack'] == '3' and labels['cke.cybozu.com/role'] == 'ss'   # fixed keys win
    assert node['annotations'] == dict(SEED_ANNOTATIONS, hoge='fuga')
    assert node['taints'] == TEMPLATE['taints']
    assert template == TEMPLATE, 'the template must not change'


def test_the_node_does_not_share_structures_with_the_template():
    template = copy.deepcopy(TEMPLATE)
    node = machine_to_node(machine('RETIRED'), template)
    node['labels']['foo'] = 'changed'
    node['annotations']['hoge'] = 'changed'
    node['taints'][0]['effect'] = 'NoExecute'
    node['taints'].clear()
    assert template == TEMPLATE


# --- state taints (seed 000 "Taint nodes"): only RETIRING and RETIRED ---------------------------------
@pytest.mark.parametrize('state, taint', [
    ('RETIRING', {'key': 'cke.cybozu.com/state', 'value': 'retiring', 'effect': 'NoExecute'}),
    ('RETIRED', {'key': 'cke.cybozu.com/state', 'value': 'retired', 'effect': 'NoExecute'}),
    ('HEALTHY', None), ('UNHEALTHY', None), ('UNREACHABLE', None), ('UPDATING', None), ('UNINITIALIZED', None),
])
def test_state_taint(state, taint):
    node = machine_to_node(machine(state), TEMPLATE)
    assert node['taints'][:2] == TEMPLATE['taints']
    assert node['taints'][2:] == ([taint] if taint else [])


def test_no_ipv4_cannot_become_a_node():
    with pytest.raises(MachineError, match='abc123.*ipv4') as err:
        machine_to_node(machine(ipv4=[]), EMPTY_TEMPLATE)
    assert isinstance(err.value, GeneratorError)


def test_parsed_machine_or_raw_json_give_the_same_node():
    raw = machine()
    assert machine_to_node(parse_machine(raw), EMPTY_TEMPLATE) == machine_to_node(raw, EMPTY_TEMPLATE)


# --- has_valid_state_taint: does the node's first state taint match the machine state? ---------------
RETIRING = {'key': 'cke.cybozu.com/state', 'value': 'retiring', 'effect': 'NoExecute'}
RETIRED = {'key': 'cke.cybozu.com/state', 'value': 'retired', 'effect': 'NoExecute'}


@pytest.mark.parametrize('state, taints, valid', [
    ('HEALTHY', [], True),
    ('HEALTHY', [{'key': 'foo', 'effect': 'NoSchedule'}], True),
    ('HEALTHY', [RETIRING], False),
    ('UNHEALTHY', [], True),
    ('UNREACHABLE', [], True),
    ('UNREACHABLE', [{'key': 'cke.cybozu.com/state', 'value': 'unreachable', 'effect': 'NoSchedule'}], False),
    ('UPDATING', [], True),
    ('RETIRING', [RETIRING], True),
    ('RETIRING', [], False),
    ('RETIRING', [RETIRED], False),
    ('RETIRING', [dict(RETIRING, effect='NoSchedule')], False),
    ('RETIRED', [RETIRED], True),
    ('RETIRED', [RETIRING], False),
    ('RETIRED', [RETIRED, RETIRING], True),      # only the first state taint counts
    ('RETIRED', [RETIRING, RETIRED], False),
])
def test_has_valid_state_taint(state, taints, valid):
    node = {'address': '10.3.0.7', 'taints': taints}
    assert has_valid_state_taint(node, parse_machine(machine(state))) is valid


# --- tainted_beyond_tolerations: which Kubernetes taints keep a node from being a control plane ---------
@pytest.mark.parametrize('taints, tolerations, tainted', [
    (None, [], False),
    ([], [], False),
    ([{'key': 'node.kubernetes.io/not-ready', 'effect': 'NoSchedule'}], [], False),
    ([{'key': 'node.kubernetes.io/unreachable', 'effect': 'NoExecute'}], [], False),
    ([{'key': 'cke.cybozu.com/state', 'value': 'retiring', 'effect': 'NoExecute'}], [], False),
    ([{'key': 'cke.cybozu.com/master', 'effect': 'NoSchedule'}], [], False),
    ([{'key': 'foo.cybozu.com/transient', 'effect': 'NoSchedule'}], ['foo.cybozu.com/transient'], False),
    ([{'key': 'foo.cybozu.com/transient', 'effect': 'NoSchedule'}], [], True),
    ([{'key': 'foo', 'value': 'bar', 'effect': 'NoSchedule'}], [], True),
    ([{'key': 'node-role.kubernetes.io/control-plane', 'effect': 'NoSchedule'}], [], True),
    ([{'key': 'node.kubernetes.io/not-ready'}, {'key': 'foo'}], [], True),
    ([{'key': 'cke.cybozu.com/role', 'value': 'storage', 'effect': 'NoExecute'}], [], True),
])
def test_tainted_beyond_tolerations(taints, tolerations, tainted):
    assert tainted_beyond_tolerations(taints, tolerations) is tainted


@pytest.mark.parametrize('control_plane', [True, False])
def test_render_equals_labels_and_annotations_of_key_order_included(control_plane):
    """render builds labels and annotations from per-renderer forms holding placeholders; the result must be
    the dicts labels_of and annotations_of build, key order included, also when the template sets the same keys."""
    from ansible_collections.steward.cluster.plugins.module_utils.sabakan.nodes import NodeRenderer
    template = {'user': 'u', 'labels': {'cke.cybozu.com/index-in-rack': 'x', 'a': 'b', 'cke.cybozu.com/retire-month': 'y'},
                'annotations': {'cke.cybozu.com/register-date': 'z', 'c': 'd'},
                'taints': [{'key': 'k', 'value': 'v', 'effect': 'NoSchedule'}]}
    renderer = NodeRenderer(template, control_plane)
    for index, state in enumerate(['HEALTHY', 'RETIRED', 'RETIRING', 'HEALTHY']):
        parsed = parse_machine(machine(state, indexInRack=index, rack=index % 2))
        node = renderer.render(parsed)
        assert list(node['labels'].items()) == list(renderer.labels_of(parsed).items())
        assert list(node['annotations'].items()) == list(renderer.annotations_of(parsed).items())
        assert node['labels']['cke.cybozu.com/index-in-rack'] == str(index)
        assert node['taints'][0] == template['taints'][0] and node['taints'][0] is not template['taints'][0]
