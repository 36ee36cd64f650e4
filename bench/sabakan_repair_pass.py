#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: the controller's cost of one repair pass with 1,000 machines (Nodes) and 50 RepairEntries.

Not a test. One pass of the repair loop (controller/steward_controller/sabakan/repair_loop.py) does, apart
from the API calls: index the Nodes by name and InternalIP, translate every RepairEntry, run the health check
of every unfinished entry (one process each, CKE's rule), and plan. Timed separately, median of --runs:

  * engine   - NodeIndex over 1,000 Nodes + 50 RepairEntry objects -> Entry + plan_pass (no process);
  * checks   - the 50 health checks as processes (`sh -c 'echo false'`, the cheapest real command), sequential
               as the loop runs them;
  * pass     - both.

The 50 entries: 10 processing (watching), 40 queued, max_concurrent_repairs 5. CPU seconds of this process
(user+sys) are printed beside wall time, and the load average, since the machine is shared.

    python bench/sabakan_repair_pass.py --runs 5
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from typing import Any, Callable, Dict, List, Tuple

import _env  # noqa: E402,F401  (first: the venv, the collection link, the etcd binaries; see bench/_env.py)

from summary_file import write_summary  # noqa: E402

from ansible_collections.steward.cluster.plugins.module_utils.sabakan import repair_exec, repair_queue, repair_run  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.kube_nodes import NodeIndex, node_name  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.repair_config import load_repair_config  # noqa: E402

MACHINES = 1000
ENTRIES = 50


def nodes() -> List[Dict[str, Any]]:
    def address(i: int) -> str:
        return '10.%d.%d.%d' % (i // 65536, i // 256 % 256, i % 256)
    return [{'metadata': {'name': 'w-%d' % i, 'labels': {'kubernetes.io/hostname': 'w-%d' % i}},
             'status': {'addresses': [{'type': 'InternalIP', 'address': address(i)}]}}
            for i in range(MACHINES)]


def entries() -> List[Dict[str, Any]]:
    out = []
    for i in range(ENTRIES):
        address = '10.0.%d.%d' % (i * 20 // 256, i * 20 % 256)
        status: Dict[str, Any] = {'status': 'queued'}
        if i < 10:
            status = {'status': 'processing', 'step': 0, 'stepStatus': 'watching',
                      'lastTransitionTime': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}
        out.append({'metadata': {'name': repair_queue.entry_name(address),
                                 'creationTimestamp': '2026-01-01T00:00:%02dZ' % (i % 60)},
                    'spec': {'address': address, 'machineType': 'IPMI-2.0', 'operation': 'unhealthy',
                             'integration': 'infra/dc1'}, 'status': status})
    return out


CONFIG = load_repair_config({'repair_procedures': [{'machine_types': ['IPMI-2.0'], 'repair_operations': [{
    'operation': 'unhealthy',
    'repair_steps': [{'repair_command': ['true'], 'need_drain': True, 'watch_seconds': 604800}],
    'health_check_command': ['sh', '-c', 'echo false']}]}], 'max_concurrent_repairs': 5})


def engine(kube_nodes: List[Dict[str, Any]], objects: List[Dict[str, Any]]) -> repair_run.PassPlan:
    index = NodeIndex(kube_nodes)
    translated = []
    for obj in objects:
        node = index.match({'address': obj['spec']['address']})
        translated.append(repair_queue.run_entry(obj, node_name(node) if node is not None else None, False))
    return repair_run.plan_pass(translated, CONFIG, {}, now=time.time())


def checks(objects: List[Dict[str, Any]]) -> Dict[str, Any]:
    translated = [repair_queue.run_entry(obj, None, False) for obj in objects]
    return repair_exec.health_checks(translated, CONFIG)


def timed(function: Callable[[], Any], runs: int) -> Tuple[float, float]:
    walls, cpus = [], []
    for _unused in range(runs):
        before = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        function()
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_SELF)
        cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[1])
    parser.add_argument('--runs', type=int, default=5)
    parser.add_argument('--output', default=os.path.join(os.path.dirname(os.path.abspath(__file__)), 'results',
                                                         'sabakan_repair_pass.json'))
    args = _env.parse_args(parser, 'sabakan_repair_pass', {'runs': 1})
    _env.announce(args)
    kube_nodes, objects = nodes(), entries()
    plan = engine(kube_nodes, objects)
    limited = sum(1 for d in plan.decisions if d.limited)
    print('%d machines, %d entries: %d hold a slot (max_concurrent_repairs=5), %d wait for one'
          % (MACHINES, ENTRIES, plan.active, limited))
    results = {
        'engine': timed(lambda: engine(kube_nodes, objects), args.runs),
        'checks': timed(lambda: checks(objects), args.runs),
    }
    results['pass'] = (results['engine'][0] + results['checks'][0], results['engine'][1] + results['checks'][1])
    print('%-8s %12s %16s' % ('part', 'wall (ms)', 'cpu here (ms)'))
    for name, (wall, cpu) in results.items():
        print('%-8s %12.1f %16.1f' % (name, wall * 1000, cpu * 1000))
    print('load average: %.2f %.2f %.2f on %d cores' % (os.getloadavg() + (os.cpu_count() or 0,)))
    write_summary(args.output, {'benchmark': 'sabakan_repair_pass', 'machines': MACHINES, 'entries': ENTRIES,
                                'ms': {name: {'wall': wall * 1000, 'cpu': cpu * 1000} for name, (wall, cpu) in results.items()},
                                'load_average': os.getloadavg()})


if __name__ == '__main__':
    main()
