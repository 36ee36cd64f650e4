#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: size and time of one scrape of the controller's /metrics (every loop in one process) for a fleet of
--nodes Nodes, --machines Machines and --etcd-clusters EtcdBackups, and the cost the maintenance loop's new
time-in-state gauge adds per pass over the Nodes.

Not a test. The registries are the controller's own (core.metrics.Metrics and each loop's metrics class); they are
filled the way the loops fill them: per EtcdBackup the snapshot, GC, verification and compaction series; machines by
phase and driver calls by operation and code (no per-machine label); nodes by maintenance state and per profile;
the certificates of one anchor. The scrape is a real HTTP GET of core.metrics.serve on loopback.

    python bench/metrics_scrape.py --nodes 5000 --machines 1000 --etcd-clusters 100
Writes bench/results/metrics_scrape.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
import _env  # noqa: E402,F401  (first: the venv, the collection link, the etcd binaries; see bench/_env.py)

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.data import node_data  # noqa: E402

from steward_controller.anchor.loop import AnchorMetrics  # noqa: E402
from steward_controller.core.metrics import Health, Metrics, serve  # noqa: E402
from steward_controller.etcd_backup.metrics import VerificationMetrics  # noqa: E402
from steward_controller.machines.metrics import MachineMetrics  # noqa: E402
from steward_controller.prober.report import ProberMetrics  # noqa: E402
from steward_controller.weeder.loop import WeederMetrics  # noqa: E402
from summary_file import write_summary  # noqa: E402

PHASES = ('Creating', 'Pending', 'Running', 'Unknown', 'Failed', 'Terminating', 'CrashLoopBackOff')
OPERATIONS = ('CreateMachine', 'DeleteMachine', 'GetMachineStatus', 'ListMachines', 'InitializeMachine')
CODES = ('OK', 'NotFound', 'Unavailable', 'Internal', 'Throttled')
STATES = ('operational', 'maintenance-required', 'in-maintenance')
PROFILES = ('flatcar', 'kernel', 'hardware', 'reboot')


def fill(args: argparse.Namespace) -> Metrics:
    metrics, health = Metrics(), Health()
    metrics.watch(health)
    for loop in ('operator-loop', 'leader-election', 'machines', 'maintenance', 'prober', 'weeder', 'anchor'):
        health.beat(loop)
    r = metrics.registry
    verification = VerificationMetrics(r)
    machines, prober, weeder, anchor = MachineMetrics(r), ProberMetrics(r), WeederMetrics(r), AnchorMetrics(r)
    now = time.time()
    for i in range(args.etcd_clusters):
        res = 'shoot--%03d/etcd-main' % i
        for kind in ('Full', 'Incr', 'Compaction'):
            metrics.snapshot_duration.labels(res, kind, 'true').observe(0.3)
            metrics.snapshot_latest_revision.labels(res, kind).set(1000 + i)
            metrics.snapshot_latest_timestamp.labels(res, kind).set(now)
            metrics.snapshot_required.labels(res, kind).set(0)
            metrics.snapshot_gc.labels(res, kind, 'true').inc()
        metrics.delta_events.labels(res).inc(10)
        metrics.delta_buffered_bytes.labels(res).set(0)
        metrics.backup_ready.labels(res).set(1)
        metrics.compactions.labels(res, 'true').inc()
        metrics.seed.compaction_jobs.labels('true', 'shoot--%03d' % i).inc()
        metrics.seed.compaction_job_duration.labels('true', 'shoot--%03d' % i).observe(2)
        metrics.seed.compaction_num_delta_events.labels('shoot--%03d' % i, res).set(5)
        verification.observe(res, True, 1000, 4.0, now)
        metrics.seed.cluster_size.labels(res).set(3)   # the backup loop's member list: 3 members, none a learner
        for member in ('etcd-main-0', 'etcd-main-1', 'etcd-main-2'):
            metrics.seed.is_learner.labels(res, member).set(0)
    for phase in PHASES:
        machines.phase.labels(phase).set(args.machines if phase == 'Running' else 0)
    for op in OPERATIONS:
        machines.requests.labels('AWS', op).inc()
        for code in CODES:
            machines.driver_calls.labels('AWS', op, code).inc()
    machines.passes.observe(0.05)
    for state in STATES:
        metrics.maintenance_nodes.labels(state).set(args.nodes // 3)
    for profile in PROFILES:
        for state in STATES[1:]:
            metrics.seed.maintenance_state_age.labels(profile, state).set(600)
            metrics.maintenance_transitions.labels(profile, 'operational', state).inc()
    for result in ('healthy', 'failed', 'api'):
        prober.probes.labels(result).inc()
    prober.probe_seconds.observe(0.1)
    weeder.active.set(2)
    for j in range(25):
        metrics.seed.certificate_not_after.labels('cp1', '/etc/kubernetes/pki/c%02d.crt' % j).set(now + 86400 * 300)
    anchor.files.set(40)
    return metrics


def state_age_pass(nodes: int, fraction: float) -> float:
    """Seconds the time-in-state gauge adds to one pass over `nodes` Nodes of which `fraction` are not operational
    (operational nodes are skipped by their label, without reading the data annotation)."""
    stamp = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%S.000000000Z')
    data = json.dumps({'Profiles': {p: {'Transition': stamp, 'Current': 'maintenance-required', 'Previous': 'operational'}
                                    for p in PROFILES[:2]}, 'Notifications': {}})
    busy = int(nodes * fraction)
    objs = [{'metadata': {'labels': {'cloud.sap/maintenance-state': 'maintenance-required' if i < busy else 'operational',
                                     'cloud.sap/maintenance-profile': 'flatcar--kernel'},
                          'annotations': {'cloud.sap/maintenance-data': data}}} for i in range(nodes)]
    started = time.perf_counter()
    for node in objs:
        if node['metadata']['labels']['cloud.sap/maintenance-state'] != 'operational':
            node_data(node)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('--nodes', type=int, default=5000)
    parser.add_argument('--machines', type=int, default=1000)
    parser.add_argument('--etcd-clusters', type=int, default=100)
    parser.add_argument('--scrapes', type=int, default=30)
    parser.add_argument('--output', default=os.path.join(HERE, 'results', 'metrics_scrape.json'))
    args = _env.parse_args(parser, 'metrics_scrape', {'nodes': 50, 'machines': 10, 'etcd_clusters': 2, 'scrapes': 2})
    _env.announce(args)
    metrics = fill(args)
    server = serve('127.0.0.1', 0, metrics, Health())
    url = 'http://127.0.0.1:%d/metrics' % server.server_port
    times, size, lines = [], 0, 0
    for _scrape in range(args.scrapes):
        started = time.perf_counter()
        with urllib.request.urlopen(url, timeout=10) as answer:
            body = answer.read()
        times.append(time.perf_counter() - started)
        size = len(body)
        lines = sum(1 for line in body.splitlines() if line and not line.startswith(b'#'))
    server.shutdown()
    summary = {'benchmark': 'metrics_scrape', 'python': platform.python_version(), 'nodes': args.nodes,
               'machines': args.machines, 'etcd_clusters': args.etcd_clusters, 'scrape_bytes': size,
               'series': lines, 'scrape_seconds_median': statistics.median(times), 'scrape_seconds_max': max(times),
               'state_age_pass_seconds_10pct_busy': state_age_pass(args.nodes, 0.1),
               'state_age_pass_seconds_all_busy': state_age_pass(args.nodes, 1.0),
               'load_average': os.getloadavg()}
    print(json.dumps(summary, indent=2))
    write_summary(args.output, summary)
    return 0


if __name__ == '__main__':
    sys.exit(main())
