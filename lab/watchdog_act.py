#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watchdog act of `make demo`: most nodes lose the API server, the controllers that would act on "dead"
nodes are scaled down in level order and the fleet is frozen, the nodes come back, everything is restored.

The real controller (`python -m steward_controller --controllers prober`, DWD's prober config) runs against the
lab's Kubernetes API emulator (lab/kube_api.py, whose status mover plays the deployment controller). Six Nodes
with their Leases in kube-node-lease are renewed every second, as kubelets do; the "partition" stops renewing
four of them. The targets: kube-controller-manager (level 0 down, 1 up), machine-controller-manager (1 down,
1 up), cluster-autoscaler (2 down, 0 up), as in DWD's example. While they are held down each carries
`dependency-watchdog.gardener.cloud/meltdown-protection-active`: the machine controller's fleet freeze, so no
machine is replaced for nodes that only lost their network.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List

import requests
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import lab  # noqa: E402
from controller_act import wait_for  # noqa: E402
from kube_api import KubeServer  # noqa: E402

TITLE = 'dependency watchdog: a partition scales the node-acting controllers down by level, healing restores them'

NS = 'kube-system'
NODES = 6
PARTITIONED = 4
MELTDOWN = 'dependency-watchdog.gardener.cloud/meltdown-protection-active'
REPLICAS = 'dependency-watchdog.gardener.cloud/replicas'
TARGETS = (('kube-controller-manager', 2, 1, 0), ('machine-controller-manager', 1, 1, 1), ('cluster-autoscaler', 1, 0, 2))
CONFIG = {'probeInterval': '1s', 'initialDelay': '1s', 'backoffJitterFactor': 0, 'kcmNodeMonitorGraceDuration': '8s',
          'nodeLeaseFailureFraction': 0.6,
          'dependentResourceInfos': [{'ref': {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': name},
                                      'optional': False, 'scaleUp': {'level': up}, 'scaleDown': {'level': down}}
                                     for name, _, up, down in TARGETS]}


def micro(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, tz=datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%S.%fZ')


class Api:
    """Just enough of a Kubernetes client for the act (plain JSON over HTTP)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def create(self, path: str, body: Dict[str, Any]) -> None:
        requests.post(self.url + path, json=body, timeout=10).raise_for_status()

    def get(self, path: str) -> Dict[str, Any]:
        r = requests.get(self.url + path, timeout=10)
        return r.json() if r.status_code == 200 else {}

    def patch(self, path: str, body: Dict[str, Any]) -> None:
        requests.patch(self.url + path, json=body, timeout=10,
                       headers={'Content-Type': 'application/merge-patch+json'}).raise_for_status()


class Kubelets:
    """Nodes and their Leases, renewed every second unless partitioned."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.names = ['node-%d' % i for i in range(NODES)]
        self.partitioned: set = set()
        self.stop = threading.Event()
        now = time.time()
        for name in self.names:
            api.create('/api/v1/nodes', {'apiVersion': 'v1', 'kind': 'Node', 'metadata': {'name': name}})
            api.create('/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases', {
                'apiVersion': 'coordination.k8s.io/v1', 'kind': 'Lease',
                'metadata': {'name': name, 'namespace': 'kube-node-lease'},
                'spec': {'holderIdentity': name, 'leaseDurationSeconds': 40, 'renewTime': micro(now)}})
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop.wait(1.0):
            for name in self.names:
                if name not in self.partitioned:
                    try:
                        self.api.patch('/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/' + name,
                                       {'spec': {'renewTime': micro(time.time())}})
                    except requests.RequestException:
                        pass


def run(ctx: Any) -> List[str]:
    kube = KubeServer(status_delay=0.5).start()
    api = Api(kube.url)
    act: Dict[str, Any] = {}
    deployments = '/apis/apps/v1/namespaces/%s/deployments' % NS
    status_path = '/api/v1/namespaces/%s/configmaps/steward-watchdog-prober-status' % NS

    def replicas() -> Dict[str, int]:
        return {d['metadata']['name']: d['spec']['replicas'] for d in api.get(deployments).get('items', [])}

    def operation(direction: str) -> Any:
        text = (api.get(status_path).get('data') or {}).get('lastOperation')
        op = json.loads(text) if text else None
        return op if op and op['direction'] == direction and op['outcomes'].get('succeeded') == len(TARGETS) else None

    def start() -> str:
        for name, count, _, _ in TARGETS:
            labels = {'app': name}
            api.create(deployments, {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'metadata': {'name': name},
                                     'spec': {'replicas': count, 'selector': {'matchLabels': labels},
                                              'template': {'metadata': {'labels': labels},
                                                           'spec': {'containers': [{'name': 'c', 'image': name}]}}}})
        act['kubelets'] = Kubelets(api)
        config = os.path.join(ctx.state, 'watchdog-prober.yaml')
        with open(config, 'w') as f:
            yaml.safe_dump(CONFIG, f)
        env = dict(os.environ, KUBECONFIG=kube.write_kubeconfig(os.path.join(ctx.state, 'watchdog-kubeconfig.json')),
                   STEWARD_NAMESPACE=NS, PYTHONPATH=os.pathsep.join([lab.COLLECTIONS, os.path.join(REPO, 'controller')]))
        with open(ctx.log_path('watchdog-prober.log'), 'ab') as log:
            act['proc'] = subprocess.Popen([lab.venv_python(), '-m', 'steward_controller', '--controllers', 'prober',
                                            '--prober-config', config, '--no-leader-election', '--http-host',
                                            '127.0.0.1', '--http-port', '0'],
                                           env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(lambda: (api.get(status_path).get('data') or {}).get('lastProbeResult') == 'healthy', 60,
                 'a first healthy probe')
        return 'prober on %d nodes; %s' % (NODES, ', '.join('%s=%d' % kv for kv in sorted(replicas().items())))

    def partition() -> str:
        act['kubelets'].partitioned = set(act['kubelets'].names[:PARTITIONED])
        started = time.time()
        op = wait_for(lambda: operation('down'), 90, 'the scale-down')
        order = [s['target'].split('/')[1] for s in sorted(op['steps'], key=lambda s: s['scaleCallAt'])]
        frozen = [n for n, *_ in TARGETS
                  if MELTDOWN in (api.get(deployments + '/' + n).get('metadata') or {}).get('annotations', {})]
        return '%d of %d leases expired: scaled down %.1f s later in level order %s; fleet frozen (%s) on %d targets' % (
            PARTITIONED, NODES, time.time() - started, ' -> '.join(order), MELTDOWN.split('/')[1], len(frozen))

    def heal() -> str:
        act['kubelets'].partitioned = set()
        started = time.time()
        op = wait_for(lambda: operation('up'), 90, 'the scale-up')
        wait_for(lambda: not any(REPLICAS in ((api.get(deployments + '/' + n).get('metadata') or {}).get('annotations')
                                              or {}) for n, *_ in TARGETS), 30, 'the markers removed')
        restored = replicas()
        want = {n: c for n, c, _, _ in TARGETS}
        if restored != want:
            raise SystemExit('demo: restored %s, expected %s' % (restored, want))
        order = [s['target'].split('/')[1] for s in sorted(op['steps'], key=lambda s: s['scaleCallAt'])]
        return 'leases renewed: restored %.1f s later to their old replicas (%s), order %s' % (
            time.time() - started, ', '.join('%s=%d' % kv for kv in sorted(restored.items())), ' -> '.join(order))

    try:
        return [ctx.step('start the prober (DWD config, 3 targets on 3 levels)', start),
                ctx.step('partition %d of %d nodes' % (PARTITIONED, NODES), partition),
                ctx.step('heal the partition', heal)]
    finally:
        if act.get('kubelets'):
            act['kubelets'].stop.set()
        proc = act.get('proc')
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        kube.stop()
