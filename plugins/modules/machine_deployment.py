#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: machine_deployment
short_description: Create, scale, update or delete a MachineDeployment (machine-controller-manager's API)
version_added: 0.1.0
description:
  - Manages a C(machine.sapcloud.io/v1alpha1) MachineDeployment, which the steward controller's C(machines) loop
    (or machine-controller-manager itself) turns into MachineSets and Machines.
  - Only the options given are applied; an existing deployment keeps every field the task does not name, so
    O(replicas) alone scales and changes nothing else.
  - A new deployment gets MCM's conventions - selector and template label C(name=<name>), strategy RollingUpdate
    with maxSurge 1 and maxUnavailable 1, 0 replicas unless O(replicas) is given - and needs O(class_name).
  - Changing O(class_name), O(labels) or O(annotations) rolls the machines (a new MachineSet); the node template
    (O(node_labels), O(node_annotations), O(node_taints)) and the timeouts change in place, as in MCM.
  - With O(wait), the task returns once every machine of the current template is Running and available (or the
    deployment is gone, for O(state=absent)); a paused deployment ends the wait at once.
options:
  name:
    description: Name of the MachineDeployment (a DNS subdomain).
    type: str
    required: true
  namespace:
    description: Namespace of the MachineDeployment and of its MachineClass.
    type: str
    default: default
  state:
    description:
      - V(present) creates or updates; V(absent) deletes the deployment, which deletes its MachineSets, Machines and
        their VMs.
    type: str
    choices: [present, absent]
    default: present
  replicas:
    description: Number of machines. Not given, an existing deployment keeps its count (a new one gets 0).
    type: int
  class_name:
    description: The MachineClass machines are created from (same namespace). Required to create a deployment.
    type: str
    aliases: [machine_class]
  labels:
    description:
      - Labels of the machine template (the label C(name=<name>) is always added). Changing them rolls the machines.
    type: dict
  annotations:
    description: Annotations of the machine template. Changing them rolls the machines (MCM's rollout trigger).
    type: dict
  node_labels:
    description: Labels the controller puts on each machine's Node (changed in place, no rollout).
    type: dict
  node_annotations:
    description: Annotations the controller puts on each machine's Node (changed in place, no rollout).
    type: dict
  node_taints:
    description: Taints the controller puts on each machine's Node (C(key), C(value), C(effect)).
    type: list
    elements: dict
  creation_timeout:
    description: A machine that has not joined in this time (Go duration, such as C(20m)) is Failed and replaced.
    type: str
  health_timeout:
    description: An Unknown machine is Failed after this time (Go duration, such as C(10m)), subject to the safety limits.
    type: str
  drain_timeout:
    description: A drain blocked this long (Go duration, such as C(2h)) is forced.
    type: str
  max_evict_retries:
    description: Eviction attempts per pod before it is deleted (one every 20 seconds).
    type: int
  node_conditions:
    description: Node conditions that make a machine unhealthy when True (default the controller's C(--node-conditions)).
    type: list
    elements: str
  disable_health_timeout:
    description: Never fail machines of this deployment for their health (creation timeouts still apply).
    type: bool
  strategy:
    description: How a template change rolls out.
    type: str
    choices: [RollingUpdate, Recreate, InPlaceUpdate]
  orchestration_type:
    description: With O(strategy=InPlaceUpdate) (MCM's in-place update - the machines' driver updates each machine where
      it stands, one drain per node), who selects the nodes - C(Auto) the controller, O(max_unavailable) at a time;
      C(Manual) the operator, by labelling a Node C(node.machine.sapcloud.io/selected-for-update=true).
    type: str
    choices: [Auto, Manual]
    default: Auto
  max_surge:
    description: With O(strategy=RollingUpdate), machines above O(replicas) during a rollout (integer or percentage, rounded up).
    type: raw
    default: 1
  max_unavailable:
    description: With O(strategy=RollingUpdate) or O(strategy=InPlaceUpdate), machines below O(replicas) during a rollout
      (integer or percentage, rounded down).
    type: raw
    default: 1
  min_ready_seconds:
    description: A machine counts as available after being Running this long.
    type: int
  revision_history_limit:
    description: Old, empty MachineSets kept for rollback (not given, all are kept).
    type: int
  progress_deadline_seconds:
    description: A rollout that makes no progress this long gets the condition reason C(ProgressDeadlineExceeded).
    type: int
  paused:
    description: Pause (or resume with V(false)) the rollout; scaling still happens.
    type: bool
  wait:
    description: Wait until the deployment is ready (every machine updated, Running and available) or gone.
    type: bool
    default: false
  wait_timeout:
    description: Seconds O(wait) may take, every poll included.
    type: int
    default: 600
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
    details: Validates every option and reads the deployment; reports the change without writing it.
  diff_mode:
    support: full
    details: The deployment before and after (without status and server-set metadata).
  platform:
    platforms: posix
seealso:
  - module: steward.cluster.machine_info
requirements:
  - kubernetes (the Python client)
author: steward.cluster developers (@steward)
'''

EXAMPLES = r'''
- name: A pool of three workers from an MCM-style AWS MachineClass
  steward.cluster.machine_deployment:
    name: workers
    namespace: shoot--prod
    class_name: workers-eu-west-1a
    replicas: 3
    health_timeout: 10m
    wait: true
    wait_timeout: 900

- name: Scale it (nothing else changes)
  steward.cluster.machine_deployment:
    name: workers
    namespace: shoot--prod
    replicas: 5

- name: Roll the machines to a new class, one at a time
  steward.cluster.machine_deployment:
    name: workers
    namespace: shoot--prod
    class_name: workers-eu-west-1a-v2
    strategy: RollingUpdate
    max_surge: 1
    max_unavailable: 0
    wait: true

- name: Delete it with its machines and VMs
  steward.cluster.machine_deployment:
    name: workers
    namespace: shoot--prod
    state: absent
    wait: true
'''

RETURN = r'''
machine_deployment:
  description: The MachineDeployment as stored (as it would be, in check mode); empty after O(state=absent).
  returned: always
  type: dict
operation:
  description: What the task did - C(create), C(patch), C(delete), C(none) or C(absent) (already gone).
  returned: always
  type: str
  sample: patch
patch:
  description: The merge patch sent (or that would be sent) to an existing deployment.
  returned: when O(state=present) and the deployment existed
  type: dict
readiness:
  description: With O(wait), the last look at the rollout.
  returned: when O(wait) and O(state=present)
  type: dict
  contains:
    ready:
      description: Every machine updated, Running and available.
      type: bool
    desired:
      description: O(replicas).
      type: int
    updated:
      description: Machines of the current template.
      type: int
    available:
      description: Machines Running for at least minReadySeconds.
      type: int
    frozen:
      description: The Frozen condition (a safety limit stopping replacements), when active.
      type: dict
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.kube.args import KUBE_CONNECTION_SPEC, client_from_params
from ansible_collections.steward.cluster.plugins.module_utils.common.argspec import argspec
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError
from ansible_collections.steward.cluster.plugins.module_utils.machines.ansible_view import Wait, apply_change, plan_change
from ansible_collections.steward.cluster.plugins.module_utils.kube.mcm import API_VERSION
from ansible_collections.steward.cluster.plugins.module_utils.machines.errors import MachinesError
from ansible_collections.steward.cluster.plugins.module_utils.machines.params import parse_machine_deployment


SPEC = argspec(
    KUBE_CONNECTION_SPEC,
    name=dict(type='str', required=True),
    namespace=dict(type='str', default='default'),
    state=dict(type='str', choices=['present', 'absent'], default='present'),
    replicas=dict(type='int'),
    class_name=dict(type='str', aliases=['machine_class']),
    labels=dict(type='dict'),
    annotations=dict(type='dict'),
    node_labels=dict(type='dict'),
    node_annotations=dict(type='dict'),
    node_taints=dict(type='list', elements='dict'),
    creation_timeout=dict(type='str'),
    health_timeout=dict(type='str'),
    drain_timeout=dict(type='str'),
    max_evict_retries=dict(type='int'),
    node_conditions=dict(type='list', elements='str'),
    disable_health_timeout=dict(type='bool'),
    strategy=dict(type='str', choices=['RollingUpdate', 'Recreate', 'InPlaceUpdate']),
    orchestration_type=dict(type='str', choices=['Auto', 'Manual'], default='Auto'),
    max_surge=dict(type='raw', default=1),
    max_unavailable=dict(type='raw', default=1),
    min_ready_seconds=dict(type='int'),
    revision_history_limit=dict(type='int'),
    progress_deadline_seconds=dict(type='int'),
    paused=dict(type='bool'),
    wait=dict(type='bool', default=False),
    wait_timeout=dict(type='int', default=600),
)


def run(module):
    params = module.params
    desired = parse_machine_deployment(params)
    namespace, name = desired['metadata']['namespace'], desired['metadata']['name']
    path = api_path(API_VERSION, 'machinedeployments', namespace, name)
    client = client_from_params(params)
    result = dict(changed=False)
    try:
        change = plan_change(client.get_or_none(path), desired, params['state'])
        result.update(changed=change.changed, operation=change.action, machine_deployment=change.after)
        if change.action == 'patch':
            result['patch'] = change.body
        if module._diff:
            result['diff'] = dict(before=change.before, after=change.after)
        if module.check_mode:
            return result
        result.update(apply_change(client, change, Wait(params['wait'], params['wait_timeout'])))
    finally:
        client.close()
    return result


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    where = '%s/%s' % (module.params['namespace'], module.params['name'])
    shell.run(module, lambda p, check_mode: run(module), KubeError, MachinesError,
              what='machine deployment %s' % where, machine_deployment=where)


if __name__ == '__main__':
    main()
