#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: machine lifecycle (seed 004, machine-controller-manager) at realistic scale.

Not a test. Three parts:

(a) the real controller (`steward-controller --controllers machines`, its default flags but for the EC2 budget)
    against the lab as `make lab` runs it (lab/parts.py): the Kubernetes API emulator, EC2 with fidelity over
    moto and the node emulator (kubelets: a Node and a Lease per running instance, renewed every 10 s), each its
    own process. EC2 answers `RequestLimitExceeded` above 20 requests per second (burst 20); the controller's
    shared bucket is set to 16/s. One MachineDeployment scaled 0 -> --machines (default 500) until every
    machine is Running, then back to 0 until no instance runs. Per leg: wall time next to what the controller's
    bucket alone allows (one EC2 call per machine at 16/s after a burst of 16), the controller's EC2 calls per
    machine by action (the fidelity layer's counts; the lab's own calls are not counted), requests EC2 throttled,
    and CPU seconds of the controller and of each lab process (where the wall time goes). Then machines.md
    §(f)5's two figures: throttle errors surfaced as failures (driver calls failed, any code) and
    DescribeInstances calls against machines/50; the controller's peak RSS (VmHWM) and its pass (plan) times.

(b) the status check of every machine, ours against MCM-aws's call pattern, on the same EC2 with the same
    running instances: MCM's AWS driver answers GetMachineStatus with one DescribeInstances per machine
    (filtered by the machine's Name tag and the cluster tag), so one health/status round costs N calls; the
    controller here lists each class once per wave (one filtered, paginated DescribeInstances, 1,000 per page).
    Printed: calls and wall time per round, both ways (MCM's timed on --mcm-sample machines, interleaved with
    our rounds, and scaled to N), and the ratio.

(c) the engine alone (`reconcile.plan_pass`, what the controller runs per pass) over steady fleets of 500, 1,000,
    2,000 and --engine-machines (default 5,000) Running machines, built through the engine itself in memory
    (tests/support/machines_sim.py); time per pass (best of 7) and per machine, and the growth factor against the
    machine count (1.0 = linear), for the time and for the work (Python function calls per machine, which the
    machine's caches and load do not move).

Every figure is printed with the load average it was taken at. Writes bench/results/machines.json.

    python bench/machines.py --machines 500 --engine-machines 5000
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List

import _env  # noqa: E402,F401  (first: the venv, the collection link, the etcd binaries; see bench/_env.py)

import kubernetes  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.machines.reconcile import plan_pass  # noqa: E402

from lab import parts  # noqa: E402
from summary_file import write_summary  # noqa: E402
from lab.env.controller import ControllerProcess, wait_for  # noqa: E402
from lab.env.ec2_server import EC2Server  # noqa: E402
from lab.env.machines_aws import ec2_client  # noqa: E402
from lab.env.machines_bench import REGION, MachinesBench  # noqa: E402
from support.machines_sim import MachinesSim  # noqa: E402

RESULTS = os.path.join(HERE, 'results', 'machines.json')
CONTROLLER_LOG = os.path.join(HERE, 'results', 'machines-controller.log')   # kept; the lab's state dir is removed
EC2_LIMIT = 20           # machines.md §(f)5: an EC2 limited to 20 requests per second
CONTROLLER_RATE = 16     # the controller's shared bucket, under EC2's limit
ACTIONS = ('RunInstances', 'DescribeInstances', 'TerminateInstances', 'DescribeImages', 'CreateTags',
           'ModifyInstanceAttribute')


def load() -> str:
    return '%.1f/%.1f/%.1f' % os.getloadavg()


def rss_mib(pid: int, field: str = 'VmHWM') -> float:
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1]) / 1024.0
    return 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU of one process so far (/proc/<pid>/stat fields 14 and 15, in clock ticks)."""
    with open('/proc/%d/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


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


class LabApi:
    """What ControllerProcess needs of an API server: the lab's kubeconfig (lab/parts.py wrote it)."""

    def __init__(self, url: str, kubeconfig: str):
        self.url = url
        self.kubeconfig = kubeconfig

    def write_kubeconfig(self, path: str) -> str:
        shutil.copyfile(self.kubeconfig, path)
        return path


class Leg:
    """One scaling leg: wall time, EC2 calls and throttles, CPU seconds of every process, load averages."""

    def __init__(self, ec2: EC2Server, pids: Dict[str, int]):
        self.ec2, self.pids = ec2, pids
        ec2.reset_counts()
        self.cpu = {name: cpu_seconds(pid) for name, pid in pids.items()}
        self.load_before = load()
        self.started = time.monotonic()

    def done(self, machines: int) -> Dict[str, Any]:
        """The leg's figures; `floor_s` is what the controller's bucket alone allows (one EC2 call per machine)."""
        wall = time.monotonic() - self.started
        floor = max(0.0, machines - CONTROLLER_RATE) / CONTROLLER_RATE
        settings = self.ec2.settings()
        calls = {action: settings['calls'].get(action, 0) for action in ACTIONS}
        cpu = {name: round(cpu_seconds(pid) - self.cpu[name], 1) for name, pid in self.pids.items()}
        return {'wall_s': round(wall, 1), 'floor_s': round(floor, 1), 'wall_over_floor': round(wall / floor, 2) if floor else None,
                'ec2_calls': calls, 'ec2_throttled': sum(settings['throttled'].values()),
                'ec2_calls_per_machine': {k: round(v / machines, 3) for k, v in calls.items() if v},
                'cpu_s': cpu, 'controller_cpu_ms_per_machine': round(cpu['controller'] / machines * 1000, 1),
                'load': [self.load_before, load()]}


def status_round_mcm(client, cluster: str, names: List[str]) -> int:
    """MCM-aws's GetMachineStatus for every machine: DescribeInstances filtered by tag:Name and the cluster tag."""
    for name in names:
        client.describe_instances(Filters=[{'Name': 'tag:Name', 'Values': [name]},
                                           {'Name': 'tag-key', 'Values': ['kubernetes.io/cluster/' + cluster]},
                                           {'Name': 'instance-state-name', 'Values': ['pending', 'running', 'stopping',
                                                                                      'stopped']}])
    return len(names)


def status_round_ours(client, cluster: str) -> int:
    """The controller's wave: one filtered, paginated DescribeInstances over the class's tag keys."""
    pages = 0
    for _page in client.get_paginator('describe_instances').paginate(
            Filters=[{'Name': 'tag-key', 'Values': ['kubernetes.io/cluster/' + cluster]},
                     {'Name': 'tag-key', 'Values': ['kubernetes.io/role/node']}], PaginationConfig={'PageSize': 1000}):
        pages += 1
    return pages


def status_rounds(ec2_url: str, cluster: str, names: List[str], sample: int, rounds: int = 3) -> Dict[str, Any]:
    """Both patterns, interleaved (the load moves; each gets its share): MCM's on `sample` machines in `rounds`
    slices, scaled to N; ours `rounds` times. The lab's client: these calls are not the controller's."""
    client = ec2_client(ec2_url, REGION, lab=True)
    picked = names[:min(len(names), sample)]
    mcm_s = ours_s = 0.0
    ours_calls = 0
    for i in range(rounds):
        t0 = time.monotonic()
        status_round_mcm(client, cluster, picked[i::rounds])
        mcm_s += time.monotonic() - t0
        t0 = time.monotonic()
        ours_calls += status_round_ours(client, cluster)
        ours_s += time.monotonic() - t0
    mcm_time = mcm_s / len(picked) * len(names)
    ours_time = ours_s / rounds
    calls = ours_calls / rounds
    return {'instances': len(names), 'mcm_aws_calls': len(names), 'mcm_aws_timed_on': len(picked), 'ours_calls': calls,
            'calls_ratio_mcm_over_ours': round(len(names) / max(calls, 1), 1), 'mcm_aws_s': round(mcm_time, 2),
            'ours_s': round(ours_time, 3), 'time_ratio_mcm_over_ours': round(mcm_time / max(ours_time, 1e-6), 1),
            'load': load()}


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


def pass_times(proc: ControllerProcess) -> Dict[str, Any]:
    count = proc.metric_total('steward_machines_pass_seconds_count')
    total = proc.metric_total('steward_machines_pass_seconds_sum')
    return {'passes': int(count), 'mean_s': round(total / count, 4) if count else None}


def part_controller(machines: int, timeout: float, mcm_sample: int) -> Dict[str, Any]:
    state = tempfile.mkdtemp(prefix='steward-bench-machines-')
    work = os.path.join(state, 'work')
    bench = None
    try:
        lab = parts.up(state, parts.CloudSettings(), ['kube', 'ec2', 'nodes'])
        configuration = kubernetes.client.Configuration()
        configuration.host = lab['kube']['url']
        client = KubeClient(configuration)
        client.server = LabApi(lab['kube']['url'], parts.files(state)['kubeconfig'])
        ec2 = EC2Server.at(lab['ec2']['url'])
        bench = MachinesBench(client, ec2.url, work, kubelets=False)
        bench.net = wide_network(ec2.url, bench.net)
        bench.create_class()
        bench.create_deployment(replicas=0)
        ec2.set_rate_limit(EC2_LIMIT, burst=EC2_LIMIT)
        proc = ControllerProcess(client.server, work, args=[
            '--controllers', 'machines', '--aws-api-rate', str(CONTROLLER_RATE), '--aws-api-burst', str(CONTROLLER_RATE)],
            extra_env={'AWS_ENDPOINT_URL': ec2.url, 'AWS_DEFAULT_REGION': REGION}).start()
        bench.controllers.append(proc)
        wait_for(proc.is_leader, 60, 0.5, what='controller leader')
        sampler = PeakRss(proc.proc.pid)
        pids = {'controller': proc.proc.pid, 'kube_api': lab['kube']['pid'], 'ec2_moto': lab['ec2']['pid'],
                'node_emulator': lab['nodes']['pid']}

        leg = Leg(ec2, pids)
        scale(bench, machines)
        wait_for(lambda: bench.phases() == ['Running'] * machines, timeout, 2.0, what='%d Running machines' % machines)
        up = leg.done(machines)
        passes_up = pass_times(proc)
        names = [m['metadata']['name'] for m in bench.machines()]
        rounds = status_rounds(ec2.url, bench.cluster, names, mcm_sample)

        leg = Leg(ec2, pids)
        scale(bench, 0)
        wait_for(lambda: not bench.machines() and not bench.running_instances(), timeout, 2.0,
                 what='no machine and no instance')
        down = leg.done(machines)
        failed = proc.metric_total('mcm_cloud_api_driver_requests_failed_total')
        throttle_failed = proc.metric_total('mcm_cloud_api_driver_requests_failed_total', {'error_code': 'Throttled'})
        describes = up['ec2_calls']['DescribeInstances'] + down['ec2_calls']['DescribeInstances']
        calls = sum(up['ec2_calls'].values()) + sum(down['ec2_calls'].values())
        return {
            'machines': machines, 'ec2_limit_per_s': EC2_LIMIT, 'controller_rate_per_s': CONTROLLER_RATE,
            'controller_log': CONTROLLER_LOG, 'up': up, 'down': down, 'status_round': rounds,
            'ec2_calls_per_machine': round(calls / machines, 2),
            'budget': {'ec2_throttled': up['ec2_throttled'] + down['ec2_throttled'],
                       'throttle_failures_surfaced': int(throttle_failed), 'driver_calls_failed': int(failed),
                       'describe_calls': describes,
                       'describe_limit': math.ceil(machines / 50.0)},
            'controller_peak_rss_mib': round(max(rss_mib(proc.proc.pid), sampler.stop()), 1),
            'controller_passes_up': passes_up, 'controller_passes_all': pass_times(proc),
        }
    finally:
        if bench is not None:
            bench.stop()
            if bench.controllers and os.path.exists(bench.controllers[0].log_path):
                os.makedirs(os.path.dirname(CONTROLLER_LOG), exist_ok=True)
                shutil.copyfile(bench.controllers[0].log_path, CONTROLLER_LOG)
        parts.down(state)
        shutil.rmtree(state, ignore_errors=True)


def steady_fleet(machines: int) -> MachinesSim:
    sim = MachinesSim()
    sim.add_class()
    sim.add_deployment(replicas=machines)
    for _step in range(200):
        if sim.phases() == ['Running'] * machines:
            return sim
        sim.step()
    raise RuntimeError('the in-memory fleet of %d did not settle: %s' % (machines, sorted(set(sim.phases()))))


def part_engine(sizes: List[int], repeats: int = 7) -> Dict[str, Any]:
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
        best = min(times)     # the least disturbed of the runs: other processes only ever add to a pass's time
        rows.append({'machines': n, 'pass_s': round(best, 3), 'median_s': round(statistics.median(times), 3),
                     'per_machine_us': round(best / n * 1e6, 1),
                     'calls_per_machine': round(_env.python_calls(lambda: plan_pass(world, sim.memory, sim.settings, sim.now)) / n, 1),
                     'machine_actions_in_steady_pass': actions, 'load': load()})
        del sim, world
    base = rows[0]
    for row in rows:
        row['growth_vs_linear'] = round((row['pass_s'] / base['pass_s']) / (row['machines'] / base['machines']), 2)
        row['work_growth_vs_linear'] = round(row['calls_per_machine'] / base['calls_per_machine'], 2)
    return {'rows': rows, 'rss_mib_after': round(rss_mib(os.getpid(), 'VmHWM'), 1)}


def report_controller(ctl: Dict[str, Any]) -> None:
    n = ctl['machines']
    for name in ('up', 'down'):
        leg = ctl[name]
        print('controller, scale %s: %d machines in %.1f s, %.2fx the %.1f s the EC2 budget alone needs (load %s -> %s); '
              'EC2 calls per machine %s; EC2 throttled %d; CPU s: %s (controller %.1f ms per machine)'
              % (name, n, leg['wall_s'], leg['wall_over_floor'] or 0, leg['floor_s'], leg['load'][0], leg['load'][1],
                 leg['ec2_calls_per_machine'], leg['ec2_throttled'], leg['cpu_s'], leg['controller_cpu_ms_per_machine']))
    budget = ctl['budget']
    print('API budget (machines.md (f)5, EC2 limited to %d req/s, controller bucket %d/s): throttle errors surfaced as '
          'failures %d (driver calls failed, any code: %d; EC2 answered RequestLimitExceeded %d times); '
          'DescribeInstances %d <= machines/50 = %d: %s'
          % (ctl['ec2_limit_per_s'], ctl['controller_rate_per_s'], budget['throttle_failures_surfaced'],
             budget['driver_calls_failed'], budget['ec2_throttled'], budget['describe_calls'], budget['describe_limit'],
             'yes' if budget['describe_calls'] <= budget['describe_limit'] else 'NO'))
    print('EC2 calls per machine, 0 -> %d -> 0: %.2f; controller peak RSS %.0f MiB; passes %s (all: %s)'
          % (n, ctl['ec2_calls_per_machine'], ctl['controller_peak_rss_mib'], ctl['controller_passes_up'],
             ctl['controller_passes_all']))
    rnd = ctl['status_round']
    print('status round over %d instances (load %s): MCM-aws pattern %d DescribeInstances / %.2f s (timed on %d), ours %g / '
          '%.3f s -> %.0fx fewer calls, %.0fx less time; per machine per status check: MCM-aws 1, ours %.4f'
          % (rnd['instances'], rnd['load'], rnd['mcm_aws_calls'], rnd['mcm_aws_s'], rnd['mcm_aws_timed_on'],
             rnd['ours_calls'], rnd['ours_s'], rnd['calls_ratio_mcm_over_ours'], rnd['time_ratio_mcm_over_ours'],
             rnd['ours_calls'] / rnd['instances']))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('--machines', type=int, default=500, help='machines the controller scales to and back (a, b)')
    parser.add_argument('--engine-machines', type=int, default=5000, help='largest in-memory fleet for the engine (c)')
    parser.add_argument('--timeout', type=float, default=1800.0, help='deadline for each scaling leg, seconds')
    parser.add_argument('--mcm-sample', type=int, default=60, help='machines MCM-aws\'s per-machine calls are timed on (b)')
    parser.add_argument('--skip-controller', action='store_true', help='only the engine part (c)')
    parser.add_argument('--skip-engine', action='store_true', help='only the controller parts (a, b)')
    parser.add_argument('--results', default=RESULTS, help='where the summary goes (JSON)')
    args = _env.parse_args(parser, 'machines', {'machines': 3, 'engine_machines': 50, 'timeout': 180.0, 'mcm_sample': 2},
                           output='results')
    _env.announce(args)
    summary: Dict[str, Any] = {'benchmark': 'machines', 'python': platform.python_version(), 'cpus': os.cpu_count(),
                               'load_at_start': load()}

    if not args.skip_controller:
        summary['controller'] = part_controller(args.machines, args.timeout, args.mcm_sample)
        report_controller(summary['controller'])

    if not args.skip_engine:
        sizes = sorted({s for s in (500, 1000, 2000, args.engine_machines) if s <= args.engine_machines})
        engine = part_engine(sizes)
        summary['engine'] = engine
        for row in engine['rows']:
            print('engine pass over %5d Running machines: %.3f s (%.0f us per machine, time growth vs linear %.2f; '
                  '%.0f Python calls per machine, work growth vs linear %.2f; load %s)'
                  % (row['machines'], row['pass_s'], row['per_machine_us'], row['growth_vs_linear'], row['calls_per_machine'],
                     row['work_growth_vs_linear'], row['load']))
        print('bench process peak RSS %.0f MiB' % engine['rss_mib_after'])
    summary['load_at_end'] = load()
    write_summary(args.results, summary)
    return 0


if __name__ == '__main__':
    sys.exit(main())
