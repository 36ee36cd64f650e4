#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watchdog act of `make demo`: most nodes lose the API server, the controllers that would act on "dead"
nodes are scaled down in level order and the machine fleet is frozen, no machine is replaced, the nodes come
back, everything is restored.

One real controller process runs two loops, `--controllers machines,prober` (DWD's prober config), against
the Kubernetes API emulator (lab/kube/api.py, whose status mover plays the deployment controller) and EC2 with
fidelity (lab/cloud/ec2_fidelity.py): a MachineDeployment of six machines, one VM each, whose kubelets register a Node
(lab/env/machines_bench.py) and renew its Lease in kube-node-lease every second
(lab/env/node_leases.py). The targets: kube-controller-manager (level 0 down, 1 up), machine-controller-manager
(1 down, 1 up), cluster-autoscaler (2 down, 0 up), as in DWD's example. The "partition" stops four kubelets:
their leases expire (the prober scales down, marking each target
`dependency-watchdog.gardener.cloud/meltdown-protection-active`), then their Nodes turn Ready=Unknown and stay so
past the machines' health timeout - and the machines loop, frozen by that marker, replaces none of them. The
machines loop's own fleet freeze is switched off for the act, so the watchdog's marker is what protects them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from typing import Any, Dict, List

import yaml

from lab.paths import REPO
from lab import manager
from lab.demo.controller_act import wait_for
from lab.kube.api import KubeServer
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from lab.env.controller import install_crds
from lab.env.ec2_server import EC2Server
from lab.env.machines_bench import FAST_FLAGS, REGION, MachinesBench
from lab.env.node_leases import NodeLeases, deployment

TITLE = ('dependency watchdog: a partition scales the node-acting controllers down by level and freezes the '
         'machine fleet (none replaced); healing restores them')

NS = 'shoot--demo'
NODES = 6
PARTITIONED = 4
HEALTH_TIMEOUT = 6.0   # FAST_FLAGS' --machine-health-timeout
MELTDOWN = 'dependency-watchdog.gardener.cloud/meltdown-protection-active'
REPLICAS = 'dependency-watchdog.gardener.cloud/replicas'
TARGETS = (('kube-controller-manager', 2, 1, 0), ('machine-controller-manager', 1, 1, 1), ('cluster-autoscaler', 1, 0, 2))
CONFIG = {'probeInterval': '1s', 'initialDelay': '1s', 'backoffJitterFactor': 0, 'kcmNodeMonitorGraceDuration': '8s',
          'nodeLeaseFailureFraction': 0.6,
          'dependentResourceInfos': [{'ref': {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': name},
                                      'optional': False, 'scaleUp': {'level': up}, 'scaleDown': {'level': down}}
                                     for name, _replicas, up, down in TARGETS]}


def emulator_client(server: KubeServer) -> KubeClient:
    import kubernetes
    configuration = kubernetes.client.Configuration()
    configuration.host = server.url
    client = KubeClient(configuration)
    client.server = server
    install_crds(client)
    return client


def run(ctx: Any) -> List[str]:
    kube = KubeServer(status_delay=0.5).start()
    client = emulator_client(kube)
    act: Dict[str, Any] = {}
    deployments = api_path('apps/v1', 'deployments', NS)
    status_path = api_path('v1', 'configmaps', NS, 'steward-watchdog-prober-status')

    def replicas() -> Dict[str, int]:
        return {d['metadata']['name']: d['spec']['replicas'] for d in client.list(deployments)}

    def marked() -> List[str]:
        return [d['metadata']['name'] for d in client.list(deployments) if MELTDOWN in (d['metadata'].get('annotations') or {})]

    def status() -> Dict[str, str]:
        return (client.get_or_none(status_path) or {}).get('data') or {}

    def operation(direction: str) -> Any:
        text = status().get('lastOperation')
        op = json.loads(text) if text else None
        return op if op and op['direction'] == direction and op['outcomes'].get('succeeded') == len(TARGETS) else None

    def frozen() -> Any:
        md = client.get(act['bench'].path('machinedeployments', 'pool'))
        return next((c for c in (md.get('status') or {}).get('conditions') or []
                     if c['type'] == 'Frozen' and c['status'] == 'True'), None)

    def machines() -> List[str]:
        return sorted(m['metadata']['name'] for m in act['bench'].machines())

    def start() -> str:
        for name, count, _up, _down in TARGETS:
            client.create(deployments, deployment(name, count))
        act['ec2'] = ec2 = EC2Server().start()
        act['bench'] = bench = MachinesBench(client, ec2.url, ctx.state, namespace=NS)
        bench.create_class()
        bench.create_deployment(replicas=NODES)
        config = os.path.join(ctx.state, 'watchdog-prober.yaml')
        with open(config, 'w') as f:
            yaml.safe_dump(CONFIG, f)
        env = dict(os.environ, KUBECONFIG=kube.write_kubeconfig(os.path.join(ctx.state, 'watchdog-kubeconfig.json')),
                   STEWARD_NAMESPACE=NS, AWS_ENDPOINT_URL=ec2.url, AWS_DEFAULT_REGION=REGION,
                   PYTHONPATH=os.pathsep.join([manager.COLLECTIONS, os.path.join(REPO, 'controller')]))
        with open(ctx.log_path('watchdog-controller.log'), 'ab') as log:
            act['proc'] = subprocess.Popen(
                [manager.venv_python(), '-m', 'steward_controller', '--controllers', 'machines,prober'] + FAST_FLAGS +
                ['--machine-fleet-freeze-fraction', '1', '--prober-config', config, '--kube-api-qps', '50',
                 '--kube-api-burst', '100', '--no-leader-election', '--http-host', '127.0.0.1', '--http-port', '0'],
                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        bench.wait_running(NODES, timeout=240)
        act['machines'] = machines()
        act['leases'] = NodeLeases(client, names=bench.kubelets.node_names(), period=1.0).start()
        wait_for(lambda: status().get('lastProbeResult') == 'healthy', 60, 'a first healthy probe')
        return '%d machines Running (one EC2 instance and Node each); prober and machines loops in one process; %s' % (
            NODES, ', '.join('%s=%d' % kv for kv in sorted(replicas().items())))

    def partition() -> str:
        victims = act['bench'].kubelets.node_names()[:PARTITIONED]
        act['leases'].partition(victims)                    # their kubelets stop renewing
        started = time.time()
        op = wait_for(lambda: operation('down'), 90, 'the scale-down')
        down = time.time() - started
        order = [s['target'].split('/')[1] for s in sorted(op['steps'], key=lambda s: s['scaleCallAt'])]
        cond = wait_for(frozen, 30, 'the machines loop frozen by the watchdog')
        act['bench'].kubelets.partition(victims)            # the node lifecycle controller: Ready=Unknown
        time.sleep(HEALTH_TIMEOUT + 6)
        replaced = sorted(set(act['machines']) ^ set(machines()))
        if replaced or 'Failed' in act['bench'].phases():
            raise SystemExit('demo: machines replaced or failed during the freeze: %s (%s)' % (replaced, act['bench'].phases()))
        return ('%d of %d kubelets cut off: their leases expired and the targets were scaled down %.1f s later, in level order %s, %s on %d targets; machines '
                'loop Frozen (%s); %d Nodes Unknown for %.0f s, past the %.0f s health timeout: 0 machines replaced') % (
            PARTITIONED, NODES, down, ' -> '.join(order), MELTDOWN.split('/')[1], len(marked()), cond['reason'],
            PARTITIONED, HEALTH_TIMEOUT + 6, HEALTH_TIMEOUT)

    def heal() -> str:
        act['bench'].kubelets.heal()
        act['leases'].heal()
        started = time.time()
        op = wait_for(lambda: operation('up'), 90, 'the scale-up')
        wait_for(lambda: not any(REPLICAS in (d['metadata'].get('annotations') or {}) for d in client.list(deployments)),
                 30, 'the markers removed')
        restored = replicas()
        want = {n: c for n, c, _up, _down in TARGETS}
        if restored != want:
            raise SystemExit('demo: restored %s, expected %s' % (restored, want))
        wait_for(lambda: frozen() is None and act['bench'].phases() == ['Running'] * NODES, 60, 'the freeze lifted')
        if machines() != act['machines']:
            raise SystemExit('demo: machines changed: %s -> %s' % (act['machines'], machines()))
        order = [s['target'].split('/')[1] for s in sorted(op['steps'], key=lambda s: s['scaleCallAt'])]
        return ('leases renewed: restored %.1f s later to their old replicas (%s), order %s; freeze lifted, the same '
                '%d machines Running') % (time.time() - started, ', '.join('%s=%d' % kv for kv in sorted(restored.items())),
                                          ' -> '.join(order), NODES)

    try:
        return [ctx.step('start the machines and prober loops (DWD config, 3 targets on 3 levels)', start),
                ctx.step('partition %d of %d nodes' % (PARTITIONED, NODES), partition),
                ctx.step('heal the partition', heal)]
    finally:
        if act.get('leases'):
            act['leases'].stop()
        if act.get('bench'):
            act['bench'].stop()
        proc = act.get('proc')
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        if act.get('ec2'):
            act['ec2'].stop()
        kube.stop()
