#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: the sabakan cluster generator (CKE's LEGACY algorithm) from 100 to 50,000 machines.

Not a test. For each size, a seeded data center from lab/datacenter.py (racks of up to 250 machines,
roles cs/ss, retire dates over every lifetime bucket, status with timestamp and duration as the
sabakan server answers) and the lab template (cs:ss = 2:1), with
control-plane-count 5 and minimum-workers = half the machines. Timed, median of --runs runs each:

  * generate        - a new cluster from the raw `searchMachines` JSON;
  * update (nop)    - update of that cluster with the same machines (every step checked, None returned);
  * update (repair) - update after one control plane turned UNHEALTHY and one worker RETIRED long ago
                      (replace control plane fires: demote, pick and add a new control plane).

Every timing includes parsing and checking the machine JSON, as a real run does. Prints a table (wall time, and
the thread CPU time beside it: on a shared machine the load moves the wall time several times over),
the growth exponent k of t ~ n^k (the log-log slope of the medians between consecutive sizes and from the first
size to the last, of the wall times and of the CPU times) and the goal "update for 10,000 machines < 50 ms" (wall
and CPU). Each size has the same work per machine (a data center of the same shape, minimum-workers half the
machines). Writes bench/results/sabakan_generator.json.

There is no reference tool to run beside it: CKE's generator is Go code inside the CKE server
and needs its own etcd, so only our figures are printed.

    python bench/sabakan_generator.py --runs 5
"""

from __future__ import annotations

import argparse
import copy
import datetime
import gc
import math
import os
import platform
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Sequence, Tuple

import _env  # noqa: E402,F401  (first: the venv, the collection link, the etcd binaries; see bench/_env.py)

import yaml  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

from lab.sabakan.datacenter import generate_datacenter  # noqa: E402
from summary_file import write_summary  # noqa: E402

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.generator import (  # noqa: E402
    generate, update, update_with_reason,
)

NOW = datetime.datetime(2025, 1, 15, tzinfo=datetime.timezone.utc)
SIZES = (100, 1000, 10000, 50000)
GOAL_SIZE = 10000
GOAL_SECONDS = 0.050   # issue 29: every update < 50 ms at 10,000 machines (was 100 ms)
MAX_PER_RACK = 250


def datacenter(total: int) -> List[Dict[str, Any]]:
    """`total` machines in as few racks of at most 250 as possible (one boot server per rack), as
    sabakan answers `searchMachines`: status with both timestamp and duration (seconds since it)."""
    racks = max(1, math.ceil(total / MAX_PER_RACK))
    per_rack = math.ceil(total / racks)
    machines = generate_datacenter(racks, per_rack, seed=total, now=NOW)[:total]
    for machine in machines:
        stamp = datetime.datetime.fromisoformat(machine['status']['timestamp'].replace('Z', '+00:00'))
        machine['status']['duration'] = (NOW - stamp).total_seconds()
    return machines


def constraints_for(total: int) -> Dict[str, int]:
    return {'control-plane-count': 5, 'minimum-workers': total // 2}


def damaged(machines: List[Dict[str, Any]], cluster: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The inventory after the first control plane went UNHEALTHY and the first worker retired an hour ago."""
    cp = next(n['address'] for n in cluster['nodes'] if n['control_plane'])
    worker = next(n['address'] for n in cluster['nodes'] if not n['control_plane'])
    result = []
    for machine in machines:
        address = machine['spec']['ipv4'][0]
        if address in (cp, worker):
            machine = copy.deepcopy(machine)
            machine['status'] = {'state': 'UNHEALTHY' if address == cp else 'RETIRED', 'duration': 3600.0}
        result.append(machine)
    return result


CPU_TIMES: Dict[str, float] = {}   # label -> median thread CPU time of the last timed() with that label


def timed(func: Callable[[], Any], runs: int, label: str = '') -> Tuple[float, Any]:
    """Median wall time of `runs` calls (GC collected before each, left enabled during) and the last result.

    The median thread CPU time goes to CPU_TIMES[label]: on a shared machine the wall time moves with the load
    average several times over, the CPU time far less, so the two side by side tell the load from the code."""
    samples = []
    cpu = []
    result = None
    for _run in range(runs):
        result = None  # the previous run's cluster is freed here, not inside the next run's timing
        gc.collect()
        start = time.perf_counter()
        start_cpu = time.thread_time()
        result = func()
        cpu.append(time.thread_time() - start_cpu)
        samples.append(time.perf_counter() - start)
    CPU_TIMES[label] = statistics.median(cpu)
    return statistics.median(samples), result


def slope(sizes: Sequence[int], seconds: Sequence[float]) -> float:
    """Growth exponent k in t ~ n^k, from the first to the last size."""
    return math.log(seconds[-1] / seconds[0]) / math.log(sizes[-1] / sizes[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--runs', type=int, default=5, help='runs per measurement; the median is reported (default 5)')
    parser.add_argument('--sizes', default=','.join(map(str, SIZES)), help='machine counts (default %(default)s)')
    parser.add_argument('--output', default=os.path.join(HERE, 'results', 'sabakan_generator.json'))
    args = _env.parse_args(parser, 'sabakan_generator', {'runs': 1, 'sizes': '100,300'})
    _env.announce(args)
    sizes = [int(s) for s in args.sizes.split(',') if s.strip()]
    with open(os.path.join(REPO, 'lab', 'sabakan-template.yml')) as f:
        template = yaml.safe_load(f)

    print('sabakan generator (LEGACY CKE algorithm), python %s on %s, %d run(s) each, median'
          % (platform.python_version(), platform.machine(), args.runs))
    print('no reference tool is run: CKE\'s generator is Go inside the CKE server and needs its own etcd')
    print('%8s %7s %6s %12s %14s %16s  %s' % ('machines', 'nodes', 'racks', 'generate ms', 'update nop ms',
                                              'update repair ms', 'repair step'))
    rows = []
    for total in sizes:
        machines = datacenter(total)
        cstr = constraints_for(total)
        gen_s, cluster = timed(lambda: generate(template, cstr, machines, now=NOW), args.runs, 'generate')
        nop_s, nop = timed(lambda: update(cluster, template, cstr, machines, now=NOW), args.runs, 'nop')
        if nop is not None:
            raise SystemExit('update of a freshly generated cluster must be None (n=%d)' % total)
        broken = damaged(machines, cluster)
        rep_s, outcome = timed(lambda: update_with_reason(cluster, template, cstr, broken, now=NOW), args.runs, 'repair')
        step = outcome.operation.name if outcome.operation else 'none'
        racks = len({m['spec']['rack'] for m in machines})
        rows.append({'machines': total, 'nodes': len(cluster['nodes']), 'racks': racks, 'generate_s': gen_s,
                     'update_nop_s': nop_s, 'update_repair_s': rep_s, 'repair_step': step,
                     'cpu_generate_s': CPU_TIMES['generate'], 'cpu_update_nop_s': CPU_TIMES['nop'],
                     'cpu_update_repair_s': CPU_TIMES['repair']})
        print('%8d %7d %6d %12.1f %14.1f %16.1f  %s   (CPU ms: %.1f %.1f %.1f)'
              % (total, len(cluster['nodes']), racks, gen_s * 1e3, nop_s * 1e3, rep_s * 1e3, step,
                 CPU_TIMES['generate'] * 1e3, CPU_TIMES['nop'] * 1e3, CPU_TIMES['repair'] * 1e3), flush=True)

    # The growth exponent of the median wall times and of the median thread CPU times: on a shared machine a
    # busier moment during one size moves the wall-time exponent by 0.1 or more, the CPU-time one far less.
    exponents: Dict[str, Any] = {}
    if len(rows) >= 2:
        ns = [r['machines'] for r in rows]
        print('growth exponent k (t ~ n^k; 1.0 = linear), between consecutive sizes and overall, wall | CPU:')
        for key, label in (('generate_s', 'generate'), ('update_nop_s', 'update nop'),
                           ('update_repair_s', 'update repair')):
            ts = [r[key] for r in rows]
            cpus = [r['cpu_' + key] for r in rows]
            steps = [slope(ns[i:i + 2], ts[i:i + 2]) for i in range(len(ns) - 1)]
            cpu_steps = [slope(ns[i:i + 2], cpus[i:i + 2]) for i in range(len(ns) - 1)]
            overall, cpu_overall = slope(ns, ts), slope(ns, cpus)
            exponents[label] = {'steps': steps, 'overall': overall, 'cpu_steps': cpu_steps, 'cpu_overall': cpu_overall}
            print('  %-14s %s   overall %.2f  |  CPU %s   overall %.2f'
                  % (label, '  '.join('%.2f' % k for k in steps), overall, '  '.join('%.2f' % k for k in cpu_steps),
                     cpu_overall))

    goal = next((r for r in rows if r['machines'] == GOAL_SIZE), None)
    verdict = cpu_verdict = None
    if goal:
        worst = max(goal['update_nop_s'], goal['update_repair_s'])
        worst_cpu = max(goal['cpu_update_nop_s'], goal['cpu_update_repair_s'])
        verdict, cpu_verdict = worst < GOAL_SECONDS, worst_cpu < GOAL_SECONDS
        print('goal: update for %d machines < %.0f ms: worst update %.1f ms wall -> %s, %.1f ms of CPU -> %s'
              % (GOAL_SIZE, GOAL_SECONDS * 1e3, worst * 1e3, 'met' if verdict else 'NOT met', worst_cpu * 1e3,
                 'met' if cpu_verdict else 'NOT met'))
    summary = {
        'benchmark': 'sabakan_generator', 'python': platform.python_version(), 'runs': args.runs,
        'constraints': 'control-plane-count 5, minimum-workers = machines // 2', 'template': 'lab/sabakan-template.yml',
        'rows': rows, 'growth_exponents': exponents,
        'goal': {'machines': GOAL_SIZE, 'update_below_seconds': GOAL_SECONDS, 'met': verdict, 'met_cpu': cpu_verdict},
        'reference': 'none run (CKE generator is Go inside the CKE server, needs its own etcd)',
    }
    write_summary(args.output, summary)
    return 0


if __name__ == '__main__':
    sys.exit(main())
