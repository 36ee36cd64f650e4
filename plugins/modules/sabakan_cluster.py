#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: sabakan_cluster
short_description: Generate and maintain a CKE cluster file from sabakan machines
version_added: 0.1.0
description:
  - One cycle of CKE's sabakan integration (seed 000, the weighted LEGACY generation) on a cluster file.
  - Without a cluster file, generates a cluster from the template, C(control-plane-count) control
    planes and C(minimum-workers) workers chosen by CKE's scores (rack spread, then lifetime;
    equal scores go to the numerically lowest IP address).
  - With a cluster file, makes the smallest change it needs. The Update steps run in this order, and
    the first one that finds something to do wins; remove non-existent nodes, increase control planes,
    decrease control planes, replace a bad control plane, increase workers, remove a worker retired for
    longer than O(wait_retired_seconds), fix the C(cke.cybozu.com/state) taints.
    When no step fires but the template changed, the template is re-applied to the same machines.
  - The cluster that stands afterwards (the new one, or the current one when nothing changes) is checked
    against the constraints as CKE and the controller check it; a violation fails the task with
    C(ConstraintViolation).
  - The new cluster file is written atomically. A second run with the same machines changes nothing.
  - Generator errors (C(NotAvailable), C(TooManyNonExistent), C(MissingMachine), C(ConstraintViolation),
    C(TemplateError), C(ConstraintsError), C(MachineError)) and sabakan errors fail the task and leave the
    file as it was; the result's C(error) names the class, and for bad input C(field) and C(rule) say where
    and which rule.
options:
  cluster_file:
    description:
      - Path of the CKE C(cluster.yml) to maintain. Created when it does not exist.
      - An existing but empty file is an error, not a request to generate a new cluster.
    type: path
    required: true
  template:
    description:
      - The cluster template, a CKE C(cluster.yml) with one control plane node template and one or
        more worker node templates (C(cke.cybozu.com/role) and C(cke.cybozu.com/weight) labels) and no addresses.
      - Exactly one of O(template) and O(template_file) is required.
    type: dict
  template_file:
    description: YAML or JSON file holding the cluster template.
    type: path
  node_taints:
    description:
      - Current Kubernetes taints per node name (the node address), as lists of C({key, value, effect}).
      - A control plane candidate carrying a taint other than C(node.kubernetes.io/*), C(cke.cybozu.com/state),
        C(cke.cybozu.com/master) or the template's C(control_plane_tolerations) is not chosen, and a control
        plane with one is replaced. Nodes left out count as untainted.
    type: dict
  wait_retired_seconds:
    description: Seconds a worker must have been RETIRED before it is removed from the cluster.
    type: float
    default: 300
  now:
    description:
      - The time to plan at, RFC 3339 (C(2026-01-01T00:00:00Z)), for reproducible offline planning.
      - Used for the lifetime scores and for durations derived from C(status.timestamp). Defaults to the current time.
    type: str
  mode:
    description:
      - Permissions of the cluster file, as an octal string such as C('0644').
      - Unset keeps the mode of an existing file; a new file gets C(0644).
    type: raw
extends_documentation_fragment:
  - steward.cluster.sabakan_connection
  - steward.cluster.sabakan_connection.machines
  - steward.cluster.sabakan_connection.constraints
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  action_group:
    support: full
    membership: [steward.cluster.sabakan]
  check_mode:
    support: full
    details: Plans the same change and reports it, writes nothing.
  diff_mode:
    support: full
    details: The cluster file before and after, as YAML text.
  platform:
    platforms: posix
notes:
  - >-
    The default query variables are seed 000's, C({"having": null, "notHaving": {"roles": ["boot"], "states": ["RETIRED"]}}).
    With them a RETIRED machine disappears from the answer, so its node is removed as non-existent at once;
    set O(variables) to C({"notHaving": {"roles": ["boot"]}}) to keep RETIRED machines visible and have
    O(wait_retired_seconds) apply.
requirements:
  - PyYAML
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: Generate or update the cluster file from sabakan
  steward.cluster.sabakan_cluster:
    url: http://sabakan.example:10080/graphql
    cluster_file: /etc/cke/cluster.yml
    template_file: /etc/cke/template.yml
    constraints:
      control-plane-count: 3
      minimum-workers: 10
  register: cluster

- name: Say what changed and why
  ansible.builtin.debug:
    msg: "{{ cluster.operation or 'no change' }}: {{ cluster.node_changes }}"

- name: Plan offline from a saved machine list at a fixed time (run with --check --diff to only look)
  steward.cluster.sabakan_cluster:
    machines_file: /srv/sabakan/machines.json
    now: "2026-01-01T00:00:00Z"
    cluster_file: /tmp/cluster.yml
    template:
      name: lab
      service_subnet: 10.68.0.0/16
      nodes:
        - user: cybozu
          control_plane: true
          labels:
            cke.cybozu.com/role: compute
        - user: cybozu
          labels:
            cke.cybozu.com/role: compute
            cke.cybozu.com/weight: "6.0"
        - user: cybozu
          labels:
            cke.cybozu.com/role: storage
            cke.cybozu.com/weight: "3.0"
'''

RETURN = r'''
operation:
  description:
    - The Update step that fired, C(new) for a generated cluster, C(regenerate) for a re-applied template,
      or empty when nothing changed.
  returned: success
  type: str
  sample: replace control plane
changes:
  description: What the step did, one line per action (as CKE logs it).
  returned: success
  type: list
  elements: str
  sample:
    - "remove bad control plane: 10.0.0.3"
    - "add new control plane: 10.2.0.4"
node_changes:
  description: Node-level differences between the old and the new cluster file.
  returned: success
  type: list
  elements: dict
  contains:
    address:
      description: The node address (its name).
      type: str
    change:
      description: C(added), C(removed), C(promoted), C(demoted), C(retainted) or C(updated).
      type: str
    detail:
      description: Control plane or worker, or the old and new state taint.
      type: str
cluster:
  description: The cluster file contents after the run (the planned contents in check mode).
  returned: success
  type: dict
machine_count:
  description: Number of machines the plan was made from.
  returned: success
  type: int
  sample: 36
cluster_file:
  description: The path of the cluster file.
  returned: always
  type: str
  sample: /etc/cke/cluster.yml
error:
  description: On failure, the error name, such as C(TooManyNonExistent), C(NotAvailable) or C(SabakanUnavailable).
  returned: failure
  type: str
  sample: TooManyNonExistent
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.args import (
    CONSTRAINTS_SPEC,
    MACHINES_SOURCE_EXCLUSIVE,
    MACHINES_SOURCE_SPEC,
    SABAKAN_CONNECTION_SPEC,
)
from ansible_collections.steward.cluster.plugins.module_utils.common.argspec import argspec
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.client import GENERATOR_VARIABLES
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import SabakanError
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.files import apply_file_update, dump_yaml, plan_file_update
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.integrate import plan_checked_cluster
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.params import parse_sabakan_cluster
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.source import (
    load_constraints_input,
    load_current_cluster,
    load_template,
    machines_from,
)

SPEC = argspec(
    SABAKAN_CONNECTION_SPEC, MACHINES_SOURCE_SPEC, CONSTRAINTS_SPEC,
    cluster_file={'type': 'path', 'required': True},
    template={'type': 'dict'},
    template_file={'type': 'path'},
    node_taints={'type': 'dict'},
    wait_retired_seconds={'type': 'float', 'default': 300},
    now={'type': 'str'},
    mode={'type': 'raw'},
)


def plan(params):
    """Read every input, plan and check the constraints as the controller does; (plan, cluster afterwards, file
    update, machine count). Raises SabakanError before anything is written."""
    path = params['cluster_file']
    parsed = parse_sabakan_cluster(params)
    now = parsed['now']
    template = load_template(params['template'], params['template_file'])
    constraints = load_constraints_input(params['constraints'], params['constraints_file'])
    current = load_current_cluster(path)
    machines = machines_from(url=params['url'], machines=params['machines'], machines_file=params['machines_file'],
                             variables=params['variables'], defaults=GENERATOR_VARIABLES, timeout=params['timeout'],
                             validate_certs=params['validate_certs'], ca_path=params['ca_path'], now=now)
    result, cluster = plan_checked_cluster(current, template, constraints, machines, now=now,
                                           node_taints=parsed['node_taints'],
                                           wait_retired_seconds=parsed['wait_retired_seconds'])
    update = plan_file_update(path, dump_yaml(cluster) if result.changed else None, parsed['mode'], 'cluster')
    return result, cluster, update, len(machines)


def act(params, check_mode):
    result, cluster, update, machine_count = plan(params)
    if not check_mode:
        apply_file_update(update)
    return dict(changed=update.changed, operation=result.operation, changes=result.changes,
                node_changes=[c.as_dict() for c in result.node_changes], cluster=cluster,
                machine_count=machine_count, cluster_file=params['cluster_file'],
                diff=update.diff() if update.changed else None)


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True,
                           mutually_exclusive=MACHINES_SOURCE_EXCLUSIVE + [('template', 'template_file'),
                                                                           ('constraints', 'constraints_file')],
                           required_one_of=MACHINES_SOURCE_EXCLUSIVE + [('template', 'template_file')])
    shell.require_libraries(module, 'PyYAML')
    shell.run(module, act, SabakanError, cluster_file=module.params['cluster_file'])


if __name__ == '__main__':
    main()
