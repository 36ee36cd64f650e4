"""Module parameters: the doc fragments match the argspecs, the action group lists every module, requests parse."""

from __future__ import annotations

import datetime
import importlib
import os

import pytest
import yaml

from ansible_collections.steward.cluster.plugins.doc_fragments import provisioning_cluster, provisioning_node, provisioning_write
from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import args, runner
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import Refused

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), *(['..'] * 5))
MODULES = ['cluster_genesis', 'node_join', 'join_script', 'node_remove', 'node_teardown', 'node_labels', 'cert_info',
           'apiserver_lb', 'cluster_authority', 'cluster_upgrade']


@pytest.mark.parametrize('fragment, spec', [(provisioning_cluster, args.CLUSTER_SPEC), (provisioning_node, args.NODE_SPEC),
                                            (provisioning_write, args.PROVISION_SPEC)])
def test_fragments_match_the_argspecs(fragment, spec):
    options = yaml.safe_load(fragment.ModuleDocFragment.DOCUMENTATION)['options']
    assert set(options) == set(spec)
    for key, option in spec.items():
        assert options[key]['type'] == option['type'], key
        assert options[key].get('default') == option.get('default'), key
        assert options[key].get('choices') == option.get('choices'), key


def test_action_group_lists_every_provisioning_module():
    with open(os.path.join(REPO, 'meta', 'runtime.yml')) as handle:
        assert sorted(yaml.safe_load(handle)['action_groups']['provisioning']) == sorted(MODULES)


@pytest.mark.parametrize('name', MODULES)
def test_module_documents_its_own_options(name):
    module = importlib.import_module('ansible_collections.steward.cluster.plugins.modules.' + name)
    doc = yaml.safe_load(module.DOCUMENTATION)
    assert doc['module'] == name
    own = set(doc.get('options') or {})
    fragments = {'steward.cluster.provisioning_cluster': args.CLUSTER_SPEC,
                 'steward.cluster.provisioning_node': args.NODE_SPEC,
                 'steward.cluster.provisioning_write': args.PROVISION_SPEC}
    for fragment in doc.get('extends_documentation_fragment') or []:
        own |= set(fragments.get(fragment, {}))
        if fragment == 'steward.cluster.kube_connection':
            from ansible_collections.steward.cluster.plugins.module_utils.kube.args import KUBE_CONNECTION_SPEC
            own |= set(KUBE_CONNECTION_SPEC)
    spec = getattr(module, 'SPEC', None)
    if spec is not None:
        assert own == set(spec)
    assert doc['attributes']['action_group']['membership'] == ['steward.cluster.provisioning']


BASE = {'control_plane': [{'name': 'cp1', 'address': '10.0.0.1'}], 'node_name': 'cp1', 'address': '10.0.0.1',
        'labels': {}, 'root': '/tmp/x', 'wait': True, 'wait_timeout': 300.0, 'etcd_timeout': 5.0,
        'lb_validate_command': ['haproxy', '-c', '-f', '{config}'], 'lb_validate': True,
        'kubelet_binary': '/usr/bin/kubelet', 'manage_kubelet': True}


def test_provision_request_from_params():
    request = runner.provision_request(dict(BASE, now='2026-03-01T12:00:00Z'), bootstrap=True)
    assert request.node.control_plane and request.bootstrap
    assert request.now == datetime.datetime(2026, 3, 1, 12, tzinfo=datetime.timezone.utc)
    assert request.lb_validate_command == ('haproxy', '-c', '-f', '{config}')
    assert runner.provision_request(dict(BASE, lb_validate=False), bootstrap=True).lb_validate_command is None


@pytest.mark.parametrize('change, field, rule', [
    ({'now': 'yesterday'}, 'now', 'rfc3339'),
    ({'now': '2026-03-01T12:00:00'}, 'now', 'rfc3339'),
    ({'root': 'relative/dir'}, 'root', 'absolute-path'),
    ({'wait_timeout': 0}, 'wait_timeout', 'minimum'),
    ({'lb_validate_command': ['haproxy', '-c']}, 'lb_validate_command', 'placeholder'),
    ({'labels': {'node-role.kubernetes.io/control-plane': ''}}, 'labels.node-role.kubernetes.io/control-plane',
     'kubelet-label'),
])
def test_bad_parameters_are_named(change, field, rule):
    with pytest.raises(InvalidInput) as err:
        runner.provision_request(dict(BASE, **change), bootstrap=True)
    assert (err.value.field, err.value.rule) == (field, rule)


def test_failure_carries_the_typed_fields():
    # args.failure became ProvisioningError.result(), reported by the one module shell
    expected = {'msg': 'no', 'rule': 'etcd-quorum', 'refused': True, 'where': 'cp1', 'changed': False}
    assert shell.failure_result(Refused('no', 'etcd-quorum', 'cp1')) == expected
    assert shell.failure_result(InvalidInput('root', 'absolute-path', 'bad'))['field'] == 'root'
