#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: machine lifecycle (seed 004, machine-controller-manager) at realistic scale.

Not a test. Three parts:

(a) the real controller (`steward-controller --controllers machines`) against the Kubernetes API emulator and
    EC2 with fidelity (lab/ec2_fidelity.py over moto, HTTP), with bench kubelets registering a Ready Node per
    running instance: one MachineDeployment scaled 0 -> --machines (default 500) until every machine is
    Running, then back to 0 until no instance runs. Wall time of each leg, the controller's EC2 calls per
    machine by action (the fidelity layer's own counts; the kubelets' calls are lab traffic, not counted),
    and the controller's peak RSS (VmHWM).

(b) the status check of every machine, ours against MCM-aws's call pattern, on the same EC2 with the same
    running instances: MCM's AWS driver answers GetMachineStatus with one DescribeInstances per machine
    (filtered by the machine's Name tag and the cluster tag), so one health/status round costs N calls; the
    controller here lists each class once per wave (one filtered, paginated DescribeInstances, 1,000 per page).
    Printed: calls and wall time per round, both ways, and the ratio.

(c) the engine alone (`reconcile.plan_pass`, what the controller runs per pass) over steady fleets of 1,000,
    2,000 and --engine-machines (default 5,000) Running machines, built through the engine itself in memory
    (tests/support/machines_sim.py); time per pass and per machine, and the growth factor against the
    machine count (1.0 = linear).

Writes bench/results/machines.json.

    python bench/machines.py --machines 500 --engine-machines 5000
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List

import kubernetes

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, 'tests'))
sys.path.insert(0, os.path.join(REPO, 'controller'))

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.machines.reconcile import plan_pass  # noqa: E402

from summary_file import write_summary  # noqa: E402
from support.controller import install_crds, wait_for  # noqa: E402
from support.ec2 import EC2Server  # noqa: E402
from support.kube import KubeServer  # noqa: E402
from support.machines_aws import ec2_client  # noqa: E402
from support.machines_cluster import REGION, Kubelets, MachinesBench, stamp  # noqa: E402
from support.machines_sim import MachinesSim  # noqa: E402

RESULTS = os.path.join(HERE, 'results', 'machines.json')


def rss_mib(pid: int, field: str = 'VmHWM') -> float:
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1]) / 1024.0
    return 0.0


class BulkKubelets(Kubelets):
    """The bench's kubelets: one Node list per sync (not one GET per instance), a Ready Node per running instance."""

    def sync(self) -> None:
        from support.machines_aws import instances
        have = {n['metadata']['name'] for n in self.client.list(api_path('v1', 'nodes'))}
        for inst in instances(self.ec2_url, REGION, self.cluster, ('running',)):
            name = inst['PrivateDnsName']
            if name in have:
                continue
            now = stamp(time.time())
            self.client.create(api_path('v1', 'nodes'), {
                'apiVersion': 'v1', 'kind': 'Node', 'metadata': {'name': name, 'labels': {'kubernetes.io/hostname': name}},
                'spec': {'providerID': 'aws:///%s/%s' % (REGION, inst['InstanceId'])},
                'status': {'conditions': [{'type': 'Ready', 'status': 'True', 'reason': 'KubeletReady',
                                           'lastTransitionTime': now, 'lastHeartbeatTime': now}]}})


class PeakRss:
    """Samples a process's RSS every 0.5 s (VmHWM is the kernel's own peak; this keeps the timeline's maximum too)."""

    def __init__(self, pid: int):
        self.pid = pid
        self.peak = 0.0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                self.peak = max(self.peak, rss_mib(self.pid, 'VmRSS'))
            except OSError:
                return
            self.stopping.wait(0.5)

    def stop(self) -> float:
        self.stopping.set()
        self.thread.join(5)
        return self.peak


def ec2_calls(ec2: EC2Server) -> Dict[str, int]:
    return {action: ec2.calls(action) for action in
            ('RunInstances', 'DescribeInstances', 'TerminateInstances', 'DescribeImages', 'CreateTags',
             'ModifyInstanceAttribute')}


def status_round_mcm(ec2_url: str, cluster: str, names: List[str]) -> int:
    """MCM-aws's GetMachineStatus for every machine: DescribeInstances filtered by tag:Name and the cluster tag."""
    client = ec2_client(ec2_url, REGION)
    for name in names:
        client.describe_instances(Filters=[{'Name': 'tag:Name', 'Values': [name]},
                                           {'Name': 'tag-key', 'Values': ['kubernetes.io/cluster/' + cluster]},
                                           {'Name': 'instance-state-name', 'Values': ['pending', 'running', 'stopping',
                                                                                      'stopped']}])
    return len(names)


def status_round_ours(ec2_url: str, cluster: str) -> int:
    """The controller's wave: one filtered, paginated DescribeInstances over the class's tag keys."""
    client = ec2_client(ec2_url, REGION)
    pages = 0
    for _page in client.get_paginator('describe_instances').paginate(
            Filters=[{'Name': 'tag-key', 'Values': ['kubernetes.io/cluster/' + cluster]},
                     {'Name': 'tag-key', 'Values': ['kubernetes.io/role/node']}], PaginationConfig={'PageSize': 1000}):
        pages += 1
    return pages


def wide_network(ec2_url: str, net: Dict[str, str]) -> Dict[str, str]:
    """A /20 subnet in a VPC of its own: moto hands out a subnet's addresses without reuse checks, and 500
    instances in the test network's /24 would get duplicate private DNS names (which the controller rightly
    treats as stale nodes)."""
    ec2 = ec2_client(ec2_url, REGION, lab=True)
    vpc = ec2.create_vpc(CidrBlock='10.64.0.0/16')['Vpc']['VpcId']
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock='10.64.0.0/20')['Subnet']['SubnetId']
    group = ec2.create_security_group(GroupName='bench-nodes', Description='nodes', VpcId=vpc)['GroupId']
    return dict(net, vpc=vpc, subnet=subnet, group=group)


def scale(bench: MachinesBench, replicas: int) -> None:
    bench.kube.merge_patch(bench.path('machinedeployments', 'pool'), {'spec': {'replicas': replicas}})


def part_controller(machines: int, timeout: float, mcm_sample: int) -> Dict[str, Any]:
    kube_server = KubeServer().start()
    ec2 = EC2Server().start()
    work = tempfile.mkdtemp(prefix='steward-bench-machines-')
    bench = None
    try:
        configuration = kubernetes.client.Configuration()
        configuration.host = kube_server.url
        client = KubeClient(configuration)
        client.server = kube_server
        install_crds(client)
        bench = MachinesBench(client, ec2.url, work, kubelets=False)
        bench.net = wide_network(ec2.url, bench.net)
        bench.kubelets = BulkKubelets(client, ec2.url, bench.cluster, interval=1.0).start()
        bench.create_class()
        bench.create_deployment(replicas=0)
        proc = bench.controller('--concurrent-syncs', '10', '--machine-cloud-sync-period', '10s', '--aws-api-rate', '50', '--aws-api-burst', '100',
                                '--machine-health-timeout', '10m', '--machine-creation-timeout', '20m')
        wait_for(proc.is_leader, 60, 0.5, what='controller leader')
        sampler = PeakRss(proc.proc.pid)
        ec2.reset_counts()
        start = time.monotonic()
        scale(bench, machines)
        wait_for(lambda: bench.phases() == ['Running'] * machines, timeout, 2.0, what='%d Running machines' % machines)
        up = time.monotonic() - start
        calls_up = ec2_calls(ec2)
        names = [m['metadata']['name'] for m in bench.machines()]

        rounds = 3
        # MCM's round is one call per machine: N calls by construction; its time is measured on a sample of the
        # machines (the moto server answers a filtered DescribeInstances in ~0.1-1 s on a loaded machine, so
        # timing all N would take longer than the rest of the benchmark) and scaled to N.
        sample = names[:min(len(names), mcm_sample)]
        t0 = time.monotonic()
        status_round_mcm(ec2.url, bench.cluster, sample)
        mcm_calls = len(names)
        mcm_time = (time.monotonic() - t0) / len(sample) * len(names)
        t0 = time.monotonic()
        ours_calls = sum(status_round_ours(ec2.url, bench.cluster) for _round in range(rounds)) / rounds
        ours_time = (time.monotonic() - t0) / rounds

        ec2.reset_counts()
        start = time.monotonic()
        scale(bench, 0)
        wait_for(lambda: not bench.machines() and not bench.running_instances(), timeout, 2.0,
                 what='no machine and no instance')
        down = time.monotonic() - start
        calls_down = ec2_calls(ec2)
        peak_sampled = sampler.stop()
        hwm = rss_mib(proc.proc.pid)
        total = {k: calls_up[k] + calls_down[k] for k in calls_up}
        return {
            'machines': machines, 'controller_log': proc.log_path, 'scale_up_s': round(up, 1), 'scale_down_s': round(down, 1),
            'ec2_calls_up': calls_up, 'ec2_calls_down': calls_down,
            'ec2_calls_per_machine': round(sum(total.values()) / machines, 2),
            'describe_calls_per_machine': round(total['DescribeInstances'] / machines, 3),
            'controller_peak_rss_mib': round(max(hwm, peak_sampled), 1),
            'status_round': {'instances': len(names), 'mcm_aws_calls': mcm_calls, 'mcm_aws_timed_on': len(sample), 'ours_calls': ours_calls,
                             'calls_ratio_mcm_over_ours': round(mcm_calls / max(ours_calls, 1), 1),
                             'mcm_aws_s': round(mcm_time, 2), 'ours_s': round(ours_time, 3),
                             'time_ratio_mcm_over_ours': round(mcm_time / max(ours_time, 1e-6), 1)},
        }
    finally:
        if bench is not None:
            bench.stop()
        ec2.stop()
        kube_server.stop()


def steady_fleet(machines: int) -> MachinesSim:
    sim = MachinesSim()
    sim.add_class()
    sim.add_deployment(replicas=machines)
    for _step in range(200):
        if sim.phases() == ['Running'] * machines:
            return sim
        sim.step()
    raise RuntimeError('the in-memory fleet of %d did not settle: %s' % (machines, sorted(set(sim.phases()))))


def part_engine(sizes: List[int], repeats: int = 5) -> Dict[str, Any]:
    rows = []
    for n in sizes:
        sim = steady_fleet(n)
        world = sim.world()
        times = []
        for _repeat in range(repeats):
            gc.collect()
            t0 = time.perf_counter()
            plan = plan_pass(world, sim.memory, sim.settings, sim.now)
            times.append(time.perf_counter() - t0)
        actions = sum(1 for mp in plan.machines if mp.call or mp.action)
        median = statistics.median(times)
        rows.append({'machines': n, 'pass_s': round(median, 3), 'per_machine_us': round(median / n * 1e6, 1),
                     'machine_actions_in_steady_pass': actions})
        del sim, world
    base = rows[0]
    for row in rows:
        row['growth_vs_linear'] = round((row['pass_s'] / base['pass_s']) / (row['machines'] / base['machines']), 2)
    return {'rows': rows, 'rss_mib_after': round(rss_mib(os.getpid(), 'VmHWM'), 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('--machines', type=int, default=500, help='machines the controller scales to and back (a, b)')
    parser.add_argument('--engine-machines', type=int, default=5000, help='largest in-memory fleet for the engine (c)')
    parser.add_argument('--timeout', type=float, default=1800.0, help='deadline for each scaling leg, seconds')
    parser.add_argument('--mcm-sample', type=int, default=50, help='machines MCM-aws\'s per-machine calls are timed on (b)')
    parser.add_argument('--skip-controller', action='store_true', help='only the engine part (c)')
    parser.add_argument('--skip-engine', action='store_true', help='only the controller parts (a, b)')
    parser.add_argument('--results', default=RESULTS, help='where the summary goes (JSON)')
    args = parser.parse_args()
    summary: Dict[str, Any] = {'benchmark': 'machines', 'python': platform.python_version(), 'cpus': os.cpu_count()}

    if not args.skip_controller:
        ctl = part_controller(args.machines, args.timeout, args.mcm_sample)
        summary['controller'] = ctl
        rnd = ctl['status_round']
        print('controller, 0 -> %d -> 0 machines: up %.1f s, down %.1f s; EC2 calls per machine %.2f '
              '(DescribeInstances %.3f); controller peak RSS %.0f MiB'
              % (ctl['machines'], ctl['scale_up_s'], ctl['scale_down_s'], ctl['ec2_calls_per_machine'],
                 ctl['describe_calls_per_machine'], ctl['controller_peak_rss_mib']))
        print('  EC2 calls up %s; down %s' % (ctl['ec2_calls_up'], ctl['ec2_calls_down']))
        print('status round over %d instances: MCM-aws pattern %d calls / %.2f s (timed on %d), ours %d calls / %.3f s '
              '-> ratio %.0fx calls, %.0fx time'
              % (rnd['instances'], rnd['mcm_aws_calls'], rnd['mcm_aws_s'], rnd['mcm_aws_timed_on'], rnd['ours_calls'],
                 rnd['ours_s'],
                 rnd['calls_ratio_mcm_over_ours'], rnd['time_ratio_mcm_over_ours']))

    if not args.skip_engine:
        sizes = sorted({s for s in (1000, 2000, args.engine_machines) if s <= args.engine_machines})
        engine = part_engine(sizes)
        summary['engine'] = engine
        for row in engine['rows']:
            print('engine pass over %5d Running machines: %.3f s (%.0f us per machine, growth vs linear %.2f)'
                  % (row['machines'], row['pass_s'], row['per_machine_us'], row['growth_vs_linear']))
        print('bench process peak RSS %.0f MiB' % engine['rss_mib_after'])
    write_summary(args.results, summary)
    return 0


if __name__ == '__main__':
    sys.exit(main())
