#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: etcd_druid_info
short_description: Status of etcd-druid C(Etcd) objects (druid.gardener.cloud/v1alpha1) in one call
version_added: 0.1.0
description:
  - Reads the C(Etcd) objects of etcd-druid's API (served by this collection, see C(docs/etcd-druid.md)) and
    reports, for each, its size, readiness, conditions by type, members, last operation and last errors, with a
    short verdict (RV(etcds[].healthy) and the RV(etcds[].problems) that make it false).
  - Filters like M(kubernetes.core.k8s_info) - O(namespace), O(name), O(label_selectors) - with the same connection
    options.
  - Changes nothing.
options:
  namespace:
    description: Only Etcds of this namespace; every namespace when not given.
    type: str
  name:
    description: Only the Etcd of this name (a missing one returns an empty list).
    type: str
  label_selectors:
    description:
      - Only Etcds whose labels match every one of these selectors (such as C(role=main), C(app in (etcd,main))),
        as in M(kubernetes.core.k8s_info).
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
    membership: [steward.cluster.etcd]
  check_mode:
    support: full
    details: Reads only; the same answer in check mode.
  diff_mode:
    support: N/A
    details: Changes nothing.
  platform:
    platforms: posix
seealso:
  - module: steward.cluster.etcd_cluster_info
requirements:
  - kubernetes (the Python client)
author: steward.cluster developers (@steward)
'''

EXAMPLES = r'''
- name: Every Etcd of a namespace
  steward.cluster.etcd_druid_info:
    namespace: shoot--dev
  register: druid

- name: Those that are not healthy, and why
  ansible.builtin.debug:
    msg: "{{ item.namespace }}/{{ item.name }}: {{ item.problems | join('; ') }}"
  loop: "{{ druid.etcds | rejectattr('healthy') }}"

- name: Wait until etcd-main is healthy after scaling it to 3
  steward.cluster.etcd_druid_info:
    namespace: shoot--dev
    name: etcd-main
  register: main
  until: main.healthy and main.etcds[0].ready_replicas == 3
  retries: 60
  delay: 10

- name: The main Etcds of every namespace, by label
  steward.cluster.etcd_druid_info:
    label_selectors: [role=main]
    kubeconfig: ~/.kube/garden
'''

RETURN = r'''
healthy:
  description: At least one Etcd was found and every one found is healthy.
  returned: always
  type: bool
etcds:
  description: One entry per Etcd, sorted by namespace and name.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The Etcd's name.
      type: str
      sample: etcd-main
    namespace:
      description: Its namespace.
      type: str
    replicas:
      description: C(spec.replicas), the wanted size (0 hibernates the cluster).
      type: int
    ready:
      description: C(status.ready), every replica ready (false when not reported yet).
      type: bool
    cluster_size:
      description: C(status.clusterSize), the members the cluster has (null when not reported yet).
      type: int
    current_replicas:
      description: C(status.currentReplicas).
      type: int
    ready_replicas:
      description: C(status.readyReplicas) (0 when not reported yet).
      type: int
    conditions:
      description:
        - C(status.conditions) by type (C(Ready), C(AllMembersReady), C(BackupReady), C(DataVolumesReady)), each
          with C(status), C(reason), C(message), C(last_transition_time) and C(last_update_time).
      type: dict
      sample: {Ready: {status: 'True', reason: Quorate, message: The majority of ETCD members is ready}}
    members:
      description: C(status.members), each with C(name), C(id), C(role), C(status), C(reason), C(last_transition_time).
      type: list
      elements: dict
    leader:
      description: The name of the member whose role is C(Leader), or null.
      type: str
    last_operation:
      description: C(status.lastOperation) as C(type), C(state), C(description), C(last_update_time), C(run_id); null when none.
      type: dict
    last_errors:
      description: C(status.lastErrors), each as C(code), C(description), C(observed_at).
      type: list
      elements: dict
    generation:
      description: C(metadata.generation).
      type: int
    observed_generation:
      description: C(status.observedGeneration), the generation the controller last reconciled (null before).
      type: int
    reconcile_requested:
      description: The annotation C(gardener.cloud/operation=reconcile) is set (spec changes wait for it unless the
        controller reconciles specs automatically).
      type: bool
    suspended:
      description: The annotation C(druid.gardener.cloud/suspend-etcd-spec-reconcile) is set.
      type: bool
    healthy:
      description:
        - True when nothing below is wrong; false with RV(etcds[].problems) saying why.
        - Healthy means C(status.ready), conditions C(Ready) and C(AllMembersReady) true, C(BackupReady) true
          when the Etcd has a backup store, the current generation reconciled, the Etcd not being deleted and not
          hibernated (replicas 0).
      type: bool
    problems:
      description: Short reasons the Etcd is not healthy, such as C(Ready=False (QuorumLost)); empty when healthy.
      type: list
      elements: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.common.argspec import argspec
from ansible_collections.steward.cluster.plugins.module_utils.druid.params import parse_etcd_druid_info
from ansible_collections.steward.cluster.plugins.module_utils.druid.spec import API_VERSION
from ansible_collections.steward.cluster.plugins.module_utils.druid.status import etcd_report
from ansible_collections.steward.cluster.plugins.module_utils.kube.args import KUBE_CONNECTION_SPEC, client_from_params
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError

SPEC = argspec(
    KUBE_CONNECTION_SPEC,
    namespace=dict(type='str'),
    name=dict(type='str'),
    label_selectors=dict(type='list', elements='str', default=[]),
)


def act(p, check_mode):
    query = parse_etcd_druid_info(p)
    client = client_from_params(p)
    try:
        found = client.list(api_path(API_VERSION, 'etcds', query['namespace']), label_selector=query['label_selector'])
    finally:
        client.close()
    return dict(etcd_report(found, query['name']), changed=False)


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    shell.run(module, act, KubeError, what='Etcds (%s)' % API_VERSION)


if __name__ == '__main__':
    main()
