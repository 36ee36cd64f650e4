# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The prober end to end: the real controller (`--controllers prober --prober-config FILE`) against the
Kubernetes API emulator, node leases renewed by the test (tests/support/watchdog.py) and a status mover
playing the Deployment controller, so completion gates see real progress.

DWD's prober acceptance tests (gardener-components-inventory.md §1.1) are named `test_dwd_p<N>_*`; our
improvements `test_improvement_*`. Fast timings through the config: probes every second, leases expire
6s after their last renewal (kcmNodeMonitorGraceDuration 8s; renewals every 0.5s leave slack on a busy machine)."""

from __future__ import annotations

import json
import time
from typing import Any, Dict, List, Optional

import pytest
import yaml

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

from support.controller import ControllerProcess, wait_for
from support.watchdog import HOLD, NodeLeases, StatusMover, deployment

NS = 'steward-system'
REPLICAS = 'dependency-watchdog.gardener.cloud/replicas'
MELTDOWN = 'dependency-watchdog.gardener.cloud/meltdown-protection-active'
IGNORE = 'dependency-watchdog.gardener.cloud/ignore-scaling'
OWNER = 'cluster.steward.io/watchdog-owner'
STATE = 'cluster.steward.io/watchdog-state'
STATUS = api_path('v1', 'configmaps', NS, 'steward-watchdog-prober-status')

# DWD's example levels: scale down KCM (0), then MCM (1), then CA (2); scale up CA (0), then KCM and MCM (1).
TARGETS = [('kube-controller-manager', 3, 1, 0), ('machine-controller-manager', 2, 1, 1), ('cluster-autoscaler', 1, 0, 2)]


def prober_config(targets=TARGETS, **extra: Any) -> Dict[str, Any]:
    config = {'probeInterval': '1s', 'initialDelay': '1s', 'probeTimeout': '5s', 'backoffJitterFactor': 0,
              'kcmNodeMonitorGraceDuration': '8s', 'nodeLeaseFailureFraction': 0.6,
              'dependentResourceInfos': [
                  {'ref': {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': name}, 'optional': False,
                   'scaleUp': {'level': up}, 'scaleDown': {'level': down}}
                  for name, _, up, down in targets]}
    config.update(extra)
    return config


class Env:
    def __init__(self, kube, tmp_path, nodes: int = 5, mover_delay: float = 0.3):
        self.kube = kube
        self.tmp_path = tmp_path
        self.leases = NodeLeases(kube, nodes).start()
        self.mover = StatusMover(kube, NS, delay=mover_delay).start()
        self.recorder = self.mover
        self.controllers: List[ControllerProcess] = []

    def deploy(self, targets=TARGETS, annotations: Optional[Dict[str, Dict[str, str]]] = None) -> None:
        for name, replicas, _, _ in targets:
            self.kube.create(api_path('apps/v1', 'deployments', NS), deployment(name, replicas, (annotations or {}).get(name)))

    def start(self, config: Dict[str, Any], identity: str = 'prober-0', extra: Optional[List[str]] = None) -> ControllerProcess:
        path = self.tmp_path / 'prober.yaml'
        path.write_text(yaml.safe_dump(config))
        # The emulator is slow on a busy machine; DWD's client limits (5 qps, burst 10) would pace the 1s probes.
        args = ['--controllers', 'prober', '--prober-config', str(path), '--kube-api-qps', '50', '--kube-api-burst', '100']
        controller = ControllerProcess(self.kube.server, str(self.tmp_path), identity=identity, args=args + (extra or []))
        self.controllers.append(controller.start())
        return controller

    def get(self, name: str) -> Dict[str, Any]:
        return self.kube.get(api_path('apps/v1', 'deployments', NS, name))

    def annotations(self, name: str) -> Dict[str, str]:
        return self.get(name)['metadata'].get('annotations') or {}

    def replicas(self, name: str) -> int:
        return self.get(name)['spec']['replicas']

    def status(self) -> Dict[str, str]:
        cm = self.kube.get_or_none(STATUS)
        return (cm or {}).get('data') or {}

    def events(self, name: str) -> List[Dict[str, Any]]:
        return [e for e in self.kube.list(api_path('v1', 'events', NS)) if e['involvedObject']['name'] == name]

    def stop(self) -> None:
        for controller in self.controllers:
            controller.stop()
            print('--- %s (last lines)\n%s' % (controller.log_path, '\n'.join(controller.log().splitlines()[-40:])))
        print('--- status', self.status())
        print('--- lease renewal errors', self.leases.errors[-5:], 'renewer alive', self.leases._thread.is_alive(),
              'now', time.strftime('%H:%M:%S', time.gmtime()), 'partitioned', sorted(self.leases.partitioned))
        for lease in self.kube.list(api_path('coordination.k8s.io/v1', 'leases', 'kube-node-lease')):
            print('--- lease', lease['metadata']['name'], lease['spec']['renewTime'])
        for part in (self.mover, self.leases):
            part.stop()


@pytest.fixture
def env(kube, tmp_path):
    environment = Env(kube, tmp_path)
    yield environment
    environment.stop()


def until(predicate, timeout: float, what: str):
    """wait_for at a relaxed pace: the emulator serves from this process, so the test's own polling stays light."""
    return wait_for(predicate, timeout, 0.5, what)


def last_operation(env: Env, direction: str) -> Optional[Dict[str, Any]]:
    """The status' lastOperation if it is a `direction` operation (the status is written after the operation)."""
    text = env.status().get('lastOperation')
    operation = json.loads(text) if text else None
    return operation if operation and operation['direction'] == direction else None


def step_of(operation: Dict[str, Any], name: str) -> Dict[str, Any]:
    (step,) = [s for s in operation['steps'] if s['target'] == 'Deployment/' + name]
    return step


def all_at(env: Env, replicas: Dict[str, int]) -> bool:
    """One LIST (the emulator shares this process: keep the test's own polling light)."""
    current = {d['metadata']['name']: d['spec']['replicas'] for d in env.kube.list(api_path('apps/v1', 'deployments', NS))}
    return all(current.get(name) == want for name, want in replicas.items())


def test_dwd_p1_p2_p4_scale_down_by_level_and_back_up(env):
    """P1: 3 of 5 leases expired -> every target at 0 with `…/replicas` = its old count, in scaleDown level order
    (KCM, MCM, CA), each level after the one before reached 0; meltdown and owner markers set.
    P2: leases renewed -> each target back to exactly its annotated replicas in scaleUp level order (CA, then
    KCM and MCM together), every annotation removed. Events on every target, the plan in the status ConfigMap."""
    env.deploy()
    controller = env.start(prober_config())
    until(lambda: env.status().get('lastProbeResult') == 'healthy', 30, what='a first healthy probe')
    assert all_at(env, {'kube-controller-manager': 3, 'machine-controller-manager': 2, 'cluster-autoscaler': 1})

    env.leases.partition(env.leases.names[:3])
    until(lambda: all_at(env, {'kube-controller-manager': 0, 'machine-controller-manager': 0, 'cluster-autoscaler': 0}),
             60, what='every target scaled down')
    for name, replicas, _, _ in TARGETS:
        ann = env.annotations(name)
        assert ann[REPLICAS] == str(replicas) and ann[MELTDOWN] == '' and ann[OWNER] == 'steward-watchdog-prober'
        until(lambda: env.annotations(name).get(STATE) == 'scaled-down', 10, what='%s scaled-down' % name)
    operation = until(lambda: last_operation(env, 'down'), 30, what='the scale-down in the status')
    assert operation['outcomes'] == {'succeeded': 3}
    kcm, mcm, ca = (step_of(operation, n) for n in ('kube-controller-manager', 'machine-controller-manager',
                                                     'cluster-autoscaler'))
    # scaleDown levels: KCM (0) reached 0 before MCM (1) was touched, MCM before CA (2).
    assert kcm['finishedAt'] <= mcm['scaleCallAt'] and mcm['finishedAt'] <= ca['scaleCallAt']
    assert kcm['replicasBefore'] == 3 and kcm['observed'].startswith('(status.replicas 0')
    assert env.status()['phase'] == 'ScaledDown'
    assert json.loads(env.status()['lastPlan'])['levels'][0]['steps'][0]['target'] == 'Deployment/kube-controller-manager'
    assert any(e['reason'] == 'ScaledDown' for e in env.events('kube-controller-manager'))
    assert any(e['reason'] == 'ScaleDownPlanned' for e in env.events('steward-watchdog-prober-status'))
    assert controller.metric('dwd_prober_scaled_down') == 1.0
    assert controller.metric('dwd_prober_scale_operations_total', {'target': 'Deployment/kube-controller-manager',
                                                                   'direction': 'down', 'outcome': 'succeeded'}) >= 1
    assert controller.metric('dwd_prober_expired_lease_fraction') >= 0.6

    env.leases.heal()
    until(lambda: all_at(env, {'kube-controller-manager': 3, 'machine-controller-manager': 2, 'cluster-autoscaler': 1}),
             60, what='every target restored')
    until(lambda: not any(k in env.annotations(n) for n, *_ in TARGETS for k in (REPLICAS, MELTDOWN, OWNER, STATE)),
             15, what='markers removed')
    operation = until(lambda: last_operation(env, 'up'), 30, what='the scale-up in the status')
    assert operation['outcomes'] == {'succeeded': 3}
    ca, kcm, mcm = (step_of(operation, n) for n in ('cluster-autoscaler', 'kube-controller-manager',
                                                     'machine-controller-manager'))
    # scaleUp levels: CA (level 0) done before level 1 starts; KCM and MCM (level 1) act together.
    assert ca['finishedAt'] <= kcm['scaleCallAt'] and ca['finishedAt'] <= mcm['scaleCallAt']
    assert kcm['scaleCallAt'] < mcm['finishedAt'] and mcm['scaleCallAt'] < kcm['finishedAt']
    assert env.status()['phase'] == 'Healthy'
    assert any(e['reason'] == 'ScaledUp' for e in env.events('cluster-autoscaler'))
    # Each target went down once and up once: no flapping.
    for name, replicas, _, _ in TARGETS:
        assert env.recorder.count(name, 0) == 1 and env.recorder.count(name, replicas) == 1


def test_dwd_p3_p5_default_one_and_ignore_scaling(env):
    """P3: a target found at 0 without annotation, or with annotation 0, is scaled up to 1 on a healthy probe.
    P5: a target with ignore-scaling is never scaled, in either direction."""
    targets = [('no-annotation', 0, 0, 0), ('annotation-zero', 0, 0, 0), ('ignored', 2, 0, 0)]
    env.deploy(targets, annotations={'annotation-zero': {REPLICAS: '0'}, 'ignored': {IGNORE: 'true'}})
    env.start(prober_config(targets))
    until(lambda: all_at(env, {'no-annotation': 1, 'annotation-zero': 1}), 30, what='default scale-up to 1')
    until(lambda: REPLICAS not in env.annotations('annotation-zero'), 15, what='the replicas annotation removed')
    env.leases.partition(env.leases.names[:4])
    until(lambda: all_at(env, {'no-annotation': 0, 'annotation-zero': 0}), 30, what='scale down')
    time.sleep(1.5)   # a couple more failing probes
    assert env.replicas('ignored') == 2 and env.recorder.changes_of('ignored') == []
