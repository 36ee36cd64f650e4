#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: etcd_recover_member
short_description: Carry out this host's part of an etcd recovery plan
version_added: 0.1.0
description:
  - Runs on every host of a plan made by M(steward.cluster.etcd_recovery_plan), all at once (one task of the
    C(steward.cluster.etcd_recover) playbook), and does what the plan gives this host to do, step after
    step without waiting for Ansible in between.
  - The survivor of a lost quorum (V(force_new_cluster)) is stopped, started alone with C(--force-new-cluster)
    until healthy, and its config is written again without the flag (it must never apply twice).
  - A joiner stops what runs, moves its data dir aside (never deletes it), writes its config, removes its own
    stale member entry, waits for its turn (every joiner before it in the plan is a voting member, read with a
    linearizable member list at sub-second polls), is added as a learner the moment etcd allows it (etcd
    refuses a change within 5 s of the last; refusals are retried every 0.1 s), started, and promoted once it
    serves. A learner that received the leader's snapshot and does not serve 0.25 s after it arrived is restarted
    once (etcd would otherwise wait its 7 s request timeout before the new member publishes itself; a learner
    is no voter, so quorum is untouched).
  - A restored member (V(restore_snapshot); its data dir was restored by M(steward.cluster.etcd_restore))
    gets its config and starts with the others; it is healthy once a quorum of them runs.
  - A healthy learner of the plan is promoted. Every other host has nothing to do.
  - Each step's start and duration are returned, for the playbook's timing table.
options:
  plan:
    description: The C(plan) returned by M(steward.cluster.etcd_recovery_plan).
    type: dict
    required: true
  host:
    description: This host's inventory name, as the plan names it.
    type: str
    required: true
  name:
    description: The etcd member name.
    type: str
    required: true
  client_url:
    description: The member's advertised client URL (its health is polled there).
    type: str
    required: true
  peer_url:
    description: The member's advertised peer URL (what it is added with).
    type: str
    required: true
  data_dir:
    description: The member's data dir; a joiner's is moved aside to C(<data_dir>.lost-<time>).
    type: path
    required: true
  config_file:
    description: etcd's YAML config file.
    type: path
    required: true
  config:
    description:
      - The member's config as the etcd role renders it; C(initial-cluster), C(initial-cluster-state) and
        C(force-new-cluster) are set from the plan.
    type: dict
    required: true
  mode:
    description: Mode of O(config_file).
    type: raw
    default: '0640'
  directories:
    description: Directories to create first, each with C(path) and C(mode) (as M(steward.cluster.etcd_config)).
    type: list
    elements: dict
    default: []
  fingerprint_path:
    description: The restart fingerprint file of the etcd role (written as M(steward.cluster.etcd_config) does).
    type: path
    required: true
  fingerprint:
    description: The restart fingerprint.
    type: str
    required: true
  owner:
    description: Owner of the directories and files (systemd mode).
    type: str
  group:
    description: Group of the directories and files (systemd mode).
    type: str
  service_manager:
    description: How the member runs - a detached V(process) with a pid file, or a V(systemd) unit.
    type: str
    choices: [process, systemd]
    default: process
  service_name:
    description: The systemd unit (without C(.service)).
    type: str
    default: etcd
  binary:
    description: The etcd binary (process mode).
    type: path
  pid_file:
    description: The pid file (process mode).
    type: path
  log_file:
    description: The log file (process mode).
    type: path
  ca_cert:
    description: CA bundle for C(https) client URLs.
    type: path
  client_cert:
    description: Client certificate, when the members require one.
    type: path
  client_key:
    description: Key of O(client_cert).
    type: path
  timeout:
    description: Seconds each request to etcd may take.
    type: float
    default: 5.0
  wait_timeout:
    description:
      - Seconds for each wait - a member to become healthy, a membership change to be accepted, a learner to be
        promotable; a joiner waits for its turn this long per joiner before it and itself.
    type: int
    default: 60
  stop_timeout:
    description: Seconds between SIGTERM and SIGKILL when a process is stopped (etcd is crash-safe).
    type: int
    default: 10
attributes:
  action_group:
    support: full
    membership: [steward.cluster.etcd]
  check_mode:
    support: full
    details: Every check runs and the steps are listed in RV(actions); nothing is stopped, written or changed.
  diff_mode:
    support: none
  platform:
    platforms: posix
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
seealso:
  - module: steward.cluster.etcd_recovery_plan
  - module: steward.cluster.etcd_member_facts
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
# The etcd role runs it (tasks_from: recover) with its own config; the playbook steward.cluster.etcd_recover
# runs that on every host of the plan at once.
- name: Carry out this host's part of the plan
  steward.cluster.etcd_recover_member:
    plan: "{{ etcd_recovery.plan }}"
    host: "{{ inventory_hostname }}"
    name: etcd2
    client_url: http://10.0.0.2:2379
    peer_url: http://10.0.0.2:2380
    data_dir: /var/lib/etcd
    config_file: /etc/etcd/etcd.conf.yml
    config: {name: etcd2, data-dir: /var/lib/etcd, listen-client-urls: http://10.0.0.2:2379}
    fingerprint_path: /etc/etcd/etcd.conf.yml.restart-sha256
    fingerprint: 3f1c0de2
    service_manager: process
    binary: /usr/local/bin/etcd
    pid_file: /run/etcd.pid
    log_file: /var/log/etcd.log
  register: etcd_recovered
'''

RETURN = r'''
part:
  description: What this host does in the plan - survivor, seed, joiner, learner, restored or none.
  returned: always
  type: str
  sample: joiner
actions:
  description: What was done (in check mode, what would be done).
  returned: always
  type: list
  elements: str
  sample: [moved /var/lib/etcd aside to /var/lib/etcd.lost-1767225600, re-added etcd2 as a learner, started and promoted it]
steps:
  description: Each step with its wall-clock C(start) (Unix seconds) and its duration in C(seconds).
  returned: always
  type: list
  elements: dict
  sample: [{step: wait for its turn, start: 1767225600.5, seconds: 0.8}, {step: add as learner, start: 1767225601.3, seconds: 0.05}]
msg:
  description: The actions in one line.
  returned: always
  type: str
'''

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.etcd.args import ETCD_CONNECTION_SPEC
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.params import parse_etcd_recover_member
from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery.recovery_steps import (
    PART_NONE,
    cluster_endpoints,
    host_part,
    recover_host,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.service import ProcessService, SystemdService

SPEC = dict(
    plan=dict(type='dict', required=True),
    host=dict(type='str', required=True),
    name=dict(type='str', required=True),
    client_url=dict(type='str', required=True),
    peer_url=dict(type='str', required=True),
    data_dir=dict(type='path', required=True),
    config_file=dict(type='path', required=True),
    config=dict(type='dict', required=True),
    mode=dict(type='raw', default='0640'),
    directories=dict(type='list', elements='dict', default=[]),
    fingerprint_path=dict(type='path', required=True),
    fingerprint=dict(type='str', required=True),
    owner=dict(type='str'),
    group=dict(type='str'),
    service_manager=dict(type='str', choices=['process', 'systemd'], default='process'),
    service_name=dict(type='str', default='etcd'),
    binary=dict(type='path'),
    pid_file=dict(type='path'),
    log_file=dict(type='path'),
    wait_timeout=dict(type='int', default=60),
    stop_timeout=dict(type='int', default=10),
    # the client side of the connection options (the cluster's endpoints come from the plan)
    **dict((k, ETCD_CONNECTION_SPEC[k]) for k in ('ca_cert', 'client_cert', 'client_key', 'timeout'))
)


def act(p, check_mode):
    parsed = parse_etcd_recover_member(p)
    plan, spec = parsed['plan'], parsed['spec']
    service = SystemdService(parsed['service_name'], spec) if parsed['service_name'] else ProcessService(spec)
    endpoints = cluster_endpoints(plan) if host_part(plan, p['host']) != PART_NONE else [p['client_url']]
    conn = EtcdConnection(endpoints=tuple(endpoints), ca_cert=p['ca_cert'], client_cert=p['client_cert'],
                          client_key=p['client_key'], timeout=parsed['timeout'])
    return recover_host(plan, p['host'], parsed['setup'], service, conn, now=time.time(), check_mode=check_mode,
                        wait_timeout=parsed['wait_timeout'])


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True,
                           required_if=[('service_manager', 'process', ('binary', 'pid_file'))])
    shell.run(module, act, EtcdError)


if __name__ == '__main__':
    main()
