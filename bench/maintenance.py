#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: node maintenance (seed 003) for 5,000 nodes with 3 profiles.

Not a test. Two parts:

(a) the engine alone: `reconcile` over --nodes in-memory Nodes (a third each on the profiles
    `flatcar` (the seed's example: annotations, approval, notifications), `kernel` (maxMaintenance,
    so cluster-scoped transitions through a gate) and `hardware` (stagger Leases, condition check);
    every tenth node is eligible), with the controller's own in-memory parts: NodeCache as the node
    list, CachedLeaseStore over MemoryLeaseStore, a lock as the gate, a dict as the API for commits,
    counting notification senders. Three full passes: first contact (every node gets its state label
    and data annotation), the pass after (notifications of the new states, gated transitions), and
    a steady pass (nothing to do: the common case). Total and per-node time, RSS, and the RSS of
    5,000 realistic Node objects (with `status.images`) in the controller's cache, full and slimmed
    (tracemalloc: the slimmed cache still holds what the node list shares with the full objects it
    was cut from, i.e. only what the controller keeps).

    Reference: the seed's requeue intervals, i.e. the time a controller has for a pass over every
    node: `requeue: 60s` (the seed's flatcar example) and `requeue: 200ms` (the seed's format
    example). Printed as ratio = pass time / requeue (goal <= 1.0: a pass fits into one interval).

(b) the controller against the Kubernetes API emulator (lab/kube_api.py): MaintenanceController
    in this process, 8 workers, --emulator-nodes Nodes (default 200: kmock's emulator costs about
    0.5 ms per stored object per request, so 5,000 would take hours to even create). One cycle =
    LIST + reconcile every node + the patches; next to the plain baseline on the same emulator:
    LIST + one merge patch per node from 8 threads. Ratio ours/baseline (goal <= ~1: the API
    round trips, not the engine, bound a cycle).

Writes bench/results/maintenance.json.

    python bench/maintenance.py --nodes 5000 --emulator-nodes 200
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import copy
import gc
import math
import os
import platform
import sys
import threading
import time
import tracemalloc
from typing import Any, Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
import _env  # noqa: E402,F401  (first: the venv, the collection link, the etcd binaries; see bench/_env.py)

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config import load_config  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.constants import IN_MAINTENANCE, STATE_LABEL  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.environment import Environment  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.leases import MemoryLeaseStore  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.senders import HttpPoster, SmtpSender  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.state import reconcile  # noqa: E402

from steward_controller.core.informer import NodeCache, slim  # noqa: E402
from steward_controller.maintenance.leases import CachedLeaseStore, LeaseCache  # noqa: E402
from summary_file import write_summary  # noqa: E402

NOW = 1767258000.0     # 2026-01-01T09:00:00Z, a Thursday
PROFILE = 'cloud.sap/maintenance-profile'
REBOOT_NEEDED = 'flatcar-linux-update.v1.flatcar-linux.net/reboot-needed'
REQUEUES = {'60s (flatcar example)': 60.0, '200ms (format example)': 0.2}
CONFIG = '''
intervals: {requeue: 60s}
instances:
  notify:
  - type: slack
    name: approval_required
    config: {hook: "http://hooks.invalid/T/B/X", channel: "#maintenance",
             message: "The node {{ .Node.Name }} requires maintenance ({{ .Profile.Current }}, {{ .State }})."}
    schedule: {type: periodic, config: {interval: 24h}}
  - type: mail
    name: started_mail
    config: {auth: false, address: "mail.invalid:25", from: m@example.com, to: [ops@example.com], subject: started,
             message: "Maintenance for node {{ .Node.Name }} has started."}
    schedule: {type: periodic, config: {interval: 24h}}
  check:
  - {type: hasAnnotation, name: reboot_needed, config: {key: %(needed)s, value: "true"}}
  - {type: hasAnnotation, name: approved, config: {key: cloud.sap/maintenance-approved, value: "true"}}
  - {type: hasLabel, name: kernel_update, config: {key: kernel-update, value: "true"}}
  - {type: hasAnnotation, name: hw_fault, config: {key: hardware/fault}}
  - {type: condition, name: ready, config: {type: Ready, status: "True"}}
  - {type: maxMaintenance, name: max5, config: {max: 5}}
  - {type: stagger, name: one_per_10m, config: {duration: 10m, leaseName: hw, leaseNamespace: steward-system, parallel: 3}}
  trigger:
  - {type: alterAnnotation, name: reboot_ok, config: {key: flatcar/reboot-ok, value: "true"}}
  - {type: alterAnnotation, name: remove_approval, config: {key: cloud.sap/maintenance-approved, remove: true}}
  - {type: alterLabel, name: drained, config: {key: drained, value: "true"}}
profiles:
- name: flatcar
  operational: {transitions: [{check: reboot_needed, next: maintenance-required}]}
  maintenance-required:
    notify: approval_required
    transitions: [{check: approved, trigger: remove_approval && reboot_ok, next: in-maintenance}]
  in-maintenance:
    notify: started_mail
    transitions: [{check: "!reboot_needed", next: operational}]
- name: kernel
  operational: {transitions: [{check: kernel_update && ready && max5, trigger: drained, next: in-maintenance}]}
  in-maintenance: {transitions: [{check: "!kernel_update", next: operational}]}
- name: hardware
  operational: {transitions: [{check: hw_fault && one_per_10m, next: maintenance-required}]}
  maintenance-required: {notify: approval_required, transitions: [{check: "!hw_fault", next: operational}]}
''' % {'needed': REBOOT_NEEDED}


def rss_mib() -> float:
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) / 1024.0
    return 0.0


def bench_node(i: int, images: bool = False) -> Dict[str, Any]:
    """A Node as a kubelet registers it (labels, addresses, capacity, conditions, nodeInfo; optionally
    `status.images` with 40 images, which is most of a real Node's size)."""
    profile = ('flatcar', 'kernel', 'hardware')[i % 3]
    labels = {'kubernetes.io/hostname': 'node-%05d' % i, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64',
              'topology.kubernetes.io/zone': 'zone-%d' % (i % 3), 'node.kubernetes.io/instance-type': 'm5.2xlarge',
              PROFILE: profile}
    annotations = {'node.alpha.kubernetes.io/ttl': '0', 'volumes.kubernetes.io/controller-managed-attach-detach': 'true'}
    if i % 10 == 0:   # eligible
        if profile == 'flatcar':
            annotations[REBOOT_NEEDED] = 'true'
        elif profile == 'kernel':
            labels['kernel-update'] = 'true'
        else:
            annotations['hardware/fault'] = 'disk'
    conditions = [{'type': t, 'status': 'True' if t == 'Ready' else 'False', 'reason': 'Kubelet' + t,
                   'lastHeartbeatTime': '2026-01-01T08:59:00Z', 'lastTransitionTime': '2025-12-01T00:00:00Z'}
                  for t in ('MemoryPressure', 'DiskPressure', 'PIDPressure', 'Ready')]
    status: Dict[str, Any] = {
        'conditions': conditions,
        'addresses': [{'type': 'InternalIP', 'address': '10.%d.%d.%d' % (i >> 16, (i >> 8) & 255, i & 255)},
                      {'type': 'Hostname', 'address': 'node-%05d' % i}],
        'capacity': {'cpu': '8', 'memory': '32Gi', 'pods': '110', 'ephemeral-storage': '100Gi'},
        'allocatable': {'cpu': '7800m', 'memory': '30Gi', 'pods': '110', 'ephemeral-storage': '92Gi'},
        'nodeInfo': {'kubeletVersion': 'v1.31.2', 'osImage': 'Flatcar Container Linux 4081.2.0', 'kernelVersion': '6.6.60',
                     'containerRuntimeVersion': 'containerd://1.7.23', 'architecture': 'amd64', 'operatingSystem': 'linux'}}
    if images:
        status['images'] = [{'names': ['registry.example/team-%d/service-%d@sha256:%064x' % (k % 7, k, i * 100 + k),
                                       'registry.example/team-%d/service-%d:v1.%d.%d' % (k % 7, k, k, i % 50)],
                             'sizeBytes': 50_000_000 + k} for k in range(40)]
    return {'apiVersion': 'v1', 'kind': 'Node',
            'metadata': {'name': 'node-%05d' % i, 'uid': 'uid-%05d' % i, 'resourceVersion': str(1000 + i),
                         'labels': labels, 'annotations': annotations,
                         'managedFields': [{'manager': 'kubelet', 'operation': 'Update', 'fieldsType': 'FieldsV1',
                                            'fieldsV1': {'f:status': {'f:conditions': {}, 'f:images': {}}}}] if images else []},
            'spec': {'podCIDR': '100.64.%d.0/24' % (i % 256), 'providerID': 'aws:///eu-central-1a/i-%017x' % i}, 'status': status}


class CountingHttp(HttpPoster):
    def __init__(self) -> None:
        self.posts = 0
        self.lock = threading.Lock()

    def post(self, url: str, body: bytes, headers: Any) -> Tuple[int, bytes]:
        with self.lock:
            self.posts += 1
        return 200, b'ok'


class CountingSmtp(SmtpSender):
    def __init__(self) -> None:
        self.mails = 0

    def send(self, address: str, sender: str, recipients: Any, message: bytes, auth: Any) -> None:
        self.mails += 1


class MemoryCluster:
    """The API as a dict: commits apply the merge patch and move the resourceVersion on; the cache follows."""

    def __init__(self, nodes: List[Dict[str, Any]]):
        self.cache = NodeCache(index_label=STATE_LABEL)
        for node in nodes:
            self.cache.put(node)
        self.version = 100000
        self.patches = 0
        self.gate_entries = 0
        self.lock = threading.Lock()

    @contextlib.contextmanager
    def gate(self) -> Any:
        with self.lock:
            self.gate_entries += 1
            yield

    def commit(self, name: str, patch: Dict[str, Any]) -> None:
        node = copy.copy(self.cache.get(name))
        meta = dict(node['metadata'])
        for section, changes in patch.get('metadata', {}).items():
            values = dict(meta.get(section) or {})
            for key, value in changes.items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = value
            meta[section] = values
        self.version += 1
        meta['resourceVersion'] = str(self.version)
        node['metadata'] = meta
        self.patches += 1
        self.cache.put(node)


def engine_part(count: int, calls: bool = False) -> Dict[str, Any]:
    """Three passes over `count` nodes; with `calls`, each pass runs under cProfile and its function calls are
    counted (the work, which the load of a shared machine does not change; its times are then not comparable)."""
    config = load_config(CONFIG, environ={})
    gc.collect()
    rss_start = rss_mib()
    cluster = MemoryCluster([bench_node(i) for i in range(count)])
    rss_nodes = rss_mib()
    http, smtp = CountingHttp(), CountingSmtp()
    leases = CachedLeaseStore(MemoryLeaseStore(), LeaseCache(clock=lambda: NOW))
    env = Environment(nodes=cluster.cache.snapshot, fresh_nodes=cluster.cache.snapshot,
                      nodes_in_maintenance=lambda: cluster.cache.labelled(IN_MAINTENANCE), leases=leases, http=http,
                      smtp=smtp, gate=cluster.gate, commit=cluster.commit)
    passes = []
    for number, label in enumerate(('first contact', 'transitions and notifications', 'steady (nothing to do)')):
        before = (cluster.patches, http.posts + smtp.mails, cluster.gate_entries)
        transitions = errors = 0
        gc.collect()

        def one_pass() -> None:
            nonlocal transitions, errors
            for name in cluster.cache.names():
                result = reconcile(cluster.cache.get(name), config, NOW + 60 * number, env)
                transitions += len(result.transitions)
                errors += len(result.errors)
        start = time.perf_counter()
        made = _env.python_calls(one_pass) if calls else 0
        if not calls:
            one_pass()
        seconds = time.perf_counter() - start
        passes.append({'pass': label, 'seconds': seconds, 'per_node_us': seconds / count * 1e6, 'calls_per_node': made / count,
                       'patches': cluster.patches - before[0], 'notifications': http.posts + smtp.mails - before[1],
                       'gate_entries': cluster.gate_entries - before[2], 'transitions': transitions, 'errors': errors})
    states: Dict[str, int] = {}
    for node in cluster.cache.snapshot():
        state = node['metadata']['labels'].get('cloud.sap/maintenance-state', '')
        states[state] = states.get(state, 0) + 1
    return {'nodes': count, 'profiles': sorted(set(config.profiles) - {'default'}), 'passes': passes, 'states': states,
            'rss_start_mib': rss_start, 'rss_with_nodes_mib': rss_nodes, 'rss_end_mib': rss_mib(),
            'lease_api_reads': leases.cache.api_reads}


def cache_memory(count: int) -> Dict[str, float]:
    """Memory (tracemalloc) of `count` realistic Nodes (40 images, managedFields) in a NodeCache, full vs slimmed."""
    out = {}
    for label, shrink in (('full', False), ('slim', True)):
        gc.collect()
        tracemalloc.start()
        cache = NodeCache()
        for i in range(count):
            node = bench_node(i, images=True)
            cache.put(slim(node) if shrink else node)
            del node
        gc.collect()
        out[label + '_mib'] = tracemalloc.get_traced_memory()[0] / 2 ** 20
        tracemalloc.stop()
        del cache
    return out


def written(runtime: Any) -> float:
    """Transitions the controller wrote so far (its metric)."""
    return sum(runtime.metrics.registry.get_sample_value('maintenance_controller_transitions_total',
                                                         {'profile': p, 'from': f, 'to': t}) or 0.0
               for p in ('flatcar', 'kernel', 'hardware') for f in ('operational', 'maintenance-required', 'in-maintenance')
               for t in ('operational', 'maintenance-required', 'in-maintenance'))


def emulator_part(count: int, workers: int) -> Dict[str, Any]:
    import kubernetes
    from lab.kube.api import KubeServer
    from steward_controller.core import metrics as metrics_mod, settings as settings_mod
    from steward_controller.maintenance.controller import MaintenanceController
    from ansible_collections.steward.cluster.plugins.module_utils.maintenance.kube_reads import parse_config_source
    from steward_controller.core.runtime import Runtime

    server = KubeServer().start()
    try:
        configuration = kubernetes.client.Configuration()
        configuration.host = server.url
        configuration.connection_pool_maxsize = workers + 4
        client = KubeClient(configuration)
        client.create(api_path('v1', 'configmaps', 'steward-system'), {
            'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'maintenance', 'namespace': 'steward-system'},
            'data': {'maintenance.yaml': CONFIG.replace('requeue: 60s', 'requeue: 1h')}})
        start = time.perf_counter()
        for i in range(count):
            node = bench_node(i, images=True)
            node['metadata'].pop('managedFields')
            node['metadata'].pop('resourceVersion')
            client.create(api_path('v1', 'nodes'), node)
        create_s = time.perf_counter() - start
        settings = settings_mod.parse(['--namespace', 'steward-system', '--identity', 'bench', '--maintenance-workers', str(workers),
                                       '--maintenance-config', 'configmap/steward-system/maintenance'])
        runtime = Runtime(settings=settings, client=client, metrics=metrics_mod.Metrics(), health=metrics_mod.Health())
        controller = MaintenanceController(runtime, parse_config_source('configmap/steward-system/maintenance'))
        controller.smtp, controller.http = CountingSmtp(), CountingHttp()
        if not controller.poll_config().changed:
            raise SystemExit('the benchmark config did not load')
        controller.start(scheduler=False)
        cycles = []
        try:
            # a transitioned node is queued again at once, so its notifications fall into the same cycle
            for label in ('first contact (+ requeued)', 'second', 'third (steady)'):
                transitions_before = written(runtime)
                start = time.perf_counter()
                controller.resync()
                controller.queue.add_all(controller.cache.names())
                while not controller.idle():
                    time.sleep(0.002)
                seconds = time.perf_counter() - start
                transitions = written(runtime) - transitions_before
                cycles.append({'cycle': label, 'seconds': seconds, 'per_node_ms': seconds / count * 1e3,
                               'transitions': int(transitions)})
        finally:
            controller.stop()

        def patch(name: str) -> None:
            client.merge_patch(api_path('v1', 'nodes', name=name), {'metadata': {'labels': {'bench/touched': 'yes'}}})

        start = time.perf_counter()
        names = [n['metadata']['name'] for n in client.list(api_path('v1', 'nodes'))]
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            list(pool.map(patch, names))
        baseline_patch = time.perf_counter() - start
        start = time.perf_counter()
        client.list(api_path('v1', 'nodes'))
        baseline_list = time.perf_counter() - start
        client.close()
    finally:
        server.stop()
    return {'nodes': count, 'workers': workers, 'create_seconds': create_s, 'cycles': cycles,
            'baseline_list_and_patch_seconds': baseline_patch, 'baseline_list_seconds': baseline_list,
            'ratio_first_cycle': cycles[0]['seconds'] / baseline_patch, 'ratio_steady_cycle': cycles[2]['seconds'] / baseline_list}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--nodes', type=int, default=5000, help='nodes of part (a) (default 5000)')
    parser.add_argument('--emulator-nodes', type=int, default=200, help='nodes of part (b), 0 skips it (default 200)')
    parser.add_argument('--workers', type=int, default=8, help='maintenance workers in part (b) (default 8)')
    parser.add_argument('--growth-sizes', default='1250,2500',
                        help='smaller node counts part (a) also runs at, for the growth exponent (default 1250,2500)')
    parser.add_argument('--output', default=os.path.join(HERE, 'results', 'maintenance.json'))
    args = _env.parse_args(parser, 'maintenance', {'nodes': 60, 'emulator_nodes': 6, 'workers': 2, 'growth_sizes': '20'})
    _env.announce(args)
    import logging
    logging.basicConfig(level=logging.ERROR)

    print('node maintenance, python %s on %s' % (platform.python_version(), platform.machine()))
    engine = engine_part(args.nodes)
    print('(a) engine alone: %d nodes, profiles %s; RSS %.0f MiB at start, %.0f MiB with the nodes, %.0f MiB after 3 passes'
          % (engine['nodes'], ', '.join(engine['profiles']), engine['rss_start_mib'], engine['rss_with_nodes_mib'],
             engine['rss_end_mib']))
    header = ('pass', 'seconds', 'us per node', 'patches', 'notifications', 'gated', 'transitions')
    print('%-32s %9s %12s %8s %12s %6s %12s' % header)
    for p in engine['passes']:
        print('%-32s %9.3f %12.1f %8d %12d %6d %12d' % (p['pass'], p['seconds'], p['per_node_us'], p['patches'],
                                                        p['notifications'], p['gate_entries'], p['transitions']))
    print('final states: %s; stagger lease reads from the API: %d' % (engine['states'], engine['lease_api_reads']))
    worst = max(p['seconds'] for p in engine['passes'])
    steady = engine['passes'][-1]['seconds']
    engine['ratios'] = {}
    for label, requeue in REQUEUES.items():
        engine['ratios'][label] = {'worst_pass': worst / requeue, 'steady_pass': steady / requeue}
        print('requeue %-24s ratio pass/requeue: worst %.3f, steady %.3f (goal <= 1.0)' % (label, worst / requeue, steady / requeue))
    # growth: the work (Python calls per node, each pass under cProfile), which the load does not move
    growth = []
    for size in sorted({int(s) for s in args.growth_sizes.split(',') if s.strip() and int(s) < args.nodes} | {args.nodes}):
        counted = engine_part(size, calls=True)
        growth.append({'nodes': size, 'calls_per_node': [p['calls_per_node'] for p in counted['passes']]})
    engine['growth'] = growth
    for row in growth:
        print('%6d nodes: Python calls per node, first contact %.0f, transitions %.0f, steady %.0f'
              % ((row['nodes'],) + tuple(row['calls_per_node'])))
    if len(growth) > 1:
        low, high = growth[0], growth[-1]
        exponents = [1 + math.log(high['calls_per_node'][i] / low['calls_per_node'][i]) / math.log(high['nodes'] / low['nodes'])
                     for i in range(3)]
        engine['growth_exponents'] = dict(zip(('first_contact', 'transitions', 'steady'), exponents))
        print('work growth ~ n^k from %d to %d nodes (1.0 = linear): first contact %.2f, transitions %.2f, steady %.2f'
              % (low['nodes'], high['nodes'], exponents[0], exponents[1], exponents[2]))
    memory = cache_memory(args.nodes)
    engine['cache_memory'] = memory
    print('controller cache of %d realistic Nodes (40 images each): %.0f MiB full, %.0f MiB slimmed (ratio %.2f)'
          % (args.nodes, memory['full_mib'], memory['slim_mib'], memory['slim_mib'] / max(memory['full_mib'], 0.001)))

    summary: Dict[str, Any] = {'benchmark': 'maintenance', 'python': platform.python_version(), 'engine': engine}
    if args.emulator_nodes > 0:
        emu = emulator_part(args.emulator_nodes, args.workers)
        summary['emulator'] = emu
        print('(b) controller against the API emulator: %d nodes (created in %.1f s), %d workers'
              % (emu['nodes'], emu['create_seconds'], emu['workers']))
        for c in emu['cycles']:
            row = (c['cycle'], c['seconds'], c['per_node_ms'], c['transitions'])
            print('  cycle %-30s %7.2f s  %7.2f ms per node  %3d transitions' % row)
        print('  baseline LIST + %d merge patches (%d threads): %.2f s -> ratio first cycle/baseline %.2f'
              % (emu['nodes'], emu['workers'], emu['baseline_list_and_patch_seconds'], emu['ratio_first_cycle']))
        print('  baseline LIST only: %.3f s -> ratio steady cycle/baseline %.2f (the emulator costs ~0.5 ms per stored '
              'object per request; it, not the engine, bounds these cycles)' % (emu['baseline_list_seconds'], emu['ratio_steady_cycle']))
    write_summary(args.output, summary)
    return 0


if __name__ == '__main__':
    sys.exit(main())
