#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: cluster_genesis
short_description: Bring up the first control-plane node of a new cluster (Promenade's genesis, kubeadm's layout)
version_added: 0.1.0
description:
  - Writes everything the first control-plane node needs in kubeadm's file layout - the cluster PKI (cluster CA,
    etcd CA, front-proxy CA, service-account key, and every leaf certificate with its SANs), kubeconfigs, static pod
    manifests for etcd (TLS for clients and peers), kube-apiserver, kube-controller-manager and kube-scheduler, the
    node-local HAProxy in front of every apiserver, and the kubelet's config and systemd unit.
  - The authority is created when neither O(authority) nor the node holds one. etcd starts as a new one-member
    cluster only when no member of O(control_plane) answers; when a cluster answers and this node is not a member,
    the module refuses (rule C(cluster-exists)) - join it with M(steward.cluster.node_join) instead. Genesis never
    starts a second cluster.
  - Nothing marks the genesis node afterwards - it can be drained, removed (M(steward.cluster.node_remove)) and
    joined again like any other node.
  - Idempotent - every certificate still right is kept byte for byte, so a second run changes nothing. Check mode
    plans the same (etcd is read, C(haproxy -c) runs) and writes nothing; O(lb_validate) rejects an invalid load
    balancer config before any file is written.
  - Static pod manifests are written last, after the certificates they use; each carries a digest of its inputs,
    so a renewed certificate restarts exactly the pods that read it.
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
  - module: steward.cluster.node_join
  - module: steward.cluster.node_remove
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: Bring up the first control-plane node
  steward.cluster.cluster_genesis:
    node_name: cp1
    address: 10.0.0.11
    control_plane:
      - {name: cp1, address: 10.0.0.11}
      - {name: cp2, address: 10.0.0.12}
      - {name: cp3, address: 10.0.0.13}
    kubernetes_version: v1.31.4

- name: Try it below a directory (no kubelet is touched outside /)
  steward.cluster.cluster_genesis:
    root: /tmp/try/cp1
    node_name: cp1
    address: 127.0.0.21
    local_address: 127.0.0.21
    control_plane: [{name: cp1, address: 127.0.0.21}]
    wait: false
'''

RETURN = r'''
files:
  description: One line per file created, updated or removed (or that would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: [create /etc/kubernetes/pki/ca.crt, update /etc/kubernetes/manifests/etcd.yaml (content)]
certificates:
  description: Every leaf certificate of the node with C(name) (kubeadm's), C(path), C(action) (keep, issue, renew) and C(reason).
  returned: always
  type: list
  elements: dict
authority_created:
  description: Whether a new authority (CAs and service-account key) was created.
  returned: always
  type: bool
etcd:
  description:
    - C(initial_cluster) and C(initial_cluster_state) of the node's etcd member, C(actions) taken (bootstrap,
      add as learner, promote) and, after the wait, the C(member).
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

SPEC = argspec(CLUSTER_SPEC, NODE_SPEC, PROVISION_SPEC)


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    shell.require_libraries(module, 'cryptography', 'PyYAML')
    shell.run(module, lambda p, check_mode: provision_node(module.run_command, p, check_mode, bootstrap=True),
              ProvisioningError, EtcdError, KubeError)


if __name__ == '__main__':
    main()
