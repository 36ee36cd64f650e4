# -*- coding: utf-8 -*-
"""Benchmark: a druid `Etcd`'s etcd image 3.4 -> 3.5 on three lab pods while a client writes and reads at a steady
rate through every member's client URL: ours (the `etcd` loop's rolling restart on the engine's one rolling plan:
followers first, the leader last, the next pod only once every pod is Ready, a restarted member Ready only once it
has caught up with the leader - revision and HashKV - and a leader's sidecar handing leadership to a caught-up
follower when its pod is deleted) next to druid's plain rolling update (the controller stopped; the StatefulSet's
`RollingUpdate`, highest ordinal first, each pod Ready before the next - the lab's pod runtime does what Kubernetes'
StatefulSet controller does - with the member program's hand-off and catch-up readiness turned off:
`--leader-handoff=false --readiness-catch-up=false`; etcd's own leader transfer on SIGTERM still applies).

Per run: failed requests, the longest stall (slowest request), p99, requests retried on another endpoint (the
client fails over as etcd's clientv3 does: tests/support/etcd_rolling.py), acknowledged keys missing afterwards, the
upgrade's total time, the order pods restarted in and which one led. The lab's parts: tests/support/druid_lab.py
(API emulator, pod runtime on a random loopback /24, the controller's `etcd` loop; no lab lock).

Each run also records what tests/integration/test_druid_rolling_upgrade.py checks on this benchmark's `--smoke` run
(one run of ours at 60 requests/s; `make test` runs the scenario once, as the test and as the smoke run): the versions
before, the acknowledged keys missing on every member, the MemberRestarted Events and the old leader's sidecar lines
on leadership, and the time each stage took.

    python bench/druid_rolling.py [--rate 60] [--runs 1]
Writes bench/results/druid_rolling.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))

import _env  # noqa: E402,F401  (first: the venv, the collection link, the etcd binaries; see bench/_env.py)

from summary_file import write_summary  # noqa: E402
from support.druid_lab import DruidLab  # noqa: E402
from support.etcd_rolling import LoadClient  # noqa: E402

from lab.pods import images  # noqa: E402

OLD, NEW = 'v3.4.34', 'v3.5.17'
ELECTION_TIMEOUT = 1.0   # druid's etcd config: election-timeout 1000 ms (the lab's etcd logs say so)
STS = '/apis/apps/v1/namespaces/%s/statefulsets/%s'


def plain_rolling_update(lab: DruidLab) -> None:
    """druid's way: the StatefulSet itself rolls (RollingUpdate), our sidecar's extras off."""
    lab.stop_controller()
    url = lab.kube.url + STS % (lab.ns, lab.name)
    sts = lab.session.get(url).json()
    spec = sts['spec']
    spec['updateStrategy'] = {'type': 'RollingUpdate'}
    for container in spec['template']['spec']['containers']:
        if container['name'] == 'etcd':
            container['image'] = container['image'].rsplit(':', 1)[0] + ':' + NEW
        else:
            container['args'] = list(container.get('args') or []) + ['--leader-handoff=false',
                                                                     '--readiness-catch-up=false']
    answer = lab.session.put(url, json=sts)
    assert answer.status_code == 200, answer.text


def _pods_ready(lab: DruidLab) -> bool:
    pods = lab.pods()
    return len(pods) == 3 and all(any(c['type'] == 'Ready' and c['status'] == 'True'
                                      for c in (p.get('status') or {}).get('conditions') or []) for p in pods)


def _restart_order(lab: DruidLab, log: str) -> List[str]:
    """Pod names in the order the runtime stopped them (its log: `pod ns/name (uid ...) is gone`)."""
    order = []
    with open(log, errors='replace') as f:
        for line in f:
            if ' is gone: stopped pid ' in line and '/%s-' % lab.name in line:
                name = line.split(' pod ', 1)[1].split(' ', 1)[0].split('/', 1)[1]
                if not order or order[-1] != name:
                    order.append(name)
    return list(dict.fromkeys(order))


def _ran_prestop(lab: DruidLab, pod: str, log: str) -> bool:
    """The runtime ran `pod`'s etcd container preStop hook (its log: `pod ns/name container etcd: preStop GET`)."""
    with open(log, errors='replace') as f:
        return any('pod %s/%s container etcd: preStop GET' % (lab.ns, pod) in line for line in f)


def one_run(kind: str, rate: float) -> Dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix='bench-druid-rolling-') as work:
        lab = DruidLab(work).start()
        load = None
        try:
            created = time.monotonic()
            lab.create(3, OLD)
            lab.wait(lambda: lab.all_ready(3), 120, 'three members Ready on 3.4')
            ready_before = time.monotonic() - created
            urls = lab.client_urls()
            versions_before = lab.versions(urls)
            leader = next(m['name'] for m in lab.status()['members'] if m['role'] == 'Leader')
            load = LoadClient(urls, rate=rate, prefix='load/').start()
            time.sleep(2.0)
            began = time.monotonic()
            if kind == 'ours':
                lab.set_image(NEW)
            else:
                plain_rolling_update(lab)
            lab.wait(lambda: all(v.startswith('3.5.') for v in lab.versions(urls).values()), 300, 'all on 3.5')
            to_new_version = time.monotonic() - began
            lab.wait(lambda: _pods_ready(lab) and (kind != 'ours' or lab.all_ready(3)), 120, 'all pods Ready')
            total = time.monotonic() - began
            time.sleep(2.0)
            load.stop()
            missing_per_member = {}
            for url in urls:
                found = lab.read_prefix(url, 'load/')
                missing_per_member[url] = sorted(k for k, v in load.written.items() if found.get(k) != v)
            missing = missing_per_member[urls[0]]
            latencies = sorted(load.latencies)
            sidecar_log = os.path.join(work, 'pods', 'logs', lab.ns, leader, 'backup-restore.log')
            with open(sidecar_log, errors='replace') as f:
                leadership = [line.rstrip('\n') for line in f if 'leadership' in line or 'hand-off' in line]
            return {
                'kind': kind, 'seconds_total': round(total, 1), 'requests_ok': load.ok,
                'requests_failed': len(load.failed), 'failures': load.failed[:5],
                'longest_stall_s': round(latencies[-1], 3), 'p99_s': round(latencies[int(len(latencies) * 0.99)], 4),
                'slower_than_election_timeout': sum(1 for x in latencies if x > ELECTION_TIMEOUT),
                'retried_on_another_endpoint': len(load.retried), 'retry_kinds': sorted(set(load.retried))[:5],
                'acknowledged_keys_missing': len(missing), 'leader_before': leader,
                'restart_order': _restart_order(lab, os.path.join(work, 'runtime.log')),
                'versions_after': sorted(set(lab.versions(urls).values())),
                # what tests/integration/test_druid_rolling_upgrade.py checks on the smoke run
                'seconds_to_ready_before': round(ready_before, 1), 'seconds_to_new_version': round(to_new_version, 1),
                'versions_before': sorted(versions_before.values()),
                'acknowledged_keys_missing_per_member': {u: len(m) for u, m in missing_per_member.items()},
                'missing_examples': {u: m[:3] for u, m in missing_per_member.items() if m},
                'restart_events': [e['message'] for e in lab.events('MemberRestarted')],
                'leader_sidecar_leadership_lines': leadership,
                'leader_prestop_ran': _ran_prestop(lab, leader, os.path.join(work, 'runtime.log')),
            }
        finally:
            if load is not None:
                load.stop()
            lab.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--rate', type=float, default=60.0, help='client requests per second (puts and reads)')
    parser.add_argument('--runs', type=int, default=1)
    parser.add_argument('--kinds', default='ours,plain-restart', help='which variants, comma-separated')
    parser.add_argument('--output', default=os.path.join(HERE, 'results', 'druid_rolling.json'))
    # the smoke run is the integration test's scenario (test_druid_rolling_upgrade.py): its rate, ours only
    args = _env.parse_args(parser, 'druid_rolling', {'rate': 60.0, 'runs': 1, 'kinds': 'ours'})
    _env.announce(args)
    if images.etcd_binary('3.4') is None or images.etcd_binary('3.5') is None:
        sys.exit('needs etcd 3.4 and 3.5 binaries (make all)')
    runs = []
    for _run in range(args.runs):
        for kind in args.kinds.split(','):
            runs.append(one_run(kind, args.rate))
            r = runs[-1]
            print('%-13s %6.1fs  failed %3d/%-5d  longest stall %.3fs  p99 %.3fs  >election %d  retried %3d  '
                  'missing keys %d  restarts %s (leader %s)' % (
                      kind, r['seconds_total'], r['requests_failed'], r['requests_ok'] + r['requests_failed'],
                      r['longest_stall_s'], r['p99_s'], r['slower_than_election_timeout'],
                      r['retried_on_another_endpoint'], r['acknowledged_keys_missing'], r['restart_order'],
                      r['leader_before']), flush=True)
    write_summary(args.output, {'rate': args.rate, 'load_average': os.getloadavg(),
                                'date': time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()), 'runs': runs})


if __name__ == '__main__':
    main()
