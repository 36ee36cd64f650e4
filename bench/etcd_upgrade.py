# -*- coding: utf-8 -*-
"""Benchmark: etcd 3.4 -> 3.5 on three real members while a client writes and reads at a steady rate and a watcher
follows every write: ours (etcd/upgrade: followers first, leadership moved away from the leader before it stops,
each member caught up by revision and HashKV before the next) next to the usual playbook (a plain restart of each
member in inventory order with the new binary, waiting for its health only, no leader move).

Per run: the request rate achieved, failed requests, the slowest request (against one election timeout), requests
retried on another endpoint, watch events missed or repeated, seconds per member, the versions after. Clusters from
tests/support/etcd_cluster.py (free ports).

    python bench/etcd_upgrade.py [--rate 300] [--clients 8] [--runs 1] [--keys 2000]
Writes bench/results/etcd_upgrade.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Dict

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

import _env  # noqa: E402,F401  (first: the venv, the collection link, the etcd binaries; see bench/_env.py)

import requests  # noqa: E402

from summary_file import write_summary  # noqa: E402
from support.etcd_cluster import EtcdCluster, etcd_bin_dirs, etcd_version  # noqa: E402
from support.etcd_rolling import LoadClient, MemberProcessOps, Watcher  # noqa: E402

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.run import observe, run_upgrade  # noqa: E402

ELECTION_TIMEOUT = 0.5   # the test clusters' --election-timeout (ms 500)


def _dirs() -> Dict[str, str]:
    return {etcd_version(d).rsplit('.', 1)[0]: d for d in etcd_bin_dirs()}


def plain_restart(cluster: EtcdCluster, new_dir: str) -> Dict[str, float]:
    """The usual playbook: each member in order, stop, new binary, start, wait for its health; no leader move."""
    seconds = {}
    for name in cluster.members:
        began = time.monotonic()
        ops = MemberProcessOps(cluster, name, new_dir)
        ops.stop()
        ops.swap()
        ops.start()
        cluster.wait_healthy([name], timeout=60)
        seconds[name] = round(time.monotonic() - began, 3)
    return seconds


def ours(cluster: EtcdCluster, new_dir: str) -> Dict[str, float]:
    conn = EtcdConnection(endpoints=tuple(cluster.endpoints))
    ops = {n: MemberProcessOps(cluster, n, new_dir) for n in cluster.members}
    result = run_upgrade(conn, ops, etcd_version(new_dir), {'require_snapshot': False})
    return {u['name']: u['seconds'] for u in result['upgraded']}


def one_run(kind: str, dirs: Dict[str, str], rate: float, keys: int, clients: int) -> Dict[str, Any]:
    """`clients` load clients share `rate` (one Python thread alone does not hold 200+ requests/s on a busy 2-core
    machine; etcd's clients are many too), each on its own prefix below the watched `load/`."""
    with tempfile.TemporaryDirectory(prefix='bench-upgrade-') as base:
        cluster = EtcdCluster(base, size=3, bin_dir=dirs['3.4']).start()
        try:
            cluster.put_many({'seed/%05d' % i: 'x' * 100 for i in range(keys)})
            # from the revision after the seed: a watch created after the first load write would miss it
            seeded = int(requests.post(cluster.endpoints[0] + '/v3/kv/range', json={'key': 'c2VlZA=='},
                                       timeout=10).json()['header']['revision'])
            watcher = Watcher(cluster.endpoints, prefix='load', start_revision=seeded + 1).start()
            loads = [LoadClient(cluster.endpoints, rate=rate / clients, prefix='load/%d' % i).start()
                     for i in range(clients)]
            load_began = time.monotonic()
            time.sleep(1.0)
            began = time.monotonic()
            seconds = (ours if kind == 'ours' else plain_restart)(cluster, dirs['3.5'])
            total = time.monotonic() - began
            time.sleep(1.0)
            for load in loads:
                load.stop()
            load_seconds = time.monotonic() - load_began
            put_revs = {r for load in loads for r in load.put_revisions}
            # the watcher may trail the writers on a busy machine: give it until the last write (10 s at most)
            # before a revision counts as missed, so a slow tail is not taken for a lost event
            deadline = time.monotonic() + 10.0
            while watcher.last < max(put_revs, default=0) and time.monotonic() < deadline:
                time.sleep(0.05)
            watcher.stop()
            versions = sorted({m['version'] for m in observe(EtcdConnection(endpoints=tuple(cluster.endpoints)))[
                'members']})
            latencies = sorted(x for load in loads for x in load.latencies)
            failed = [f for load in loads for f in load.failed]
            retried = [r for load in loads for r in load.retried]
            ok = sum(load.ok for load in loads)
            seen = set(watcher.revisions)
            return {
                'kind': kind, 'seconds_total': round(total, 3), 'seconds_per_member': seconds,
                'requests_ok': ok, 'requests_failed': len(failed), 'failures': failed[:5],
                'achieved_rate': round((ok + len(failed)) / load_seconds, 1), 'clients': clients,
                'retried_on_another_endpoint': len(retried), 'retry_kinds': sorted(set(retried)),
                'slowest_request_s': round(max(latencies), 4),
                'slower_than_election_timeout': sum(1 for x in latencies if x > ELECTION_TIMEOUT),
                'p99_s': round(latencies[int(len(latencies) * 0.99)], 4),
                'watch_events': len(watcher.revisions),
                'watch_missed': len(put_revs - seen), 'watch_missed_revisions': sorted(put_revs - seen)[:10],
                'watch_last_seen': watcher.last, 'watch_repeated': len(watcher.repeated),
                'watch_reconnects': watcher.reconnects, 'versions_after': versions,
            }
        finally:
            cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--rate', type=float, default=300.0, help='client requests per second (puts and reads)')
    parser.add_argument('--runs', type=int, default=1)
    parser.add_argument('--keys', type=int, default=2000, help='keys written before the upgrade')
    parser.add_argument('--clients', type=int, default=8, help='load clients sharing --rate')
    parser.add_argument('--output', default=os.path.join(HERE, 'results', 'etcd_upgrade.json'))
    args = _env.parse_args(parser, 'etcd_upgrade', {'rate': 50.0, 'runs': 1, 'keys': 100, 'clients': 2})
    _env.announce(args)
    dirs = _dirs()
    if not {'3.4', '3.5'} <= set(dirs):
        sys.exit('needs etcd 3.4 and 3.5 in STEWARD_ETCD_BIN_DIRS (make all)')
    runs = []
    for _run in range(args.runs):
        for kind in ('ours', 'plain-restart'):
            runs.append(one_run(kind, dirs, args.rate, args.keys, args.clients))
            r = runs[-1]
            print('%-13s %6.2fs  %5.0f req/s  failed %3d/%-5d retried %3d  slowest %.3fs  >election %d  watch missed '
                  '%d repeated %d  per member %s' % (
                      kind, r['seconds_total'], r['achieved_rate'], r['requests_failed'],
                      r['requests_ok'] + r['requests_failed'],
                      r['retried_on_another_endpoint'], r['slowest_request_s'], r['slower_than_election_timeout'],
                      r['watch_missed'], r['watch_repeated'], r['seconds_per_member']))
    summary = {'rate': args.rate, 'clients': args.clients, 'keys': args.keys, 'load_average': os.getloadavg(),
               'date': time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()), 'runs': runs,
               'median_seconds': {k: statistics.median(r['seconds_total'] for r in runs if r['kind'] == k)
                                  for k in ('ours', 'plain-restart')}}
    write_summary(args.output, summary)


if __name__ == '__main__':
    main()
