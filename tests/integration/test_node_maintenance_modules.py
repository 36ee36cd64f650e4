# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_maintenance_info and node_maintenance in real ansible-playbook runs against the Kubernetes API
emulator over HTTP (lab/kube/api.py), with the seed's flatcar config. Assertions read what the modules
returned and what is stored on the Nodes."""

from __future__ import annotations

import base64
import json

import pytest
import yaml

from support.ansible import local_play, run_playbook
from lab.env.ports import free_port
from support.maintenance import APPROVED, FLATCAR, REBOOT_NEEDED, REBOOT_OK

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

PROFILE = 'cloud.sap/maintenance-profile'
STATE = 'cloud.sap/maintenance-state'
DATA = 'cloud.sap/maintenance-data'
NS = 'steward-system'


def data_of(**states):
    return json.dumps({'Profiles': {name: {'Transition': '2026-01-01T00:00:00Z', 'Current': state, 'Previous': state}
                                    for name, state in states.items()}, 'Notifications': {}})


def add_node(kube, name, labels=None, annotations=None):
    return kube.create(api_path('v1', 'nodes'), {'apiVersion': 'v1', 'kind': 'Node',
                                                 'metadata': {'name': name, 'labels': dict(labels or {}),
                                                              'annotations': dict(annotations or {})}})


def flatcar(kube, name, state, **annotations):
    labels = {PROFILE: 'flatcar', STATE: state}
    return add_node(kube, name, labels, dict({DATA: data_of(flatcar=state)}, **annotations))


def metadata(kube, name):
    md = kube.get(api_path('v1', 'nodes', name=name))['metadata']
    return md.get('labels') or {}, md.get('annotations') or {}


@pytest.fixture
def kubeconfig(kube, tmp_path):
    return kube.server.write_kubeconfig(str(tmp_path / 'kubeconfig'))


@pytest.fixture
def cluster(kube):
    """The flatcar walk at every step, plus a node without a profile and one with unreadable data."""
    flatcar(kube, 'n1-operational', 'operational')
    flatcar(kube, 'n2-required', 'maintenance-required', **{REBOOT_NEEDED: 'true'})
    flatcar(kube, 'n3-approved', 'maintenance-required', **{REBOOT_NEEDED: 'true', APPROVED: 'true'})
    flatcar(kube, 'n4-in', 'in-maintenance', **{REBOOT_NEEDED: 'true', REBOOT_OK: 'true'})
    flatcar(kube, 'n5-rebooted', 'in-maintenance', **{REBOOT_OK: 'true'})
    add_node(kube, 'n6-plain')
    add_node(kube, 'n7-broken', {PROFILE: 'flatcar', STATE: 'in-maintenance'}, {DATA: '{"Profiles": 5}'})
    kube.create(api_path('v1', 'configmaps', NS), {'apiVersion': 'v1', 'kind': 'ConfigMap',
                                                   'metadata': {'name': 'maintenance', 'namespace': NS},
                                                   'data': {'maintenance.yaml': FLATCAR}})
    kube.create(api_path('v1', 'secrets', NS), {'apiVersion': 'v1', 'kind': 'Secret', 'type': 'Opaque',
                                                'metadata': {'name': 'maintenance', 'namespace': NS},
                                                'data': {'config.yaml': base64.b64encode(FLATCAR.encode()).decode()}})
    return kube


def inline_config():
    """FLATCAR as a mapping for `config:`; Ansible would template its Go `{{ .Node.Name }}` (see the module docs),
    so the messages here are plain text."""
    config = yaml.safe_load(FLATCAR)
    for instance in config['instances']['notify']:
        instance['config']['message'] = 'node needs maintenance'
    return config


def by_name(result):
    return {n['name']: n for n in result['nodes']}


def test_info_shows_state_and_pending_checks(cluster, kubeconfig, tmp_path):
    config_file = tmp_path / 'maintenance.yaml'
    config_file.write_text(FLATCAR)
    play = local_play([
        {'name': 'all from configmap', 'steward.cluster.node_maintenance_info': {'config_source': 'configmap/%s/maintenance' % NS}},
        {'name': 'selector from secret', 'steward.cluster.node_maintenance_info': {
            'config_source': 'secret/%s/maintenance/config.yaml' % NS, 'label_selector': '%s=in-maintenance' % STATE}},
        {'name': 'one from dict', 'steward.cluster.node_maintenance_info': {'name': 'n2-required', 'config': inline_config()}},
        {'name': 'one from file in check mode', 'check_mode': True,
         'steward.cluster.node_maintenance_info': {'name': 'n3-approved', 'config_file': str(config_file)}},
        {'name': 'without config', 'steward.cluster.node_maintenance_info': {'name': 'n4-in'}},
    ], module_defaults={'group/steward.cluster.maintenance': {'kubeconfig': kubeconfig}})
    result = run_playbook(play)
    assert result.rc == 0, result.stdout[-3000:]
    assert result.changed() == 0

    everything = result.result('all from configmap')
    assert everything['config_source'] == 'configmap/steward-system/maintenance/maintenance.yaml'
    assert everything['config_warnings'] == []
    nodes = by_name(everything)
    assert sorted(nodes) == ['n1-operational', 'n2-required', 'n3-approved', 'n4-in', 'n5-rebooted', 'n6-plain', 'n7-broken']
    expect = {
        'n1-operational': ('operational', None, ['reboot_needed'],
                           'profile flatcar is operational; to maintenance-required: waiting for reboot_needed (hasAnnotation: '
                           'flatcar-linux-update.v1.flatcar-linux.net/reboot-needed is not set)'),
        'n2-required': ('maintenance-required', None, ['check_approval'],
                        'profile flatcar is maintenance-required; to in-maintenance: waiting for check_approval (hasAnnotation: '
                        'cloud.sap/maintenance-approved is not set)'),
        'n3-approved': ('maintenance-required', 'in-maintenance', [],
                        'profile flatcar is maintenance-required; moves to in-maintenance at the next reconcile'),
        'n4-in': ('in-maintenance', None, ['!reboot_needed'],
                  'profile flatcar is in-maintenance; to operational: waiting for !reboot_needed (hasAnnotation: passes)'),
        'n5-rebooted': ('in-maintenance', 'operational', [],
                        'profile flatcar is in-maintenance; moves to operational at the next reconcile'),
    }
    for name, (state, following, pending, line) in expect.items():
        node = nodes[name]
        [profile] = node['profiles']
        [transition] = profile['transitions']
        assert (node['state'], profile['state'], profile['next'], transition['pending']) == (state, state, following, pending), name
        assert node['waiting_for'] == [line]
        assert node['data']['profiles']['flatcar']['current'] == state and node['data_error'] == ''
        assert profile['last_transition'] == '2026-01-01T00:00:00Z'
    assert nodes['n2-required']['profiles'][0]['notify'] == [{'instance': 'approval_required', 'type': 'slack', 'due': True}]
    assert nodes['n4-in']['profiles'][0]['transitions'][0]['trigger'] == ['remove_reboot_ok']
    assert nodes['n4-in']['annotations'][REBOOT_OK] == 'true' and nodes['n4-in']['labels'][PROFILE] == 'flatcar'
    plain = nodes['n6-plain']
    assert (plain['state'], plain['profile_names'], plain['data']) == ('', ['default'], None)
    assert plain['waiting_for'] == ['profile default is operational; this state has no transitions']
    broken = nodes['n7-broken']
    assert broken['profiles'] == [] and broken['data'] is None and 'data.Profiles: expected a JSON object' in broken['data_error']

    assert sorted(by_name(result.result('selector from secret'))) == ['n4-in', 'n5-rebooted', 'n7-broken']
    assert result.result('selector from secret')['config_source'] == 'secret/steward-system/maintenance/config.yaml'
    [one] = result.result('one from dict')['nodes']
    assert one['name'] == 'n2-required' and one['profiles'][0]['transitions'][0]['pending'] == ['check_approval']
    [approved] = result.result('one from file in check mode')['nodes']
    assert approved['profiles'][0]['next'] == 'in-maintenance'
    [bare] = result.result('without config')['nodes']
    assert bare['profiles'] == [{'name': 'flatcar', 'state': 'in-maintenance', 'previous': 'in-maintenance',
                                 'last_transition': '2026-01-01T00:00:00Z', 'next': None, 'transitions': [], 'notify': []}]
    assert bare['waiting_for'] == [] and result.result('without config')['config_source'] == ''
    # Reading changed nothing: no trigger ran on the approved node.
    assert REBOOT_OK not in metadata(cluster, 'n3-approved')[1]


MAX_ONE = '''
intervals: {requeue: 1m}
instances:
  check:
  - {type: hasAnnotation, name: approved, config: {key: cloud.sap/maintenance-approved, value: "true"}}
  - {type: maxMaintenance, name: one_at_a_time, config: {max: 1}}
  - {type: stagger, name: stagger, config: {duration: 1h, leaseName: mc-stagger, leaseNamespace: steward-system}}
profiles:
- name: careful
  maintenance-required:
    transitions:
    - {check: approved && one_at_a_time && stagger, next: in-maintenance}
    typo: 1
'''


def test_info_reads_the_cluster_for_cluster_checks(kube, kubeconfig):
    """maxMaintenance counts the other nodes, stagger reads its Lease; neither takes anything."""
    add_node(kube, 'busy', {PROFILE: 'careful', STATE: 'in-maintenance'}, {DATA: data_of(careful='in-maintenance')})
    add_node(kube, 'waiting', {PROFILE: 'careful', STATE: 'maintenance-required'},
             {DATA: data_of(careful='maintenance-required'), APPROVED: 'true'})
    kube.create(api_path('coordination.k8s.io/v1', 'leases', NS), {
        'apiVersion': 'coordination.k8s.io/v1', 'kind': 'Lease', 'metadata': {'name': 'mc-stagger-0', 'namespace': NS},
        'spec': {'holderIdentity': 'busy', 'renewTime': '2026-01-01T00:00:00.000000Z', 'leaseDurationSeconds': 3600}})
    play = local_play([{'name': 'info', 'steward.cluster.node_maintenance_info': {
        'kubeconfig': kubeconfig, 'name': 'waiting', 'config': yaml.safe_load(MAX_ONE), 'now': '2026-01-01T00:30:00Z'}}])
    result = run_playbook(play)
    assert result.rc == 0, result.stdout[-3000:]
    info = result.result('info')
    [node] = info['nodes']
    [transition] = node['profiles'][0]['transitions']
    assert transition['pending'] == ['one_at_a_time', 'stagger']
    assert transition['checks']['one_at_a_time']['info'] == {'scope': 'all nodes in the cluster', 'maintained': 1, 'max': 1,
                                                             'nodes': ['busy']}
    assert transition['checks']['stagger']['info'] == {'availableInSec': [1800.0]}
    assert node['waiting_for'] == [
        'profile careful is maintenance-required; to in-maintenance: waiting for one_at_a_time (maxMaintenance: '
        'maintained=1, max=1, nodes=["busy"], scope="all nodes in the cluster") and stagger (stagger: availableInSec=[1800.0])']
    assert any('unknown key "typo"' in w for w in info['config_warnings'])
    lease = kube.get(api_path('coordination.k8s.io/v1', 'leases', NS, 'mc-stagger-0'))
    assert lease['spec']['holderIdentity'] == 'busy'


def test_info_errors(cluster, kubeconfig, tmp_path):
    bad = inline_config()
    bad['instances']['check'][0]['type'] = 'hasAnnotatoin'
    unreachable = 'http://127.0.0.1:%d' % free_port()
    play = local_play([
        {'name': 'missing node', 'steward.cluster.node_maintenance_info': {'name': 'nope'}},
        {'name': 'bad config', 'steward.cluster.node_maintenance_info': {'config': bad}},
        {'name': 'missing configmap', 'steward.cluster.node_maintenance_info': {'config_source': 'configmap/%s/nothere' % NS}},
        {'name': 'missing key', 'steward.cluster.node_maintenance_info': {'config_source': 'configmap/%s/maintenance/x.yaml' % NS}},
        {'name': 'bad source', 'steward.cluster.node_maintenance_info': {'config_source': 'deployment/x/y'}},
        {'name': 'unreachable', 'steward.cluster.node_maintenance_info': {'host': unreachable, 'kubeconfig': None}},
        {'name': 'no kubeconfig', 'steward.cluster.node_maintenance_info': {'kubeconfig': str(tmp_path / 'none')}},
        {'name': 'two sources', 'steward.cluster.node_maintenance_info': {'config_file': '/x', 'config_source': 'secret/a/b'}},
    ], module_defaults={'group/steward.cluster.maintenance': {'kubeconfig': kubeconfig}}, ignore_errors=True)
    result = run_playbook(play)
    msgs = {name: result.result(name).get('msg', '') for name in (
        'missing node', 'bad config', 'missing configmap', 'missing key', 'bad source', 'unreachable', 'no kubeconfig', 'two sources')}
    assert all(result.result(name).get('failed') for name in msgs), msgs
    assert msgs['missing node'] == 'name: node nope not found (API server %s)' % cluster.server.url
    assert msgs['bad config'].startswith('maintenance config: config: instances.check[0] (name "reboot_needed"): unknown plugin '
                                         'type "hasAnnotatoin"')
    assert msgs['missing configmap'] == 'config_source: configmap steward-system/nothere does not exist'
    assert msgs['missing key'] == ('config_source: configmap/steward-system/maintenance/x.yaml: ConfigMap '
                                   'steward-system/maintenance has no key "x.yaml" (keys: maintenance.yaml)')
    assert result.result('missing key')['field'] == 'config_source'
    assert msgs['bad source'] == "config_source: 'deployment/x/y': unknown kind 'deployment' (secret or configmap)"
    assert msgs['unreachable'].startswith('GET %s/api/v1/nodes: the API server did not answer' % unreachable)
    assert msgs['no kubeconfig'] == "kubeconfig: '%s' does not exist" % (tmp_path / 'none')
    assert (result.result('no kubeconfig')['field'], result.result('no kubeconfig')['rule']) == ('kubeconfig', 'exists')
    assert 'mutually exclusive' in msgs['two sources']


def test_node_maintenance_check_diff_apply_idempotent(cluster, kubeconfig):
    """The set of four: check mode writes nothing, the real run writes a merge patch, both again change nothing."""
    approve = {'name': 'n2-required', 'state': 'approved', 'annotations': {'example.com/ticket': 'CHG-1', 'example.com/absent': None},
               'labels': {'example.com/window': 'weekend'}}
    tasks = []
    for suffix, check in (('check', True), ('real', False), ('again check', True), ('again', False)):
        tasks.append({'name': 'approve ' + suffix, 'check_mode': check, 'diff': True, 'steward.cluster.node_maintenance': approve})
    before = metadata(cluster, 'n2-required')
    play = local_play(tasks[:1], module_defaults={'group/steward.cluster.maintenance': {'kubeconfig': kubeconfig}})
    result = run_playbook(play)
    assert result.rc == 0, result.stdout[-3000:]
    checked = result.result('approve check')
    assert checked['changed'] is True and metadata(cluster, 'n2-required') == before   # check mode wrote nothing
    assert checked['patch'] == {'metadata': {'labels': {'example.com/window': 'weekend'},
                                             'annotations': {APPROVED: 'true', 'example.com/ticket': 'CHG-1'}}}
    assert checked['changes'] == ["set label example.com/window='weekend'", "set annotation %s='true'" % APPROVED,
                                  "set annotation example.com/ticket='CHG-1'"]
    assert checked['diff']['before']['annotations'] == before[1]
    assert checked['diff']['after']['annotations'] == dict(before[1], **{APPROVED: 'true', 'example.com/ticket': 'CHG-1'})
    assert checked['diff']['after']['labels'] == dict(before[0], **{'example.com/window': 'weekend'})
    assert checked['state'] == 'maintenance-required' and checked['profiles'] == ['flatcar']

    result = run_playbook(local_play(tasks[1:], module_defaults={'group/steward.cluster.maintenance': {'kubeconfig': kubeconfig}}))
    assert result.rc == 0, result.stdout[-3000:]
    real = result.result('approve real')
    assert real['changed'] is True and real['patch'] == checked['patch'] and real['annotations'] == checked['diff']['after']['annotations']
    labels, annotations = metadata(cluster, 'n2-required')
    assert annotations[APPROVED] == 'true' and annotations['example.com/ticket'] == 'CHG-1' and labels['example.com/window'] == 'weekend'
    assert annotations[DATA] == before[1][DATA] and annotations[REBOOT_NEEDED] == 'true'    # other keys untouched
    for name in ('approve again check', 'approve again'):
        again = result.result(name)
        assert (again['changed'], again['patch'], again['changes']) == (False, {}, []), name
        assert again['diff']['before'] == again['diff']['after'] == real['diff']['after'], name
    assert result.changed() == 1


def test_node_maintenance_request_release_and_profiles(cluster, kubeconfig):
    play = local_play([
        {'name': 'request', 'steward.cluster.node_maintenance': {
            'name': 'n1-operational', 'state': 'requested', 'request_annotation': {REBOOT_NEEDED: True}, 'profile': ['kernel']}},
        {'name': 'replace profiles', 'steward.cluster.node_maintenance': {
            'name': 'n6-plain', 'profile': 'flatcar,kernel', 'profile_mode': 'replace'}},
        {'name': 'remove a profile', 'steward.cluster.node_maintenance': {
            'name': 'n1-operational', 'profile': ['flatcar'], 'profile_mode': 'remove'}},
        {'name': 'detach in-maintenance', 'steward.cluster.node_maintenance': {
            'name': 'n4-in', 'profile': ['other'], 'profile_mode': 'replace'}, 'check_mode': True},
        {'name': 'release', 'steward.cluster.node_maintenance': {
            'name': 'n3-approved', 'state': 'released', 'request_annotation': {REBOOT_NEEDED: 'true'}}},
        {'name': 'recover', 'steward.cluster.node_maintenance': {
            'name': 'n7-broken', 'annotations': {DATA: None}, 'labels': {STATE: None}}},
    ], module_defaults={'group/steward.cluster.maintenance': {'kubeconfig': kubeconfig}})
    result = run_playbook(play)
    assert result.rc == 0, result.stdout[-3000:]
    assert result.result('request')['patch'] == {'metadata': {'labels': {PROFILE: 'flatcar--kernel'},
                                                              'annotations': {REBOOT_NEEDED: 'true'}}}
    labels, annotations = metadata(cluster, 'n1-operational')
    assert labels[PROFILE] == 'kernel' and annotations[REBOOT_NEEDED] == 'true'
    assert result.result('remove a profile')['profiles'] == ['kernel']
    assert metadata(cluster, 'n6-plain')[0][PROFILE] == 'flatcar--kernel'
    detach = result.result('detach in-maintenance')
    assert detach['changed'] is True and metadata(cluster, 'n4-in')[0][PROFILE] == 'flatcar'
    assert any('profile flatcar is in-maintenance on node n4-in' in w for w in detach.get('warnings', []))
    assert result.result('release')['patch'] == {'metadata': {'annotations': {REBOOT_NEEDED: None, APPROVED: None}}}
    released = metadata(cluster, 'n3-approved')[1]
    assert REBOOT_NEEDED not in released and APPROVED not in released
    labels, annotations = metadata(cluster, 'n7-broken')
    assert STATE not in labels and DATA not in annotations and labels[PROFILE] == 'flatcar'


def test_node_maintenance_errors(cluster, kubeconfig):
    unreachable = 'http://127.0.0.1:%d' % free_port()
    cases = {
        'missing node': {'name': 'nope', 'state': 'approved'},
        'unreachable': {'name': 'n1-operational', 'state': 'approved', 'host': unreachable, 'kubeconfig': None},
        'bad annotation key': {'name': 'n1-operational', 'annotations': {'Bad Key/x': 'y'}},
        'bad label value': {'name': 'n1-operational', 'labels': {'example.com/x': 'not valid!'}},
        'set state label': {'name': 'n1-operational', 'labels': {STATE: 'operational'}},
        'request without key': {'name': 'n1-operational', 'state': 'requested'},
        'nothing to do': {'name': 'n1-operational'},
        'bad profile': {'name': 'n1-operational', 'profile': ['a--b']},
    }
    play = local_play([{'name': name, 'steward.cluster.node_maintenance': args} for name, args in cases.items()],
                      module_defaults={'group/steward.cluster.maintenance': {'kubeconfig': kubeconfig}}, ignore_errors=True)
    before = {n['metadata']['name']: n['metadata'] for n in cluster.list(api_path('v1', 'nodes'))}
    result = run_playbook(play)
    msgs = {name: result.result(name).get('msg', '') for name in cases}
    assert all(result.result(name).get('failed') for name in cases), msgs
    assert msgs['missing node'] == 'name: node nope not found (API server %s)' % cluster.server.url
    assert msgs['unreachable'].startswith('node n1-operational: GET %s/api/v1/nodes/n1-operational: the API server did not answer'
                                          % unreachable)
    assert msgs['bad annotation key'].startswith("annotations: 'Bad Key/x' is not a valid key: the prefix 'Bad Key'")
    assert msgs['bad label value'].startswith("labels[example.com/x]: 'not valid!' is not a valid label value")
    assert msgs['set state label'].startswith('labels[cloud.sap/maintenance-state]: the controller sets this label')
    assert msgs['request without key'] == 'state is requested but any of the following are missing: request_annotation, request_label'
    assert msgs['nothing to do'] == 'one of the following is required: annotations, labels, state, profile'
    assert msgs['bad profile'].startswith("profile: 'a--b' is not a valid profile name")
    after = {n['metadata']['name']: n['metadata'] for n in cluster.list(api_path('v1', 'nodes'))}
    assert after == before
