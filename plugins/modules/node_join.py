#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: node_join
short_description: Join a control-plane or worker node to a running cluster (etcd learner, then promoted)
version_added: 0.1.0
description:
  - Writes the node's files in kubeadm's layout, as M(steward.cluster.cluster_genesis) does, with the authority
    given in O(authority) (read from any control-plane node). A worker gets its kubelet client certificate and
    kubeconfig, the kubelet's config and unit, the cluster CA certificate and the node-local load balancer; a
    control-plane node also the whole authority, its apiserver, etcd and front-proxy certificates, the
    control-plane kubeconfigs and static pod manifests.
  - A control-plane node's etcd member is added as a learner before its manifest is written (so it never counts
    against quorum while it catches up), started by the kubelet from that manifest, and promoted to a voting member
    once it is in sync (O(wait)). Its C(--initial-cluster) is the membership at that moment and is kept on later runs
    (etcd reads it only at the first start).
  - Idempotent - a second run keeps every certificate and file; certificates due within O(renew_before_days) (or
    wrong) are renewed, which makes this module the renewal step of the C(steward.cluster.cert_renew) playbook too.
  - Refuses a node whose root holds another node, another authority, or a control-plane node being joined as a
    worker (remove it first).
options:
  role:
    description: The node's role.
    type: str
    choices: [control-plane, worker]
    default: worker
extends_documentation_fragment:
  - steward.cluster.provisioning_cluster
  - steward.cluster.provisioning_node
  - steward.cluster.provisioning_write
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
    details: File contents are shown; secrets (keys, kubeconfigs) only by size.
seealso:
  - module: steward.cluster.cluster_genesis
  - module: steward.cluster.join_script
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: Read the authority from a control-plane node
  ansible.builtin.slurp:
    path: "/etc/kubernetes/pki/{{ item }}"
  loop: [ca.crt, ca.key, etcd/ca.crt, etcd/ca.key, front-proxy-ca.crt, front-proxy-ca.key, sa.key, sa.pub]
  delegate_to: cp1
  register: authority_files
  no_log: true

- name: Join cp2
  steward.cluster.node_join:
    node_name: cp2
    address: 10.0.0.12
    role: control-plane
    control_plane: [{name: cp1, address: 10.0.0.11}, {name: cp2, address: 10.0.0.12}]
    authority: "{{ dict(authority_files.results | map(attribute='item') | zip(authority_files.results
                 | map(attribute='content') | map('b64decode'))) }}"
'''

RETURN = r'''
files:
  description: One line per file created, updated or removed (or that would be, in check mode).
  returned: always
  type: list
  elements: str
certificates:
  description: Every leaf certificate of the node with C(name), C(path), C(action) (keep, issue, renew) and C(reason).
  returned: always
  type: list
  elements: dict
authority_created:
  description: Always false for a join.
  returned: always
  type: bool
etcd:
  description: For a control-plane node, C(initial_cluster), C(initial_cluster_state), C(actions) and C(member); null for a worker.
  returned: always
  type: dict
lb:
  description: The load balancer config - C(validated) by haproxy, C(reloaded), C(running).
  returned: always
  type: dict
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common.argspec import argspec
from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.args import (
    CLUSTER_SPEC, NODE_SPEC, PROVISION_SPEC,
)
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import ProvisioningError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.runner import provision_node

SPEC = argspec(CLUSTER_SPEC, NODE_SPEC, PROVISION_SPEC,
               role={'type': 'str', 'choices': ['control-plane', 'worker'], 'default': 'worker'})


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    shell.require_libraries(module, 'cryptography', 'PyYAML')
    shell.run(module, lambda p, check_mode: provision_node(module.run_command, p, check_mode, bootstrap=False),
              ProvisioningError, EtcdError, KubeError)


if __name__ == '__main__':
    main()
