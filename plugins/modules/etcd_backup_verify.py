#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: etcd_backup_verify
short_description: Prove that the newest etcd backup restores, by restoring it into a throwaway etcd
version_added: 0.1.0
description:
  - Reads the newest full snapshot of a store (or O(snapshot)) and the delta snapshots continuing it,
    verifies their content, restores the full snapshot into a scratch data dir, starts a throwaway etcd
    on a free loopback port, and compares what it serves with what the backup recorded - the revision,
    and etcd's C(HashKV) at the revision recorded from the cluster when the snapshot was taken. Then the
    deltas are replayed on it, each event landing on its recorded revision, up to the revision the last
    delta ends at.
  - Reports every snapshot of the chain as C(intact), C(corrupt) (which check failed), C(unrestorable)
    (why) or C(not-checked) (after an earlier failure).
  - Fails when the newest backup is not wholly restorable. With O(check_older), when the newest full
    snapshot itself fails, older ones are restored in turn and the first that restores is named
    (RV(fallback)), so the report says what a recovery would restore today (RV(would_restore)).
  - Changes nothing in the store; the scratch data dir and process are removed whatever happens.
  - Snapshots written by etcd-backup-restore (no metadata, status C(unrecorded)) are verified by their
    content; they record no C(HashKV), which the result says.
options:
  snapshot:
    description: Name of the full snapshot to verify instead of the newest usable one.
    type: str
  apply_deltas:
    description: Replay the delta snapshots continuing the full snapshot; V(false) verifies the full snapshot only.
    type: bool
    default: true
  check_older:
    description: When the newest full snapshot is not restorable, verify older ones until one is, and name it.
    type: bool
    default: true
  tmp_dir:
    description: Directory for the scratch data dir and the snapshot copies (default the system temp directory).
    type: path
extends_documentation_fragment:
  - steward.cluster.etcd_store
  - steward.cluster.etcd_tools
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  check_mode:
    support: full
    details: Never changes anything, so it runs the same in check mode.
  diff_mode:
    support: N/A
  action_group:
    support: full
    membership: [steward.cluster.etcd]
  platform:
    platforms: posix
author: steward.cluster developers (@steward)
'''

EXAMPLES = r'''
- name: Prove the newest backup restores
  steward.cluster.etcd_backup_verify:
    store: s3://backups/etcd/main
    s3_endpoint_url: https://minio.example.com
  register: proof

- name: Show what a disaster would restore today
  ansible.builtin.debug:
    msg: "{{ proof.msg }}"
'''

RETURN = r'''
ok:
  description: Whether the newest full snapshot and every delta of its chain restored and matched.
  returned: always
  type: bool
msg:
  description: One line saying what was restored, to which revision, in how long, or what failed.
  returned: always
  type: str
snapshot:
  description: The full snapshot verified.
  returned: always
  type: str
  sample: Full-00000000-00001234-1767225600
deltas:
  description: The delta snapshots of its chain, in replay order.
  returned: always
  type: list
  elements: str
expected_revision:
  description: The revision the chain ends at (the newest delta, else the full snapshot).
  returned: always
  type: int
restored_revision:
  description: The revision the throwaway etcd reached (null when the full snapshot did not restore).
  returned: always
  type: int
hash_kv:
  description:
    - C(match) (true, false, or null when no comparison was possible), C(expected) (recorded from the
      cluster), C(restored), C(revision), and a C(note) when there was nothing to compare.
  returned: when the full snapshot restored
  type: dict
verdicts:
  description: Per snapshot of the chain - C(name), C(kind), C(result) (intact, corrupt, unrestorable, not-checked), C(failed_check), C(reason).
  returned: always
  type: list
  elements: dict
would_restore:
  description: What a recovery would restore today - C(snapshot), C(deltas) (count), C(last_delta), C(revision); null when nothing.
  returned: always
  type: dict
fallback:
  description: The newest older full snapshot that restores, when the newest does not (with O(check_older)).
  returned: always
  type: str
older:
  description: The older full snapshots verified while looking for RV(fallback), with their verdicts.
  returned: always
  type: list
  elements: dict
duration:
  description: Seconds the verification of the newest chain took.
  returned: always
  type: float
steps:
  description: Seconds per step (read and check, restore and start, compare, replay deltas).
  returned: always
  type: dict
gap:
  description: Why the chain ends before the newest delta (a revision gap), empty when it does not.
  returned: always
  type: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.etcd.args import ETCD_STORE_SPEC, ETCD_TOOLS_SPEC
from ansible_collections.steward.cluster.plugins.module_utils.common.argspec import argspec
from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.backup_verify import summary, verify_backup
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.binaries import resolve_tools
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.params import parse_etcd_backup_verify
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.stores import store_from_params, store_report

SPEC = argspec(ETCD_STORE_SPEC, ETCD_TOOLS_SPEC,
               snapshot={'type': 'str'},
               apply_deltas={'type': 'bool', 'default': True},
               check_older={'type': 'bool', 'default': True},
               tmp_dir={'type': 'path'})


def act(p, check_mode):
    parsed = parse_etcd_backup_verify(p)
    store = store_from_params(p)
    tools = resolve_tools(p['etcdutl_path'], p['etcd_path'], p['bin_dirs'], p['tool_timeout'])
    result = verify_backup(store, work_dir=parsed['tmp_dir'], snapshot=p['snapshot'], apply_deltas=p['apply_deltas'],
                           check_older=p['check_older'], tool=tools.snapshot_tool, etcd_binary=tools.etcd)
    result.update(store_report(store), msg=summary(result), changed=False)
    if not result['ok']:
        raise shell.Failed(result['msg'], result)
    return result


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    shell.require_libraries(module, 'boto3' if module.params['store'].startswith('s3://') else None)
    shell.run(module, act, EtcdError)


if __name__ == '__main__':
    main()
