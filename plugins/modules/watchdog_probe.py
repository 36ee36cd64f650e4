#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: watchdog_probe
short_description: Run one dependency-watchdog probe now and scale the dependent controllers as it says
version_added: 0.1.0
description:
  - Runs one probe of the dependency watchdog's prober (Gardener dependency-watchdog, seed 004) with a DWD prober
    config, unchanged - the API server check, the node-lease probe (a lease expires 0.75 x C(kcmNodeMonitorGraceDuration)
    after its renewal; the probe fails when C(expired / candidates >= nodeLeaseFailureFraction)) - and reports the
    verdict and the scale plan (targets by level, replicas before and after, why).
  - Then applies the plan level by level, as the controller's prober loop does (C(steward-controller --controllers prober)),
    with the same ownership annotations, so the two cooperate; useful during an incident to see what the watchdog sees,
    or to bring the controllers back at once.
  - In check mode the plan is computed from the targets as they are and nothing is written.
  - O(action=auto) acts on this probe's verdict alone; C(failureThreshold) and C(successThreshold) need a run of probes
    and are not waited for here.
options:
  config:
    description:
      - The DWD prober config as a mapping (C(kubeConfigSecretName), C(probeInterval), C(kcmNodeMonitorGraceDuration),
        C(nodeLeaseFailureFraction), C(dependentResourceInfos), ...), as in DWD's C(dep-config.yaml).
      - Mutually exclusive with O(config_file); one of the two is required.
    type: dict
  config_file:
    description: Path of a DWD prober config file on the host the module runs on.
    type: path
  namespace:
    description:
      - The namespace of the dependent resources (and of the Secret C(kubeConfigSecretName) names), the controller's
        C(--namespace).
    type: str
    required: true
  owner:
    description:
      - Who scales, in the annotation C(cluster.steward.io/watchdog-owner). Use the controller's C(--prober-name) so
        that targets one scaled down are recognised by the other.
    type: str
    default: steward-watchdog-prober
  action:
    description:
      - C(auto) scales down when the probe fails, up when it succeeds, and does nothing when it is skipped (one
        candidate lease), has no verdict (API server or lease list unreachable), or probing is off for the cluster
        (namespace annotated C(cluster.steward.io/hibernated) or C(cluster.steward.io/migrating), being deleted,
        no Nodes).
      - C(scale_down) or C(scale_up) apply that direction whatever the probe says (the probe is still run and reported).
      - C(none) only probes and plans.
    type: str
    choices: [auto, scale_down, scale_up, none]
    default: auto
  wait:
    description:
      - Wait for each target's completion gate (status.replicas 0 on the way down; the restored replicas with one
        ready on the way up) within its C(timeout), level by level.
      - With C(false) the scale calls are made level by level without waiting.
    type: bool
    default: true
extends_documentation_fragment:
  - steward.cluster.kube_connection
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  action_group:
    support: full
    membership: [steward.cluster.watchdog]
  check_mode:
    support: full
    details: Probes and computes the plan from the targets as they are; scales nothing and writes no annotation.
  diff_mode:
    support: full
    details: The targets' replicas before and after (planned in check mode).
  platform:
    platforms: posix
notes:
  - A target that fails (a mandatory target missing, a write refused) or misses its completion gate fails the task,
    after every other step of the plan was done; RV(operation) says what happened to each target.
  - The ownership rules of the controller hold - a target whose replicas someone else changed while it was scaled
    down is left as it is and reported.
seealso:
  - name: Gardener dependency-watchdog
    description: The prober this module is compatible with.
    link: https://github.com/gardener/dependency-watchdog
requirements:
  - kubernetes (the Python client)
author: steward.cluster developers (@steward)
'''

EXAMPLES = r'''
- name: What would the watchdog do right now (incident view, changes nothing)
  steward.cluster.watchdog_probe:
    namespace: shoot--prod--a
    config_file: /etc/dependency-watchdog/prober/dep-config.yaml
  check_mode: true
  register: probe

- name: Bring the controllers back now, in the scaleUp level order
  steward.cluster.watchdog_probe:
    namespace: shoot--prod--a
    action: scale_up
    config:
      kcmNodeMonitorGraceDuration: 40s
      dependentResourceInfos:
        - ref: {apiVersion: apps/v1, kind: Deployment, name: kube-controller-manager}
          optional: false
          scaleUp: {level: 0}
          scaleDown: {level: 1}
        - ref: {apiVersion: apps/v1, kind: Deployment, name: machine-controller-manager}
          optional: false
          scaleUp: {level: 1, initialDelay: 30s}
          scaleDown: {level: 0}
'''

RETURN = r'''
probe:
  description: The probe - C(result) (healthy, failed, skipped, or the stage that failed - api, nodes, leases, machines,
    secret), the candidate and expired lease counts, the fraction and threshold, the reason, nodes left out and why.
  returned: always
  type: dict
  sample: {"result": "failed", "candidates": 10, "expired": 7, "fraction": 0.7, "threshold": 0.6,
           "reason": "7 of 10 node leases expired (0.70 >= 0.60)", "nodes": 10}
stopped:
  description: Why probing is off for the cluster (empty when it is on).
  returned: always
  type: str
direction:
  description: C(down), C(up), or null when nothing is to be done.
  returned: always
  type: str
  sample: down
reason:
  description: Why this direction (or why none).
  returned: always
  type: str
plan:
  description: The plan - direction, reason, one entry per level in order with each target's action, kind, replicas
    before and after and reason, and a one-line C(summary). Null without a direction.
  returned: always
  type: dict
  sample: {"direction": "down", "summary": "scale down: level 0: Deployment/kube-controller-manager 3->0 (...)",
           "levels": [{"level": 0, "steps": [{"target": "Deployment/kube-controller-manager", "action": "scale",
           "replicasBefore": 3, "replicasAfter": 0}]}]}
operation:
  description: What happened to each target (outcome succeeded, skipped, failed, timeout or blocked, message, times);
    empty in check mode.
  returned: always
  type: list
  elements: dict
failed_steps:
  description: The steps that failed or timed out (in check mode, the steps that would fail).
  returned: always
  type: list
  elements: dict
replicas:
  description: Each target's spec.replicas before and after (planned in check mode); null for a missing target.
  returned: always
  type: dict
  sample: {"before": {"Deployment/kube-controller-manager": 3}, "after": {"Deployment/kube-controller-manager": 0}}
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.kube.args import KUBE_CONNECTION_SPEC, client_from_params
from ansible_collections.steward.cluster.plugins.module_utils.common.argspec import argspec
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.errors import WatchdogError
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.oneshot import ACTIONS, failure_message, run_once
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.params import parse_watchdog_probe

SPEC = argspec(
    KUBE_CONNECTION_SPEC,
    config=dict(type='dict'),
    config_file=dict(type='path'),
    namespace=dict(type='str', required=True),
    owner=dict(type='str', default='steward-watchdog-prober'),
    action=dict(type='str', choices=list(ACTIONS), default='auto'),
    wait=dict(type='bool', default=True),
)


def act(p, check_mode):
    parsed = parse_watchdog_probe(p)
    warnings = ['config: unknown field %s ignored (as DWD does)' % warning for warning in parsed['config'].warnings]
    client = client_from_params(p)
    try:
        result = run_once(client, parsed['config'], parsed['namespace'], parsed['owner'], p['action'], check_mode,
                          p['wait'])
    finally:
        client.close()
    result['diff'] = {'before': result['replicas']['before'], 'after': result['replicas']['after']}
    if result['failed_steps']:
        raise shell.Failed('%s: %s' % ('would fail' if check_mode else 'failed', '; '.join(failure_message(result))),
                           dict(result, warnings=warnings))
    return dict(result, warnings=warnings)


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True,
                           mutually_exclusive=[('config', 'config_file')],
                           required_one_of=[('config', 'config_file')])
    shell.run(module, act, KubeError, WatchdogError)


if __name__ == '__main__':
    main()
