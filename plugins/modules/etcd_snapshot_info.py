#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: etcd_snapshot_info
short_description: List the etcd snapshots in a local directory or S3 store and say which are usable
version_added: 0.1.0
description:
  - Lists every snapshot object of the store (v2 layout, and the legacy v1 layout) in restore
    order and gives each a status; only usable snapshots (C(valid), C(unrecorded)) are ever restored from.
  - By default every usable snapshot is read back and its content verified, because "is this backup
    usable" is what a listing is asked for. O(verify=listing) is the cheap mode, named as such.
  - C(valid) means data and metadata exist and agree (and, with O(verify=content), the content too);
    C(unrecorded) a snapshot written by etcd-backup-restore (no metadata object), usable when its content
    verifies; C(incomplete) data without metadata (an interrupted run); C(corrupt) data that disagrees with
    its metadata or fails a content check (RV(snapshots[].failed_check) names which); C(orphan-metadata)
    metadata without data; C(partial) a temporary object or unfinished multipart upload.
  - Never changes anything.
options:
  verify:
    description:
      - V(content) downloads each usable snapshot and checks it - sha256 and size against its metadata;
        for full snapshots etcd's sha256 trailer and the full bolt structure (C(snapshot status)); for
        deltas their sha256 trailer, JSON and revisions. A snapshot that fails is reported C(corrupt).
      - V(listing) is the cheap mode - names, sizes and metadata only. A file corrupted in place (same
        size) still lists as C(valid) in this mode.
    type: str
    choices: [content, listing]
    default: content
  verify_sha256:
    description:
      - Deprecated, use O(verify). V(true) is O(verify=content), V(false) is O(verify=listing).
    type: bool
  tmp_dir:
    description: Directory for the copies read back from an S3 store (default the system temp directory).
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
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: List the snapshots and verify their content
  steward.cluster.etcd_snapshot_info:
    store: s3://backups/etcd/main
    s3_endpoint_url: https://minio.example.com
  register: snaps

- name: Only list names and metadata (cheap, does not read the snapshots)
  steward.cluster.etcd_snapshot_info:
    store: /var/backups/etcd
    verify: listing

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
      description: One of C(valid), C(unrecorded), C(incomplete), C(corrupt), C(orphan-metadata), C(partial).
      type: str
    valid:
      description: Whether the snapshot can be restored from (C(valid) or C(unrecorded)).
      type: bool
    problem:
      description: Why it is not valid (empty when valid).
      type: str
    failed_check:
      description:
        - The content check that failed for a C(corrupt) snapshot, e.g. C(sha256), C(size), C(sha256-trailer),
          C(snapshot-status), C(delta-content), C(decompression); null otherwise.
      type: str
    checked:
      description: How far the snapshot was verified, C(content) or C(listing).
      type: str
    sha256:
      description: sha256 recorded in the metadata.
      type: str
    metadata:
      description: The metadata object, if any.
      type: dict
latest_valid:
  description: The latest usable full snapshot (same fields as an item of RV(snapshots)), or null.
  returned: always
  type: dict
counts:
  description: Number of snapshots per status.
  returned: always
  type: dict
  sample: {valid: 3, unrecorded: 0, incomplete: 0, corrupt: 0, orphan-metadata: 0, partial: 1}
verify:
  description: The verification that was done, C(content) or C(listing).
  returned: always
  type: str
encryption:
  description: Server-side encryption settings used to read an S3 store (never the key).
  returned: for S3 stores
  type: dict
store_notes:
  description: Store directories that others may read or enter (local stores), with a message each.
  returned: for local stores
  type: list
  elements: dict
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.etcd.args import ETCD_STORE_SPEC, ETCD_TOOLS_SPEC
from ansible_collections.steward.cluster.plugins.module_utils.common.argspec import argspec
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.binaries import resolve_tools
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.params import parse_etcd_snapshot_info
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.snapshot import (
    VERIFY_CONTENT,
    VERIFY_LISTING,
    VERIFY_MODES,
    list_snapshots,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.stores import store_from_params, store_report

SPEC = argspec(ETCD_STORE_SPEC, ETCD_TOOLS_SPEC,
               verify={'type': 'str', 'choices': list(VERIFY_MODES), 'default': VERIFY_CONTENT},
               verify_sha256={'type': 'bool'},
               tmp_dir={'type': 'path'})


def act(p, check_mode):
    verify = p['verify']
    if p['verify_sha256'] is not None:
        verify = VERIFY_CONTENT if p['verify_sha256'] else VERIFY_LISTING
    parsed = parse_etcd_snapshot_info(p)
    store = store_from_params(p, must_exist=not check_mode)
    tool = resolve_tools(p['etcdutl_path'], p['etcd_path'], p['bin_dirs'], p['tool_timeout']).snapshot_tool \
        if verify == VERIFY_CONTENT else None
    result = list_snapshots(store, verify=verify, tmp_dir=parsed['tmp_dir'], tool=tool)
    result.update(store_report(store), changed=False)
    return result


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    shell.require_libraries(module, 'boto3' if module.params['store'].startswith('s3://') else None)
    if module.params['verify_sha256'] is not None:
        module.deprecate('verify_sha256 is replaced by verify (content or listing)', version='2.0.0',
                         collection_name='steward.cluster')
    shell.run(module, act, EtcdError)


if __name__ == '__main__':
    main()
