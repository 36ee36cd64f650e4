"""The steward.cluster.sabakan inventory plugin through `ansible-inventory --list`, from a cluster file
and live from the lab sabakan server over HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest
import yaml

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.client import SabakanClient
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.generator import generate
from support.ansible import VENV_BIN, ansible_env

TEMPLATE = {
    'name': 'lab',
    'nodes': [
        {'user': 'cybozu', 'control_plane': True, 'labels': {'cke.cybozu.com/role': 'cs'}},
        {'user': 'cybozu', 'labels': {'cke.cybozu.com/role': 'cs', 'cke.cybozu.com/weight': '2.0'}},
        {'user': 'storage-admin', 'labels': {'cke.cybozu.com/role': 'ss', 'cke.cybozu.com/weight': '1.0'},
         'taints': [{'key': 'cke.cybozu.com/role', 'value': 'storage', 'effect': 'NoExecute'}]},
    ],
    'service_subnet': '10.68.0.0/16',
}
CONSTRAINTS = {'control-plane-count': 3, 'minimum-workers': 6}


def inventory(tmp_path, config, name='cluster.sabakan.yml', fail_unparsed=True):
    """`ansible-inventory -i <config> --list`; returns (returncode, parsed JSON or None, stderr)."""
    path = tmp_path / name
    path.write_text(yaml.safe_dump(config))
    env = ansible_env({'ANSIBLE_INVENTORY_UNPARSED_FAILED': 'True' if fail_unparsed else 'False'})
    proc = subprocess.run([os.path.join(VENV_BIN, 'ansible-inventory'), '-i', str(path), '--list'],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=120, check=False)
    try:
        data = plain(json.loads(proc.stdout))
    except ValueError:
        data = None
    return proc.returncode, data, proc.stderr


def plain(value):
    """ansible-inventory writes untrusted strings (all of ours: they come from sabakan) as {"__ansible_unsafe": s}."""
    if isinstance(value, dict):
        if set(value) == {'__ansible_unsafe'}:
            return value['__ansible_unsafe']
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def hosts(data, group):
    return sorted(data.get(group, {}).get('hosts', []))


@pytest.fixture
def lab(sabakan_server, tmp_path):
    """The lab server, a template file, and a cluster file generated from the server's machines."""
    template_file = tmp_path / 'template.yml'
    template_file.write_text(yaml.safe_dump(TEMPLATE))
    machines = SabakanClient(sabakan_server.url).search()
    cluster = generate(TEMPLATE, CONSTRAINTS, machines)
    cluster_file = tmp_path / 'cluster.yml'
    cluster_file.write_text(yaml.safe_dump(cluster))
    return {'server': sabakan_server, 'cluster': cluster, 'cluster_file': str(cluster_file),
            'template_file': str(template_file), 'machines': machines}


def check_hosts(data, cluster, machines):
    """Every node is a host with the documented groups and variables."""
    serial = {m['spec']['ipv4'][0]: m['spec']['serial'] for m in machines}
    nodes = {n['address']: n for n in cluster['nodes']}
    assert sorted(data['_meta']['hostvars']) == sorted(nodes)
    assert hosts(data, 'control_plane') == sorted(a for a, n in nodes.items() if n['control_plane'])
    assert hosts(data, 'workers') == sorted(a for a, n in nodes.items() if not n['control_plane'])
    for address, node in nodes.items():
        hostvars = data['_meta']['hostvars'][address]
        rack = int(node['labels']['cke.cybozu.com/rack'])
        role = node['labels']['cke.cybozu.com/role']
        assert hostvars['ansible_host'] == address
        assert hostvars['ansible_user'] == node['user']
        assert hostvars['sabakan_serial'] == serial[address]
        assert hostvars['sabakan_rack'] == rack
        assert hostvars['sabakan_role'] == role
        assert hostvars['sabakan_control_plane'] is node['control_plane']
        assert hostvars['sabakan_labels'] == node['labels']
        assert hostvars['sabakan_annotations'] == node['annotations']
        assert hostvars['sabakan_taints'] == node['taints']
        assert address in hosts(data, 'role_' + role)
        assert address in hosts(data, 'rack_%d' % rack)


def test_hosts_from_a_cluster_file(lab, tmp_path):
    rc, data, stderr = inventory(tmp_path, {'plugin': 'steward.cluster.sabakan', 'cluster_file': 'cluster.yml'})
    assert rc == 0, stderr
    check_hosts(data, lab['cluster'], lab['machines'])
    assert len(hosts(data, 'control_plane')) == 3 and len(hosts(data, 'workers')) == 6
    assert Counter(data['_meta']['hostvars'][h]['sabakan_role'] for h in hosts(data, 'workers')) == {'cs': 4, 'ss': 2}
    storage = hosts(data, 'role_ss')
    assert {data['_meta']['hostvars'][h]['ansible_user'] for h in storage} == {'storage-admin'}
    assert set(data['all']['children']) >= {'control_plane', 'workers', 'role_cs', 'role_ss'}
    assert {g for g in data['all']['children'] if g.startswith('rack_')} <= {'rack_0', 'rack_1', 'rack_2', 'rack_3'}


def test_values_from_sabakan_are_never_templated(lab, tmp_path):
    """A sabakan label is data from outside: ansible-inventory marks every string we set as unsafe."""
    path = tmp_path / 'cluster.sabakan.yml'
    path.write_text(yaml.safe_dump({'plugin': 'steward.cluster.sabakan', 'cluster_file': 'cluster.yml'}))
    proc = subprocess.run([os.path.join(VENV_BIN, 'ansible-inventory'), '-i', str(path), '--list'],
                          capture_output=True, text=True, env=ansible_env(), cwd=str(tmp_path), timeout=120, check=False)
    node = lab['cluster']['nodes'][0]
    hostvars = json.loads(proc.stdout)['_meta']['hostvars'][node['address']]
    assert hostvars['ansible_host'] == {'__ansible_unsafe': node['address']}
    assert hostvars['sabakan_role'] == {'__ansible_unsafe': node['labels']['cke.cybozu.com/role']}
    assert hostvars['sabakan_rack'] == int(node['labels']['cke.cybozu.com/rack'])


def test_constructed_features(lab, tmp_path):
    config = {
        'plugin': 'steward.cluster.sabakan', 'cluster_file': lab['cluster_file'],
        'compose': {'node_zone': "sabakan_labels['topology.kubernetes.io/zone']"},
        'groups': {'no_execute': "sabakan_taints | selectattr('effect', 'equalto', 'NoExecute') | list | length > 0"},
        'keyed_groups': [{'key': "sabakan_labels['sabakan.cke.cybozu.com/product']", 'prefix': 'product'}],
    }
    rc, data, stderr = inventory(tmp_path, config)
    assert rc == 0, stderr
    for address, node in ((n['address'], n) for n in lab['cluster']['nodes']):
        hostvars = data['_meta']['hostvars'][address]
        assert hostvars['node_zone'] == 'rack' + node['labels']['cke.cybozu.com/rack']
        assert address in hosts(data, 'product_' + node['labels']['sabakan.cke.cybozu.com/product'])
    assert hosts(data, 'no_execute') == hosts(data, 'role_ss')


def test_live_generation_gives_the_same_hosts_as_the_generated_file(lab, tmp_path):
    config = {'plugin': 'steward.cluster.sabakan', 'url': lab['server'].url, 'template_file': 'template.yml',
              'constraints': CONSTRAINTS}
    rc, data, stderr = inventory(tmp_path, config, name='live.sabakan.yaml')
    assert rc == 0, stderr
    check_hosts(data, lab['cluster'], lab['machines'])


def test_live_with_a_cluster_file_shows_the_next_cluster_and_writes_nothing(lab, tmp_path):
    server = lab['server']
    victim = next(n['address'] for n in lab['cluster']['nodes'] if not n['control_plane'])
    serial = next(m['spec']['serial'] for m in lab['machines'] if m['spec']['ipv4'][0] == victim)
    server.set_state(serial, 'RETIRING')
    before = open(lab['cluster_file']).read()
    config = {'plugin': 'steward.cluster.sabakan', 'url': server.url, 'template': TEMPLATE,
              'constraints': CONSTRAINTS, 'cluster_file': 'cluster.yml'}
    rc, data, stderr = inventory(tmp_path, config)
    assert rc == 0, stderr
    taints = data['_meta']['hostvars'][victim]['sabakan_taints']
    assert {'key': 'cke.cybozu.com/state', 'value': 'retiring', 'effect': 'NoExecute'} in taints
    assert len(hosts(data, 'workers')) == 7  # a healthy replacement joins (increase worker)
    assert open(lab['cluster_file']).read() == before


@pytest.mark.parametrize('config, expected', [
    ({}, 'SourceError: set cluster_file (hosts from a cluster file), or url or machines_file'),
    ({'cluster_file': 'missing.yml'}, 'FileError: cluster file '),
    ({'cluster_file': 'cluster.yml', 'template_file': 'template.yml'}, 'SourceError: template and template_file need'),
    ({'url': 'URL'}, 'SourceError: live generation from url needs template or template_file'),
    ({'url': 'URL', 'template_file': 'template.yml', 'constraints': {'minimum-workers': 99}}, 'NotAvailable: '),
    ({'url': 'URL', 'template_file': 'template.yml', 'variables': {'having': {'states': ['UP']}}},
     "SabakanVariablesError: variables: having.states[0]: 'UP' is not a machine state"),
])
def test_configuration_errors_are_reported(lab, tmp_path, config, expected):
    config = dict({'plugin': 'steward.cluster.sabakan'}, **{k: (lab['server'].url if v == 'URL' else v)
                                                            for k, v in config.items()})
    rc, data, stderr = inventory(tmp_path, config)
    assert rc != 0
    assert expected in ' '.join(stderr.split())


def test_sabakan_outage_is_reported(lab, tmp_path):
    lab['server'].set_fault('http500')
    config = {'plugin': 'steward.cluster.sabakan', 'url': lab['server'].url, 'template_file': 'template.yml'}
    rc, data, stderr = inventory(tmp_path, config)
    assert rc != 0 and 'SabakanUnavailable: sabakan at %s failed with HTTP 500' % lab['server'].url in stderr


def test_only_files_named_sabakan_yml_are_taken(lab, tmp_path):
    rc, data, stderr = inventory(tmp_path, {'plugin': 'steward.cluster.sabakan', 'cluster_file': 'cluster.yml'},
                                 name='hosts.yml')
    assert rc != 0 and "could not be verified by inventory plugin 'steward.cluster.sabakan'" in stderr


def test_playbook_uses_the_inventory(lab, tmp_path):
    """The groups work for plays: count the control planes through a play that only runs locally."""
    config = tmp_path / 'cluster.sabakan.yml'
    config.write_text(yaml.safe_dump({'plugin': 'steward.cluster.sabakan', 'cluster_file': lab['cluster_file']}))
    playbook = tmp_path / 'play.yml'
    playbook.write_text(yaml.safe_dump([{'hosts': 'control_plane', 'gather_facts': False, 'connection': 'local',
                                         'tasks': [{'name': 'who', 'ansible.builtin.debug': {
                                             'msg': '{{ sabakan_serial }} {{ sabakan_rack }}'}}]}]))
    env = ansible_env()
    proc = subprocess.run([os.path.join(VENV_BIN, 'ansible-playbook'), '-i', str(config), str(playbook),
                           '-e', 'ansible_python_interpreter=%s' % sys.executable],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout[proc.stdout.index('{'):])
    ran = result['plays'][0]['tasks'][0]['hosts']
    cps = [n for n in lab['cluster']['nodes'] if n['control_plane']]
    assert sorted(ran) == sorted(n['address'] for n in cps)
    for node in cps:
        expected = '%s %s' % (node['annotations']['cke.cybozu.com/serial'], node['labels']['cke.cybozu.com/rack'])
        assert ran[node['address']]['msg'] == expected
