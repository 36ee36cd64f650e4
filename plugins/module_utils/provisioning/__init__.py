# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node provisioning (seed 002, Promenade and kubeadm): genesis, join, removal and teardown of a node, its files and
its etcd member, as a pure plan plus the few steps that act.

Input and plans:
  spec.py          the cluster and the node, validated like an API;  args.py: the modules' option groups
  layout.py        where everything lives on a node (kubeadm's layout);  render.py: YAML, the same bytes every time
  certs.py, pki.py the cluster's PKI plan by kubeadm's names, and the keys and certificates (`cryptography`)
  kubeconfig.py, kubelet.py, manifests.py, haproxy.py   kubeadm's files: kubeconfigs, the kubelet's, static pods,
                   the node-local apiserver load balancer
  node_files.py    every file a node needs, as data;  files.py: read, plan, write atomically below a root
  labels.py        the node labels this collection owns;  certinfo.py: one report of every certificate on a node
  api.py           the Promenade-compatible provisioning API as pure functions (the controller serves the HTTP)
  join_script.py   Promenade's self-contained join.sh;  anchor.py: static pods kept equal to their ConfigMap/Secret
Acting: provision.py (genesis and join), runner.py (what cluster_genesis and node_join share), etcd_membership.py
  (the etcd side, on etcd/cluster/), lb.py (the live load balancer), node_labels_op.py (labels onto the Node),
  remove.py (the cluster side of removing a node), teardown.py (the node's own files).
upgrade/: Kubernetes version upgrades (the skew policy, the plan, the per-node steps; steward.cluster.cluster_upgrade)
  and the floor node_join keeps after one (upgrade/floor.py).
errors.py: the area's exception tree; deps.py: which third-party libraries the modules lack.
"""
