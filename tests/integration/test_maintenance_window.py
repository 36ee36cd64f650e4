# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""steward.cluster.maintenance_window in real ansible-playbook runs, with the REAL controller
(`python -m steward_controller --maintenance-config configmap/steward-system/maintenance`) moving the nodes
through the seed's flatcar profile on the Kubernetes API emulator.

The user's task file records, while it runs for a node, the maintenance state of every node and the
annotations the flatcar triggers set; the assertions check the order (one node at a time, in the given
order, each in-maintenance while its tasks ran and nobody else), the release and the final states.
"""

from __future__ import annotations

import json
import time

import pytest

from support.ansible import run_playbook
from lab.env.controller import ControllerProcess, wait_for

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

PLAYBOOK = 'steward.cluster.maintenance_window'
NS = 'steward-system'
STATE = 'cloud.sap/maintenance-state'
PROFILE = 'cloud.sap/maintenance-profile'
DATA = 'cloud.sap/maintenance-data'
REBOOT_NEEDED = 'flatcar-linux-update.v1.flatcar-linux.net/reboot-needed'
REBOOT_OK = 'flatcar-linux-update.v1.flatcar-linux.net/reboot-ok'
APPROVED = 'cloud.sap/maintenance-approved'
DONE = 'example.com/maintained-at'

# The seed's flatcar profile (without its Slack notifications), reconciled every second.
CONFIG = '''
intervals:
  requeue: 1s
instances:
  check:
  - type: hasAnnotation
    name: reboot_needed
    config: {key: %(needed)s, value: "true"}
  - type: hasAnnotation
    name: check_approval
    config: {key: %(approval)s, value: "true"}
  trigger:
  - type: alterAnnotation
    name: reboot-ok
    config: {key: %(ok)s, value: "true"}
  - type: alterAnnotation
    name: remove_approval
    config: {key: %(approval)s, remove: true}
  - type: alterAnnotation
    name: remove_reboot_ok
    config: {key: %(ok)s, remove: true}
profiles:
- name: flatcar
  operational:
    transitions:
    - check: reboot_needed
      next: maintenance-required
  maintenance-required:
    transitions:
    - check: check_approval
      trigger: remove_approval && reboot-ok
      next: in-maintenance
  in-maintenance:
    transitions:
    - check: "!reboot_needed"
      trigger: remove_reboot_ok
      next: operational
'''

# The user's work on a node: look at the whole cluster, record it, mark the node.
TASKS = '''
- name: Look at every node while {{ maintenance_window_node }} is in maintenance
  steward.cluster.node_maintenance_info:
    kubeconfig: "{{ maintenance_window_kubeconfig }}"
  register: everything

- name: Record what was seen
  ansible.builtin.lineinfile:
    path: "%(log)s"
    create: true
    line: >-
      {{ {'node': maintenance_window_node, 'host': inventory_hostname, 'time': now(utc=true).timestamp(),
          'entered': maintenance_window_state.state,
          'reboot_ok': maintenance_window_state.annotations['%(ok)s'] | default(''),
          'states': everything.nodes | items2dict(key_name='name', value_name='state')} | to_json }}

- name: Mark the node as maintained
  steward.cluster.node_maintenance:
    kubeconfig: "{{ maintenance_window_kubeconfig }}"
    name: "{{ maintenance_window_node }}"
    annotations:
      %(done)s: "{{ now(utc=true).isoformat() }}"
'''


def add_node(kube, name, labels=None, annotations=None):
    return kube.create(api_path('v1', 'nodes'), {'apiVersion': 'v1', 'kind': 'Node',
                                                 'metadata': {'name': name, 'labels': dict(labels or {}),
                                                              'annotations': dict(annotations or {})},
                                                 'status': {'conditions': [{'type': 'Ready', 'status': 'True'}]}})


def metadata(kube, name):
    md = kube.get(api_path('v1', 'nodes', name=name))['metadata']
    return md.get('labels') or {}, md.get('annotations') or {}


def put_config(kube, text):
    kube.create(api_path('v1', 'configmaps', NS), {'apiVersion': 'v1', 'kind': 'ConfigMap',
                                                   'metadata': {'name': 'maintenance', 'namespace': NS},
                                                   'data': {'maintenance.yaml': text}})


@pytest.fixture
def controller(kube, tmp_path):
    proc = ControllerProcess(kube.server, str(tmp_path / 'controller'),
                             args=['--maintenance-config', 'configmap/%s/maintenance' % NS]).start()
    yield proc
    code = proc.stop()
    assert code == 0, proc.log()[-3000:]


@pytest.fixture
def site(kube, tmp_path):
    """Three nodes (one already with the flatcar profile), an inventory that reaches them locally, the user's task file."""
    add_node(kube, 'node-a', {PROFILE: 'flatcar'})
    add_node(kube, 'node-b')
    add_node(kube, 'node-c', {PROFILE: 'other'})
    inventory = tmp_path / 'inventory.ini'
    inventory.write_text('localhost ansible_connection=local\n' + ''.join(
        '%s ansible_connection=local\n' % name for name in ('node-a', 'node-b', 'node-c')))
    log = tmp_path / 'seen.jsonl'
    tasks = tmp_path / 'work.yml'
    tasks.write_text(TASKS % {'log': log, 'ok': REBOOT_OK, 'done': DONE})
    return {'inventory': str(inventory), 'log': log, 'tasks': str(tasks),
            'kubeconfig': kube.server.write_kubeconfig(str(tmp_path / 'kubeconfig'))}


def window_vars(site, nodes, **extra):
    variables = {'maintenance_window_nodes': nodes, 'maintenance_window_kubeconfig': site['kubeconfig'],
                 'maintenance_window_request_annotation': {REBOOT_NEEDED: 'true'}, 'maintenance_window_profile': 'flatcar',
                 'maintenance_window_tasks': site['tasks'], 'maintenance_window_poll_interval': 1, 'maintenance_window_timeout': 60,
                 'maintenance_window_config_source': 'configmap/%s/maintenance' % NS}
    variables.update(extra)
    return variables


def test_nodes_are_maintained_one_at_a_time(kube, controller, site):
    put_config(kube, CONFIG % {'needed': REBOOT_NEEDED, 'ok': REBOOT_OK, 'approval': APPROVED})
    wait_for(lambda: all(metadata(kube, n)[0].get(STATE) == 'operational' for n in ('node-a', 'node-b', 'node-c')),
             30, 0.2, 'the controller to label every node')
    order = ['node-c', 'node-a', 'node-b']
    started = time.time()
    result = run_playbook(PLAYBOOK, inventory=site['inventory'], extra_vars=window_vars(site, order))
    elapsed = time.time() - started
    assert result.rc == 0, result.stdout[-5000:] + result.stderr[-2000:] + controller.log()[-3000:]

    seen = [json.loads(line) for line in site['log'].read_text().splitlines()]
    assert [s['node'] for s in seen] == order and [s['host'] for s in seen] == order
    for index, record in enumerate(seen):
        node = record['node']
        # While its tasks ran: this node was in-maintenance (the flatcar trigger had set reboot-ok), every other
        # node operational - the ones before it were back, the ones after it not yet requested.
        assert record['entered'] == 'in-maintenance' and record['reboot_ok'] == 'true', record
        assert record['states'] == {n: ('in-maintenance' if n == node else 'operational') for n in order}, record
        if index:
            assert record['time'] > seen[index - 1]['time']

    for name in order:
        labels, annotations = metadata(kube, name)
        assert labels[STATE] == 'operational', name
        assert REBOOT_NEEDED not in annotations and REBOOT_OK not in annotations and APPROVED not in annotations, name
        assert DONE in annotations, name
        assert json.loads(annotations[DATA])['Profiles']['flatcar']['Current'] == 'operational'
    assert metadata(kube, 'node-a')[0][PROFILE] == 'flatcar'
    assert metadata(kube, 'node-b')[0][PROFILE] == 'flatcar'
    assert metadata(kube, 'node-c')[0][PROFILE] == 'other--flatcar'          # the other profile was kept
    # Each node's walk is ordered too: the release of one node comes before the request of the next.
    maintained = [metadata(kube, n)[1][DONE] for n in order]
    assert maintained == sorted(maintained)
    assert elapsed < 120

    # A second run over a finished node requests, waits, runs the tasks and releases again: it is a new window.
    result = run_playbook(PLAYBOOK, inventory=site['inventory'], extra_vars=window_vars(site, ['node-a'], maintenance_window_tasks=''))
    assert result.rc == 0, result.stdout[-5000:]
    assert metadata(kube, 'node-a')[0][STATE] == 'operational'


def test_a_timeout_names_the_node_the_state_and_the_pending_checks(kube, controller, site):
    """The profile waits for an approval key the playbook does not set: the walk stops at the first node, with the
    reason, and the next node is never requested."""
    put_config(kube, CONFIG % {'needed': REBOOT_NEEDED, 'ok': REBOOT_OK, 'approval': 'example.com/change-approved'})
    wait_for(lambda: metadata(kube, 'node-a')[0].get(STATE) == 'operational', 30, 0.2, 'the controller to label node-a')
    result = run_playbook(PLAYBOOK, inventory=site['inventory'],
                          extra_vars=window_vars(site, ['node-a', 'node-b'], maintenance_window_timeout=8))
    assert result.rc != 0
    failure = result.result('Say why the node did not enter maintenance', host='node-a')
    assert failure['msg'] == (
        'node node-a did not reach in-maintenance within 8s: its state is maintenance-required; profile flatcar is '
        'maintenance-required; to in-maintenance: waiting for check_approval (hasAnnotation: example.com/change-approved is not set)')
    assert not site['log'].exists()                                     # the user's tasks never ran
    labels, annotations = metadata(kube, 'node-a')
    assert labels[STATE] == 'maintenance-required' and annotations[REBOOT_NEEDED] == 'true'   # left as it is
    labels, annotations = metadata(kube, 'node-b')
    assert REBOOT_NEEDED not in annotations and PROFILE not in labels   # never touched
    with pytest.raises(KeyError):
        result.result('Request maintenance of the node', host='node-b')


def test_variables_are_checked_first(kube, site):
    result = run_playbook(PLAYBOOK, inventory=site['inventory'], extra_vars={'maintenance_window_nodes': ['node-a', 'node-a'],
                                                                             'maintenance_window_request_annotation': {'a': 'b'}})
    assert result.rc != 0
    assert 'set maintenance_window_nodes to a list of distinct Node names' in result.result('Check the variables')['msg']
    result = run_playbook(PLAYBOOK, inventory=site['inventory'], extra_vars={'maintenance_window_nodes': ['missing'],
                                                                             'maintenance_window_kubeconfig': site['kubeconfig'],
                                                                             'maintenance_window_request_annotation': {'a': 'b'}})
    assert result.rc != 0
    assert result.result("Read the node's maintenance state", host='missing')['msg'] == (
        'name: node missing not found (API server %s)' % kube.server.url)


def test_check_mode_writes_nothing_and_does_not_wait(kube, site):
    """No controller: in check mode nothing would ever move, so the waits are skipped; the task file runs in check mode."""
    before = {n['metadata']['name']: n['metadata'] for n in kube.list(api_path('v1', 'nodes'))}
    result = run_playbook(PLAYBOOK, inventory=site['inventory'], check=True, diff=True,
                          extra_vars=window_vars(site, ['node-b', 'node-a'], maintenance_window_timeout=1))
    assert result.rc == 0, result.stdout[-5000:]
    for name in ('node-b', 'node-a'):
        request = result.result('Request maintenance of the node', host=name)
        assert request['changed'] is True and request['patch'] == {'metadata': {'annotations': {REBOOT_NEEDED: 'true'}}}
        assert result.result('Wait for the in-maintenance state', host=name).get('skipped') is True
        assert result.result('Mark the node as maintained', host=name)['changed'] is True
        assert result.result('Release the maintenance request', host=name)['changed'] is False   # nothing was requested
    assert result.result('Attach the maintenance profile', host='node-b')['diff']['after']['labels'][PROFILE] == 'flatcar'
    after = {n['metadata']['name']: n['metadata'] for n in kube.list(api_path('v1', 'nodes'))}
    assert after == before and not site['log'].exists()
