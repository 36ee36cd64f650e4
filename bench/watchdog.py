#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: the dependency watchdog's prober at 5,000 node leases, and its decision latency.

Not a test. Three parts:

(a) the verdict alone: `candidate_nodes` + `evaluate_leases` over --nodes realistic Nodes (labels, conditions,
    addresses, capacity, nodeInfo) and their Leases, in memory; median of 15 (wall and thread CPU time) and the
    best, and the memory of the objects (tracemalloc). Reference: DWD's default probeInterval (10s), the time a probe has: ratio = verdict / 10s.

(b) one probe over HTTP: `probe_cluster` (GET /version, list Nodes, list node Leases, verdict) against a
    stand-in API server that serves pre-encoded lists (so the server's own cost is not counted); median of 5,
    peak memory (tracemalloc) and RSS. Baseline: the same three requests through the same client, decoded, with
    no verdict: ratio probe/baseline = what our work adds to the transfer. Reference: probeInterval 10s.

(c) decision latency, end to end: the real controller (`--controllers prober`, probeInterval --interval, jitter
    0.2, failureThreshold 1) probing that stand-in through kubeConfigSecretName, its targets (3 Deployments on
    two levels) in the Kubernetes API emulator. At a known instant T, 60% of the leases cross their expiry
    (renewTime + 0.75 x 40s); the latency is the first scale call (the controller's own `scaleCallAt`) minus T.
    As in a real outage, the kubelets of those nodes stopped renewing before T: their leases show renewTime
    T - 30s from LEAD_CYCLES probe cycles before T on (a real outage shows it 30 s before T; the prober keeps no
    lease history, so a shorter lead looks the same to it and keeps the run short). The crossings fall at
    three different phases of the probe cycle.
    Reference: DWD notices a crossing at its next probe, at most probeInterval x (1 + jitter) later, and scales
    right after its probe, so its bound is probeInterval x 1.2 + one probe (b): ratio = latency / that bound.
    Also the controller's RSS while probing 5,000 leases.

Writes bench/results/watchdog.json.

    python bench/watchdog.py --nodes 5000 --crossings 3
"""

from __future__ import annotations

import argparse
import gc
import http.server
import json
import os
import platform
import statistics
import sys
import threading
import time
import tracemalloc
from typing import Any, Callable, Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
import _env  # noqa: E402,F401  (first: the venv, the collection link, the etcd binaries; see bench/_env.py)

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.watchdog import leases as lease_engine  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.probe import probe_cluster  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.prober_config import parse_prober_config  # noqa: E402
from summary_file import write_summary  # noqa: E402

DWD_INTERVAL = 10.0
JITTER = 0.2
GRACE = 40.0
EXPIRY = 0.75 * GRACE
NS = 'steward-system'
LEAD_CYCLES = 2   # part (c): the stale leases are visible this many probe cycles (interval x 1.2) before T


def micro(ts: float) -> str:
    import datetime
    return datetime.datetime.fromtimestamp(ts, tz=datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%S.%fZ')


def node(i: int) -> Dict[str, Any]:
    """A Node as a kubelet registers it (no status.images: the probe never reads them)."""
    name = 'node-%05d' % i
    conditions = [{'type': t, 'status': 'True' if t == 'Ready' else 'False', 'reason': 'Kubelet' + t,
                   'lastHeartbeatTime': '2026-01-01T08:59:00Z', 'lastTransitionTime': '2025-12-01T00:00:00Z'}
                  for t in ('MemoryPressure', 'DiskPressure', 'PIDPressure', 'Ready')]
    return {'apiVersion': 'v1', 'kind': 'Node',
            'metadata': {'name': name, 'uid': 'uid-%05d' % i, 'resourceVersion': str(1000 + i),
                         'labels': {'kubernetes.io/hostname': name, 'kubernetes.io/os': 'linux',
                                    'topology.kubernetes.io/zone': 'zone-%d' % (i % 3),
                                    'node.kubernetes.io/instance-type': 'm5.2xlarge'},
                         'annotations': {'node.alpha.kubernetes.io/ttl': '0'}},
            'spec': {'podCIDR': '100.64.%d.0/24' % (i % 256), 'providerID': 'aws:///eu-central-1a/i-%017x' % i},
            'status': {'conditions': conditions,
                       'addresses': [{'type': 'InternalIP', 'address': '10.%d.%d.%d' % (i >> 16, (i >> 8) & 255, i & 255)},
                                     {'type': 'Hostname', 'address': name}],
                       'capacity': {'cpu': '8', 'memory': '32Gi', 'pods': '110'},
                       'allocatable': {'cpu': '7800m', 'memory': '30Gi', 'pods': '110'},
                       'nodeInfo': {'kubeletVersion': 'v1.31.2', 'osImage': 'Flatcar Container Linux 4081.2.0',
                                    'containerRuntimeVersion': 'containerd://1.7.23', 'architecture': 'amd64'}}}


def lease(i: int, renewed: float) -> Dict[str, Any]:
    name = 'node-%05d' % i
    return {'apiVersion': 'coordination.k8s.io/v1', 'kind': 'Lease',
            'metadata': {'name': name, 'namespace': 'kube-node-lease', 'uid': 'lease-%05d' % i,
                         'resourceVersion': str(9000 + i),
                         'ownerReferences': [{'apiVersion': 'v1', 'kind': 'Node', 'name': name, 'uid': 'uid-%05d' % i}]},
            'spec': {'holderIdentity': name, 'leaseDurationSeconds': 40, 'renewTime': micro(renewed)}}


class ProbedCluster:
    """A stand-in API server of the probed cluster: pre-encoded Node and Lease lists. `crossing` is the instant at
    which the first `fraction` of the leases expire (their renewTime is crossing - 30s); the others are renewed
    "now" on every list."""

    def __init__(self, count: int):
        self.count = count
        self.nodes = json.dumps({'kind': 'NodeList', 'apiVersion': 'v1', 'metadata': {},
                                 'items': [node(i) for i in range(count)]}).encode()
        self.crossing = float('inf')
        self.fraction = 0.6
        self._parts = self._lease_parts()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'

            def do_GET(self) -> None:  # noqa: N802
                path = self.path.split('?', 1)[0]
                if path == '/version':
                    body = b'{"major": "1", "minor": "31", "gitVersion": "v1.31.2"}'
                elif path == '/api/v1/nodes':
                    body = server.nodes
                elif path == '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases':
                    body = server.leases()
                else:
                    self.send_response(404)
                    self.send_header('Content-Length', '0')
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.httpd.daemon_threads = True
        self.url = 'http://127.0.0.1:%d' % self.httpd.server_port
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self._cache: Tuple[float, bytes] = (0.0, b'')

    def _lease_parts(self) -> List[Tuple[bytes, bytes]]:
        """Each lease's JSON before and after its renewTime text, encoded once (only renewTime changes)."""
        mark = '2000-01-01T00:00:00.000000Z'
        parts = []
        for i in range(self.count):
            head, tail = json.dumps(lease(i, 946684800.0)).split(mark)
            parts.append((head.encode(), tail.encode()))
        return parts

    def leases(self) -> bytes:
        """The LeaseList as of now: put together from the pre-encoded leases and two renewTime texts, a few ms.

        Encoding 5,000 leases afresh took 50-110 ms holding this process's GIL, and part (c)'s Kubernetes API
        emulator runs in this process too: the controller's target reads and scale calls could wait for it."""
        now = time.time()
        if now - self._cache[0] < 0.5:   # put together at most twice a second (server cost, not ours)
            return self._cache[1]
        expired = int(self.count * self.fraction) if self.crossing != float('inf') else 0
        stale, fresh = micro(self.crossing - EXPIRY).encode() if expired else b'', micro(now).encode()
        body = b''.join((b'{"kind": "LeaseList", "apiVersion": "coordination.k8s.io/v1", "metadata": {}, "items": [',
                         b', '.join(head + (stale if i < expired else fresh) + tail
                                    for i, (head, tail) in enumerate(self._parts)), b']}'))
        self._cache = (now, body)
        return body

    def cross_at(self, when: float) -> None:
        self.crossing = when
        self._cache = (0.0, b'')

    def heal(self) -> None:
        self.crossing = float('inf')
        self._cache = (0.0, b'')

    def stop(self) -> None:
        self.httpd.shutdown()


def client_for(url: str, timeout: float = 30.0) -> KubeClient:
    import kubernetes
    configuration = kubernetes.client.Configuration()
    configuration.host = url
    return KubeClient(configuration, timeout=timeout)


def rss_mib(pid: str = 'self') -> float:
    try:
        with open('/proc/%s/status' % pid) as f:
            for line in f:
                if line.startswith('VmRSS:'):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def timed(fn: Callable[[], Any], runs: int = 5) -> Tuple[float, Any]:
    times, result = [], None
    for _run in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def engine_part(count: int) -> Dict[str, Any]:
    now = time.time()
    gc.collect()
    tracemalloc.start()
    nodes = [node(i) for i in range(count)]
    items = [lease(i, now - (60 if i < count * 0.6 else 1)) for i in range(count)]
    objects_mib = tracemalloc.get_traced_memory()[0] / 2 ** 20
    tracemalloc.stop()

    def verdict():
        names, excluded = lease_engine.candidate_nodes(nodes)
        return lease_engine.evaluate_leases(items, names, now, EXPIRY, 0.6, excluded)
    # median of 15, the collector run before each; the thread CPU time beside the wall time: on a shared machine
    # the load moves the wall time of a 10 ms call several times over, the CPU time far less
    walls, cpus, result = [], [], None
    for _run in range(15):
        result = None
        gc.collect()
        start, start_cpu = time.perf_counter(), time.thread_time()
        result = verdict()
        cpus.append(time.thread_time() - start_cpu)
        walls.append(time.perf_counter() - start)
    seconds = statistics.median(walls)
    return {'nodes': count, 'verdict': result.verdict, 'expired': result.expired, 'seconds': seconds,
            'cpu_seconds': statistics.median(cpus), 'best_seconds': min(walls),
            'objects_mib': objects_mib, 'ratio_to_probe_interval': seconds / DWD_INTERVAL}


def http_part(cluster: ProbedCluster) -> Dict[str, Any]:
    config = parse_prober_config({'kcmNodeMonitorGraceDuration': '40s', 'dependentResourceInfos': [
        {'ref': {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': 'kcm'}, 'scaleUp': {'level': 0},
         'scaleDown': {'level': 0}}]})
    client = client_for(cluster.url)

    def baseline():
        client.request('GET', '/version')
        return [len(client.request('GET', p)['items']) for p in
                ('/api/v1/nodes', '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases')]
    baseline_seconds, _result = timed(baseline)
    probe_seconds, outcome = timed(lambda: probe_cluster(client, config))
    gc.collect()
    tracemalloc.start()
    probe_cluster(client, config)
    peak_mib = tracemalloc.get_traced_memory()[1] / 2 ** 20
    tracemalloc.stop()
    client.close()
    return {'probe_seconds': probe_seconds, 'baseline_seconds': baseline_seconds, 'verdict': outcome.result,
            'candidates': outcome.verdict.candidates, 'peak_mib': peak_mib, 'rss_mib': rss_mib(),
            'ratio_to_baseline': probe_seconds / baseline_seconds, 'ratio_to_probe_interval': probe_seconds / DWD_INTERVAL}


def latency_part(cluster: ProbedCluster, interval: float, crossings: int, probe_seconds: float) -> Dict[str, Any]:
    import base64
    import tempfile
    import yaml
    from lab.env.controller import ControllerProcess, wait_for
    from lab.kube.api import KubeServer
    from lab.env.node_leases import deployment
    from support.watchdog import kubeconfig_for

    server = KubeServer(status_delay=0.2).start()   # its status mover plays the deployment controller
    kube = client_for(server.url)
    kube.server = server
    work = tempfile.mkdtemp(prefix='bench-watchdog-')
    targets = (('kube-controller-manager', 3, 0), ('machine-controller-manager', 2, 0), ('cluster-autoscaler', 1, 1))
    for name, replicas, _level in targets:
        kube.create(api_path('apps/v1', 'deployments', NS), deployment(name, replicas))
    kube.create(api_path('v1', 'secrets', NS), {'apiVersion': 'v1', 'kind': 'Secret', 'metadata': {'name': 'probed'},
                                                'data': {'kubeconfig': base64.b64encode(yaml.safe_dump(
                                                    kubeconfig_for(cluster.url)).encode()).decode()}})
    config = {'kubeConfigSecretName': 'probed', 'probeInterval': '%gs' % interval, 'initialDelay': '1s',
              'backoffJitterFactor': JITTER, 'kcmNodeMonitorGraceDuration': '40s', 'probeTimeout': '30s',
              'dependentResourceInfos': [{'ref': {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': name},
                                          'optional': False, 'scaleUp': {'level': level}, 'scaleDown': {'level': level}}
                                         for name, _replicas, level in targets]}
    path = os.path.join(work, 'prober.yaml')
    with open(path, 'w') as f:
        yaml.safe_dump(config, f)
    controller = ControllerProcess(server, work, identity='bench', args=[
        '--controllers', 'prober', '--prober-config', path, '--no-leader-election']).start()
    status = api_path('v1', 'configmaps', NS, 'steward-watchdog-prober-status')

    def operation(direction: str):
        data = ((kube.get_or_none(status) or {}).get('data') or {})
        op = json.loads(data['lastOperation']) if data.get('lastOperation') else None
        return op if op and op['direction'] == direction else None

    rows: List[Dict[str, float]] = []
    rss: List[float] = []
    try:
        wait_for(lambda: ((kube.get_or_none(status) or {}).get('data') or {}).get('lastProbeResult') == 'healthy',
                 120, 0.5, 'a first healthy probe')
        for _crossing in range(crossings):
            lead = LEAD_CYCLES * interval * (1 + JITTER)
            crossing = time.time() + lead + (interval * (len(rows) % 3) / 3.0)   # crossings at different phases
            cluster.cross_at(crossing)
            op = wait_for(lambda: operation('down'), 120, 0.2, 'the scale-down')
            first = min(s['scaleCallAt'] for s in op['steps'] if 'scaleCallAt' in s)
            rss.append(rss_mib(str(controller.proc.pid)))
            rows.append({'latency': first - crossing, 'decision_to_scale': op['decisionToFirstScaleSeconds']})
            cluster.heal()
            wait_for(lambda: operation('up'), 120, 0.2, 'the scale-up')
    finally:
        controller.stop()
        kube.close()
        server.stop()
    bound = interval * (1 + JITTER) + probe_seconds
    latencies = [r['latency'] for r in rows]
    return {'interval': interval, 'jitter': JITTER, 'crossings': rows, 'latency_mean': statistics.mean(latencies),
            'latency_max': max(latencies), 'dwd_bound': bound, 'ratio_max_to_bound': max(latencies) / bound,
            'controller_rss_mib': max(rss) if rss else 0.0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--nodes', type=int, default=5000)
    parser.add_argument('--interval', type=float, default=2.0, help='probeInterval of part (c), seconds (default 2)')
    parser.add_argument('--crossings', type=int, default=3, help='threshold crossings in part (c); 0 skips it')
    parser.add_argument('--output', default=os.path.join(HERE, 'results', 'watchdog.json'))
    args = _env.parse_args(parser, 'watchdog', {'nodes': 50, 'interval': 1.0, 'crossings': 1})
    _env.announce(args)
    import logging
    logging.basicConfig(level=logging.ERROR)

    print('dependency watchdog prober, python %s on %s, %d node leases'
          % (platform.python_version(), platform.machine(), args.nodes))
    engine = engine_part(args.nodes)
    print('(a) verdict alone: %.1f ms median, %.1f ms best, %.1f ms of CPU (%s, %d expired); objects %.0f MiB; '
          'ratio verdict / probeInterval 10s: %.4f; goal <= 10 ms: %s'
          % (engine['seconds'] * 1000, engine['best_seconds'] * 1000, engine['cpu_seconds'] * 1000, engine['verdict'],
             engine['expired'], engine['objects_mib'], engine['ratio_to_probe_interval'],
             'met' if engine['seconds'] <= 0.010 else 'NOT met'))
    cluster = ProbedCluster(args.nodes)
    try:
        probe = http_part(cluster)
        print('(b) one probe over HTTP: %.3f s (baseline: the same requests, decoded: %.3f s; ratio %.2f); '
              'peak %.0f MiB traced, RSS %.0f MiB; ratio probe / probeInterval 10s: %.3f'
              % (probe['probe_seconds'], probe['baseline_seconds'], probe['ratio_to_baseline'], probe['peak_mib'],
                 probe['rss_mib'], probe['ratio_to_probe_interval']))
        summary: Dict[str, Any] = {'benchmark': 'watchdog', 'python': platform.python_version(), 'engine': engine,
                                   'probe': probe}
        if args.crossings > 0:
            latency = latency_part(cluster, args.interval, args.crossings, probe['probe_seconds'])
            summary['latency'] = latency
            for row in latency['crossings']:
                print('(c) threshold crossing -> first scale call: %.2f s (decision -> scale call %.3f s)'
                      % (row['latency'], row['decision_to_scale']))
            print('(c) mean %.2f s, max %.2f s; DWD bound probeInterval x 1.2 + one probe = %.2f s; ratio max / bound %.2f; '
                  'controller RSS %.0f MiB' % (latency['latency_mean'], latency['latency_max'], latency['dwd_bound'],
                                               latency['ratio_max_to_bound'], latency['controller_rss_mib']))
    finally:
        cluster.stop()
    write_summary(args.output, summary)
    return 0


if __name__ == '__main__':
    sys.exit(main())
