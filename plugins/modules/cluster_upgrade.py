#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: cluster_upgrade
short_description: Plan a Kubernetes version upgrade of a provisioned cluster, or run one node's step of it
version_added: 0.1.0
description:
  - Reads what is installed - the image tags of the static-pod manifests (this node's files, the other nodes'
    mirror pods), each Node's C(status.nodeInfo.kubeletVersion), C(kubelet --version) of this node's kubelet and
    the kube-proxy DaemonSet - and plans the way to O(version) under Kubernetes' version skew policy - the control
    plane one minor at a time (through O(via) when the target is further), kube-controller-manager and
    kube-scheduler only once every kube-apiserver runs the hop's version, kubelets and kube-proxy never newer than
    the oldest kube-apiserver nor more minors behind than allowed. A plan that cannot be run is refused naming
    each rule, and nothing is changed.
  - When the target's minor wants a newer etcd than a control-plane node's etcd manifest names (kubeadm's
    C(SupportedEtcdVersion) floors, or O(etcd_image)), the plan's first step is C(etcd) (C(plan.etcd), with the
    image); it is run by C(steward.cluster.etcd_upgrade) (the playbook imports its plays), and every stage of this
    module waits for it (C(blocked)).
  - O(stage=plan) only plans (and shows each Node's recorded kubelet step); the other stages run this node's
    (O(node_name)) next step of that kind - a manifest rewritten and gated on the mirror pod reporting the version
    and Ready (and C(/readyz) for kube-apiserver), or for C(kubelet) the node drained through the Eviction API
    (PodDisruptionBudgets respected, cordoned once), the kubelet installed with O(kubelet_install_command) and
    restarted, gated on the Node reporting the version and Ready, and uncordoned unless it was cordoned before.
  - The kubelet step records its phase in the Node annotation C(cluster.steward.io/upgrade); a run killed at any
    point and started again does not drain a node twice. A step whose earlier wave is not done is not run
    (C(blocked) in the result; with O(strict_order) it fails with rule C(order)).
  - Cloud pools (O(machine_deployments), MachineDeployments of the machines area, MCM's API) are not upgraded in
    place - O(stage=machine-deployment) writes a new MachineClass naming the target kubelet (label and, for AWS, tag
    C(machine.steward.io/kubelet-version); O(class_patch) changes what else differs, such as the image) and points
    the MachineDeployment at it; the machines controller's rolling update replaces the machines; the step waits
    until the rollout is complete and every Node of the pool reports the kubelet (up to O(rollout_timeout)). A
    second run finds the class in place and only waits.
  - The C(steward.cluster.cluster_upgrade) playbook runs the stages in order on every node.
options:
  version:
    description: The target Kubernetes version, C(vX.Y.Z).
    type: str
    required: true
  via:
    description: One release of each minor between the current control plane and O(version), when the target is
      more than one minor ahead (the control plane moves one minor at a time).
    type: list
    elements: str
    default: []
  stage:
    description: C(plan), or the kind of step to run on O(node_name) (C(machine-deployment) - on the pool
      O(machine_deployment)).
    type: str
    choices: [plan, kube-apiserver, controller-manager-scheduler, kube-proxy, kubelet, machine-deployment]
    default: plan
  node_name:
    description: This node's name (required unless O(stage=plan) or O(stage=machine-deployment)); its manifests below
      O(root) are read and written.
    type: str
  machine_deployments:
    description: The cloud pools, as C(namespace/name) of their MachineDeployments - their machines' Nodes are
      planned as workers of the pool (skew-checked, never in the kubelet steps) and the pool rolled onto a new
      MachineClass after the control plane (and in a hop's first wave when a chain of several minors needs it).
    type: list
    elements: str
    default: []
  machine_deployment:
    description: The pool O(stage=machine-deployment) acts on (C(namespace/name), one of O(machine_deployments)).
    type: str
  class_patch:
    description:
      - A JSON merge patch (RFC 7386, MCM's field names) applied to the copy of the pool's current MachineClass that
        becomes the new one, for example a new image in C(providerSpec.ami) or another Secret in C(secretRef.name)
        (user data that installs the new kubelet).
      - C(metadata), C(apiVersion) and C(kind) are set by the upgrade.
    type: dict
  rollout_timeout:
    description: Seconds a pool's rollout may take, from the class switch to every Node reporting the kubelet.
    type: float
    default: 1800.0
  control_plane:
    description: The control-plane nodes' names, in the order they are upgraded.
    type: list
    elements: str
    required: true
  workers:
    description: The workers' names, in the order they are upgraded.
    type: list
    elements: str
    default: []
  root:
    description: The host's root prefix (C(/) on a real host; a directory for a lab host).
    type: path
    default: /
  kubelet_binary:
    description: Where the kubelet install is on the node (as seen on the node); C(<kubelet_binary> --version) names
      its version.
    type: str
    default: /usr/bin/kubelet
  kubelet_install_command:
    description: The command that installs the target kubelet, run on the node; C({version}) (v1.32.4),
      C({semver}) (1.32.4), C({binary}) (the kubelet's path below O(root)) and C({root}) are replaced. Empty - the
      kubelet step refuses (C(kubelet-install)) unless the binary names the target already.
    type: list
    elements: str
    default: []
  manage_kubelet:
    description: Restart the kubelet with systemctl after installing it (on a real root).
    type: bool
    default: true
  max_unavailable:
    description: Workers upgraded at once at most (the size of a batch in the plan; the playbook's C(serial) follows
      the plan's batches). A batch is smaller when O(max_maintenance) (or the profile's C(maxMaintenance)) is, and
      is closed early when one more node would evict more pods of a PodDisruptionBudget than it allows now.
    type: int
    default: 1
  max_maintenance:
    description: At most this many workers in one batch, for workers walked through the node-maintenance state
      machine (the profile's C(maxMaintenance)); with O(maintenance_config_source) or O(maintenance_config_file) the
      profile's own value is read as well (the smaller wins), less the nodes in maintenance that are not being
      upgraded.
    type: int
  maintenance_profile:
    description: The node-maintenance profile whose C(maxMaintenance) checks (on its transitions into
      C(in-maintenance)) bound the batches, with O(maintenance_config_source) / O(maintenance_config_file); unset,
      every profile the workers' C(cloud.sap/maintenance-profile) labels name (the smallest C(max) wins).
    type: str
  maintenance_config_source:
    description: Where the maintenance controller's C(maintenance.yaml) is, C(configmap/<ns>/<name>[/<key>]) or
      C(secret/...), read (stage C(plan) only) for the profile's C(maxMaintenance).
    type: str
  maintenance_config_file:
    description: The same C(maintenance.yaml) from a file (an absolute path) on the host the module runs on.
    type: path
  renew_certificates:
    description: In the C(kube-apiserver) and C(controller-manager-scheduler) steps, renew the certificates the
      rewritten static pods read that end within O(renew_before_days) (signed again by the CA on the node, same
      key, subject, SANs and usages), before the manifest is rewritten, so the restarted pod starts with them.
    type: bool
    default: true
  renew_before_days:
    description: A certificate ending within this many days is renewed on the way (O(renew_certificates)); the
      same rule as the provisioning modules' C(renew_before_days).
    type: int
    default: 30
  cert_days:
    description: How long a certificate renewed on the way is valid, in days (the provisioning modules' C(cert_days)).
    type: int
    default: 365
  etcd_check:
    description: Plan an etcd step first when an etcd member's image (the etcd manifest's tag) is older than the etcd
      kubeadm ships with the target minor (or O(etcd_image)). The step is run by C(steward.cluster.etcd_upgrade)
      (the playbook runs its plays); every stage of this module waits for it (C(blocked)). C(false) plans no etcd
      step.
    type: bool
    default: true
  etcd_image:
    description: The etcd image to move etcd to when it is older (its tag names the version, like
      C(registry.k8s.io/etcd:3.5.21-0)), instead of the installed repository with the version of kubeadm's table;
      one older than kubeadm's table is used with a warning.
    type: str
  maintenance:
    description: The kubelet step runs only while the node is C(in-maintenance) in the node-maintenance state machine
      (its label C(cloud.sap/maintenance-state)), else it refuses (C(not-in-maintenance)) changing nothing - for
      bare-metal workers walked through maintenance by the C(steward.cluster.maintenance_window) playbook (the
      C(steward.cluster.cluster_upgrade) playbook does so with C(cluster_upgrade_worker_maintenance)). Not checked in
      check mode.
    type: bool
    default: false
  strict_order:
    description: Fail (rule C(order)) instead of reporting C(blocked) when an earlier wave is not done.
    type: bool
    default: false
  timeout:
    description: Seconds a gate may take (a component reporting the version, the Node reporting the kubelet).
    type: float
    default: 300.0
  drain_timeout:
    description: Seconds the whole drain may take.
    type: float
    default: 600.0
  eviction_timeout:
    description: Seconds one pod's eviction may be refused by a PodDisruptionBudget before the drain fails.
    type: float
    default: 120.0
  force:
    description: Also evict pods that no controller would recreate.
    type: bool
    default: false
  protected_namespaces:
    description: Namespaces whose pods are not evicted.
    type: list
    elements: str
    default: []
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
    details: Every option is validated and the plan made; nothing is written, drained or installed.
  diff_mode:
    support: none
requirements:
  - kubernetes (the Python client)
  - PyYAML
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: Plan the upgrade to v1.32.4
  steward.cluster.cluster_upgrade:
    version: v1.32.4
    control_plane: [cp1, cp2, cp3]
    workers: [w1, w2]
    kubeconfig: /etc/kubernetes/admin.conf
  register: upgrade

- name: Upgrade this node's kubelet (drained, installed, restarted, gated, uncordoned)
  steward.cluster.cluster_upgrade:
    version: v1.32.4
    stage: kubelet
    node_name: w1
    control_plane: [cp1, cp2, cp3]
    workers: [w1, w2]
    kubelet_install_command: [apt-get, install, -y, "kubelet={semver}-1.1"]
    kubeconfig: /etc/kubernetes/admin.conf

- name: Roll a cloud pool onto a MachineClass naming v1.32.4 (after the control plane)
  steward.cluster.cluster_upgrade:
    version: v1.32.4
    stage: machine-deployment
    machine_deployment: shoot--demo/workers
    machine_deployments: [shoot--demo/workers]
    class_patch: {providerSpec: {ami: ami-0a1b2c3d4e5f60718}}
    control_plane: [cp1, cp2, cp3]
    kubeconfig: /etc/kubernetes/admin.conf
'''

RETURN = r'''
target:
  description: The target version.
  returned: always
  type: str
plan:
  description: C(target), C(current) (the oldest kube-apiserver), C(hops), C(steps) (C(kind), C(nodes), C(version),
    C(drain), C(hop); the C(etcd) step also C(image); a C(machine-deployment) step C(pool); a batch of workers'
    kubelets also C(batch), its number), C(refusals), C(done), C(etcd) (the etcd step, or null), C(pools) (the
    MachineDeployments with a step to do) and C(batches) (what bounded the workers' batches, C(max_unavailable),
    C(max_maintenance), C(size), C(limited_by), C(splits) by PodDisruptionBudgets, C(in_flight), C(budgets); null
    when no worker is left).
  returned: always
  type: dict
status:
  description: C(records) (each Node's recorded kubelet step, C(version), C(phase), C(unschedulable_before)),
    C(next) (the steps of the next wave), C(batches) (the workers' batches left, each node with its recorded phase
    or null) and C(done) (the nodes recorded done for the target).
  returned: always
  type: dict
installed:
  description: Per node, the versions read (C(kubelet), C(kube-apiserver), C(kube-controller-manager), C(kube-scheduler)).
  returned: always
  type: dict
step:
  description: The step run (or that would be, in check mode); null when there was none for this node.
  returned: always
  type: dict
actions:
  description: What was done, or would be in check mode, in order.
  returned: always
  type: list
  elements: str
certificates:
  description: The certificates renewed on the way (or that would be, in check mode), each with C(name), C(path),
    C(days_left), C(not_after) and C(message) (C(renew apiserver cert, expires in 12 days ...)); in the C(plan) stage
    with O(node_name) on a control-plane node, those its pending steps will renew, each with C(step).
  returned: control-plane steps, and the plan stage with O(node_name)
  type: list
  elements: dict
blocked:
  description: An earlier wave is not done, so this node's step was not run.
  returned: always
  type: bool
machine_class:
  description: The MachineClass a C(machine-deployment) step rolls its pool onto.
  returned: when a pool's step ran
  type: str
drain:
  description: The pods evicted and skipped, and whether this run cordoned the node (kubelet steps).
  returned: when a node was drained
  type: dict
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.common.argspec import argspec
from ansible_collections.steward.cluster.plugins.module_utils.common.systemd import ansible_runner
from ansible_collections.steward.cluster.plugins.module_utils.kube.args import KUBE_CONNECTION_SPEC
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import ProvisioningError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.entry import cluster_upgrade

SPEC = argspec(
    KUBE_CONNECTION_SPEC,
    version={'type': 'str', 'required': True},
    via={'type': 'list', 'elements': 'str', 'default': []},
    stage={'type': 'str', 'default': 'plan',
           'choices': ['plan', 'kube-apiserver', 'controller-manager-scheduler', 'kube-proxy', 'kubelet',
                       'machine-deployment']},
    node_name={'type': 'str'},
    machine_deployments={'type': 'list', 'elements': 'str', 'default': []},
    machine_deployment={'type': 'str'},
    class_patch={'type': 'dict'},
    rollout_timeout={'type': 'float', 'default': 1800.0},
    control_plane={'type': 'list', 'elements': 'str', 'required': True},
    workers={'type': 'list', 'elements': 'str', 'default': []},
    root={'type': 'path', 'default': '/'},
    kubelet_binary={'type': 'str', 'default': '/usr/bin/kubelet'},
    kubelet_install_command={'type': 'list', 'elements': 'str', 'default': []},
    manage_kubelet={'type': 'bool', 'default': True},
    max_unavailable={'type': 'int', 'default': 1},
    max_maintenance={'type': 'int'},
    maintenance_profile={'type': 'str'},
    maintenance_config_source={'type': 'str'},
    maintenance_config_file={'type': 'path'},
    renew_certificates={'type': 'bool', 'default': True},
    renew_before_days={'type': 'int', 'default': 30},
    cert_days={'type': 'int', 'default': 365},
    etcd_check={'type': 'bool', 'default': True},
    etcd_image={'type': 'str'},
    maintenance={'type': 'bool', 'default': False},
    strict_order={'type': 'bool', 'default': False},
    timeout={'type': 'float', 'default': 300.0},
    drain_timeout={'type': 'float', 'default': 600.0},
    eviction_timeout={'type': 'float', 'default': 120.0},
    force={'type': 'bool', 'default': False},
    protected_namespaces={'type': 'list', 'elements': 'str', 'default': []},
)


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    shell.require_libraries(module, 'PyYAML')
    shell.run(module, lambda p, check_mode: cluster_upgrade(p, check_mode, ansible_runner(module.run_command)),
              ProvisioningError, KubeError)


if __name__ == '__main__':
    main()
