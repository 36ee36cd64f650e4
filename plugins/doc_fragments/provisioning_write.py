# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # How a node's files are written and its etcd member waited for; matches PROVISION_SPEC in
    # module_utils/provisioning/args.py.
    DOCUMENTATION = r'''
options:
  root:
    description:
      - Root prefix every node path is placed below (C(/etc/kubernetes/...) becomes C(<root>/etc/kubernetes/...)).
        C(/) on a real host; a directory for the lab's hosts or to build an image.
      - The kubelet is managed (O(manage_kubelet)) only with the real root C(/).
    type: path
    default: /
  authority:
    description:
      - The cluster's CAs and service-account key, as a mapping of the file names under C(/etc/kubernetes/pki) to
        their PEM text - C(ca.crt), C(ca.key), C(etcd/ca.crt), C(etcd/ca.key), C(front-proxy-ca.crt),
        C(front-proxy-ca.key), C(sa.key), C(sa.pub). Read them from any control-plane node (the playbooks do);
        a worker needs only C(ca.crt) and C(ca.key) and keeps only C(ca.crt) on disk.
      - A node that already holds another CA or service-account key is refused (rule C(authority-mismatch)).
    type: dict
  renew_ca:
    description:
      - Renew a CA that is due within O(renew_before_days) (with its own key, so every certificate it signed stays
        valid). Without it, a CA is never touched.
    type: bool
    default: false
  wait:
    description:
      - For a control-plane node, wait until its etcd member started (the kubelet runs it from the manifest) and
        promote it from learner to voting member once it caught up.
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait for the etcd member (start and promotion together).
    type: float
    default: 300.0
  etcd_timeout:
    description: Seconds one etcd request may take.
    type: float
    default: 5.0
  lb_validate_command:
    description:
      - Command that validates a load balancer config before it replaces the live one; C({config}) is replaced by
        the path of a temporary file holding the new config. Use a container runtime (for example
        C([crictl, exec, ...])) when haproxy is not installed on the host itself.
    type: list
    elements: str
    default: [haproxy, -c, -f, '{config}']
  lb_validate:
    description: Validate the load balancer config before it replaces the live one. Turn off only when nothing can run haproxy.
    type: bool
    default: true
  manage_kubelet:
    description:
      - With O(root=/), run C(systemctl daemon-reload), enable the kubelet and restart it when its files changed
        (start it otherwise), after the files are written and before waiting for etcd.
    type: bool
    default: true
  kubelet_binary:
    description: The kubelet binary the systemd unit runs (installed separately, for example from the Kubernetes packages).
    type: path
    default: /usr/bin/kubelet
  allow_downgrade:
    description:
      - Render O(kubernetes_version) and O(etcd_image) even where the node's manifests name a newer release. Without it
        what is installed is the floor - after an upgrade (M(steward.cluster.cluster_upgrade)) a run with the
        inventory unchanged keeps each control-plane and etcd image where it is (a warning says so), never rolling a
        node back.
    type: bool
    default: false
  now:
    description:
      - Plan and issue as of this time (RFC 3339, such as C(2026-03-01T12:00:00Z)) instead of the current time, for
        tests and what-if runs.
    type: str
requirements:
  - cryptography
  - PyYAML
  - requests (etcd membership of control-plane nodes)
'''
