#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: node_maintenance
short_description: Request, approve or release node maintenance by setting the annotations and labels profiles check
version_added: 0.1.0
description:
  - The maintenance controller (seed 003, and C(steward_controller --maintenance-config)) moves a node through
    C(operational), C(maintenance-required) and C(in-maintenance) when the check chains of its profiles pass.
    Those checks read the node's annotations and labels (C(hasAnnotation), C(hasLabel)); this module sets and
    removes them - the controller then does the rest.
  - O(annotations) and O(labels) set keys (a null value removes the key); O(state) is a shortcut for the usual
    keys - C(requested) sets O(request_annotation) / O(request_label), C(approved) sets O(approval_annotation)
    (by default C(cloud.sap/maintenance-approved=true), as in the seed's flatcar example), and C(released)
    removes the request and the approval keys. Explicit O(annotations) and O(labels) win over the shortcut
    for the same key.
  - O(profile) attaches maintenance profiles through the C(cloud.sap/maintenance-profile) label, keeping the
    other profiles of a C(A--B) label (O(profile_mode)).
  - Writes one JSON merge patch of C(metadata.labels) and C(metadata.annotations) (never a replace), so other
    writers' keys are untouched; nothing is written when the node already matches.
  - The controller's own keys, the C(cloud.sap/maintenance-state) label and the C(cloud.sap/maintenance-data)
    annotation, can be removed (to recover a node) but not set.
options:
  name:
    description: The Node name.
    type: str
    required: true
  annotations:
    description:
      - Annotations to set, a mapping of key to value; a null value removes the key. Booleans become C(true)/C(false),
        numbers their text.
    type: dict
  labels:
    description:
      - Labels to set, a mapping of key to value; a null value removes the key. Keys and values follow Kubernetes' label rules.
    type: dict
  state:
    description:
      - C(requested) sets O(request_annotation) and O(request_label) (the keys the profile's C(operational)
        transition checks); C(approved) sets O(approval_annotation); C(released) removes the request keys and
        the approval annotation (for the flatcar example that lets C(!reboot_needed) pass, so the node
        returns to C(operational)).
      - Not set, only O(annotations), O(labels) and O(profile) apply.
    type: str
    choices: [requested, approved, released]
  request_annotation:
    description:
      - The annotation(s) that request maintenance, for the seed's flatcar example the key
        C(flatcar-linux-update.v1.flatcar-linux.net/reboot-needed) with the value C("true").
      - There is no default - it depends on your profiles. One of O(request_annotation) and O(request_label)
        is required with O(state=requested) and O(state=released).
    type: dict
  request_label:
    description: The label(s) that request maintenance, for profiles that check with C(hasLabel).
    type: dict
  approval_annotation:
    description: The annotation(s) that approve maintenance, set by O(state=approved), removed by O(state=released).
    type: dict
    default: {cloud.sap/maintenance-approved: "true"}
  profile:
    description:
      - Maintenance profile names for the C(cloud.sap/maintenance-profile) label.
      - Detaching a profile that is C(in-maintenance) makes the controller forget its state; the module warns.
    type: list
    elements: str
  profile_mode:
    description:
      - C(add) appends the O(profile) names the label lacks and keeps the others in order, C(replace) sets the label
        to exactly O(profile), C(remove) drops the O(profile) names (the label goes when none is left, which
        means the C(default) profile).
    type: str
    choices: [add, replace, remove]
    default: add
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
    details: Reads the node and reports the change and the patch it would write, writes nothing.
  diff_mode:
    support: full
    details: The node's labels and annotations before and after.
  platform:
    platforms: posix
seealso:
  - module: steward.cluster.node_maintenance_info
requirements:
  - kubernetes (the Python client)
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: Approve the maintenance of worker-3 (the flatcar example's manual approval)
  steward.cluster.node_maintenance:
    name: worker-3
    state: approved

- name: Request maintenance of worker-4 the way the flatcar update agent would
  steward.cluster.node_maintenance:
    name: worker-4
    state: requested
    request_annotation:
      flatcar-linux-update.v1.flatcar-linux.net/reboot-needed: "true"

- name: Release it after the work is done
  steward.cluster.node_maintenance:
    name: worker-4
    state: released
    request_annotation:
      flatcar-linux-update.v1.flatcar-linux.net/reboot-needed: "true"

- name: Attach the kernel profile next to the node's others (flatcar -> flatcar--kernel)
  steward.cluster.node_maintenance:
    name: worker-5
    profile: kernel

- name: Set and remove arbitrary keys
  steward.cluster.node_maintenance:
    name: worker-6
    annotations:
      example.com/maintenance-ticket: CHG-1234
      example.com/old-note: null
    labels:
      example.com/maintenance-window: weekend

- name: Recover a node whose data annotation cannot be read (every profile starts again as operational)
  steward.cluster.node_maintenance:
    name: worker-7
    annotations:
      cloud.sap/maintenance-data: null
'''

RETURN = r'''
node:
  description: The Node name.
  returned: always
  type: str
  sample: worker-3
changes:
  description: What was (or in check mode would be) changed, one line per key.
  returned: success
  type: list
  elements: str
  sample: ["set annotation cloud.sap/maintenance-approved='true'"]
patch:
  description: The merge patch written (or that would be written); empty when nothing changes.
  returned: success
  type: dict
  sample: {"metadata": {"annotations": {"cloud.sap/maintenance-approved": "true"}}}
labels:
  description: The node's labels after the change (the planned ones in check mode).
  returned: success
  type: dict
annotations:
  description: The node's annotations after the change (the planned ones in check mode).
  returned: success
  type: dict
state:
  description: The node's C(cloud.sap/maintenance-state) label (the controller changes it, not this module).
  returned: success
  type: str
  sample: maintenance-required
profiles:
  description: The profiles the C(cloud.sap/maintenance-profile) label names after the change (C([default]) without it).
  returned: success
  type: list
  elements: str
  sample: [flatcar, kernel]
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.kube.args import KUBE_CONNECTION_SPEC, client_from_params
from ansible_collections.steward.cluster.plugins.module_utils.common.argspec import argspec
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.constants import PROFILE_LABEL, STATE_LABEL, split_profiles
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import MaintenanceError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.kube_reads import edit_node
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.node_edit import (
    APPROVAL_ANNOTATION, PROFILE_MODES, SHORTCUT_STATES)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.params import parse_node_maintenance

SPEC = argspec(
    KUBE_CONNECTION_SPEC,
    name=dict(type='str', required=True),
    annotations=dict(type='dict'),
    labels=dict(type='dict'),
    state=dict(type='str', choices=list(SHORTCUT_STATES)),
    request_annotation=dict(type='dict'),
    request_label=dict(type='dict'),
    approval_annotation=dict(type='dict', default=dict(APPROVAL_ANNOTATION)),
    profile=dict(type='list', elements='str'),
    profile_mode=dict(type='str', choices=list(PROFILE_MODES), default='add'),
)


def act(p, check_mode):
    parsed = parse_node_maintenance(p)
    client = client_from_params(p)
    try:
        plan = edit_node(client, check_mode=check_mode, **parsed)
    finally:
        client.close()
    return dict(changed=plan.changed, node=parsed['name'], changes=plan.changes, patch=plan.patch,
                labels=plan.after['labels'], annotations=plan.after['annotations'],
                state=plan.after['labels'].get(STATE_LABEL, ''),
                profiles=split_profiles(plan.after['labels'].get(PROFILE_LABEL, '')),
                warnings=list(plan.warnings), diff=dict(before=plan.before, after=plan.after))


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True,
                           required_one_of=[('annotations', 'labels', 'state', 'profile')],
                           required_if=[('state', 'requested', ('request_annotation', 'request_label'), True),
                                        ('state', 'released', ('request_annotation', 'request_label'), True)])
    name = module.params['name']
    shell.run(module, act, MaintenanceError, KubeError, what='node %s' % name, node=name)


if __name__ == '__main__':
    main()
