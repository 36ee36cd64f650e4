#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: node_labels
short_description: Set a node's labels without touching labels anyone else set (owned keys, recorded on the Node)
version_added: 0.1.0
description:
  - O(labels) is the complete desired set of the labels this collection owns on the node. Keys not yet owned are
    added, owned keys are changed to the desired value, and owned keys missing from O(labels) are removed. The owned
    keys are recorded in the annotation C(cluster.steward.io/owned-labels).
  - A label set by anyone else (another tool, an operator, the kubelet) is never changed or removed. Asking for a
    different value of such a key fails (rule C(foreign-label)) and changes nothing; asking for the value it already
    has leaves it as it is, still not owned.
  - Promenade's node-labels API replaced every non-C(kubernetes.io) label, so a second tool's labels vanished;
    this is the fix (the same semantics serve C(PUT /api/v1.0/node-labels/<node>) of the controller's
    provisioning API).
  - One merge patch with the Node's resourceVersion as precondition; a concurrent change is re-read and re-planned.
options:
  name:
    description: The Node name.
    type: str
    required: true
  labels:
    description: The complete desired set of owned labels (key to value); empty removes every owned label.
    type: dict
    required: true
extends_documentation_fragment:
  - steward.cluster.kube_connection
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  action_group:
    support: full
    membership: [steward.cluster.provisioning]
  platform:
    platforms: posix
  check_mode:
    support: full
  diff_mode:
    support: full
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: Mark cp1 as a control-plane node, with its rack
  steward.cluster.node_labels:
    name: cp1
    labels:
      node-role.kubernetes.io/control-plane: ""
      topology.kubernetes.io/zone: rack1
    kubeconfig: /etc/kubernetes/admin.conf
'''

RETURN = r'''
set:
  description: Labels added or changed (key to new value).
  returned: always
  type: dict
removed:
  description: Owned labels removed.
  returned: always
  type: list
  elements: str
owned:
  description: The keys this collection owns after the change.
  returned: always
  type: list
  elements: str
foreign_kept:
  description: Desired keys that already had that value from someone else, left theirs.
  returned: always
  type: list
  elements: str
labels:
  description: All labels of the node after the change.
  returned: always
  type: dict
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.kube.args import KUBE_CONNECTION_SPEC, client_from_params
from ansible_collections.steward.cluster.plugins.module_utils.common.argspec import argspec
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import ProvisioningError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.node_labels_op import ensure_labels
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.params import parse_node_labels

SPEC = argspec(KUBE_CONNECTION_SPEC, name={'type': 'str', 'required': True}, labels={'type': 'dict', 'required': True})


def act(p, check_mode):
    name = parse_node_labels(p)
    result = ensure_labels(client_from_params(p), name, p['labels'], check_mode)
    if not result['changed']:
        result['diff'] = None
    return result


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    shell.run(module, act, ProvisioningError, KubeError)


if __name__ == '__main__':
    main()
