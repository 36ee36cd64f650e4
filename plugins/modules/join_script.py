#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: join_script
short_description: Render Promenade's self-contained join.sh for a node, so it can join without Ansible
version_added: 0.1.0
description:
  - Writes a shell script to O(dest) (mode 0700) that holds everything the node needs - its kubelet client
    certificate and key, the cluster CA certificate, the kubeconfig, the kubelet config, flags (registration labels)
    and systemd unit, the node-local load balancer config and manifest - and the record of those files, exactly
    what M(steward.cluster.node_join) writes for a worker. Run on the node, it writes them, starts the kubelet and
    waits until the Node is Ready (C(--root DIR), C(--no-start), C(--no-wait), C(--wait-timeout SECONDS)).
  - A control-plane node joins with the same script; its control-plane components come from the anchor DaemonSet
    (C(steward-controller --controllers anchor)) that its labels select, as in Promenade.
  - The script holds a private key - it is written 0700 and never returned. The same script is served by the
    controller's provisioning API (C(GET /api/v1.0/join-scripts)).
  - An existing script for the same node is kept (a new one would carry a new key); O(force) renders it again.
    A file at O(dest) that is not a join script of this node is refused (rule C(not-ours)) unless O(force).
options:
  dest:
    description: Where to write the script (on the host the module runs on).
    type: path
    required: true
  force:
    description: Render a new script even when O(dest) holds one (or holds something else).
    type: bool
    default: false
  authority:
    description: The cluster CA certificate and key, as C({ca.crt, ca.key}) PEM text (more authority files are ignored).
    type: dict
    required: true
  now:
    description: Issue as of this time (RFC 3339); the current time by default.
    type: str
extends_documentation_fragment:
  - steward.cluster.provisioning_cluster
  - steward.cluster.provisioning_node
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
    support: none
requirements:
  - cryptography
  - PyYAML
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: A join script for w7
  steward.cluster.join_script:
    dest: /srv/join/w7.sh
    node_name: w7
    address: 10.0.1.7
    control_plane: [{name: cp1, address: 10.0.0.11}]
    authority: {ca.crt: "{{ ca_crt }}", ca.key: "{{ ca_key }}"}
    labels: {topology.kubernetes.io/zone: rack3}
  delegate_to: localhost
'''

RETURN = r'''
dest:
  description: The script's path.
  returned: always
  type: str
files:
  description: The node paths the script writes.
  returned: always
  type: list
  elements: str
sha256:
  description: Checksum of the script written (null when an existing script was kept or in check mode).
  returned: always
  type: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.args import CLUSTER_SPEC, NODE_SPEC
from ansible_collections.steward.cluster.plugins.module_utils.common.argspec import argspec
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import ProvisioningError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.join_script import write_script
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.params import parse_join_script

SPEC = argspec(CLUSTER_SPEC, NODE_SPEC, dest={'type': 'path', 'required': True}, force={'type': 'bool', 'default': False},
               authority={'type': 'dict', 'required': True, 'no_log': True}, now={'type': 'str'})


def act(p, check_mode):
    return write_script(parse_join_script(p), force=p['force'], check_mode=check_mode)


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    shell.require_libraries(module, 'cryptography', 'PyYAML')
    shell.run(module, act, ProvisioningError)


if __name__ == '__main__':
    main()
