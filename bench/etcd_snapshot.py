#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: our take_full_snapshot (stream + verify + two-phase publish to a local store)
against `etcdctl snapshot save` of the same etcd version, on the same disk.

Not a test. Starts a real 1-member etcd, loads ~--size-mb MB of 1 KiB values with concurrent
gRPC transactions (etcd/wire/calls.py), then runs both tools interleaved --runs times and prints the medians and
the ratio ours/etcdctl (goal <= 0.7, issue 29; 0.8 in issue 17). With --full-structure ours also reads the whole
file with `snapshot status` (what every restore does), as a third contender. Every run of ours also prints where
its time went: the stream (receive, write, hash, fdatasync, fsync), the verification after it (trailer and bolt
checks), the wait for the HashKV answer, and the publishing (metadata, renames, fsyncs).
Writes bench/results/etcd_snapshot.json.

    python bench/etcd_snapshot.py --size-mb 256 --runs 5
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import _env  # noqa: E402,F401  (first: the venv, the collection link, the etcd binaries; see bench/_env.py)

HERE = os.path.dirname(os.path.abspath(__file__))

from support.etcd_cluster import EtcdCluster  # noqa: E402
from summary_file import write_summary  # noqa: E402

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.local_store import LocalStore  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot import snapshot as snapshot_module  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.snapshot import take_full_snapshot  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.etcd.wire.calls import PUT, Transactions, txn_request  # noqa: E402

VALUE_SIZE = 1024
TXN_OPS = 128       # etcd's default --max-txn-ops
THREADS = 8


def load(conn: EtcdConnection, endpoint: str, size_mb: int) -> int:
    """Concurrent txns of TXN_OPS puts of 1 KiB values; returns the number of keys."""
    total = size_mb * 1024 * 1024 // VALUE_SIZE
    value = os.urandom(VALUE_SIZE // 2).hex().encode()

    def worker(start: int, stop: int) -> None:
        with Transactions(conn, endpoint, timeout=120) as client:
            for base in range(start, stop, TXN_OPS):
                client.txn(txn_request([(PUT, b'/bench/%09d' % i, value) for i in range(base, min(base + TXN_OPS, stop))]))

    step = (total + THREADS - 1) // THREADS
    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        futures = [pool.submit(worker, s, min(s + step, total)) for s in range(0, total, step)]
        for f in futures:
            f.result()
    return total


def peak_rss_mib(pid: str = 'self', reset: bool = False) -> float:
    """A process's peak RSS (VmHWM); `reset` starts a new peak (Linux >= 4.0, clear_refs); 0 once it exited."""
    try:
        if reset:
            with open('/proc/%s/clear_refs' % pid, 'w') as f:
                f.write('5')
        with open('/proc/%s/status' % pid) as f:
            for line in f:
                if line.startswith('VmHWM:'):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


PHASES: dict = {}   # phase -> seconds of the last run of ours


def _timed_phase(name: str, func):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            PHASES[name] = PHASES.get(name, 0.0) + time.perf_counter() - start
    return wrapper


def time_phases() -> None:
    """Wrap the steps of snapshot_to_store (looked up in its module at call time) to time them; no behaviour changes."""
    for name, attr in (('stream', 'stream_snapshot'), ('verify', 'verify_snapshot_file'), ('publish', 'publish_full')):
        setattr(snapshot_module, attr, _timed_phase(name, getattr(snapshot_module, attr)))
    recorder = snapshot_module.HashKVRecorder
    recorder.result = _timed_phase('hashkv_wait', recorder.result)


def run_ours(conn: EtcdConnection, store_dir: str, now: int, full_structure: bool = False) -> dict:
    shutil.rmtree(store_dir, ignore_errors=True)
    store = LocalStore(store_dir)
    peak_rss_mib(reset=True)
    PHASES.clear()
    t0 = time.perf_counter()
    result = take_full_snapshot(conn, store, now=now, full_structure=full_structure)
    elapsed = time.perf_counter() - t0
    return {'seconds': elapsed, 'size': result['snapshot']['size'], 'rss_peak_mib': peak_rss_mib(),
            'phases': dict(PHASES)}


def run_etcdctl(etcdctl: str, endpoint: str, out_dir: str) -> dict:
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    path = os.path.join(out_dir, 'snap.db')
    t0 = time.perf_counter()
    proc = subprocess.Popen([etcdctl, '--endpoints', endpoint, 'snapshot', 'save', path], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=dict(os.environ, ETCDCTL_API='3'))
    peak = 0.0
    while proc.poll() is None:  # VmHWM sampled: wait4's ru_maxrss would include this process's RSS at fork
        peak = max(peak, peak_rss_mib(str(proc.pid)))
        time.sleep(0.02)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit('etcdctl snapshot save failed with exit code %d' % proc.returncode)
    return {'seconds': elapsed, 'size': os.path.getsize(path), 'rss_peak_mib': peak}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--size-mb', type=int, default=256, help='data to load, MB of 1 KiB values (default 256)')
    parser.add_argument('--runs', type=int, default=5, help='interleaved runs of each tool (default 5)')
    parser.add_argument('--work-dir', default=None, help='where etcd data and snapshots go (default: a temp dir)')
    parser.add_argument('--full-structure', action='store_true', help='also time ours with a full snapshot status read')
    parser.add_argument('--output', default=os.path.join(HERE, 'results', 'etcd_snapshot.json'))
    args = _env.parse_args(parser, 'etcd_snapshot', {'size_mb': 2, 'runs': 1})
    _env.announce(args)

    time_phases()
    work = args.work_dir or tempfile.mkdtemp(prefix='steward-bench-')
    cluster = EtcdCluster(os.path.join(work, 'etcd'), 1).start()
    try:
        endpoint = cluster.endpoints[0]
        conn = EtcdConnection(endpoints=(endpoint,), timeout=30)
        t0 = time.perf_counter()
        keys = load(conn, endpoint, args.size_mb)
        load_s = time.perf_counter() - t0
        print('etcd %s: loaded %d keys x %d B in %.1f s' % (cluster.version, keys, VALUE_SIZE, load_s), flush=True)
        ours, theirs, full = [], [], []
        tools = ['ours', 'etcdctl'] + (['ours-full'] if args.full_structure else [])
        for i in range(args.runs):
            # rotate which goes first, so page cache and disk state do not favour one tool
            order = tools[i % len(tools):] + tools[:i % len(tools)]
            for tool in order:
                if tool == 'ours':
                    r = run_ours(conn, os.path.join(work, 'store'), 1767225600 + i)
                    ours.append(r)
                elif tool == 'ours-full':
                    r = run_ours(conn, os.path.join(work, 'store'), 1767225600 + i, full_structure=True)
                    full.append(r)
                else:
                    r = run_etcdctl(cluster.etcdctl, endpoint, os.path.join(work, 'etcdctl'))
                    theirs.append(r)
                phases = ''.join('  %s %.2f s' % kv for kv in r.get('phases', {}).items())
                print('run %d %-8s %6.2f s  %d bytes  %.0f MB/s  peak RSS %.0f MiB%s' % (
                    i + 1, tool, r['seconds'], r['size'], r['size'] / r['seconds'] / 1e6, r['rss_peak_mib'], phases),
                    flush=True)
        med_ours = statistics.median(r['seconds'] for r in ours)
        med_theirs = statistics.median(r['seconds'] for r in theirs)
        ratio = med_ours / med_theirs
        rss_ours = max(r['rss_peak_mib'] for r in ours)
        rss_theirs = max(r['rss_peak_mib'] for r in theirs)
        print('median ours %.2f s, etcdctl %.2f s, ratio ours/etcdctl %.2f (goal <= 0.7, issue 29); peak RSS ours %.0f MiB '
              '(the whole bench process), etcdctl %.0f MiB; load average %.1f'
              % (med_ours, med_theirs, ratio, rss_ours, rss_theirs, os.getloadavg()[0]))
        med_full = None
        if full:
            med_full = statistics.median(r['seconds'] for r in full)
            print('median ours with a full snapshot status read %.2f s, ratio %.2f' % (med_full, med_full / med_theirs))
        summary = {
            'benchmark': 'etcd_snapshot', 'etcd_version': cluster.version, 'keys': keys, 'value_size': VALUE_SIZE,
            'size_mb': args.size_mb, 'snapshot_bytes': ours[-1]['size'] if ours else None, 'load_seconds': load_s,
            'runs': args.runs, 'ours_seconds': [r['seconds'] for r in ours],
            'ours_phases': [r['phases'] for r in ours],
            'etcdctl_seconds': [r['seconds'] for r in theirs], 'median_ours': med_ours,
            'median_etcdctl': med_theirs, 'ratio': ratio, 'median_ours_full_structure': med_full,
            'rss_peak_mib_ours': rss_ours, 'rss_peak_mib_etcdctl': rss_theirs,
            'load_average': os.getloadavg(),
            'ours_does': 'stream over HTTP/2 (etcd/wire: one reused 1 MiB receive buffer, the blob slices of each read '
                         'written with one writev and hashed on the receiving thread, fdatasync every 64 MiB on a '
                         'write-back thread) + fsync + trailer check + bolt structure check + HashKV asked over the '
                         'last 20 % of the stream + metadata then rename + fsync dir',
            'etcdctl_does': 'stream + write .part + fsync + rename',
        }
        write_summary(args.output, summary)
    finally:
        cluster.stop()
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
