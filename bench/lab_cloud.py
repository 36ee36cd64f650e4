#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: the lab's cloud at the machines benchmark's scale (500 instances by default).

Not a test. The parts run as `make lab` runs them: the Kubernetes API emulator and EC2 with fidelity each in
its own process (lab/kube_api.py serve, lab/ec2_fidelity.py serve), the node emulator (lab/nodes.py) in this
process with the lab's default timings (renew every 10 s, grace 40 s).

(a) EC2 fidelity layer overhead: DescribeInstances (one paginated listing) of N instances through the layer,
    next to a plain moto server (`python -m moto.server`) holding the same N instances. Median of 5 each.
    Ratio layer / moto (goal ~1: the layer adds a parse of the form body, nothing per instance).
(b) Registration: N instances launched (RunInstances in batches of 100) until N Nodes are Ready.
(c) Steady state: node-emulator passes with N Nodes and Leases; a renewal round (every Lease renewed once)
    must fit into the kubelet's renew interval. Reference: 10 s (kubelet's nodeLeaseRenewInterval); printed as
    ratio = round time / 10 s (goal <= 1.0). Also the emulator's CPU per round and every process's RSS.
(d) Partition all: seconds from the partition until every Node is Ready=Unknown, next to the node lifecycle
    controller's bound (grace + node-monitor-period 5 s). Run with a short grace (--grace, default 8 s).

Writes bench/results/lab_cloud.json.

    python bench/lab_cloud.py --instances 500
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
import _env  # noqa: E402,F401  (first: the venv, the collection link, the etcd binaries; see bench/_env.py)

import requests  # noqa: E402

from lab import parts  # noqa: E402
from lab.cloud.nodes import NodeEmulator  # noqa: E402
from summary_file import write_summary  # noqa: E402
from lab.env.ec2_server import ACCESS_KEY_ID, DEFAULT_REGION, SECRET_ACCESS_KEY  # noqa: E402
from lab.env.ports import free_port  # noqa: E402

IMAGE = 'ami-0f1a5f5ada0e7da53'
KUBELET_RENEW = 10.0
NODE_MONITOR_PERIOD = 5.0


def rss_mb(pid: int) -> float:
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) / 1024.0
    return 0.0


def ec2_client(url: str):
    import boto3
    return boto3.client('ec2', endpoint_url=url, region_name=DEFAULT_REGION, aws_access_key_id=ACCESS_KEY_ID,
                        aws_secret_access_key=SECRET_ACCESS_KEY)


def launch(client, count: int) -> None:
    while count > 0:
        batch = min(100, count)
        client.run_instances(ImageId=IMAGE, MinCount=batch, MaxCount=batch, InstanceType='m5.large')
        count -= batch


def describe_seconds(client, runs: int = 5) -> float:
    times = []
    for _run in range(runs):
        started = time.perf_counter()
        pages = client.get_paginator('describe_instances').paginate()
        sum(len(r['Instances']) for page in pages for r in page['Reservations'])
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def plain_moto(count: int) -> Dict[str, Any]:
    """The reference: moto's own server with the same instances, no layer."""
    port = free_port()
    env = dict(os.environ, MOTO_AMIS_PATH=os.path.join(REPO, 'lab', 'ec2-amis.json'))
    proc = subprocess.Popen([sys.executable, '-m', 'moto.server', '-H', '127.0.0.1', '-p', str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = 'http://127.0.0.1:%d' % port
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                requests.get(url + '/moto-api/', timeout=2)
                break
            except requests.RequestException:
                time.sleep(0.2)
        client = ec2_client(url)
        launch(client, count)
        describe_seconds(client, 1)  # warm
        return {'describe_s': describe_seconds(client)}
    finally:
        proc.terminate()
        proc.wait(30)


def wait_until(predicate, timeout: float, interval: float = 0.5) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if predicate():
            return time.monotonic() - started
        time.sleep(interval)
    raise RuntimeError('not reached within %ss' % timeout)


def node_states(kube_url: str) -> List[str]:
    items = requests.get(kube_url + '/api/v1/nodes', timeout=60).json()['items']
    return [next((c['status'] for c in n['status'].get('conditions', []) if c['type'] == 'Ready'), '') for n in items]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', 1)[0])
    parser.add_argument('--instances', type=int, default=500)
    parser.add_argument('--steady', type=float, default=30.0, help='seconds of steady state to measure')
    parser.add_argument('--grace', type=float, default=8.0, help='grace for part (d)')
    parser.add_argument('--output', default=os.path.join(HERE, 'results', 'lab_cloud.json'))
    args = _env.parse_args(parser, 'lab_cloud', {'instances': 3, 'steady': 2.0, 'grace': 2.0})
    _env.announce(args)
    n = args.instances
    state = tempfile.mkdtemp(prefix='steward-bench-lab-')
    summary: Dict[str, Any] = {'instances': n, 'machine': platform.machine(), 'cpus': os.cpu_count()}
    try:
        started = time.monotonic()
        up = parts.up(state, parts.CloudSettings(), ['kube', 'ec2'])
        summary['start_s'] = round(time.monotonic() - started, 1)
        kube_url, ec2_url = up['kube']['url'], up['ec2']['url']
        client = ec2_client(ec2_url)
        print('lab parts up in %.1f s (API %s, EC2 %s)' % (summary['start_s'], kube_url, ec2_url), flush=True)

        # (b) registration
        emulator = NodeEmulator(kube_url, ec2_url, renew_interval=KUBELET_RENEW, grace=40, delete_after=60,
                                state_dir=state).start()
        started = time.monotonic()
        launch(client, n)
        launched = time.monotonic() - started
        ready = wait_until(lambda: node_states(kube_url).count('True') == n, 600) + launched
        summary['registration'] = {'launch_s': round(launched, 1), 'all_ready_s': round(ready, 1)}
        print('(b) %d instances launched in %.1f s, all %d Nodes Ready after %.1f s' % (n, launched, n, ready),
              flush=True)

        # (a) describe through the layer vs plain moto
        layer = describe_seconds(client)
        reference = plain_moto(n)['describe_s']
        summary['describe'] = {'layer_s': round(layer, 3), 'moto_s': round(reference, 3),
                               'ratio': round(layer / reference, 2)}
        print('(a) DescribeInstances of %d: layer %.3f s, plain moto %.3f s, ratio %.2f' % (
            n, layer, reference, layer / reference), flush=True)

        # (c) steady state: renewal rounds
        renewals, passes = emulator.stats['renewals'], emulator.stats['passes']
        cpu = time.process_time()
        time.sleep(args.steady)
        renewed = emulator.stats['renewals'] - renewals
        rounds = renewed / float(n)
        cpu_per_round = (time.process_time() - cpu) / rounds if rounds else float('nan')
        round_s = args.steady / rounds if rounds else float('inf')
        rss = {'kube_api_mb': round(rss_mb(up['kube']['pid']), 1), 'ec2_mb': round(rss_mb(up['ec2']['pid']), 1),
               'node_emulator_process_mb': round(rss_mb(os.getpid()), 1)}
        summary['steady'] = {'renewals': renewed, 'rounds': round(rounds, 2), 'round_s': round(round_s, 2),
                             'reference_s': KUBELET_RENEW, 'ratio': round(round_s / KUBELET_RENEW, 2),
                             'passes': emulator.stats['passes'] - passes,
                             'last_pass_s': round(emulator.last_pass_seconds, 3),
                             'emulator_cpu_per_round_s': round(cpu_per_round, 2), 'rss': rss}
        print('(c) steady: %d renewals in %.0f s = one round per %.2f s (kubelet: %.0f s), ratio %.2f; last pass '
              '%.3f s; CPU per round %.2f s; RSS API %.0f MB, EC2 %.0f MB, node emulator process %.0f MB' % (
                  renewed, args.steady, round_s, KUBELET_RENEW, round_s / KUBELET_RENEW, emulator.last_pass_seconds,
                  cpu_per_round, rss['kube_api_mb'], rss['ec2_mb'], rss['node_emulator_process_mb']), flush=True)
        emulator.stop()

        # (d) partition all with a short grace
        fast = NodeEmulator(kube_url, ec2_url, renew_interval=2.0, grace=args.grace, delete_after=60,
                            state_dir=state).start()
        time.sleep(3)
        fast.partition()
        unknown = wait_until(lambda: node_states(kube_url).count('Unknown') == n, 600, 0.25)
        bound = args.grace + NODE_MONITOR_PERIOD
        summary['partition'] = {'all_unknown_s': round(unknown, 1), 'grace_s': args.grace,
                                'reference_s': bound, 'ratio': round(unknown / bound, 2)}
        print('(d) partition all: every Node Unknown after %.1f s (grace %.0f s + monitor period %.0f s = %.0f s), '
              'ratio %.2f' % (unknown, args.grace, NODE_MONITOR_PERIOD, bound, unknown / bound), flush=True)
        fast.stop()
    finally:
        parts.down(state)
        shutil.rmtree(state, ignore_errors=True)   # the parts' logs and pid files (a temp dir of this run)
    write_summary(args.output, summary)
    return 0


if __name__ == '__main__':
    sys.exit(main())
