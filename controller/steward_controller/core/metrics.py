# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus metrics and the health endpoints, served on one port.

Names follow the projects users come from: `etcdbr_*` (etcd-backup-restore) for backups,
`cke_sabakan_*` (CKE) for the sabakan integration, with a label naming our custom resource, and
`maintenance_controller_*` (sapcc/maintenance-controller) for node maintenance.
"""

from __future__ import annotations

import http.server
import threading
import time
from typing import Callable, Dict, Optional, Tuple

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from steward_controller.core.seed_metrics import HeartbeatCollector, SeedMetrics

RESOURCE = 'resource'  # label: <namespace>/<name> of the custom resource


class Metrics:
    """Every metric the controller exports, on its own registry (no global state between tests)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.leader = Gauge('steward_controller_leader', '1 if this replica holds the leader Lease.', registry=r)
        self.actions = Counter('steward_controller_actions_total', 'Actions taken, by kind and outcome.',
                               ['kind', 'action', 'outcome'], registry=r)
        # etcd backups (etcd-backup-restore names)
        self.snapshot_duration = Histogram('etcdbr_snapshot_duration_seconds', 'Time to take and upload a snapshot.',
                                           [RESOURCE, 'kind', 'succeeded'], registry=r,
                                           buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900))
        self.snapshot_latest_revision = Gauge('etcdbr_snapshot_latest_revision', 'Last revision in the newest snapshot.',
                                              [RESOURCE, 'kind'], registry=r)
        self.snapshot_latest_timestamp = Gauge('etcdbr_snapshot_latest_timestamp', 'Unix time of the newest snapshot.',
                                               [RESOURCE, 'kind'], registry=r)
        self.snapshot_required = Gauge('etcdbr_snapshot_required', '1 when a snapshot of this kind is due but missing.',
                                       [RESOURCE, 'kind'], registry=r)
        self.snapshot_gc = Counter('etcdbr_snapshot_gc_total', 'Snapshots deleted by garbage collection.',
                                   [RESOURCE, 'kind', 'succeeded'], registry=r)
        self.delta_events = Counter('etcdbr_delta_events_total', 'Watch events written to delta snapshots.',
                                    [RESOURCE], registry=r)
        self.delta_buffered_bytes = Gauge('etcdbr_delta_buffered_bytes', 'Watch events held in memory, in bytes.',
                                          [RESOURCE], registry=r)
        self.backup_ready = Gauge('steward_etcdbackup_ready', '1 when the BackupReady condition is True.',
                                  [RESOURCE], registry=r)
        self.compactions = Counter('etcdbr_compaction_total', 'Backup compactions (full + deltas -> new full).',
                                   [RESOURCE, 'succeeded'], registry=r)
        # sabakan integration (CKE names)
        self.sabakan_successful = Gauge('cke_sabakan_integration_successful',
                                        'True (=1) if sabakan-integration satisfies constraints.', [RESOURCE], registry=r)
        self.sabakan_timestamp = Gauge('cke_sabakan_integration_timestamp_seconds',
                                       'Unix time when cke_sabakan_integration_successful was last updated.',
                                       [RESOURCE], registry=r)
        self.sabakan_workers = Gauge('cke_sabakan_workers', 'The number of worker nodes for each role.',
                                     [RESOURCE, 'role'], registry=r)
        self.sabakan_unused = Gauge('cke_sabakan_unused_machines', 'The number of unused machines.', [RESOURCE],
                                    registry=r)
        self.repair_entries = Gauge('cke_repair_queue_entries', 'RepairEntry objects that exist.', registry=r)
        self.repair_blocked = Counter('steward_repair_blocked_total',
                                      'Auto-repair cycles that queued nothing because of maximum-repair-queue-entries.',
                                      [RESOURCE], registry=r)

        # node maintenance (seed 003). The two shuffle series keep the seed's exact names, so they are gauges
        # that only grow: prometheus_client would append `_total` to a Counter's name.
        self.shuffle_count = Gauge('maintenance_controller_shuffle_count',
                                   'Counts pods in DaemonSets, Deployments and StatefulSets, that were likely shuffled by '
                                   'a node send into maintenance', ['owner', 'profile'], registry=r)
        self.shuffles_per_replica = Gauge('maintenance_controller_shuffles_per_replica',
                                          'Count of pods in DaemonSets, Deployments and StatefulSets, that were likely '
                                          'shuffled by a node send into maintenance, divided by the replica count when '
                                          'the event occurred', ['owner', 'profile'], registry=r)
        self.maintenance_transitions = Counter('maintenance_controller_transitions',
                                               'Node state transitions written, by profile.',
                                               ['profile', 'from', 'to'], registry=r)
        self.maintenance_notifications = Counter('maintenance_controller_notifications',
                                                 'Notifications sent, by profile and instance.',
                                                 ['profile', 'instance'], registry=r)
        self.maintenance_errors = Counter('steward_maintenance_reconcile_errors',
                                          'Errors while reconciling nodes (check, trigger, notification, gate, commit, list, '
                                          'internal).', ['kind'], registry=r)
        self.maintenance_reconcile_duration = Histogram(
            'steward_maintenance_reconcile_duration_seconds', 'Time to reconcile one node (engine, triggers, notifications, '
            'patch).', registry=r, buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60))
        self.maintenance_queue_depth = Gauge('steward_maintenance_queue_depth', 'Nodes waiting for a worker.', registry=r)
        self.maintenance_nodes = Gauge('steward_maintenance_nodes', 'Nodes by cloud.sap/maintenance-state.', ['state'],
                                       registry=r)
        self.maintenance_config_loaded = Gauge('steward_maintenance_config_loaded',
                                               '1 when the newest version of the maintenance config is active; 0 while it '
                                               'does not load (the last good one stays active) or before any loaded.',
                                               registry=r)
        self.maintenance_config_loads = Counter('steward_maintenance_config_loads',
                                                'Versions of the maintenance config judged, by outcome (loaded, invalid).',
                                                ['outcome'], registry=r)
        self.maintenance_config_timestamp = Gauge('steward_maintenance_config_timestamp_seconds',
                                                  'Unix time the active maintenance config was loaded.', registry=r)

        # etcd-backup-restore's and etcd-druid's other families (seed 004), certificate expiry
        self.seed = SeedMetrics(r)
        self._heartbeats: Optional[HeartbeatCollector] = None

    def watch(self, health: 'Health') -> None:
        """Export `health`'s loop heartbeat ages (`steward_controller_heartbeat_age_seconds`); a second call
        replaces the first's source (one family per registry)."""
        if self._heartbeats is None:
            self._heartbeats = HeartbeatCollector(health.ages)
            self.registry.register(self._heartbeats)
        else:
            self._heartbeats.ages = health.ages

    def render(self) -> bytes:
        return generate_latest(self.registry)


class Health:
    """Liveness: the process loop ticked recently. Readiness: the API server answered recently."""

    def __init__(self, clock: Callable[[], float] = time.time, stale_after: float = 60.0):
        self.clock = clock
        self.stale_after = stale_after
        self._beats: Dict[str, float] = {}
        self.api_ok_at: Optional[float] = None
        self._lock = threading.Lock()

    def beat(self, what: str) -> None:
        with self._lock:
            self._beats[what] = self.clock()

    def api_ok(self) -> None:
        with self._lock:
            self.api_ok_at = self.clock()

    def ages(self) -> Dict[str, float]:
        """Seconds since each beat; never negative (a clock stepping back must not hide a stuck loop)."""
        now = self.clock()
        with self._lock:
            return {what: max(0.0, now - when) for what, when in self._beats.items()}

    def live(self) -> Tuple[bool, str]:
        now = self.clock()
        with self._lock:
            stale = [w for w, t in self._beats.items() if now - t > self.stale_after]
        return (not stale, 'stale: %s' % ', '.join(stale) if stale else 'ok')

    def ready(self) -> Tuple[bool, str]:
        now = self.clock()
        ok = self.api_ok_at is not None and now - self.api_ok_at <= self.stale_after
        return ok, 'ok' if ok else 'the Kubernetes API has not answered in the last %ds' % self.stale_after


def serve(host: str, port: int, metrics: Metrics, health: Health) -> http.server.ThreadingHTTPServer:
    """Start /metrics, /healthz, /readyz on a daemon thread; returns the server (`.server_port`)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            path = self.path.split('?', 1)[0]
            if path == '/metrics':
                self._send(200, metrics.render(), CONTENT_TYPE_LATEST)
            elif path in ('/healthz', '/livez'):
                ok, why = health.live()
                self._send(200 if ok else 503, why.encode() + b'\n', 'text/plain')
            elif path == '/readyz':
                ok, why = health.ready()
                self._send(200 if ok else 503, why.encode() + b'\n', 'text/plain')
            else:
                self._send(404, b'not found\n', 'text/plain')

        def _send(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header('Content-Type', content_type)
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:  # scrapes are not worth a log line
            pass

    server = http.server.ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name='http', daemon=True).start()
    return server
