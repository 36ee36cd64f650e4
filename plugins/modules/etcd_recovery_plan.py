#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: etcd_recovery_plan
short_description: Decide the least destructive way to bring an etcd cluster back to health
version_added: 0.1.0
description:
  - Reads the facts that M(steward.cluster.etcd_member_facts) gathered on every etcd host and returns
    the plan that the C(steward.cluster.etcd_recover) playbook carries out. Pure - it contacts nothing.
  - C(none) when every host is a healthy voting member.
  - C(replace_members) when a quorum is healthy - stale entries of lost members are removed and the
    hosts are re-added as learners with empty data dirs, then promoted.
  - C(force_new_cluster) when quorum is lost but a member still has data - the survivor with the
    highest raft index is restarted with C(--force-new-cluster), then the others are re-added.
  - C(restore_snapshot) when no member has usable data - the newest intact backup is restored on every host
    at once and the members start together.
  - C(blocked) when nothing can be done safely (no host reachable, or no data and no backup store).
  - Hosts that Ansible could not reach never make the plan fail; they are reported and left alone.
  - An action plugin of the same name computes the plan on the controller (no module is shipped to a host);
    the options, checks and result are the module's.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  action_group:
    support: full
    membership: [steward.cluster.etcd]
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  hosts:
    description:
      - "One entry per etcd host, in inventory order: the C(member) result of
        M(steward.cluster.etcd_member_facts), or C({name: <host>, host_reachable: false}) for a host
        that could not be reached."
    type: list
    elements: dict
    required: true
  store_configured:
    description: Whether a backup store is available for the C(restore_snapshot) action.
    type: bool
    default: false
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: Decide what to do
  steward.cluster.etcd_recovery_plan:
    hosts: "{{ groups['etcd'] | map('extract', hostvars, 'etcd_member_state') | list }}"
    store_configured: "{{ etcd_backup_store is defined }}"
  delegate_to: localhost
  run_once: true
  register: etcd_plan
'''

RETURN = r'''
plan:
  description: The decision.
  returned: always
  type: dict
  contains:
    action:
      description: One of none, replace_members, force_new_cluster, restore_snapshot, blocked.
      type: str
      returned: always
    seed:
      description: Host that anchors the cluster - a healthy member, the survivor, or the restore target.
      type: str
      returned: always
    rejoin:
      description: Hosts to re-add as learners with empty data dirs, in this order.
      type: list
      elements: str
      returned: always
    remove:
      description: Stale member entries to remove first, each with C(host) and C(member_id).
      type: list
      elements: dict
      returned: always
    promote:
      description: Healthy learners to promote.
      type: list
      elements: str
      returned: always
    unreachable:
      description: Hosts that could not be reached and are left alone.
      type: list
      elements: str
      returned: always
    foreign_members:
      description: Members that belong to no inventory host; left alone.
      type: list
      elements: dict
      returned: always
    findings:
      description:
        - One word per host - healthy, learner, no-quorum, split-brain, down-with-data, down-without-data
          or unreachable.
      type: dict
      returned: always
    reasons:
      description: Why, in sentences.
      type: list
      elements: str
      returned: always
    changes:
      description: Whether carrying out the plan changes anything.
      type: bool
      returned: always
    initial_cluster:
      description:
        - For every host the plan starts, its C(--initial-cluster) - a joiner's is the membership it finds when
          its turn comes (the cluster plus the joiners before it), a restored host's is every restored host.
      type: dict
      returned: always
    members:
      description: For every reachable host, its member C(name), C(peer_url) and C(client_url).
      type: dict
      returned: always
  sample:
    action: force_new_cluster
    seed: etcd1
    rejoin: [etcd2, etcd3]
    findings: {etcd1: no-quorum, etcd2: down-without-data, etcd3: down-without-data}
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.etcd.args import RECOVERY_PLAN_SPEC
from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery.recovery import plan_recovery


def act(p, check_mode):
    plan = plan_recovery(p['hosts'], store_configured=p['store_configured'])
    return dict(changed=False, plan=plan.to_dict(), msg='; '.join(plan.reasons))


def main():
    # (an action plugin of the same name runs the planner on the controller; this module runs it on a host)
    module = AnsibleModule(argument_spec=RECOVERY_PLAN_SPEC, supports_check_mode=True)
    shell.run(module, act)


if __name__ == '__main__':
    main()
