# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Backup compaction: the newest full snapshot plus its deltas become one new full snapshot at the
chain's tip, so a restore replays nothing (etcd-backup-restore's compaction, EtcdBackup spec.compaction)."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Optional

from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.delta import Chain
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.fetch import fetch_delta, fetch_full
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.replay import replay
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.snapshot import MemberChoice, publish_full
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.store import Snapshot, SnapshotStore


def compact_chain(store: SnapshotStore, chain: Chain, *, work_dir: str, now: float, compression: Optional[str] = None,
                  tool: Optional[str] = None, etcd_binary: Optional[str] = None,
                  snapshot_timeout: float = 900) -> Snapshot:
    """Rebuild the chain (full + deltas) into one compacted, defragmented full snapshot and publish it.
    Nothing is deleted: garbage collection ages the old snapshots out."""
    if chain.base is None or not chain.deltas:
        raise EtcdError('nothing to compact: %s' % ('no full snapshot' if chain.base is None else 'no delta after it'))
    work = tempfile.mkdtemp(prefix='steward-compact-', dir=work_dir)
    try:
        base_path, _verification = fetch_full(store, chain.base, work, tool)
        batches = (fetch_delta(store, d, work) for d in chain.deltas)
        result = replay(base_path, chain.base.name.end_revision, batches, os.path.join(work, 'compacted.db'),
                        work_dir=work, compact=True, etcd_binary=etcd_binary, tool=tool,
                        snapshot_timeout=snapshot_timeout)
        if result.revision != chain.tip:
            raise EtcdError('compaction reached revision %d, the chain ends at %d' % (result.revision, chain.tip))
        meta = chain.base.metadata or {}
        member = MemberChoice(endpoint='compaction', member_id=meta.get('member_id', ''), name=meta.get('member_name', ''),
                              cluster_id=meta.get('cluster_id', ''), version=meta.get('etcd_version', ''),
                              revision=result.revision, applied_index=0, is_leader=False)
        extra = {'compacted': True, 'compacted_from': chain.names(), 'replayed_events': result.events}
        return publish_full(store, result.path, result.verification, member, now, compression, extra)
    finally:
        shutil.rmtree(work, ignore_errors=True)
