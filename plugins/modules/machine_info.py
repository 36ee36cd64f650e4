#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: machine_info
short_description: List Machines (machine-controller-manager's API) with phase, node, providerID and last operation
version_added: 0.1.0
description:
  - Reads C(machine.sapcloud.io/v1alpha1) Machines of a namespace and reports, for each, its phase, Node,
    providerID, MachineSet and MachineDeployment, and its last operation (type, state, description, error code and
    the typed step of a deletion).
  - Also summarizes the MachineDeployments of the namespace (replicas, conditions, whether a safety freeze is active).
  - Changes nothing.
options:
  namespace:
    description: Namespace to read.
    type: str
    default: default
  name:
    description: Only this Machine (a missing one returns an empty list).
    type: str
  machine_deployment:
    description: Only the Machines of this MachineDeployment.
    type: str
  label_selector:
    description: Only Machines matching this label selector (such as C(name=workers)).
    type: str
  phase:
    description: Only Machines in these phases (C(Creating) stands for the empty phase of a machine being created).
    type: list
    elements: str
    choices: [Creating, Pending, Available, Running, Unknown, Failed, CrashLoopBackOff, Terminating, InPlaceUpdating, InPlaceUpdateFailed]
extends_documentation_fragment:
  - steward.cluster.kube_connection
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  action_group:
    support: full
    membership: [steward.cluster.machines]
  check_mode:
    support: full
    details: Reads only; the same answer in check mode.
  diff_mode:
    support: N/A
    details: Changes nothing.
  platform:
    platforms: posix
seealso:
  - module: steward.cluster.machine_deployment
requirements:
  - kubernetes (the Python client)
author: steward.cluster developers (@steward)
'''

EXAMPLES = r'''
- name: Every machine of a pool
  steward.cluster.machine_info:
    namespace: shoot--prod
    machine_deployment: workers
  register: pool

- name: Machines that are not Running
  ansible.builtin.debug:
    msg: "{{ pool.machines | rejectattr('phase', 'equalto', 'Running') | map(attribute='name') }}"

- name: Wait until no machine is being replaced
  steward.cluster.machine_info:
    namespace: shoot--prod
    phase: [Failed, Terminating, Pending, CrashLoopBackOff, Creating]
  register: busy
  until: busy.machines | length == 0
  retries: 60
  delay: 10
'''

RETURN = r'''
machines:
  description: One entry per Machine, sorted by name.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The Machine name.
      type: str
      sample: workers-5bc6dd7c8f-x2k9p
    phase:
      description: C(status.currentStatus.phase) (empty while the VM is being created).
      type: str
      sample: Running
    node:
      description: The Node backing the machine (label C(node)).
      type: str
    provider_id:
      description: The VM (C(aws:///<region>/<instance-id>), C(sabakan:///<serial>)).
      type: str
    machine_set:
      description: The owning MachineSet.
      type: str
    machine_deployment:
      description: The MachineDeployment of the MachineSet.
      type: str
    last_operation:
      description: C(type), C(state), C(description), C(error_code), C(step) (deletion and creation steps), C(last_update_time).
      type: dict
    node_ready:
      description: The Node's Ready status as last copied into the machine (C(True), C(False), C(Unknown)).
      type: str
machine_deployments:
  description: The namespace's MachineDeployments (or only O(machine_deployment)).
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Name.
      type: str
    replicas:
      description: C(spec.replicas).
      type: int
    ready:
      description: Every machine updated, Running and available.
      type: bool
    frozen:
      description: The active Frozen condition (reason names the safety rule), or null.
      type: dict
    conditions:
      description: C(status.conditions).
      type: list
      elements: dict
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.kube.args import KUBE_CONNECTION_SPEC, client_from_params
from ansible_collections.steward.cluster.plugins.module_utils.common.argspec import argspec
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError
from ansible_collections.steward.cluster.plugins.module_utils.machines.ansible_view import describe_machine
from ansible_collections.steward.cluster.plugins.module_utils.kube.mcm import readiness
from ansible_collections.steward.cluster.plugins.module_utils.machines.constants import Phase
from ansible_collections.steward.cluster.plugins.module_utils.kube.mcm import API_VERSION
from ansible_collections.steward.cluster.plugins.module_utils.machines.params import parse_machine_info

PHASE_CHOICES = ['Creating'] + [p.value for p in Phase if p.value]
SPEC = argspec(
    KUBE_CONNECTION_SPEC,
    namespace=dict(type='str', default='default'),
    name=dict(type='str'),
    machine_deployment=dict(type='str'),
    label_selector=dict(type='str'),
    phase=dict(type='list', elements='str', choices=PHASE_CHOICES),
)


def collect(params):
    namespace = parse_machine_info(params)
    client = client_from_params(params)
    try:
        machines = client.list(api_path(API_VERSION, 'machines', namespace), label_selector=params['label_selector'])
        sets = {s['metadata']['uid']: s for s in client.list(api_path(API_VERSION, 'machinesets', namespace))}
        deployments = {d['metadata']['uid']: d for d in client.list(api_path(API_VERSION, 'machinedeployments', namespace))}
    finally:
        client.close()
    described = sorted((describe_machine(m, sets, deployments) for m in machines), key=lambda m: m['name'])
    if params['name']:
        described = [m for m in described if m['name'] == params['name']]
    if params['machine_deployment']:
        described = [m for m in described if m['machine_deployment'] == params['machine_deployment']]
    if params['phase']:
        wanted = {'' if p == 'Creating' else p for p in params['phase']}
        described = [m for m in described if m['phase'] in wanted]
    summaries = []
    for md in sorted(deployments.values(), key=lambda d: d['metadata']['name']):
        if params['machine_deployment'] and md['metadata']['name'] != params['machine_deployment']:
            continue
        state = readiness(md)
        summaries.append(dict(name=md['metadata']['name'], replicas=state['desired'], ready=state['ready'],
                              updated=state['updated'], available=state['available'], frozen=state['frozen'],
                              paused=state['paused'], conditions=(md.get('status') or {}).get('conditions') or []))
    return described, summaries


def act(p, check_mode):
    machines, deployments = collect(p)
    return dict(changed=False, machines=machines, machine_deployments=deployments)


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    shell.run(module, act, KubeError, what='machines of namespace %s' % module.params['namespace'])


if __name__ == '__main__':
    main()
