# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""etcd-druid's snapshot-compaction controller (seed 004, ETCD-38), with druid's flags and metrics.

Each `Etcd` with a backup store is looked at every COMPACTION_PERIOD (10 s: two Lease reads): the events written since the last full
snapshot are the delta snapshot Lease's revision minus the full snapshot Lease's (their holderIdentity, as
the backup leader writes them). Above `--etcd-events-threshold` (druid: "events that can be allowed before";
read as `>`), the newest full snapshot and its deltas are rebuilt into one compacted, defragmented full
snapshot (etcd/backup/compaction.compact_chain) within `--active-deadline-duration`, and the full snapshot
Lease takes its revision. Nothing is deleted: GC ages the old snapshots out. At most `--compaction-workers`
run at once, one per Etcd; it needs a full snapshot to start from. druid runs a Job per compaction; here the
controller runs it in a thread (no image, no Job), which is the difference docs/etcd-druid.md names.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from typing import Any, Mapping, Optional, Set, Tuple

import kopf

from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.compaction import compact_chain
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.delta import plan_chain
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.druid_store import parse_store
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import format_micro

from steward_controller.core.runtime import Runtime
from steward_controller.core.druid_store import open_druid_store

GROUP, VERSION = 'druid.gardener.cloud', 'v1alpha1'
LEASES = 'coordination.k8s.io/v1'
COMPACTION_PERIOD = 10.0
log = logging.getLogger('steward.etcdtasks')


def delta_events(full: Optional[Mapping[str, Any]], delta: Optional[Mapping[str, Any]]) -> Optional[int]:
    """deltaLeaseRevision - fullLeaseRevision (ETCD-38); None when either Lease holds no revision yet."""
    try:
        full_rev = int(((full or {}).get('spec') or {}).get('holderIdentity'))
        delta_rev = int(((delta or {}).get('spec') or {}).get('holderIdentity'))
    except (TypeError, ValueError):
        return None
    return max(0, delta_rev - full_rev)


class Compactions:
    """Which Etcds are being compacted; the worker limit."""

    def __init__(self, runtime: Runtime, options: Any):
        self.runtime, self.options = runtime, options
        self.running: Set[Tuple[str, str]] = set()
        self.lock = threading.Lock()

    def tick(self, body: Mapping[str, Any]) -> None:
        if not self.options.enable_backup_compaction:
            return
        meta, spec = body.get('metadata') or {}, body.get('spec') or {}
        namespace, name = meta.get('namespace'), meta.get('name')
        store_spec = (spec.get('backup') or {}).get('store')
        if not store_spec:
            return
        client = self.runtime.client
        full = client.get_or_none(api_path(LEASES, 'leases', namespace, '%s-full-snap' % name))
        delta = client.get_or_none(api_path(LEASES, 'leases', namespace, '%s-delta-snap' % name))
        events = delta_events(full, delta)
        if events is None:
            return
        self.runtime.metrics.seed.compaction_num_delta_events.labels(namespace, name).set(events)
        if events <= self.options.etcd_events_threshold:
            return
        with self.lock:
            if (namespace, name) in self.running or len(self.running) >= self.options.compaction_workers:
                return
            self.running.add((namespace, name))
        threading.Thread(target=self._compact, args=(body, store_spec, full, events), daemon=True,
                         name='compaction-%s-%s' % (namespace, name)).start()

    def _compact(self, body: Mapping[str, Any], store_spec: Mapping[str, Any], full: Mapping[str, Any],
                 events: int) -> None:
        meta = body.get('metadata') or {}
        namespace, name = meta.get('namespace'), meta.get('name')
        seed = self.runtime.metrics.seed
        seed.compaction_jobs_current.labels(namespace).inc()
        started = time.monotonic()
        work = os.path.join(self.runtime.settings.work_dir, 'compaction-%s-%s' % (namespace, name))
        ok = False
        try:
            os.makedirs(work, mode=0o700, exist_ok=True)
            store = open_druid_store(self.runtime, namespace, parse_store(store_spec, 'spec.backup.store',
                                                                          self.options.local_store_root),
                                     'spec.backup.store')
            chain = plan_chain(store.list())
            if chain.base is None:
                raise EtcdError('no full snapshot to compact from')
            snap = compact_chain(store, chain, work_dir=work, now=self.runtime.clock(),
                                 snapshot_timeout=self.options.active_deadline_duration)
            self.runtime.client.merge_patch(api_path(LEASES, 'leases', namespace, '%s-full-snap' % name), {
                'spec': {'holderIdentity': str(snap.name.end_revision), 'renewTime': format_micro(self.runtime.clock())}})
            ok = True
            self.runtime.report(body, 'SnapshotCompacted', '%d delta events above the threshold of %d: compacted into '
                                'full snapshot %s' % (events, self.options.etcd_events_threshold, snap.name),
                                kind='Etcd')
        except (EtcdError, KubeError, InvalidInput, OSError) as exc:
            self.runtime.report(body, 'SnapshotCompactionFailed', 'compaction of %d delta events failed: %s' % (
                events, exc), warning=True, kind='Etcd', outcome='failed')
        finally:
            shutil.rmtree(work, ignore_errors=True)
            if self.options.metrics_scrape_wait_duration:
                time.sleep(self.options.metrics_scrape_wait_duration)
            seed.compaction_jobs.labels('true' if ok else 'false', namespace).inc()
            seed.compaction_job_duration.labels('true' if ok else 'false', namespace).observe(time.monotonic() - started)
            seed.compaction_jobs_current.labels(namespace).dec()
            with self.lock:
                self.running.discard((namespace, name))


def register(registry: Any, runtime: Runtime) -> None:
    compactions = Compactions(runtime, runtime.settings.loop_options['etcd-tasks'])

    @kopf.timer(GROUP, VERSION, 'etcds', registry=registry, id='snapshot-compaction', interval=COMPACTION_PERIOD)
    def snapshot_compaction(body: Any, **_: Any) -> None:
        compactions.tick(body)
