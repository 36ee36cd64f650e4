#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: the highest sustained write rate (puts/s of 1 KiB values) at which our delta
snapshots keep up with no loss, and the memory of the process doing it, next to a plain
`etcdctl watch` consumer of the same etcd on the same machine.

Not a test. A real 1-member etcd; a writer process puts 1 KiB values at a fixed rate for
--seconds; the consumer is either our backup loop (module_utils/etcd/backup/backup_loop.py, in its own
process, deltas every --period to a local store) or `etcdctl watch --prefix`. A rate is kept up
with when, after the writer stops, the consumer has every event within --period + 3 s; for our
loop, the deltas are also read back and must hold every revision exactly once. Rates are raised
until a consumer falls behind or the writer cannot reach the rate any more. As the writer (and etcd)
may saturate first on a small machine, a second part measures each consumer's own throughput: a
backlog of --backlog events already in etcd's history, read from the start, in --rounds rounds (medians).

    python bench/delta_snapshot.py --rates 250,500,1000,2000,4000 --seconds 10
Writes bench/results/delta_snapshot.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
import _env  # noqa: E402,F401  (first: the venv, the collection link, the etcd binaries; see bench/_env.py)

from support.etcd_cluster import EtcdCluster  # noqa: E402
from summary_file import write_summary  # noqa: E402

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import (  # noqa: E402
    EtcdConnection,
    Gateway,
    b64,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.delta import plan_chain  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.fetch import fetch_delta  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.local_store import LocalStore  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.etcd.wire.calls import (  # noqa: E402
    PUT,
    Transactions,
    txn_request,
)

VALUE = b'v' * 1024
WRITER_THREADS = 8
# What the loop holds beyond deltaSnapshotMemoryLimit and its idle RSS (docs/etcd.md): the 1 MiB receive buffer,
# a run of events (1 MiB) and its parse, the chunk being encoded (1 MiB) and the one being queued, the 1 MiB write
# buffer of the delta being written, and allocator slack.
IN_FLIGHT_MIB = 16


# --- child processes ---------------------------------------------------------------------------
def writer_main(endpoint: str, rate: float, seconds: float) -> None:
    """Put 1 KiB values at `rate`/s for `seconds` from WRITER_THREADS threads; print {puts, revision}."""
    conn = EtcdConnection(endpoints=(endpoint,), timeout=30)
    count = [0] * WRITER_THREADS
    start = time.time() + 0.2
    per_thread = rate / WRITER_THREADS

    def work(index: int) -> None:
        client = Transactions(conn, endpoint, timeout=30)
        n = 0
        try:
            while True:
                due = start + n / per_thread
                if due - start >= seconds:
                    return
                delay = due - time.time()
                if delay > 0:
                    time.sleep(delay)
                client.txn(txn_request([(PUT, b'/bench/%d/%09d' % (index, n), VALUE)]))
                n += 1
                count[index] = n
        finally:
            client.close()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(WRITER_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.time() - start
    revision = revision_of(endpoint)
    print(json.dumps({'puts': sum(count), 'seconds': elapsed, 'revision': revision}), flush=True)


def ready_file(store_dir: str) -> str:
    return store_dir + '.ready'


def consumer_main(endpoint: str, store_dir: str, period: float, memory_limit: int = 100 * 1024 * 1024) -> None:
    """Our backup loop until SIGTERM (what the controller runs per EtcdBackup). When the loop has read
    its chain and is about to watch, the time goes into ready_file: the controller is a long-running
    process, so the interpreter's start-up is not part of the drain rate."""
    from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.backup_loop import (
        BackupListener, BackupPolicy, BackupRunner)
    from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.cron import parse_cron

    class Ready(BackupListener):
        def state(self, chain_tip, base):
            if not os.path.exists(ready_file(store_dir)):
                with open(ready_file(store_dir), 'w') as f:
                    f.write(repr(time.time()))

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    policy = BackupPolicy(full_schedule=parse_cron('0 0 1 1 *'), delta_period=period, gc_period=3600.0,
                          delta_memory_limit=memory_limit)
    runner = BackupRunner(EtcdConnection(endpoints=(endpoint,)), LocalStore(store_dir), policy,
                          work_dir=os.path.dirname(store_dir), listener=Ready())
    runner.run(stop)


# --- measuring ---------------------------------------------------------------------------------
def published_tip(store_dir: str) -> int:
    """The newest revision a published delta (or full snapshot) ends at, from the file names alone: polling
    must not cost the consumer being measured (a listing reads every metadata object)."""
    tip = 0
    try:
        names = os.listdir(os.path.join(store_dir, 'v2'))
    except FileNotFoundError:
        return 0
    for name in names:
        if name.endswith('.meta.json') and (name.startswith('Incr-') or name.startswith('Full-')):
            tip = max(tip, int(name.split('-')[2]))
    return tip


def rss_kib(pid: int) -> Dict[str, int]:
    values = {}
    try:
        with open('/proc/%d/status' % pid) as f:
            for line in f:
                if line.startswith(('VmRSS:', 'VmHWM:')):
                    values[line.split(':')[0]] = int(line.split()[1])
    except OSError:
        pass
    return values


def run_writer(endpoint: str, rate: float, seconds: float) -> Dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, 'writer', endpoint, str(rate), str(seconds)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def revision_of(endpoint: str) -> int:
    with Gateway(EtcdConnection(endpoints=(endpoint,), timeout=30)) as gateway:
        return int(gateway.call(endpoint, '/v3/kv/range', {'key': b64(b'\0')})['header']['revision'])


def ours(cluster: EtcdCluster, rate: float, seconds: float, period: float, work: str) -> Dict[str, Any]:
    store_dir = os.path.join(work, 'store-%d' % rate)
    store = LocalStore(store_dir)
    proc = subprocess.Popen([sys.executable, __file__, 'consumer', cluster.endpoints[0], store_dir, str(period)])
    try:
        deadline = time.time() + 30
        while plan_chain(store.list()).base is None:
            if time.time() > deadline:
                raise RuntimeError('no full snapshot within 30 s')
            time.sleep(0.2)
        base = plan_chain(store.list()).base
        written = run_writer(cluster.endpoints[0], rate, seconds)
        finished = time.time()
        caught_up = None
        while time.time() < finished + period + 3:
            if plan_chain(store.list()).tip >= written['revision']:
                caught_up = time.time() - finished
                break
            time.sleep(0.1)
        memory = rss_kib(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    chain = plan_chain(store.list())
    revisions: List[int] = []
    for delta in chain.deltas:
        revisions += [e.revision for e in fetch_delta(store, delta, work)]
    first = max(base.name.end_revision, 1) + 1
    complete = revisions == list(range(first, chain.tip + 1)) and chain.tip >= written['revision']
    shutil.rmtree(store_dir, ignore_errors=True)
    return {'rate': rate, 'achieved': written['puts'] / written['seconds'], 'kept_up': caught_up is not None and complete,
            'catch_up_seconds': caught_up, 'no_loss': complete, 'deltas': len(chain.deltas),
            'rss_peak_mib': memory.get('VmHWM', 0) / 1024.0, 'rss_mib': memory.get('VmRSS', 0) / 1024.0}


def etcdctl_watch(cluster: EtcdCluster, rate: float, seconds: float, period: float) -> Dict[str, Any]:
    start_rev = revision_of(cluster.endpoints[0]) + 1
    env = dict(os.environ, ETCDCTL_API='3')
    proc = subprocess.Popen([cluster.etcdctl, '--endpoints', cluster.endpoints[0], 'watch', '--prefix', '/bench/',
                             '--rev', str(start_rev)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    seen = [0]

    def count() -> None:
        for line in proc.stdout:
            if line.startswith(b'PUT'):
                seen[0] += 1

    reader = threading.Thread(target=count, daemon=True)
    reader.start()
    try:
        written = run_writer(cluster.endpoints[0], rate, seconds)
        finished = time.time()
        caught_up = None
        while time.time() < finished + period + 3:
            if seen[0] >= written['puts']:
                caught_up = time.time() - finished
                break
            time.sleep(0.05)
        memory = rss_kib(proc.pid)
    finally:
        proc.terminate()
        proc.wait(10)
    return {'rate': rate, 'achieved': written['puts'] / written['seconds'], 'kept_up': caught_up is not None,
            'catch_up_seconds': caught_up, 'events': seen[0], 'rss_peak_mib': memory.get('VmHWM', 0) / 1024.0,
            'rss_mib': memory.get('VmRSS', 0) / 1024.0}


def backlog(cluster: EtcdCluster, events: int, work: str, period: float, memory_limit: int,
            rounds: int = 3) -> Dict[str, Any]:
    """Consumer throughput without a writer in the way: `events` puts already in etcd's history
    (txns of 16 puts), then each consumer starts from before them; events/s until it holds all.
    `rounds` rounds after one uncounted read, the order of the two consumers swapped each round, after
    os.sync() and a second's rest each time (the load and the last consumer's deltas leave dirty pages the
    kernel writes back meanwhile: whoever ran first would pay for them); the medians are compared.
    Our peak RSS is compared with deltaSnapshotMemoryLimit: the overhead is the peak minus the limit, and
    the RSS of the same loop idle (no events) is what the process costs without any."""
    endpoint = cluster.endpoints[0]
    store_dir = os.path.join(work, 'store-backlog')
    store = LocalStore(store_dir)
    consumer = [sys.executable, __file__, 'consumer', endpoint, store_dir, str(period), str(memory_limit)]
    proc = subprocess.Popen(consumer)
    deadline = time.time() + 30
    while plan_chain(store.list()).base is None and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(2 * period)  # the idle loop: its memory without events
    idle = rss_kib(proc.pid).get('VmHWM', 0)
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)
    start_rev = plan_chain(store.list()).tip + 1
    if os.path.exists(ready_file(store_dir)):
        os.unlink(ready_file(store_dir))
    pristine = store_dir + '.pristine'
    shutil.copytree(store_dir, pristine)
    with Transactions(EtcdConnection(endpoints=(endpoint,), timeout=60), endpoint, timeout=60) as client:
        for base in range(0, events, 16):
            final = client.txn(txn_request([(PUT, b'/backlog/%09d' % i, VALUE)
                                            for i in range(base, min(base + 16, events))]))

    def settle() -> None:
        os.sync()
        time.sleep(1.0)

    def run_ours() -> Dict[str, Any]:
        shutil.rmtree(store_dir, ignore_errors=True)
        shutil.copytree(pristine, store_dir)
        settle()
        started = time.time()
        proc = subprocess.Popen(consumer)
        peak = 0
        while published_tip(store_dir) < final and time.time() < started + 300:
            peak = max(peak, rss_kib(proc.pid).get('VmHWM', 0))
            time.sleep(0.05)
        with open(ready_file(store_dir)) as f:
            began = float(f.read())
        result = {'events_per_second': events / (time.time() - began), 'rss_peak_mib': peak / 1024.0,
                  'start_up_seconds': began - started}
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        os.unlink(ready_file(store_dir))
        return result

    def run_etcdctl() -> Dict[str, Any]:
        settle()
        env = dict(os.environ, ETCDCTL_API='3')
        began = time.time()
        watcher = subprocess.Popen([cluster.etcdctl, '--endpoints', endpoint, 'watch', '--prefix', '/backlog/', '--rev',
                                    str(start_rev)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        seen, peak = 0, 0
        for line in watcher.stdout:
            if line.startswith(b'PUT'):
                seen += 1
                if seen % 5000 == 0:
                    peak = max(peak, rss_kib(watcher.pid).get('VmHWM', 0))
                if seen >= events:
                    break
        peak = max(peak, rss_kib(watcher.pid).get('VmHWM', 0))
        watcher.terminate()
        watcher.wait(10)
        return {'events_per_second': events / (time.time() - began), 'rss_peak_mib': peak / 1024.0}

    # Not counted: the first read of a freshly written backlog is slower for whoever reads it (measured: round 1's
    # first consumer 5-15 % below its later rounds, etcdctl as well as ours).
    run_etcdctl()
    ours_runs: List[Dict[str, Any]] = []
    theirs_runs: List[Dict[str, Any]] = []
    for index in range(rounds):
        order = [(ours_runs, run_ours), (theirs_runs, run_etcdctl)]
        for runs, run in order if index % 2 == 0 else reversed(order):
            runs.append(run())
        print('  round %d: ours %.0f events/s (peak RSS %.0f MiB), etcdctl watch %.0f events/s: ratio %.2f' % (
            index + 1, ours_runs[-1]['events_per_second'], ours_runs[-1]['rss_peak_mib'],
            theirs_runs[-1]['events_per_second'],
            ours_runs[-1]['events_per_second'] / theirs_runs[-1]['events_per_second']), flush=True)
    shutil.rmtree(store_dir, ignore_errors=True)
    shutil.rmtree(pristine, ignore_errors=True)
    return {'ours': {'events_per_second': statistics.median(r['events_per_second'] for r in ours_runs),
                     'rss_peak_mib': max(r['rss_peak_mib'] for r in ours_runs),
                     'start_up_seconds': statistics.median(r['start_up_seconds'] for r in ours_runs),
                     'rss_idle_mib': idle / 1024.0, 'memory_limit_mib': memory_limit / 1048576.0,
                     'runs': ours_runs},
            'etcdctl': {'events_per_second': statistics.median(r['events_per_second'] for r in theirs_runs),
                        'rss_peak_mib': max(r['rss_peak_mib'] for r in theirs_runs), 'runs': theirs_runs},
            'rounds': rounds}


def sweep(name: str, measure, rates: List[float]) -> List[Dict[str, Any]]:
    results = []
    for rate in rates:
        result = measure(rate)
        results.append(result)
        print('  %-8s %6d puts/s target, %7.0f achieved: %s (catch-up %s, peak RSS %.0f MiB)' % (
            name, rate, result['achieved'], 'kept up' if result['kept_up'] else 'FELL BEHIND',
            '%.2fs' % result['catch_up_seconds'] if result['catch_up_seconds'] is not None else '-',
            result['rss_peak_mib']), flush=True)
        if not result['kept_up'] or result['achieved'] < 0.9 * rate:
            break
    return results


def best(results: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    kept = [r for r in results if r['kept_up'] and r['achieved'] >= 0.9 * r['rate']]
    return kept[-1] if kept else None


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or '').split('\n\n', 1)[0])
    parser.add_argument('--rates', default='250,500,1000,2000,4000,8000')
    parser.add_argument('--seconds', type=float, default=10.0)
    parser.add_argument('--period', type=float, default=1.0, help='delta period of our loop (seconds)')
    parser.add_argument('--backlog', type=int, default=100000, help='events for the throughput part (0: skip)')
    parser.add_argument('--rounds', type=int, default=3, help='rounds of the throughput part (medians compared)')
    parser.add_argument('--memory-limit-mib', type=int, default=100, help='deltaSnapshotMemoryLimit of our loop')
    parser.add_argument('--backlog-only', action='store_true', help='skip the sustained-rate sweeps')
    parser.add_argument('--output', default=os.path.join(HERE, 'results', 'delta_snapshot.json'))
    args = _env.parse_args(parser, 'delta_snapshot', {'rates': '200', 'seconds': 1.0, 'backlog': 2000, 'rounds': 1})
    _env.announce(args)
    rates = [float(r) for r in args.rates.split(',')]
    work = tempfile.mkdtemp(prefix='bench-delta-')
    cluster = EtcdCluster(os.path.join(work, 'etcd'), 1).start()
    try:
        print('etcd %s, 1 member on loopback; writer: %d threads of 1 KiB puts for %.0fs per rate' % (
            cluster.version, WRITER_THREADS, args.seconds))
        mine: List[Dict[str, Any]] = []
        theirs: List[Dict[str, Any]] = []
        if not args.backlog_only:
            mine = sweep('ours', lambda r: ours(cluster, r, args.seconds, args.period, work), rates)
            theirs = sweep('etcdctl', lambda r: etcdctl_watch(cluster, r, args.seconds, args.period), rates)
        drained = backlog(cluster, args.backlog, work, args.period, args.memory_limit_mib * 1048576, args.rounds) \
            if args.backlog else {}
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    a, b = best(mine), best(theirs)
    print()
    print('highest sustained rate with no loss: ours %s puts/s (peak RSS %s MiB), etcdctl watch %s puts/s '
          '(peak RSS %s MiB)' % (int(a['rate']) if a else 0, '%.0f' % a['rss_peak_mib'] if a else '-',
                                 int(b['rate']) if b else 0, '%.0f' % b['rss_peak_mib'] if b else '-'))
    if a and b:
        print('ratio ours/etcdctl: rate %.2f (goal >= 1.0), memory %.2f' % (
            a['rate'] / b['rate'], a['rss_peak_mib'] / max(b['rss_peak_mib'], 0.1)))
    if drained:
        o, e = drained['ours'], drained['etcdctl']
        ratio = o['events_per_second'] / e['events_per_second']
        print('throughput on a backlog of %d events, medians of %d rounds: ours %.0f events/s (peak RSS %.0f MiB; from '
              'the loop ready to watch, %.1f s after its process started), etcdctl watch %.0f events/s (peak RSS %.0f '
              'MiB; from its process start); ratio %.2f (goal >= 1.0, issue 29)' % (
                  args.backlog, drained['rounds'], o['events_per_second'], o['rss_peak_mib'], o['start_up_seconds'],
                  e['events_per_second'], e['rss_peak_mib'], ratio))
        beyond = o['rss_peak_mib'] - o['memory_limit_mib'] - o['rss_idle_mib']
        print('our peak RSS %.0f MiB with deltaSnapshotMemoryLimit %.0f MiB: %.0f MiB over the limit, of which the '
              'same loop idle holds %.0f MiB; the rest, %.0f MiB, is within the stated %d MiB in flight (goal: peak <= '
              'limit + idle + %d MiB): %s' % (
                  o['rss_peak_mib'], o['memory_limit_mib'], o['rss_peak_mib'] - o['memory_limit_mib'], o['rss_idle_mib'],
                  beyond, IN_FLIGHT_MIB, IN_FLIGHT_MIB, 'met' if beyond <= IN_FLIGHT_MIB else 'NOT MET'))
    write_summary(args.output,
                  {'ours': mine, 'etcdctl_watch': theirs, 'backlog': drained, 'seconds': args.seconds,
                   'period': args.period})


if __name__ == '__main__':
    if len(sys.argv) > 1 and sys.argv[1] == 'writer':
        writer_main(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]))
    elif len(sys.argv) > 1 and sys.argv[1] == 'consumer':
        consumer_main(sys.argv[2], sys.argv[3], float(sys.argv[4]), *[int(a) for a in sys.argv[5:6]])
    else:
        main()
