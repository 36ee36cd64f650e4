# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node maintenance modules' wiring: the action group, documented options = argspec (with the kube_connection
fragment), and the Kubernetes client built from the connection options."""

from __future__ import annotations

import ast
import os

import pytest
import yaml

from ansible_collections.steward.cluster.plugins.doc_fragments.kube_connection import ModuleDocFragment
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.kube.args import KUBE_CONNECTION_SPEC, client_from_params
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))
MODULES = ('node_maintenance_info', 'node_maintenance')


def module_source(name):
    with open(os.path.join(REPO, 'plugins', 'modules', name + '.py')) as handle:
        return handle.read()


def documented_options(name):
    tree = ast.parse(module_source(name))
    doc = [n.value.value for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], 'id', '') == 'DOCUMENTATION'][0]
    options = dict(yaml.safe_load(doc)['options'])
    options.update(yaml.safe_load(ModuleDocFragment.DOCUMENTATION)['options'])
    return options


def argspec_keys(name):
    """The keyword names given to argspec(...) in main(), plus the shared connection spec."""
    tree = ast.parse(module_source(name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, 'id', '') == 'argspec':
            return {kw.arg for kw in node.keywords} | set(KUBE_CONNECTION_SPEC)
    raise AssertionError('no argspec() call in %s' % name)


def test_action_group_lists_the_modules():
    with open(os.path.join(REPO, 'meta', 'runtime.yml')) as handle:
        runtime = yaml.safe_load(handle)
    assert sorted(runtime['action_groups']['maintenance']) == sorted(MODULES)


@pytest.mark.parametrize('name', MODULES)
def test_documented_options_match_the_argspec(name):
    assert set(documented_options(name)) == argspec_keys(name)


def test_fragment_matches_the_connection_spec():
    options = yaml.safe_load(ModuleDocFragment.DOCUMENTATION)['options']
    assert set(options) == set(KUBE_CONNECTION_SPEC)
    for key, spec in KUBE_CONNECTION_SPEC.items():
        assert options[key]['type'] == spec['type'], key
        assert options[key].get('aliases', []) == spec.get('aliases', []), key
        assert options[key].get('default') == spec.get('default'), key


def bearer(client):
    """The Authorization header the client sends."""
    return client.configuration.auth_settings()['BearerToken']['value']


def test_client_from_host_and_token():
    client = client_from_params({'host': 'https://10.0.0.1:6443/', 'api_key': 'tok', 'validate_certs': False,
                                 'request_timeout': 5}, environ={})
    try:
        assert client.host == 'https://10.0.0.1:6443' and client.timeout == 5.0
        assert bearer(client) == 'Bearer tok'
        assert client.configuration.verify_ssl is False
    finally:
        client.close()


def test_client_from_kubeconfig_context_and_overrides(tmp_path):
    kubeconfig = tmp_path / 'kubeconfig'
    kubeconfig.write_text(yaml.safe_dump({
        'apiVersion': 'v1', 'kind': 'Config', 'current-context': 'a',
        'clusters': [{'name': 'a', 'cluster': {'server': 'http://a.example:6443'}},
                     {'name': 'b', 'cluster': {'server': 'http://b.example:6443'}}],
        'users': [{'name': 'u', 'user': {'token': 'from-file'}}],
        'contexts': [{'name': 'a', 'context': {'cluster': 'a', 'user': 'u'}}, {'name': 'b', 'context': {'cluster': 'b', 'user': 'u'}}]}))
    client = client_from_params({'context': 'b'}, environ={'K8S_AUTH_KUBECONFIG': str(kubeconfig)})
    try:
        assert client.host == 'http://b.example:6443'
        assert bearer(client) == 'Bearer from-file'
    finally:
        client.close()
    client = client_from_params({'kubeconfig': str(kubeconfig), 'host': 'http://c.example', 'api_key': 'over'}, environ={})
    try:
        assert client.host == 'http://c.example' and bearer(client) == 'Bearer over'
    finally:
        client.close()
    with pytest.raises(InvalidInput, match='kubeconfig: .*/nope. does not exist') as caught:
        client_from_params({'kubeconfig': str(tmp_path / 'nope')}, environ={})
    assert (caught.value.field, caught.value.rule) == ('kubeconfig', 'exists')
    with pytest.raises(KubeError, match='tried kubeconfig .* context missing'):
        client_from_params({'kubeconfig': str(kubeconfig), 'context': 'missing'}, environ={})
