#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: sabakan_machine_info
short_description: Query machines from sabakan
version_added: 0.1.0
description:
  - Runs sabakan's GraphQL C(searchMachines) query, the same one CKE's sabakan integration runs,
    and returns the machines with counts by state and by role.
  - Each machine is checked before it is returned; a malformed answer fails the task and names the machine.
options:
  url:
    description:
      - URL of sabakan's GraphQL API, such as C(http://sabakan.example:10080/graphql).
      - C(/graphql) is appended when the URL has no path.
    type: str
    required: true
  preset:
    description:
      - Default query variables that O(variables) is laid over.
      - >-
        C(generator) is seed 000's C({"having": null, "notHaving": {"roles": ["boot"], "states": ["RETIRED"]}}),
        the machines the cluster generator sees.
      - >-
        C(repair) is seed 001's C({"having": {"states": ["UNHEALTHY", "UNREACHABLE"]}, "notHaving": {"roles": ["boot"]}}),
        the machines the repairer sees.
      - C(all) has no condition.
    type: str
    choices: [generator, repair, all]
    default: generator
extends_documentation_fragment:
  - steward.cluster.sabakan_connection
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  action_group:
    support: full
    membership: [steward.cluster.sabakan]
  check_mode:
    support: full
    details: Only reads from sabakan.
  diff_mode:
    support: none
  platform:
    platforms: posix
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: Machines the cluster generator would see
  steward.cluster.sabakan_machine_info:
    url: http://sabakan.example:10080/graphql
  register: sabakan

- name: Every unhealthy storage machine in racks 0 and 1
  steward.cluster.sabakan_machine_info:
    url: http://sabakan.example:10080/graphql
    preset: all
    variables:
      having:
        roles: [storage]
        racks: [0, 1]
        states: [UNHEALTHY]

- name: Show the counts
  ansible.builtin.debug:
    msg: "{{ sabakan.count }} machines; by state {{ sabakan.by_state }}; by role {{ sabakan.by_role }}"
'''

RETURN = r'''
machines:
  description: The machines in the shape of sabakan's C(searchMachines) answer, in sabakan's order.
  returned: success
  type: list
  elements: dict
  contains:
    spec:
      description: serial, labels, rack, indexInRack, role, ipv4, registerDate, retireDate and bmc.bmcType.
      type: dict
    status:
      description: state, timestamp of the last state change and duration in seconds since then.
      type: dict
count:
  description: Number of machines returned.
  returned: success
  type: int
  sample: 28
by_state:
  description: Number of machines per state.
  returned: success
  type: dict
  sample:
    HEALTHY: 26
    UNREACHABLE: 2
by_role:
  description: Number of machines per role.
  returned: success
  type: dict
  sample:
    cs: 14
    ss: 14
variables:
  description: The query variables sent, after laying O(variables) over the preset.
  returned: success
  type: dict
error:
  description: On failure, the error name, such as C(SabakanUnavailable) or C(SabakanQueryError).
  returned: failure
  type: str
  sample: SabakanUnavailable
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.args import SABAKAN_CONNECTION_SPEC
from ansible_collections.steward.cluster.plugins.module_utils.common.argspec import argspec
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.client import (
    GENERATOR_VARIABLES,
    REPAIR_VARIABLES,
    SabakanClient,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import SabakanError
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.params import parse_sabakan_machine_info
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.source import count_by

SPEC = argspec(SABAKAN_CONNECTION_SPEC,
               preset={'type': 'str', 'choices': ['generator', 'repair', 'all'], 'default': 'generator'})
SPEC.update(url=dict(SPEC['url'], required=True))
PRESETS = {
    'generator': GENERATOR_VARIABLES,
    'repair': REPAIR_VARIABLES,
    'all': {'having': None, 'notHaving': None},
}


def act(params, check_mode):
    variables = parse_sabakan_machine_info(params, PRESETS[params['preset']])
    client = SabakanClient(params['url'], timeout=params['timeout'], validate_certs=params['validate_certs'],
                           ca_path=params['ca_path'])
    machines = client.search_machines(variables['having'], variables['notHaving'])
    counts = count_by(machines)
    return dict(changed=False, machines=machines, count=len(machines), variables=variables,
                by_state=counts['by_state'], by_role=counts['by_role'])


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    shell.run(module, act, SabakanError)


if __name__ == '__main__':
    main()
