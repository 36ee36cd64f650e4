#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
---
module: etcd_restore
short_description: Restore an etcd member's data dir from a verified snapshot
version_added: 0.1.0
description:
  - Restores the data dir of one etcd member from a full snapshot in a store (local directory or
    S3), by default the latest valid one, or from a local snapshot file.
  - The snapshot is downloaded and verified against the sha256 and size recorded in its metadata,
    etcd's own sha256 trailer and C(snapshot status) before anything is restored.
  - The restore runs C(etcdutl snapshot restore) (etcd 3.5+) or C(etcdctl snapshot restore)
    (etcd 3.4) into a temporary sibling of O(data_dir), which is then moved into place, so a failed
    restore leaves no partial data dir.
  - An existing non-empty O(data_dir) is refused unless O(force=true); with O(force=true) it is moved
    aside to C(<data_dir>.pre-restore-<unix time>), never deleted.
  - A marker C(<data_dir>.restore.json) next to the data dir records the snapshot; running again with
    the same snapshot reports no change.
  - From a store, the delta snapshots taken after the full snapshot are applied too (O(apply_deltas)).
    The full snapshot is restored into a scratch single-member etcd on loopback, the deltas' events are
    replayed one revision per transaction (each checked to land on its recorded revision), and the
    rebuilt snapshot is what the data dir is restored from. A restore then loses at most the writes of
    the last delta period.
  - A gap in the delta snapshots (a missing revision range) refuses the restore unless O(stop_at_gap=true).
  - Without O(snapshot), when the newest usable full snapshot or a delta of its chain fails verification
    or cannot be restored, the next older full snapshot with its deltas is tried, and so on (O(fallback));
    every snapshot passed over is named in RV(skipped) with the check that failed. When none can be
    restored, the module fails and changes nothing.
  - Snapshots written by etcd-backup-restore (no metadata objects, status C(unrecorded)) are restored
    after their content is verified (etcd's sha256 trailer and C(snapshot status)).
  - Run it for every member with the same O(initial_cluster) and O(initial_cluster_token), then start
    the members with C(--initial-cluster-state new).
author: steward.cluster developers (@steward-cluster)
options:
  store:
    description:
      - The snapshot store, a local directory (C(/var/backups/etcd) or C(file:///var/backups/etcd))
        or an S3 location (C(s3://bucket/prefix)).
      - Required unless O(snapshot_file) is given.
    type: str
    required: false
  snapshot:
    description:
      - Name of the snapshot in O(store) to restore (for example C(Full-00000000-00001001-1700000000)).
      - Defaults to the latest usable full snapshot (with O(fallback), older ones when it cannot be restored).
        A named snapshot must be usable and full, and is never replaced by another one.
    type: str
  fallback:
    description:
      - Without O(snapshot), when the newest usable full snapshot (or a delta of its chain) fails
        verification or cannot be restored, try the next older one, then the next, and say which were
        skipped and why (RV(skipped)).
      - With V(false) the newest is the only candidate.
    type: bool
    default: true
  snapshot_file:
    description:
      - A local snapshot file to restore instead of a snapshot from a store.
    type: path
  name:
    description: Name of the member whose data dir is restored (C(--name)).
    type: str
    required: true
  data_dir:
    description: The member's data dir (absolute path).
    type: path
    required: true
  initial_cluster:
    description: All members of the restored cluster, as C(n1=http://a:2380,n2=http://b:2380,...).
    type: str
    required: true
  initial_cluster_token:
    description:
      - Cluster token of the restored cluster; the same for every member.
      - Not a secret (etcd shows it in its command line); it keeps members of different clusters apart.
    type: str
    default: etcd-cluster
  initial_advertise_peer_urls:
    description: This member's peer URLs; must match its entries in O(initial_cluster).
    type: list
    elements: str
    required: true
  force:
    description:
      - Restore even when O(data_dir) is not empty, or was restored from the same snapshot already.
      - The existing data dir is moved aside to C(<data_dir>.pre-restore-<unix time>), never deleted.
    type: bool
    default: false
  apply_deltas:
    description:
      - Apply the valid delta snapshots that follow the full snapshot, in revision order.
      - With V(false) only the full snapshot is restored.
      - Ignored with O(snapshot_file).
    type: bool
    default: true
  stop_at_gap:
    description:
      - When the delta snapshots have a gap, restore up to the revision before it instead of failing.
      - The writes after the gap are lost; the result reports the gap.
    type: bool
    default: false
  last_delta:
    description:
      - Apply the delta snapshots only up to and including this one (a name from the RV(deltas) of an
        earlier run, for example in check mode).
      - Pins the data when several members are restored one after another while new deltas keep arriving.
    type: str
  tmp_dir:
    description: Directory for the downloaded snapshot (default the system temp dir).
    type: path
extends_documentation_fragment:
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
    details: Selects, downloads and verifies the snapshot (read-only) and restores nothing.
  diff_mode:
    support: full
    details: Shows the data dir state (absent, empty, present and the snapshot it came from) before and after.
  platform:
    platforms: posix
'''

EXAMPLES = r'''
- name: Restore member etcd1 from the latest valid full snapshot
  steward.cluster.etcd_restore:
    store: s3://backups/etcd/main
    name: etcd1
    data_dir: /var/lib/etcd
    initial_cluster: etcd1=https://10.0.0.1:2380,etcd2=https://10.0.0.2:2380,etcd3=https://10.0.0.3:2380
    initial_cluster_token: main-restored
    initial_advertise_peer_urls: [https://10.0.0.1:2380]

- name: Restore a named snapshot over an existing data dir (moved aside)
  steward.cluster.etcd_restore:
    store: /var/backups/etcd
    snapshot: Full-00000000-00001001-1700000000
    name: etcd1
    data_dir: /var/lib/etcd
    initial_cluster: etcd1=http://127.0.0.1:2380
    initial_advertise_peer_urls: [http://127.0.0.1:2380]
    force: true

- name: Restore only the full snapshot, without the delta snapshots after it
  steward.cluster.etcd_restore:
    store: /var/backups/etcd
    apply_deltas: false
    name: etcd1
    data_dir: /var/lib/etcd
    initial_cluster: etcd1=http://127.0.0.1:2380
    initial_advertise_peer_urls: [http://127.0.0.1:2380]

- name: Restore from a local snapshot file
  steward.cluster.etcd_restore:
    snapshot_file: /root/etcd-snapshot.db
    name: etcd1
    data_dir: /var/lib/etcd
    initial_cluster: etcd1=http://127.0.0.1:2380
    initial_advertise_peer_urls: [http://127.0.0.1:2380]
'''

RETURN = r'''
snapshot:
  description: The snapshot restored (or that would be restored).
  returned: always
  type: dict
  sample:
    name: Full-00000000-00001001-1700000000
    key: v2/Full-00000000-00001001-1700000000
    kind: Full
    size: 20512
    status: valid
    sha256: 5f0c6e...
skipped:
  description:
    - Newer full snapshots passed over by the fallback, newest first, each with C(name), C(status)
      (C(corrupt) or C(unrestorable)), C(failed_check) (e.g. C(sha256), C(sha256-trailer), C(snapshot-status),
      C(delta-content), C(replay)) and C(reason).
  returned: from a store
  type: list
  elements: dict
  sample: [{name: Full-00000000-00002001-1700003600, status: corrupt, failed_check: sha256, reason: '...'}]
encryption:
  description: Server-side encryption settings used to read an S3 store (never the key).
  returned: for S3 stores
  type: dict
store_notes:
  description: Store directories that others may read or enter (local stores), with a message each.
  returned: for local stores
  type: list
  elements: dict
data_dir:
  description: The restored data dir.
  returned: always
  type: str
  sample: /var/lib/etcd
moved_aside:
  description: Where the previous data dir was moved (or would be moved), or null.
  returned: always
  type: str
  sample: /var/lib/etcd.pre-restore-1700000000
marker:
  description: Path of the marker file that records which snapshot the data dir was restored from.
  returned: always
  type: str
  sample: /var/lib/etcd.restore.json
tool:
  description: The tool that restored the data dir, C(etcdutl) or C(etcdctl) (etcd 3.4).
  returned: when a restore ran
  type: str
  sample: etcdutl
verification:
  description: Result of the snapshot verification (sha256, size, revision, total_keys, checks); null when nothing was done.
  returned: always
  type: dict
deltas:
  description: Names of the delta snapshots applied after the full snapshot, in order.
  returned: when restoring from a store
  type: list
  elements: str
  sample: [Incr-00001002-00001090-1700000020, Incr-00001091-00001200-1700000040]
revision:
  description: The last revision the restored data holds.
  returned: when restoring from a store
  type: int
  sample: 1200
gap:
  description: The gap in the delta snapshots that stopped the restore early (with O(stop_at_gap)), or null.
  returned: when restoring from a store
  type: str
'''

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.etcd.args import ETCD_STORE_SPEC, ETCD_TOOLS_SPEC
from ansible_collections.steward.cluster.plugins.module_utils.common.argspec import argspec
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.binaries import resolve_tools
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.params import parse_etcd_restore
from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery.restore import (
    restore_file,
    restore_with_fallback,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.stores import store_from_params, store_report

SPEC = argspec(
    ETCD_STORE_SPEC, ETCD_TOOLS_SPEC,
    snapshot=dict(type='str'),
    snapshot_file=dict(type='path'),
    name=dict(type='str', required=True),
    data_dir=dict(type='path', required=True),
    initial_cluster=dict(type='str', required=True),
    initial_cluster_token=dict(type='str', default='etcd-cluster', no_log=False),
    initial_advertise_peer_urls=dict(type='list', elements='str', required=True),
    force=dict(type='bool', default=False),
    apply_deltas=dict(type='bool', default=True),
    stop_at_gap=dict(type='bool', default=False),
    last_delta=dict(type='str'),
    fallback=dict(type='bool', default=True),
    tmp_dir=dict(type='path'),
)
SPEC.update(store=dict(SPEC['store'], required=False))


def act(p, check_mode):
    parsed = parse_etcd_restore(p)
    store = None if p['snapshot_file'] else store_from_params(p)
    tools = resolve_tools(p['etcdutl_path'], p['etcd_path'], p['bin_dirs'], p['tool_timeout'])
    member = dict(name=p['name'], data_dir=p['data_dir'], initial_cluster=p['initial_cluster'],
                  initial_cluster_token=p['initial_cluster_token'],
                  initial_advertise_peer_urls=p['initial_advertise_peer_urls'], force=p['force'],
                  tool=tools.snapshot_tool, tmp_dir=parsed['tmp_dir'], now=time.time(), check_mode=check_mode)
    if p['snapshot_file']:
        result = restore_file(p['snapshot_file'], **member)
    else:
        result = restore_with_fallback(store, snapshot=p['snapshot'], fallback=p['fallback'],
                                       apply_deltas=p['apply_deltas'], stop_at_gap=p['stop_at_gap'],
                                       last_delta=p['last_delta'], etcd_binary=tools.etcd, **member)
        result.update(store_report(store))
    result['warnings'] = ['skipped snapshot %s (%s): %s' % (skipped['name'], skipped['status'], skipped['reason'])
                          for skipped in result.get('skipped', [])]
    return result


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True,
                           required_one_of=[('store', 'snapshot_file')],
                           mutually_exclusive=[('store', 'snapshot_file'), ('snapshot', 'snapshot_file')])
    shell.run(module, act, EtcdError)


if __name__ == '__main__':
    main()
