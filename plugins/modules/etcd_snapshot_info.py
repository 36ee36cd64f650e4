#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: etcd_snapshot_info
short_description: List the etcd snapshots in a local directory or S3 store and classify them
version_added: 0.1.0
description:
  - Lists every snapshot object of the store (v2 layout, and the legacy v1 layout) in restore
    order and gives each a status; only C(valid) snapshots are ever restored from.
  - C(valid) means data and metadata exist and agree; C(incomplete) data without metadata
    (an interrupted run); C(corrupt) metadata that disagrees with the data; C(orphan-metadata)
    metadata without data; C(partial) a temporary object or unfinished multipart upload.
  - Never changes anything.
options:
  verify_sha256:
    description:
      - Download each valid snapshot and check its sha256 and size against its metadata
        (plus, for full snapshots, etcd's sha256 trailer and C(snapshot status)).
      - A snapshot that fails is reported with status C(corrupt).
    type: bool
    default: false
  etcdutl_path:
    description:
      - Path of C(etcdutl) (etcd 3.5+) or C(etcdctl) (etcd 3.4) used with O(verify_sha256).
      - Searched in E(STEWARD_ETCD_BIN_DIRS), E(PATH) and the usual install places when unset.
    type: path
extends_documentation_fragment:
  - steward.cluster.etcd_store
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
- name: List the snapshots and check their hashes
  steward.cluster.etcd_snapshot_info:
    store: s3://backups/etcd/main
    s3_endpoint_url: https://minio.example.com
    verify_sha256: true
  register: snaps

- name: Stop when there is nothing to restore from
  ansible.builtin.assert:
    that: snaps.latest_valid is not none
    fail_msg: "no valid full snapshot; counts: {{ snaps.counts }}"
'''

RETURN = r'''
snapshots:
  description: Every snapshot object in restore order (oldest first), valid or not.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Snapshot name.
      type: str
    key:
      description: Object key or path relative to the store root.
      type: str
    kind:
      description: C(Full) or C(Incr); null for an unnamed temp object.
      type: str
    start_revision:
      description: First revision.
      type: int
    end_revision:
      description: Last revision.
      type: int
    created:
      description: Unix time from the name.
      type: int
    size:
      description: Size of the data in bytes.
      type: int
    status:
      description: One of C(valid), C(incomplete), C(corrupt), C(orphan-metadata), C(partial).
      type: str
    valid:
      description: Whether the snapshot can be restored from.
      type: bool
    problem:
      description: Why it is not valid (empty when valid).
      type: str
    sha256:
      description: sha256 recorded in the metadata.
      type: str
    metadata:
      description: The metadata object, if any.
      type: dict
latest_valid:
  description: The latest valid full snapshot (same fields as an item of RV(snapshots)), or null.
  returned: always
  type: dict
counts:
  description: Number of snapshots per status.
  returned: always
  type: dict
  sample: {valid: 3, incomplete: 0, corrupt: 0, orphan-metadata: 0, partial: 1}
'''

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.etcd.args import ETCD_STORE_SPEC, argspec
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.s3_store import HAS_BOTO3
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot import list_snapshots
from ansible_collections.steward.cluster.plugins.module_utils.etcd.stores import store_from_params


def main():
    module = AnsibleModule(
        argument_spec=argspec(ETCD_STORE_SPEC,
                              verify_sha256={'type': 'bool', 'default': False},
                              etcdutl_path={'type': 'path'}),
        supports_check_mode=True,
    )
    if module.params['store'].startswith('s3://') and not HAS_BOTO3:
        module.fail_json(msg=missing_required_lib('boto3'))
    try:
        result = list_snapshots(store_from_params(module.params), verify_sha256=module.params['verify_sha256'],
                                tool=module.params['etcdutl_path'])
    except EtcdError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()
