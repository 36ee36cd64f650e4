#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The machines act of `make demo`: a pool of machines on EC2, healed, frozen, scaled down and removed.

Real parts: the controller (`--controllers machines`, timings shortened through its flags: health timeout 6 s),
the Kubernetes API emulator, EC2 with fidelity over moto (lab/cloud/ec2_fidelity.py, HTTP), and kubelets registering a
Node for every running instance. The pool is made by the `steward.cluster.machine_pool` playbook from an
MCM-style AWS MachineClass; the faults are done as an operator would meet them: an instance terminated out of
band, every node unreachable at once.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, List, Set

import kubernetes

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient
from lab.kube.api import KubeServer
from lab.env.controller import install_crds, wait_for
from lab.env.ec2_server import EC2Server
from lab.env.machines_aws import provider_spec, secret_data
from lab.env.machines_bench import REGION, MachinesBench

TITLE = 'a pool of machines on EC2: an instance lost and replaced, every node unreachable (frozen, nothing replaced), ' \
        'healed, scaled down, removed'
NAMESPACE = 'shoot--demo'


def frozen(bench: MachinesBench) -> Dict[str, Any]:
    md = bench.kube.get_or_none(bench.path('machinedeployments', 'workers')) or {}
    return next((c for c in (md.get('status') or {}).get('conditions') or [] if c['type'] == 'Frozen'), {})


def instance_ids(bench: MachinesBench) -> Set[str]:
    return {i['InstanceId'] for i in bench.running_instances()}


def run(ctx: Any) -> List[str]:
    kube_server = KubeServer().start()
    ec2 = EC2Server().start()
    configuration = kubernetes.client.Configuration()
    configuration.host = kube_server.url
    client = KubeClient(configuration)
    client.server = kube_server          # the bench starts controllers against it
    install_crds(client)
    work = os.path.join(ctx.state, 'machines')
    os.makedirs(work, exist_ok=True)
    kubeconfig = kube_server.write_kubeconfig(os.path.join(work, 'kubeconfig.json'))
    bench = MachinesBench(client, ec2.url, work, namespace=NAMESPACE)
    pool_file = os.path.join(work, 'pool.json')
    pool = {'pool_name': 'workers', 'pool_namespace': NAMESPACE, 'pool_replicas': 3, 'pool_provider': 'AWS',
            'pool_provider_spec': provider_spec(bench.net, REGION, bench.cluster), 'pool_user_data': '#cloud-config\n',
            'pool_credentials': {k: v for k, v in secret_data().items() if k != 'userData'},
            'pool_kubeconfig': kubeconfig, 'pool_wait_timeout': 300}
    with open(pool_file, 'w') as f:
        json.dump(pool, f)
    act: Dict[str, Any] = {}

    def create() -> str:
        act['controller'] = bench.controller()
        ec2.reset_counts()
        run_ = ctx.playbook('machine_pool', '-e', '@' + pool_file)
        bench.wait_running(3)
        act['ids'] = instance_ids(bench)
        return '3 Running machines, 3 tagged instances in %.0f s; EC2 calls: %d RunInstances, %d DescribeInstances' % (
            run_.seconds, ec2.calls('RunInstances'), ec2.calls('DescribeInstances'))

    def lose_one() -> str:
        gone = sorted(act['ids'])[0]
        started = time.monotonic()
        bench.ec2().terminate_instances(InstanceIds=[gone])
        wait_for(lambda: not any(m['spec'].get('providerID', '').endswith(gone) for m in bench.machines()), 120, 0.5,
                 what='the machine of %s replaced' % gone)
        bench.wait_running(3)
        took = time.monotonic() - started
        act['ids'] = instance_ids(bench)
        return '%s gone: replaced, 3 Running again after %.0f s (the cloud said terminated: no health timeout ' \
               'waited)' % (gone, took)

    def partition() -> str:
        bench.kubelets.partition()
        cond = wait_for(lambda: frozen(bench) or None, 60, 0.5, what='Frozen=True')
        time.sleep(12)       # twice the 6 s health timeout: an unguarded controller would be replacing every machine
        replaced = len(act['ids'] - instance_ids(bench))
        if replaced:
            raise SystemExit('demo: %d instance(s) replaced during the fleet freeze' % replaced)
        return 'Frozen=True %s: %s; 12 s later 0 machines replaced' % (cond['reason'], cond['message'].split(' while ')[0])

    def heal() -> str:
        started = time.monotonic()
        bench.kubelets.heal()
        wait_for(lambda: not frozen(bench) and bench.phases() == ['Running'] * 3, 90, 0.5, what='thaw')
        same = instance_ids(bench) == act['ids']
        if not same:
            raise SystemExit('demo: instances changed across the freeze')
        return 'nodes back: unfrozen in %.0f s, the same 3 instances' % (time.monotonic() - started)

    def scale_down() -> str:
        run_ = ctx.playbook('machine_pool', '-e', '@' + pool_file, '-e', 'pool_replicas=1')
        wait_for(lambda: len(bench.running_instances()) == 1, 120, 0.5, what='one instance left')
        return 'scaled to 1 (steward.cluster.machine_pool, pool_replicas=1) in %.0f s: 1 instance left' % run_.seconds

    def remove() -> str:
        run_ = ctx.playbook('machine_pool', '-e', '@' + pool_file, '-e', 'pool_state=absent')
        left = bench.all_instances()
        if any(i['State']['Name'] not in ('terminated', 'shutting-down') for i in left) or bench.machines():
            raise SystemExit('demo: machines or instances left after the pool was removed')
        return 'pool removed in %.0f s: no machine, no running instance with the cluster tag; controller peak %s' % (
            run_.seconds, peak_rss(act['controller'].proc.pid))

    try:
        return [
            ctx.step('a pool of 3 (steward.cluster.machine_pool, MCM-style AWS MachineClass)', create),
            ctx.step('terminate one instance out of band', lose_one),
            ctx.step('partition every node (an outage, not broken machines)', partition),
            ctx.step('heal the partition', heal),
            ctx.step('scale down', scale_down),
            ctx.step('remove the pool', remove),
        ]
    finally:
        bench.stop()
        ec2.stop()
        kube_server.stop()


def peak_rss(pid: int) -> str:
    try:
        with open('/proc/%d/status' % pid) as f:
            for line in f:
                if line.startswith('VmHWM:'):
                    return '%.0f MiB RSS' % (int(line.split()[1]) / 1024.0)
    except OSError:
        pass
    return 'RSS unknown'
