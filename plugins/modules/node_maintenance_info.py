#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: node_maintenance_info
short_description: Show the maintenance state of Kubernetes nodes and what each profile waits for
version_added: 0.1.0
description:
  - Reads Nodes and reports what the maintenance controller (seed 003's maintenance-controller, and
    C(steward_controller --maintenance-config)) keeps on them - the C(cloud.sap/maintenance-state) label,
    the C(cloud.sap/maintenance-profile) label (C(A--B) for several profiles) and the parsed
    C(cloud.sap/maintenance-data) annotation.
  - With the maintenance configuration (O(config), O(config_file) or O(config_source)) it also evaluates,
    as the controller would right now, every transition of each profile's current state - which check
    instances pass, which are still pending (C(!x) means x must fail) - and which notifications are due,
    with one readable RV(nodes[].waiting_for) line per profile.
  - Nothing is changed - no trigger, notification or stagger lease is taken. Checks that read the
    cluster (C(maxMaintenance), C(stagger), C(nodeCount), C(clusterSemver), C(anyLabel), C(affinity))
    read the live Nodes, Pods and Leases.
options:
  name:
    description:
      - The name of one Node. A missing Node fails the task.
      - Without O(name) and O(label_selector), every Node is reported.
    type: str
  label_selector:
    description:
      - Only Nodes matching this label selector (equality based, such as C(cloud.sap/maintenance-profile=flatcar)
        or C(cloud.sap/maintenance-state!=operational)).
    type: str
  config:
    description:
      - The maintenance configuration, the content of a C(maintenance.yaml) as a mapping
        (C(intervals), C(instances), C(profiles)).
      - C(${VAR}) references are resolved from the environment of the module. One that is not set there (and has
        no default) is left as the text C(${VAR}) and named in RV(config_warnings) - the info view sends no
        notification, so a Slack hook or SMTP password the controller gets from its environment is not needed here.
      - Ansible templates option values before the module sees them, so the Go templates of notification
        messages (C({{ .Node.Name }})) in an inline O(config) must be marked C(!unsafe) (or come from
        O(config_file) or O(config_source), which Ansible does not template).
      - Mutually exclusive with O(config_file) and O(config_source). Without any of the three only the
        labels and the data annotation are reported.
      - The result never echoes the configuration, but Ansible logs module arguments with C(-vvv);
        when it holds Slack tokens or SMTP passwords prefer O(config_source) with a Secret.
    type: dict
  config_file:
    description: Path of a C(maintenance.yaml) on the host the module runs on.
    type: path
  config_source:
    description:
      - Read the configuration from the cluster, with the controller's C(--maintenance-config) syntax,
        C(configmap/<namespace>/<name>[/<key>]) or C(secret/<namespace>/<name>[/<key>]).
      - The key defaults to C(maintenance.yaml).
    type: str
  now:
    description:
      - Evaluate the time-dependent checks (C(wait), C(waitExclude), C(timeWindow), C(stagger)) and the
        notification schedules at this RFC 3339 instant (such as C(2026-01-01T10:00:00Z)) instead of the current time.
    type: str
extends_documentation_fragment:
  - steward.cluster.kube_connection
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  action_group:
    support: full
    membership: [steward.cluster.maintenance]
  check_mode:
    support: full
    details: Reads only; the same answer in check mode.
  diff_mode:
    support: N/A
    details: Changes nothing.
  platform:
    platforms: posix
notes:
  - The nodes' own labels and annotations are returned too (RV(nodes[].labels), RV(nodes[].annotations)).
seealso:
  - module: steward.cluster.node_maintenance
requirements:
  - kubernetes (the Python client)
  - PyYAML
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: What every node of the flatcar profile waits for
  steward.cluster.node_maintenance_info:
    label_selector: cloud.sap/maintenance-profile=flatcar
    config_source: configmap/steward-system/maintenance
  register: maintenance

- name: Show it
  ansible.builtin.debug:
    msg: "{{ maintenance.nodes | map(attribute='waiting_for') | flatten }}"

- name: Wait until worker-3 is in maintenance (the config is optional for this)
  steward.cluster.node_maintenance_info:
    name: worker-3
    kubeconfig: ~/.kube/admin.conf
  register: node
  until: node.nodes[0].state == 'in-maintenance'
  retries: 60
  delay: 10

- name: Evaluate a local config file against the live nodes at a fixed time
  steward.cluster.node_maintenance_info:
    config_file: ./maintenance.yaml
    now: "2026-03-02T10:30:00Z"
'''

RETURN = r'''
nodes:
  description: One entry per Node, sorted by name.
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The Node name.
      type: str
      sample: worker-1
    state:
      description: The C(cloud.sap/maintenance-state) label, empty when the controller has not labelled the node yet.
      type: str
      sample: maintenance-required
    profile_label:
      description: The C(cloud.sap/maintenance-profile) label as it is (empty when unset, which means the C(default) profile).
      type: str
      sample: flatcar--kernel
    profile_names:
      description: The profiles the label names, in label order (C([default]) when the label is unset).
      type: list
      elements: str
    unschedulable:
      description: Whether the node is cordoned (C(spec.unschedulable)).
      type: bool
    profiles:
      description:
        - Per attached profile that the config defines (without a config, per profile recorded in the data annotation).
      type: list
      elements: dict
      contains:
        name:
          description: Profile name.
          type: str
        state:
          description: The profile's state.
          type: str
        previous:
          description: The state the profile's previous reconcile started in (differs right after a transition).
          type: str
        last_transition:
          description: When the profile last changed state (RFC 3339).
          type: str
        next:
          description: The state the profile would move to now (the first transition that passes), or null.
          type: str
        transitions:
          description:
            - Every transition of the current state, in config order, with C(next), C(check) (the chain),
              C(passed), C(checks) (per instance C(type), C(passed), C(info), C(error) when it failed to run),
              C(trigger) (instance names), C(pending) (the chain's literals that do not hold yet) and, when
              set, C(blocked) (only one profile may be in-maintenance) or C(error).
          type: list
          elements: dict
        notify:
          description: The notification instances of the state with C(instance), C(type) and C(due) (would send now).
          type: list
          elements: dict
    unknown_profiles:
      description: Profiles the label names that the config does not define (the controller ignores them).
      type: list
      elements: str
    computed_state:
      description: The state label the controller would write now (the most critical profile state); empty without a config.
      type: str
    waiting_for:
      description: One line per profile saying what happens next or what it waits for; empty without a config.
      type: list
      elements: str
      sample:
        - "profile flatcar is maintenance-required; to in-maintenance: waiting for check_approval
          (hasAnnotation: cloud.sap/maintenance-approved is not set)"
    data:
      description:
        - The parsed C(cloud.sap/maintenance-data) annotation, null when absent - C(profiles) (per profile
          C(current), C(previous), C(transition)), C(notifications) (instance to last send time) and
          C(version) (the format it was written in, 0 to 2).
      type: dict
    data_error:
      description: Why the data annotation cannot be read (the controller leaves such a node alone), else empty.
      type: str
    error:
      description: The node-level error (an unreadable data annotation), else empty.
      type: str
    labels:
      description: All labels of the node.
      type: dict
    annotations:
      description: All annotations of the node.
      type: dict
config_source:
  description: Where the configuration came from - C(config), the file path, C(configmap/ns/name/key), or empty.
  returned: success
  type: str
  sample: configmap/steward-system/maintenance/maintenance.yaml
config_warnings:
  description: Unknown keys the configuration loader ignored (as the controller does), and C(${VAR}) references left unresolved.
  returned: success
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.kube.args import KUBE_CONNECTION_SPEC, client_from_params
from ansible_collections.steward.cluster.plugins.module_utils.common.argspec import argspec
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import MaintenanceError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.kube_reads import describe_nodes
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.params import parse_node_maintenance_info

SPEC = argspec(
    KUBE_CONNECTION_SPEC,
    name=dict(type='str'),
    label_selector=dict(type='str'),
    config=dict(type='dict'),
    config_file=dict(type='path'),
    config_source=dict(type='str'),
    now=dict(type='str'),
)


def act(p, check_mode):
    parsed = parse_node_maintenance_info(p)
    client = client_from_params(p)
    try:
        return describe_nodes(client, **parsed)
    finally:
        client.close()


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True,
                           mutually_exclusive=[('name', 'label_selector'), ('config', 'config_file', 'config_source')])
    shell.run(module, act, MaintenanceError, KubeError)


if __name__ == '__main__':
    main()
