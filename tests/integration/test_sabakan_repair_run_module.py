# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`steward.cluster.sabakan_repair` state=run and state=absent from real ansible-playbook runs: the lab sabakan
server, the Kubernetes API emulator for the drain, real repair commands (lab/sabakan_repair_tool.py)."""

from __future__ import annotations

import sys

import yaml

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

from support.ansible import local_play, run_playbook
from lab.kube.api import repo_path

TOOL = [sys.executable, repo_path('lab', 'sabakan_repair_tool.py')]


def setup(server, tmp_path, *, member: bool):
    machine = [m for m in server.machines() if m['spec']['role'] != 'boot'][0]
    address = machine['spec']['ipv4'][0]
    server.set_state(machine['spec']['serial'], 'UNHEALTHY')
    queue = tmp_path / 'repair-queue.yml'
    queue.write_text(yaml.safe_dump({'write_index': 1, 'entries': [{
        'index': 0, 'address': address, 'machine_type': machine['spec']['bmc']['bmcType'], 'operation': 'unhealthy',
        'serial': machine['spec']['serial'], 'status': 'queued', 'created': '2026-01-01T00:00:00Z'}]}))
    cluster = tmp_path / 'cluster.yml'
    cluster.write_text(yaml.safe_dump({'name': 'lab', 'nodes': [{'address': address, 'user': 'cybozu'}] if member else []}))
    repair = {'repair_procedures': [{'machine_types': [machine['spec']['bmc']['bmcType']], 'repair_operations': [{
        'operation': 'unhealthy',
        'repair_steps': [{'repair_command': TOOL + ['--url', server.base_url, 'set-state', 'healthy'],
                          'need_drain': True, 'watch_seconds': 20}],
        'health_check_command': TOOL + ['--url', server.base_url, 'health']}]}]}
    return machine, address, {'queue_file': str(queue), 'cluster_file': str(cluster), 'repair': repair,
                              'poll_interval': 0.5, 'run_timeout': 60}


def task(args, **extra):
    return local_play([{'name': 'repair', 'steward.cluster.sabakan_repair': dict(args, **extra)}])


def test_run_drives_an_entry_to_succeeded_with_a_drain_then_absent_deletes_it(sabakan_server, kube, tmp_path):
    machine, address, args = setup(sabakan_server, tmp_path, member=True)
    kube.create(api_path('v1', 'nodes'), {'apiVersion': 'v1', 'kind': 'Node', 'metadata': {'name': 'w-0'},
                                          'status': {'addresses': [{'type': 'InternalIP', 'address': address}]}})
    kubeconfig = kube.server.write_kubeconfig(str(tmp_path / 'kubeconfig.json'))

    refused = run_playbook(task(args, state='run')).result('repair')          # a drain, and no way to do it
    assert refused['failed'] and refused['field'] == 'kubeconfig' and refused['rule'] == 'required'

    checked = run_playbook(task(args, state='run', kubeconfig=kubeconfig), check=True).result('repair')
    assert checked['changed'] is True and checked['next_action']['action'] == 'drain'
    assert 'w-0' in checked['next_action']['reason']
    assert yaml.safe_load(open(args['queue_file']))['entries'][0]['status'] == 'queued'      # nothing ran
    assert next(m for m in sabakan_server.machines() if m['spec']['serial'] == machine['spec']['serial'])[
        'status']['state'] == 'UNHEALTHY'

    res = run_playbook(task(args, state='run', kubeconfig=kubeconfig)).result('repair')
    assert res.get('entry', {}).get('status') == 'succeeded', str({k: v for k, v in res.items() if k != 'invocation'})[:3000]
    assert res['changed']
    assert [e['reason'] for e in res['events']] == ['RepairDrained', 'RepairCommand', 'RepairSucceeded']
    assert 'Node w-0 uncordoned' in res['entry']['message'] and res['entry']['nodename'] == 'w-0'
    assert not kube.get(api_path('v1', 'nodes', None, 'w-0')).get('spec', {}).get('unschedulable')
    stored = yaml.safe_load(open(args['queue_file']))['entries'][0]
    assert stored['status'] == 'succeeded' and stored['step'] == 0

    again = run_playbook(task(args, state='run', index=0, kubeconfig=kubeconfig)).result('repair')
    assert again['changed'] is False and again['entry']['status'] == 'succeeded'

    shown = run_playbook(task({'queue_file': args['queue_file']}, state='absent'), check=True).result('repair')
    assert shown['changed'] and [d['index'] for d in shown['deleted']] == [0]
    assert len(yaml.safe_load(open(args['queue_file']))['entries']) == 1
    gone = run_playbook(task({'queue_file': args['queue_file']}, state='absent')).result('repair')
    assert gone['changed'] and gone['queue_length'] == 0
    assert yaml.safe_load(open(args['queue_file']))['entries'] == []


def test_absent_refuses_an_unfinished_entry_and_run_rejects_a_bad_procedure(sabakan_server, tmp_path):
    _machine, _address, args = setup(sabakan_server, tmp_path, member=False)
    res = run_playbook(task({'queue_file': args['queue_file']}, state='absent', index=0)).result('repair')
    assert res['failed'] and res['field'] == 'index' and res['rule'] == 'finished'
    bad = dict(args['repair'], max_concurrent_repairs=0)
    res = run_playbook(task(args, state='run', repair=bad)).result('repair')
    assert res['failed'] and res['field'] == 'repair.max_concurrent_repairs' and res['rule'] == 'minimum'
    assert yaml.safe_load(open(args['queue_file']))['entries'][0]['status'] == 'queued'
