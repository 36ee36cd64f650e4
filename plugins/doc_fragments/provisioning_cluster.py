# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # The cluster a node belongs to; matches CLUSTER_SPEC in module_utils/provisioning/args.py
    # (defaults: module_utils/provisioning/spec.py DEFAULTS).
    DOCUMENTATION = r'''
options:
  control_plane:
    description:
      - Every control-plane node of the cluster, as C(name) (the Node and etcd member name) and C(address)
        (where its apiserver and etcd listen). The node-local load balancer of every node lists exactly these,
        sorted by name.
      - The steward.cluster playbooks build it from the inventory group C(control_plane).
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Node name (a DNS subdomain).
        type: str
        required: true
      address:
        description: IPv4 or IPv6 address.
        type: str
        required: true
  cluster_name:
    description: The cluster's name in kubeconfigs and for the controller-manager.
    type: str
    default: kubernetes
  kubernetes_version:
    description: Version tag of the control-plane images (kube-apiserver, kube-controller-manager, kube-scheduler).
    type: str
    default: v1.31.4
  image_repository:
    description: Registry of the control-plane images.
    type: str
    default: registry.k8s.io
  etcd_image:
    description: The etcd image of the etcd static pod.
    type: str
    default: registry.k8s.io/etcd:3.5.16-0
  lb_image:
    description: The HAProxy image of the node-local load balancer static pod.
    type: str
    default: docker.io/library/haproxy:2.6
  service_cidr:
    description: Service IP range; its first address is the C(kubernetes) Service (an apiserver SAN), its tenth the cluster DNS.
    type: str
    default: 10.96.0.0/12
  pod_cidr:
    description: Pod IP range (the controller-manager allocates node CIDRs from it); must not overlap O(service_cidr).
    type: str
    default: 10.244.0.0/16
  dns_domain:
    description: The cluster DNS domain.
    type: str
    default: cluster.local
  apiserver_port:
    description: Port of every kube-apiserver.
    type: int
    default: 6443
  lb_port:
    description: Port of the node-local load balancer (Promenade's 6553) that every node's components use.
    type: int
    default: 6553
  etcd_client_port:
    description: etcd client port.
    type: int
    default: 2379
  etcd_peer_port:
    description: etcd peer port.
    type: int
    default: 2380
  etcd_metrics_port:
    description: etcd metrics and health port (plain HTTP, on O(local_address) only).
    type: int
    default: 2381
  cert_days:
    description: Lifetime of leaf certificates in days (kubeadm's year).
    type: int
    default: 365
  ca_days:
    description: Lifetime of the CAs in days (kubeadm's ten years), used when a CA is created or renewed.
    type: int
    default: 3650
  renew_before_days:
    description:
      - A leaf certificate that expires within this many days is renewed (a new key and certificate); so is one
        that is missing, signed by another CA, or whose subject, SANs or usages changed. Others are kept byte for byte.
    type: int
    default: 30
  apiserver_extra_sans:
    description: Extra DNS names and IP addresses for the apiserver certificates (an external load balancer's name).
    type: list
    elements: str
    default: []
  key_algorithm:
    description: Key type of new keys. Existing keys are kept whatever their type.
    type: str
    choices: [ecdsa-p256, rsa-2048]
    default: ecdsa-p256
'''
