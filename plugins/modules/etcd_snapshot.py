#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: etcd_snapshot
short_description: Take a verified full snapshot of an etcd cluster into a local directory or S3
version_added: 0.1.0
description:
  - Picks the healthiest member (answers status and a quorum read; highest applied raft index,
    a follower before the leader on ties) and streams its snapshot over the etcd API.
  - The snapshot is verified before it is published (etcd's sha256 trailer and
    C(etcdutl snapshot status), or C(etcdctl) for etcd 3.4) and named like etcd-backup-restore
    does (C(Full-00000000-<revision>-<unix time>)) under C(<store>/v2/).
  - Publishing is two-phase, data then a C(<name>.meta.json) metadata object, so an interrupted
    run never leaves anything that lists as valid.
  - Every run takes a new snapshot, so the module always reports a change.
options:
  tmp_dir:
    description:
      - Directory for the temporary snapshot file before it is published.
      - Defaults to the store directory itself for local stores (so publishing is a rename)
        and to the system temp directory for S3 stores.
    type: path
  snapshot_timeout:
    description: Seconds the whole snapshot stream may take.
    type: int
    default: 900
extends_documentation_fragment:
  - steward.cluster.etcd_connection
  - steward.cluster.etcd_store
  - steward.cluster.etcd_tools
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  action_group:
    support: full
    membership: [steward.cluster.etcd]
  check_mode:
    support: full
    details: Chooses the member and reports the name the snapshot would get; takes nothing.
  diff_mode:
    support: none
  platform:
    platforms: posix
requirements:
  - requests
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: Snapshot the cluster into a local directory
  steward.cluster.etcd_snapshot:
    endpoints: [https://10.0.0.1:2379, https://10.0.0.2:2379, https://10.0.0.3:2379]
    ca_cert: /etc/etcd/pki/ca.crt
    client_cert: /etc/etcd/pki/client.crt
    client_key: /etc/etcd/pki/client.key
    store: /var/backups/etcd

- name: Snapshot the cluster into an S3-compatible bucket
  steward.cluster.etcd_snapshot:
    endpoints: [http://127.0.0.1:2379]
    store: s3://backups/etcd/main
    s3_endpoint_url: https://minio.example.com
  register: snap

- name: Show the snapshot name
  ansible.builtin.debug:
    msg: "{{ snap.snapshot.name }} ({{ snap.snapshot.size }} bytes) from {{ snap.member.name }}"
'''

RETURN = r'''
snapshot:
  description:
    - The new snapshot as listed by the store (status C(valid)).
    - In check mode, the snapshot that would be taken, with status C(planned) and no size or sha256.
  returned: success
  type: dict
  contains:
    name:
      description: Snapshot name, C(Full-<startRev>-<lastRev>-<unix time>).
      type: str
      sample: Full-00000000-00001234-1767225600
    key:
      description: Object key or path relative to the store root.
      type: str
      sample: v2/Full-00000000-00001234-1767225600
    kind:
      description: C(Full).
      type: str
    start_revision:
      description: First revision (0 for full snapshots).
      type: int
    end_revision:
      description: The etcd revision the snapshot holds.
      type: int
    created:
      description: Unix time the snapshot was taken.
      type: int
    size:
      description: Size in bytes.
      type: int
    status:
      description: C(valid), or C(planned) in check mode.
      type: str
    valid:
      description: Whether the snapshot can be restored from.
      type: bool
    problem:
      description: Empty for a valid snapshot.
      type: str
    sha256:
      description: sha256 of the snapshot file.
      type: str
    metadata:
      description: The metadata object published with the snapshot (cluster and member ids, etcd version, checks).
      type: dict
encryption:
  description: Server-side encryption of the S3 objects (never the key; SSE-C shows the key's MD5, as S3 does).
  returned: success, for S3 stores
  type: dict
  sample: {mode: AES256}
store_notes:
  description:
    - Store directories that others may read or enter, left as the operator made them (local stores).
    - Each has C(path), C(mode), C(expected) and C(message); the module also warns.
  returned: success, for local stores
  type: list
  elements: dict
  sample: [{path: /var/backups/etcd, mode: '0755', expected: '0700', message: '...'}]
member:
  description: The member the snapshot was streamed from.
  returned: success
  type: dict
  contains:
    endpoint:
      description: Client endpoint used.
      type: str
    member_id:
      description: Member id (hex).
      type: str
    name:
      description: Member name.
      type: str
    cluster_id:
      description: Cluster id (hex).
      type: str
    version:
      description: etcd server version.
      type: str
    revision:
      description: The member's revision when it was chosen.
      type: int
    applied_index:
      description: Raft applied index when it was chosen.
      type: int
    is_leader:
      description: Whether the member was the leader.
      type: bool
'''

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common.argspec import argspec
from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.etcd.args import (
    ETCD_CONNECTION_SPEC,
    ETCD_STORE_SPEC,
    ETCD_TOOLS_SPEC,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.binaries import resolve_tools
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.params import parse_etcd_snapshot
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.snapshot import take_full_snapshot
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.stores import store_from_params, store_report

SPEC = argspec(ETCD_CONNECTION_SPEC, ETCD_STORE_SPEC, ETCD_TOOLS_SPEC,
               tmp_dir={'type': 'path'},
               snapshot_timeout={'type': 'int', 'default': 900})


def act(p, check_mode):
    parsed = parse_etcd_snapshot(p)
    store = store_from_params(p, must_exist=False)
    tools = resolve_tools(p['etcdutl_path'], p['etcd_path'], p['bin_dirs'], p['tool_timeout'])
    result = take_full_snapshot(parsed['conn'], store, now=time.time(), tmp_dir=parsed['tmp_dir'],
                                snapshot_timeout=parsed['snapshot_timeout'], tool=tools.snapshot_tool,
                                check_mode=check_mode)
    result.update(store_report(store))
    warnings = [note['message'] for note in result.get('store_notes', [])]
    if getattr(store, 'encryption_confirmed', lambda: None)() is False:
        warnings.append('the S3 store did not confirm %s server-side encryption of %s' % (
            result['encryption']['mode'], result['snapshot']['name']))
    result['warnings'] = warnings
    return result


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    shell.require_libraries(module, 'requests', 'boto3' if module.params['store'].startswith('s3://') else None)
    shell.run(module, act, EtcdError)


if __name__ == '__main__':
    main()
