# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The repair drills of issue 28, end to end: the real controller program (loops sabakan and repair) against
the Kubernetes API emulator and the lab sabakan server, on free ports. The repair commands are real processes
(lab/sabakan_repair_tool.py) that move the machine's state through sabakan's REST API, as a site's script would.

1. UNHEALTHY -> entry queued -> Node drained (its Pod evicted, the PDB allowing it) -> repair command ->
   HEALTHY -> Node uncordoned -> entry succeeded;
2. a step that outlasts command_timeout_seconds -> entry failed, the Node left cordoned and named in a Warning;
3. a repair storm above max_concurrent_repairs -> the entries beyond it wait, never more than the limit at once.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Dict, List

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path

from lab.env.controller import ControllerProcess, wait_for
from lab.kube.api import repo_path
from test_controller_sabakan import (  # noqa: E402  (the sabakan tests' helpers: one copy)
    CONSTRAINTS, REPAIRS, create_integration, create_nodes, nodes_by_address,
)

TOOL = [sys.executable, repo_path('lab', 'sabakan_repair_tool.py')]
POD_NS = 'apps'


@pytest.fixture
def controller(kube, tmp_path):
    proc = ControllerProcess(kube.server, str(tmp_path / 'controller'), args=['--controllers', 'sabakan,repair']).start()
    yield proc
    code = proc.stop()
    assert code == 0, proc.log()[-3000:]
    assert '"level": "ERROR"' not in proc.log(), proc.log()[-3000:]


def workers(sabakan) -> List[Dict[str, Any]]:
    """Worker machines that are Nodes (create_nodes makes one per non-boot machine)."""
    return [m for m in sabakan.machines() if m['spec']['role'] != 'boot']


def procedures(sabakan, machine_type: str, repair_command: List[str], **step: Any) -> Dict[str, Any]:
    return {'repair_procedures': [{
        'machine_types': [machine_type],
        'repair_operations': [{
            'operation': 'unhealthy',
            'repair_steps': [dict({'repair_command': repair_command, 'need_drain': True, 'watch_seconds': 30}, **step)],
            'health_check_command': TOOL + ['--url', sabakan.base_url, 'health'],
            'command_timeout_seconds': 10,
        }]}],
        'max_concurrent_repairs': 1, 'eviction_timeout_seconds': 20}


def entry(kube: KubeClient, address: str) -> Dict[str, Any]:
    return kube.get(REPAIRS + '/repair-' + address.replace('.', '-'))


def entry_status(kube: KubeClient, address: str) -> Dict[str, Any]:
    obj = kube.get_or_none(REPAIRS + '/repair-' + address.replace('.', '-'))
    return (obj or {}).get('status') or {}


def entry_events(kube: KubeClient, name: str) -> List[Dict[str, Any]]:
    return [e for e in kube.list(api_path('v1', 'events', 'steward-system'))
            if (e.get('involvedObject') or {}).get('name') == name]


def add_pod(kube: KubeClient, name: str, node: str) -> None:
    kube.create(api_path('v1', 'pods', POD_NS), {
        'apiVersion': 'v1', 'kind': 'Pod',
        'metadata': {'name': name, 'namespace': POD_NS, 'labels': {'app': 'web'},
                     'ownerReferences': [{'apiVersion': 'apps/v1', 'kind': 'ReplicaSet', 'name': 'web', 'uid': 'uid-web',
                                          'controller': True, 'blockOwnerDeletion': True}]},
        'spec': {'nodeName': node, 'containers': [{'name': 'c', 'image': 'x'}]},
        'status': {'phase': 'Running', 'conditions': [{'type': 'Ready', 'status': 'True'}]}})


def test_unhealthy_machine_is_drained_repaired_uncordoned_and_succeeds(kube, sabakan_server, controller):
    create_nodes(kube, sabakan_server)
    machine = workers(sabakan_server)[-1]
    address, serial = machine['spec']['ipv4'][0], machine['spec']['serial']
    node = nodes_by_address(kube)[address]['metadata']['name']
    add_pod(kube, 'web-1', node)
    add_pod(kube, 'web-2', 'elsewhere')
    kube.create(api_path('policy/v1', 'poddisruptionbudgets', POD_NS), {
        'apiVersion': 'policy/v1', 'kind': 'PodDisruptionBudget', 'metadata': {'name': 'web', 'namespace': POD_NS},
        'spec': {'minAvailable': 1, 'selector': {'matchLabels': {'app': 'web'}}}})
    repair = procedures(sabakan_server, machine['spec']['bmc']['bmcType'],
                        TOOL + ['--url', sabakan_server.base_url, 'set-state', 'healthy'])
    create_integration(kube, sabakan_server, constraints=dict(CONSTRAINTS, **{'maximum-repair-queue-entries': 3}),
                       autoRepair={'enabled': True}, repair=repair)
    wait_for(lambda: kube.list(api_path('v1', 'configmaps', 'infra')), 30, 0.2, 'the first cycle')

    began = time.time()
    sabakan_server.set_state(serial, 'UNHEALTHY')
    wait_for(lambda: entry_status(kube, address).get('status') == 'succeeded', 60, 0.2, 'the entry to succeed')
    took = time.time() - began
    print('UNHEALTHY -> succeeded in %.1fs' % took)

    assert next(m for m in sabakan_server.machines() if m['spec']['serial'] == serial)['status']['state'] == 'HEALTHY'
    st = entry_status(kube, address)
    assert st['nodeName'] == node and st['step'] == 0 and st['cordoned'] is False
    assert 'repair succeeded at step 0' in st['message'] and 'Node %s uncordoned' % node in st['message']
    assert not kube.get(api_path('v1', 'nodes', None, node)).get('spec', {}).get('unschedulable')
    pods = {p['metadata']['name'] for p in kube.list(api_path('v1', 'pods', POD_NS))}
    assert pods == {'web-2'}     # web-1 was evicted (the PDB allowed one), web-2 elsewhere untouched
    name = entry(kube, address)['metadata']['name']
    reasons = [e['reason'] for e in sorted(entry_events(kube, name), key=lambda e: e.get('firstTimestamp') or '')]
    for reason in ('RepairEntryCreated', 'RepairDrained', 'RepairCommand', 'RepairSucceeded'):
        assert reason in reasons, reasons
    (command,) = [e for e in entry_events(kube, name) if e['reason'] == 'RepairCommand']
    assert 'python' in command['message'] and '-> HEALTHY' in command['message']   # the command's output
    assert sabakan_server.base_url not in command['message'].split('exited')[0]     # the arguments are not shown
    # The entry stays until a person deletes it (no deleteFinishedAfter): CKE's rule.
    time.sleep(2)
    assert entry_status(kube, address)['status'] == 'succeeded'


def test_step_that_times_out_fails_the_entry_and_leaves_the_node_cordoned(kube, sabakan_server, controller):
    create_nodes(kube, sabakan_server)
    machine = workers(sabakan_server)[-1]
    address, serial = machine['spec']['ipv4'][0], machine['spec']['serial']
    node = nodes_by_address(kube)[address]['metadata']['name']
    repair = procedures(sabakan_server, machine['spec']['bmc']['bmcType'], ['sh', '-c', 'sleep 60'],
                        command_timeout_seconds=2)
    sabakan_server.set_state(serial, 'UNHEALTHY')
    create_integration(kube, sabakan_server, constraints=dict(CONSTRAINTS, **{'maximum-repair-queue-entries': 3}),
                       autoRepair={'enabled': True, 'deleteFinishedAfter': '4s'}, repair=repair)
    wait_for(lambda: entry_status(kube, address).get('status') == 'failed', 60, 0.2, 'the entry to fail')
    st = entry_status(kube, address)
    assert 'killed at its deadline' in st['message'] and node in st['message']
    assert kube.get(api_path('v1', 'nodes', None, node))['spec'].get('unschedulable') is True   # left cordoned
    name = 'repair-' + address.replace('.', '-')
    warnings = [e for e in entry_events(kube, name) if e['type'] == 'Warning']
    assert any(e['reason'] == 'RepairFailed' and 'Node %s' % node in e['message'] for e in warnings), warnings
    assert any(e['reason'] == 'RepairCommandFailed' and 'sh killed at its deadline' in e['message']
               for e in warnings), warnings
    # deleteFinishedAfter: the finished entry is deleted by the controller, reported on the integration; the
    # machine is still UNHEALTHY, so the next cycle queues a new entry for it (seed 001: no entry, no block).
    wait_for(lambda: any(e['reason'] == 'RepairEntryDeleted' for e in kube.list(api_path('v1', 'events', 'infra'))),
             30, 0.2, 'the failed entry to be deleted after deleteFinishedAfter')


def test_repair_storm_beyond_max_concurrent_repairs_waits(kube, sabakan_server, controller):
    create_nodes(kube, sabakan_server)
    storm = workers(sabakan_server)[-3:]
    types = {m['spec']['bmc']['bmcType'] for m in storm}
    command = ['sh', '-c', 'sleep 1.5 && exec "$0" "$@"'] + TOOL + [
        '--url', sabakan_server.base_url, 'set-state', 'healthy']
    repair = procedures(sabakan_server, 'x', command, need_drain=False)
    repair['repair_procedures'][0]['machine_types'] = sorted(types)
    for machine in storm:
        sabakan_server.set_state(machine['spec']['serial'], 'UNHEALTHY')
    create_integration(kube, sabakan_server, constraints=dict(CONSTRAINTS, **{'maximum-repair-queue-entries': 5}),
                       autoRepair={'enabled': True}, repair=repair)
    addresses = [m['spec']['ipv4'][0] for m in storm]
    most = 0
    waited = False
    deadline = time.time() + 90
    while time.time() < deadline:
        statuses = [entry_status(kube, a) for a in addresses]
        most = max(most, sum(1 for s in statuses if s.get('status') == 'processing'))
        waited = waited or any(s.get('status') == 'queued' and 'max_concurrent_repairs=1' in (s.get('message') or '')
                               for s in statuses)
        if all(s.get('status') == 'succeeded' for s in statuses):
            break
        time.sleep(0.1)
    assert [entry_status(kube, a).get('status') for a in addresses] == ['succeeded'] * 3
    assert most == 1 and waited
    waiting = [e for e in kube.list(api_path('v1', 'events', 'steward-system')) if e['reason'] == 'RepairWaiting']
    assert waiting and all('max_concurrent_repairs=1' in e['message'] for e in waiting)
