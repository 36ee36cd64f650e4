#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
---
module: etcd_snapshot_gc
short_description: Delete old etcd snapshots from a store with etcd-backup-restore's GC policies
version_added: 0.1.0
description:
  - Lists a snapshot store (local directory or S3) and deletes the snapshots that the garbage
    collection policy no longer needs, with the semantics of etcd-backup-restore's garbage collector.
  - C(LimitBased) keeps the newest O(max_backups) full snapshots. C(Exponential) keeps every full
    snapshot of the current hour, the newest one per hour for the rest of the current UTC day, per day
    for the previous 7 days and per week for the previous 4 weeks, and deletes older ones.
  - With both policies, deltas after the newest full snapshot are always kept, and older deltas are
    kept for O(delta_snapshot_retention_period) seconds.
  - Whatever the policy says, the newest valid full snapshot and the deltas after it are never deleted.
  - Invalid objects (incomplete, corrupt, orphan metadata, partial uploads) never count towards
    O(max_backups); they are deleted only once older than O(incomplete_grace_period), because a younger
    one may be an upload in progress.
  - Every deleted snapshot is returned with the reason it was deleted.
author: steward.cluster developers (@steward-cluster)
options:
  policy:
    description: The garbage collection policy.
    type: str
    choices: [LimitBased, Exponential]
    default: LimitBased
  max_backups:
    description:
      - Number of newest valid full snapshots to keep with O(policy=LimitBased) (at least 1).
      - Ignored by O(policy=Exponential).
    type: int
    default: 7
  delta_snapshot_retention_period:
    description:
      - Seconds for which delta snapshots before the newest full snapshot are kept.
      - C(0) deletes every delta snapshot that is not after the newest full snapshot.
    type: int
    default: 0
  incomplete_grace_period:
    description:
      - Seconds an invalid object (incomplete, corrupt, orphan metadata, partial upload) is left alone
        before it counts as garbage.
    type: int
    default: 3600
extends_documentation_fragment:
  - steward.cluster.etcd_store
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  action_group:
    support: full
    membership: [steward.cluster.etcd]
  check_mode:
    support: full
    details: Lists what would be deleted and deletes nothing.
  diff_mode:
    support: full
    details: Shows the snapshot names in the store before and after.
  platform:
    platforms: posix
'''

EXAMPLES = r'''
- name: Keep the newest 7 full snapshots
  steward.cluster.etcd_snapshot_gc:
    store: /var/backups/etcd

- name: Exponential retention on S3, deltas kept for a day
  steward.cluster.etcd_snapshot_gc:
    store: s3://backups/etcd/main
    s3_endpoint_url: https://minio.example.com
    policy: Exponential
    delta_snapshot_retention_period: 86400
  register: gc

- name: Show why snapshots were deleted
  ansible.builtin.debug:
    msg: "{{ gc.deleted | map(attribute='reason') | list }}"
'''

RETURN = r'''
deleted:
  description:
    - The snapshots deleted (in check mode, the ones that would be deleted), each with the reason.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Snapshot name (or object base name for partial uploads).
      type: str
    key:
      description: Object key or path relative to the store root.
      type: str
    kind:
      description: C(Full) or C(Incr); null for unnamed partial uploads.
      type: str
    status:
      description: C(valid), C(incomplete), C(corrupt), C(orphan-metadata) or C(partial).
      type: str
    reason:
      description: Why the snapshot was deleted.
      type: str
  sample:
    - name: Full-00000000-00001001-1700000000
      key: v2/Full-00000000-00001001-1700000000
      kind: Full
      status: valid
      reason: 'LimitBased: 7 newer valid full snapshots exist'
kept:
  description: Names of the snapshots kept, in restore order.
  returned: always
  type: list
  elements: str
  sample: [Full-00000000-00001001-1700003600, Incr-00001002-00001010-1700003700]
failed:
  description: Snapshots that could not be deleted, with the error (the module then fails).
  returned: always
  type: list
  elements: dict
policy:
  description: The policy applied.
  returned: always
  type: str
  sample: LimitBased
'''

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.etcd.args import ETCD_STORE_SPEC
from ansible_collections.steward.cluster.plugins.module_utils.common.argspec import argspec
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.gc import POLICIES, apply_gc, plan_gc
from ansible_collections.steward.cluster.plugins.module_utils.etcd.params import parse_etcd_snapshot_gc
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.stores import store_from_params

SPEC = argspec(
    ETCD_STORE_SPEC,
    policy=dict(type='str', choices=list(POLICIES), default='LimitBased'),
    max_backups=dict(type='int', default=7),
    delta_snapshot_retention_period=dict(type='int', default=0),
    incomplete_grace_period=dict(type='int', default=3600),
)


def act(p, check_mode):
    parsed = parse_etcd_snapshot_gc(p)
    store = store_from_params(p)
    before = store.list()
    plan = plan_gc(before, p['policy'], now=time.time(), **parsed)
    result = apply_gc(store, plan, check_mode=check_mode)
    gone = set(d['key'] for d in result['deleted'])
    result['diff'] = {'before': {'snapshots': [s.to_dict()['name'] for s in before]},
                      'after': {'snapshots': [s.to_dict()['name'] for s in before if s.key not in gone]}}
    if result['failed']:
        raise shell.Failed('could not delete %d snapshot(s): %s' % (
            len(result['failed']), '; '.join('%s: %s' % (f['name'], f['error']) for f in result['failed'])), result)
    return result


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    shell.require_libraries(module, 'boto3' if module.params['store'].startswith('s3://') else None)
    shell.run(module, act, EtcdError)


if __name__ == '__main__':
    main()
