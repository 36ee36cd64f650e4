# -*- coding: utf-8 -*-
"""Benchmark: a Kubernetes upgrade of the lab hosts (3 control-plane + 2 workers) with the
`steward.cluster.cluster_upgrade` playbook, as a user runs it: total time, evictions and cordons per node (target 1
each: one pod per node, every node drained once), and the version skew policy checked from the API every 5 s
(target 0 violations; a second checker samples every 0.2 s for a denser look).

With `--etcd` (the default when this machine has etcd 3.4 and 3.5) each control-plane host also runs a real etcd
static pod at Debian's 3.4, and the target names the wheel's 3.5 as its etcd (`cluster_upgrade_etcd_image`): etcd is
upgraded first by the etcd engine (verified snapshot, one member at a time), then the control plane and kubelets.
The hosts are private (tests/support/upgrade_lab.py: a free loopback range, the lab's static-pod supervisor and API
emulator); the skew checker states the policy in its own lines, not the engine's.

With `--max-unavailable 1 2` each run is made once per value (`cluster_upgrade_max_unavailable`): the workers'
batches. With `--worker-maintenance` the workers go through the node-maintenance state machine: the real controller
(`steward-controller --maintenance-config`) with the profile of tests/support/upgrade_lab.py at maxMaintenance 2: its
way in checks the request, the approval and maxMaintenance and drains (its drain trigger), its way out uncordons
(`cluster_upgrade_worker_maintenance`).

    python bench/k8s_upgrade.py [--runs 1] [--no-etcd] [--from v1.31.4] [--to v1.32.0] [--max-unavailable 1 2]
                                [--worker-maintenance]
Writes bench/results/k8s_upgrade.json (with --worker-maintenance: k8s_upgrade_maintenance.json).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from typing import Any, Dict

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

import _env  # noqa: E402,F401  (first: the venv, the collection link, the etcd binaries; see bench/_env.py)

from summary_file import write_summary  # noqa: E402
from support.ansible import run_playbook  # noqa: E402
from support.etcd_cluster import etcd_bin_dirs, etcd_version  # noqa: E402
from support.rbac import audited  # noqa: E402
from support.upgrade_lab import (  # noqa: E402
    HOSTS, MAINTENANCE_NS, MAINTENANCE_REQUEST, Sampler, UpgradeLab, evictions, mirrors, start_maintenance_controller,
    versions,
)


def _dirs() -> Dict[str, str]:
    return {etcd_version(d).rsplit('.', 1)[0]: d for d in etcd_bin_dirs()}


def one_run(hosts: Any, source: str, target: str, etcd: bool, work: str, max_unavailable: int = 1,
            maintenance: bool = False) -> Dict[str, Any]:
    dirs = _dirs()
    old_etcd = 'registry.k8s.io/etcd:%s-0' % etcd_version(dirs['3.4']) if etcd else None
    lab = UpgradeLab(os.path.join(work, 'lab'), hosts, source, etcd_image=old_etcd, pods_per_node=1)
    control_plane = lab.control_plane
    controller = None
    try:
        began = time.monotonic()
        lab.start(120)
        extra: Dict[str, Any] = {'cluster_upgrade_version': target, 'cluster_upgrade_max_unavailable': max_unavailable}
        if maintenance:
            controller = start_maintenance_controller(lab, os.path.join(work, 'controller'), 2)
            extra.update(cluster_upgrade_worker_maintenance=True, maintenance_window_profile='kubelet-upgrade',
                         maintenance_window_request_annotation={MAINTENANCE_REQUEST: 'true'},
                         maintenance_window_config_source='configmap/%s/maintenance' % MAINTENANCE_NS,
                         maintenance_window_poll_interval=1, maintenance_window_timeout=300)
        setup = time.monotonic() - began
        new_etcd = None
        if etcd:
            new_etcd = etcd_version(dirs['3.5'])
            extra.update(cluster_upgrade_etcd_image='registry.k8s.io/etcd:%s-0' % new_etcd,
                         etcd_upgrade_endpoints=lab.etcd_endpoints, etcd_upgrade_tls=False,
                         etcd_backup_store=os.path.join(work, 'backups'), etcd_bin_dirs=[dirs['3.5']],
                         etcd_upgrade_caught_up_timeout=60)
        time.sleep(3.0)   # etcd elects a leader; the supervisors settle
        audit = audited(lab.server)
        every5 = Sampler(lab.server.url, lab.names, control_plane, interval=5.0)
        dense = Sampler(lab.server.url, lab.names, control_plane, interval=0.2)
        every5.start()
        dense.start()
        load_before = os.getloadavg()
        began = time.monotonic()
        try:
            run = run_playbook('steward.cluster.cluster_upgrade', inventory=lab.inventory, extra_vars=extra,
                               timeout=1800)
            total = time.monotonic() - began
        finally:
            time.sleep(0.5)
            every5.stop.set()
            dense.stop.set()
            every5.join(10)
            dense.join(10)
        if run.rc != 0:
            sys.exit('the upgrade failed:\n%s\n%s' % (run.stdout[-6000:], run.stderr[-2000:]))
        pods = mirrors(lab.server.url)
        return {
            'hosts': {'control_plane': len(control_plane), 'workers': len(lab.workers)}, 'from': source, 'to': target,
            'etcd': {'from': etcd_version(dirs['3.4']), 'to': new_etcd} if etcd else None,
            'max_unavailable': max_unavailable, 'worker_maintenance': maintenance,
            'most_workers_cordoned_at_once': dense.most_workers_cordoned,
            'workers_s': dense.workers_seconds,
            'setup_s': round(setup, 1), 'total_s': round(total, 1),
            'evictions_per_node': {n: evictions(audit).get(n, 0) for n in lab.names},
            'cordons_per_node': dense.cordons,
            'skew_checks_every_5s': every5.samples, 'skew_violations_every_5s': len(every5.violations),
            'skew_checks_every_0_2s': dense.samples, 'skew_violations_every_0_2s': len(dense.violations),
            'violations_seen': (every5.violations + dense.violations)[:5],
            'kubelets_after': versions(lab.server.url),
            'control_plane_after': sorted({pods['%s-%s' % (c, n)].rsplit(':', 1)[1] for n in control_plane
                                           for c in ('kube-apiserver', 'kube-controller-manager', 'kube-scheduler')}),
            'etcd_after': sorted({pods['etcd-' + n] for n in control_plane}) if etcd else None,
            'etcd_pod_starts': {n: lab.pod_starts(n) for n in control_plane} if etcd else None,
            'load_average_before': [round(x, 2) for x in load_before],
            'load_average_after': [round(x, 2) for x in os.getloadavg()],
        }
    finally:
        if controller is not None:
            controller.stop()
        lab.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--runs', type=int, default=1)
    parser.add_argument('--from', dest='source', default='v1.31.4', help='the version the hosts start at')
    parser.add_argument('--to', dest='target', default='v1.32.0', help='the target version')
    parser.add_argument('--no-etcd', dest='etcd', action='store_false', default=None,
                        help='no etcd static pods (default: with them when etcd 3.4 and 3.5 are here)')
    parser.add_argument('--max-unavailable', type=int, nargs='+', default=[1],
                        help='cluster_upgrade_max_unavailable; each run once per value')
    parser.add_argument('--worker-maintenance', action='store_true',
                        help='workers through the node-maintenance state machine (the real controller)')
    parser.add_argument('--output', default=None)
    args = _env.parse_args(parser, 'k8s_upgrade', {'runs': 1, 'etcd': False})
    if args.output is None:
        suffix = '_maintenance' if args.worker_maintenance else ''
        args.output = os.path.join(HERE, 'results', 'k8s_upgrade%s.json' % suffix)
    _env.announce(args)
    if args.etcd is None:
        args.etcd = {'3.4', '3.5'} <= set(_dirs())
    hosts = (('cp1', 'control_plane'), ('w1', 'workers')) if args.smoke else HOSTS
    runs = []
    for _run, max_unavailable in itertools.product(range(args.runs), args.max_unavailable):
        with tempfile.TemporaryDirectory(prefix='bench-k8s-upgrade-') as work:
            r = one_run(hosts, args.source, args.target, args.etcd, work, max_unavailable, args.worker_maintenance)
        runs.append(r)
        print('%s -> %s%s on %d+%d hosts, max_unavailable %d%s (most workers cordoned at once: %d): total %.1fs '
              '(workers: %ss from the first cordon to the last uncordon; setup %.1fs), evictions per node %s, cordons %s, skew '
              'violations %d of %d checks (5 s) and %d of %d (0.2 s), load %s -> %s' % (
                  r['from'], r['to'], ' with etcd %s -> %s first' % (r['etcd']['from'], r['etcd']['to'])
                  if r['etcd'] else '', r['hosts']['control_plane'], r['hosts']['workers'], max_unavailable,
                  ' through node maintenance' if args.worker_maintenance else '', r['most_workers_cordoned_at_once'],
                  r['total_s'], r['workers_s'],
                  r['setup_s'], r['evictions_per_node'], r['cordons_per_node'], r['skew_violations_every_5s'],
                  r['skew_checks_every_5s'], r['skew_violations_every_0_2s'], r['skew_checks_every_0_2s'],
                  r['load_average_before'], r['load_average_after']), flush=True)
    write_summary(args.output, {'date': time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()),
                                'load_average': os.getloadavg(), 'runs': runs})


if __name__ == '__main__':
    main()
