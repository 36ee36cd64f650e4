#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: sabakan_repair
short_description: Queue, run and delete repair entries for machines sabakan reports as failed
version_added: 0.1.0
description:
  - CKE's sabakan-triggered repair (seed 001). Queries sabakan for failed machines and appends one
    repair queue entry per machine to a queue file, with C(address) (C(spec.ipv4[0])), C(machine_type)
    (C(spec.bmc.bmcType)) and C(operation) (the state, lower case).
  - A machine that already has an entry in the queue, finished or not, gets no new one. Entries stay
    until a user deletes them from the file, as in CKE; delete an entry once the machine is repaired.
  - When the existing entries plus the new failures would exceed C(maximum-repair-queue-entries),
    nothing at all is queued (a rack power cut must not turn into dozens of repairs); the reason is
    returned in RV(blocked) and shown as a warning.
  - An UNREACHABLE machine that is being rebooted (per O(reboot_queue_file)) or is not a node of
    O(cluster_file) is left alone until it has been unreachable for C(wait-seconds-to-repair-rebooting).
  - With O(state=run), drives one entry to the end with CKE's repair procedures (O(repair)), as the
    controller's repair loop does (docs/sabakan.md). With O(state=absent), deletes finished entries.
options:
  state:
    description:
      - V(present) queues entries for sabakan's failed machines (the default; needs a machine source).
      - V(run) drives the entry O(index) (default the oldest unfinished one) through its repair procedure, as
        health check, drain when the step says C(need_drain) and the machine is a Node, repair command with
        the machine's address as the last argument, watch, next step; until it succeeded or failed. Every
        change is written to O(queue_file) at once. In check mode nothing runs (no command, not even the health
        check) and RV(next_action) says what the next pass would do.
      - V(absent) deletes the finished (succeeded or failed) entries, or the entry O(index), which must have
        finished.
    type: str
    choices: [present, run, absent]
    default: present
  repair:
    description:
      - CKE's C(repair) configuration (cluster.yml C(repair), verbatim), with C(repair_procedures) per machine type
        with C(repair_operations) named after the sabakan state, each with C(repair_steps), C(health_check_command)
        and C(success_command), and C(max_concurrent_repairs), C(evict_retries), C(evict_interval),
        C(eviction_timeout_seconds). Every field is checked (docs/sabakan.md lists them with CKE's defaults).
      - Required with O(state=run).
    type: dict
  index:
    description: The entry to run (O(state=run)) or delete (O(state=absent)), by its C(index).
    type: int
  kubeconfig:
    description:
      - A kubeconfig for draining and uncordoning the machine's Node (O(state=run)). Without it, a step with
        C(need_drain) on a machine that is a node of O(cluster_file) is refused before anything runs.
      - The Kubernetes connection takes kubernetes.core's options (O(kubeconfig), O(context), O(host), O(api_key));
        O(validate_certs) and O(ca_path) apply to it as well as to sabakan.
    type: path
  context:
    description: The kubeconfig context for the Kubernetes API (kubernetes.core's option).
    type: str
  host:
    description: The Kubernetes API server URL, instead of or over the kubeconfig's (kubernetes.core's option).
    type: str
  api_key:
    description: A bearer token for the Kubernetes API (kubernetes.core's option).
    type: str
  run_timeout:
    description: Seconds O(state=run) may take; when they run out the task fails and the file keeps where the entry is.
    type: float
    default: 3600
  poll_interval:
    description: Seconds between health checks while O(state=run) watches a step.
    type: float
    default: 5
  queue_file:
    description:
      - The repair queue file, a YAML mapping C(entries) (list) and C(write_index) (the next entry index).
      - Created when it does not exist; each entry has C(index), C(address), C(machine_type), C(operation),
        C(serial), C(status) (C(queued) when added) and C(created) (RFC 3339).
    type: path
    required: true
  reboot_queue_file:
    description:
      - A reboot queue file, a YAML mapping C(entries) of C({node, status}); nodes with status C(rebooting)
        count as being rebooted.
      - When set, the file must exist (a mistyped path must not hide a rebooting machine).
    type: path
  cluster_file:
    description:
      - The CKE cluster file whose nodes are the cluster members.
      - When unset or not existing yet, no machine counts as a member, so every unreachable machine waits
        C(wait-seconds-to-repair-rebooting) before it is queued.
    type: path
  now:
    description: The time to decide at, RFC 3339, for reproducible offline runs. Defaults to the current time.
    type: str
  mode:
    description:
      - Permissions of the queue file, as an octal string such as C('0644'); applied when the file is written,
        and to an existing file whose mode differs even when no entry is added (as M(steward.cluster.sabakan_cluster) does).
      - Unset keeps the mode of an existing file; a new file gets C(0644).
    type: raw
extends_documentation_fragment:
  - steward.cluster.sabakan_connection
  - steward.cluster.sabakan_connection.machines
  - steward.cluster.sabakan_connection.constraints
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  action_group:
    support: full
    membership: [steward.cluster.sabakan]
  check_mode:
    support: full
    details: Returns the entries that would be queued or deleted, or the next action of O(state=run); writes and runs nothing.
  diff_mode:
    support: full
    details: The queue file before and after, as YAML text.
  platform:
    platforms: posix
notes:
  - >-
    The default query variables are seed 001's,
    C({"having": {"states": ["UNHEALTHY", "UNREACHABLE"]}, "notHaving": {"roles": ["boot"]}}).
requirements:
  - PyYAML
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: Queue repairs for failed machines, at most 3 entries in the queue
  steward.cluster.sabakan_repair:
    url: http://sabakan.example:10080/graphql
    queue_file: /etc/cke/repair-queue.yml
    cluster_file: /etc/cke/cluster.yml
    constraints:
      maximum-repair-queue-entries: 3
      wait-seconds-to-repair-rebooting: 600
  register: repair

- name: Report
  ansible.builtin.debug:
    msg: "{{ repair.entries | length }} queued, {{ repair.queue_length }} in the queue {{ repair.blocked }}"

- name: Repair the oldest queued machine with CKE's procedures
  steward.cluster.sabakan_repair:
    state: run
    queue_file: /etc/cke/repair-queue.yml
    cluster_file: /etc/cke/cluster.yml
    kubeconfig: /etc/kubernetes/admin.conf
    repair:
      repair_procedures:
        - machine_types: ["IPMI-2.0"]
          repair_operations:
            - operation: unhealthy
              repair_steps:
                - repair_command: ["/usr/local/bin/bmc-reset"]
                  need_drain: true
                  watch_seconds: 300
              health_check_command: ["/usr/local/bin/machine-healthy"]
      max_concurrent_repairs: 1

- name: Delete finished entries
  steward.cluster.sabakan_repair:
    state: absent
    queue_file: /etc/cke/repair-queue.yml
'''

RETURN = r'''
entries:
  description: The entries added by this run (that would be added, in check mode).
  returned: state=present
  type: list
  elements: dict
  contains:
    index:
      description: Entry index, unique in the queue.
      type: int
    address:
      description: The machine's first IPv4 address.
      type: str
    machine_type:
      description: The machine's BMC type.
      type: str
    operation:
      description: The machine state in lower case, C(unhealthy) or C(unreachable) with the default variables.
      type: str
    serial:
      description: The machine's serial.
      type: str
    status:
      description: C(queued).
      type: str
    created:
      description: When the entry was added (RFC 3339).
      type: str
  sample:
    - index: 0
      address: 10.1.0.3
      machine_type: IPMI-2.0
      operation: unreachable
      serial: 3f2a01bc
      status: queued
      created: "2026-01-01T00:00:00Z"
skipped_machines:
  description:
    - Failed machines that got no entry, each with C(serial), C(address) and C(reason).
    - Not called C(skipped), which Ansible reserves for skipped tasks.
  returned: state=present
  type: list
  elements: dict
blocked:
  description: Why nothing was queued when the C(maximum-repair-queue-entries) limit stopped the run, else empty.
  returned: state=present
  type: str
  sample: "too many repair requests: 2 existing entries + 2 new failures > maximum-repair-queue-entries=3; nothing queued"
queue_length:
  description: Number of entries in the queue after the run.
  returned: success
  type: int
  sample: 2
machine_count:
  description: Number of failed machines sabakan reported.
  returned: state=present
  type: int
  sample: 2
queue_file:
  description: The path of the queue file.
  returned: always
  type: str
entry:
  description: The entry O(state=run) drove, as written to the queue file (C(status), C(step), C(step_status), C(message), ...).
  returned: state=run
  type: dict
next_action:
  description: What the next pass does for the entry, C(action) (drain, execute, succeed, fail, wait, drain-timeout), C(step) and C(reason).
  returned: state=run
  type: dict
  sample: {action: drain, step: 0, reason: "need_drain: drain Node w-3 first"}
events:
  description: What O(state=run) did, as the controller's Events (C(index), C(reason), C(message), C(type)).
  returned: state=run
  type: list
  elements: dict
deleted:
  description: The entries O(state=absent) deleted (would delete, in check mode).
  returned: state=absent
  type: list
  elements: dict
error:
  description: On failure, the error name, such as C(SabakanUnavailable) or C(FileError).
  returned: failure
  type: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import about_option
from ansible_collections.steward.cluster.plugins.module_utils.common.argspec import argspec
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.args import (
    CONSTRAINTS_SPEC,
    MACHINES_SOURCE_EXCLUSIVE,
    MACHINES_SOURCE_SPEC,
    SABAKAN_CONNECTION_SPEC,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.client import REPAIR_VARIABLES
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import SabakanError
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.files import (
    apply_file_update,
    dump_yaml,
    load_cluster_file,
    load_reboot_queue,
    load_repair_queue,
    plan_file_update,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.params import check_repair_run_options, parse_sabakan_repair
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.repair import decide_repairs
from ansible_collections.steward.cluster.plugins.module_utils.sabakan import repair_file
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.source import (
    load_constraints_input,
    machines_from,
)

SPEC = argspec(
    SABAKAN_CONNECTION_SPEC, MACHINES_SOURCE_SPEC, CONSTRAINTS_SPEC,
    queue_file={'type': 'path', 'required': True},
    reboot_queue_file={'type': 'path'},
    cluster_file={'type': 'path'},
    now={'type': 'str'},
    mode={'type': 'raw'},
    state={'type': 'str', 'choices': ['present', 'run', 'absent'], 'default': 'present'},
    repair={'type': 'dict'},
    index={'type': 'int'},
    kubeconfig={'type': 'path'},
    context={'type': 'str'},
    host={'type': 'str'},
    api_key={'type': 'str', 'no_log': True},
    run_timeout={'type': 'float', 'default': 3600.0},
    poll_interval={'type': 'float', 'default': 5.0},
)


def plan(params):
    """Read every input and decide; (queue, decision, added entries, file update, machine count). Raises
    SabakanError before anything is written."""
    parsed = parse_sabakan_repair(params)
    now = parsed['now']
    constraints = load_constraints_input(params['constraints'], params['constraints_file'])
    with about_option('queue_file'):
        queue = load_repair_queue(params['queue_file'])
    with about_option('reboot_queue_file'):
        reboots = load_reboot_queue(params['reboot_queue_file']) if params['reboot_queue_file'] else []
    with about_option('cluster_file'):   # not there yet: no member (documented: unreachable machines wait longer)
        cluster = load_cluster_file(params['cluster_file']) if params['cluster_file'] else None
    machines = machines_from(url=params['url'], machines=params['machines'], machines_file=params['machines_file'],
                             variables=params['variables'], defaults=REPAIR_VARIABLES, timeout=params['timeout'],
                             validate_certs=params['validate_certs'], ca_path=params['ca_path'], now=now)
    decision = decide_repairs(machines, queue.entries, reboots, cluster, constraints, now=now)
    serials = {m['spec']['ipv4'][0]: m['spec']['serial'] for m in machines if m['spec']['ipv4']}
    added = queue.append(decision.entries, now=now, serials=serials)
    update = plan_file_update(params['queue_file'], dump_yaml(queue.as_document()) if added else None, parsed['mode'],
                              'repair queue')
    return queue, decision, added, update, len(machines)


def act(params, check_mode):
    check_repair_run_options(params)   # every option is checked in every state, check mode included
    if params['state'] != 'present':
        return repair_file.run_or_delete(params, check_mode)
    queue, decision, added, update, machine_count = plan(params)
    if not check_mode:
        apply_file_update(update)
    return dict(changed=update.changed, entries=added, skipped_machines=decision.skipped,
                blocked=decision.blocked or '', queue_length=len(queue.entries), machine_count=machine_count,
                queue_file=params['queue_file'], warnings=[decision.blocked] if decision.blocked else [],
                diff=update.diff() if update.changed else None)


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True,
                           mutually_exclusive=MACHINES_SOURCE_EXCLUSIVE + [('constraints', 'constraints_file')],
                           required_if=[('state', 'present', list(MACHINES_SOURCE_EXCLUSIVE[0]), True),
                                        ('state', 'run', ['repair'])])
    shell.require_libraries(module, 'PyYAML')
    shell.run(module, act, SabakanError, queue_file=module.params['queue_file'])


if __name__ == '__main__':
    main()
