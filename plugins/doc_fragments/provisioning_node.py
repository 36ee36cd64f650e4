# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # The node being provisioned; matches NODE_SPEC in module_utils/provisioning/args.py.
    DOCUMENTATION = r'''
options:
  node_name:
    description:
      - The node's name (Node object, etcd member, certificate subjects). A control-plane node must be listed in
        O(control_plane) with the same O(address).
    type: str
    required: true
  address:
    description: The node's IP address (the kubelet's C(--node-ip); for a control-plane node its apiserver and etcd address).
    type: str
    required: true
  local_address:
    description:
      - The loopback address the node-local listeners bind (the load balancer, etcd's local client and metrics
        listeners). Keep 127.0.0.1 on real hosts; lab hosts sharing one loopback interface use their own address.
    type: str
    default: 127.0.0.1
  labels:
    description:
      - Labels the kubelet sets when it registers the Node (C(--node-labels)). Keys in the C(kubernetes.io) and
        C(k8s.io) namespaces that the NodeRestriction admission plugin forbids a kubelet to set (such as
        C(node-role.kubernetes.io/*)) are refused; set those with M(steward.cluster.node_labels).
    type: dict
    default: {}
'''
