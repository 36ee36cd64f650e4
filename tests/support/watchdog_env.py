"""The watchdog's integration environment: the API emulator (fixture `kube`), node leases renewed by the
test, the emulator's status mover, deployments as targets, and the real controller with `--controllers prober`.
The `env` fixture is imported by the test modules that use it."""

from __future__ import annotations

import base64
import json
import time
from typing import Any, Dict, List, Optional

import pytest
import yaml

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

from lab.env.controller import ControllerProcess, wait_for
from lab.env.node_leases import NodeLeases, deployment
from support.watchdog import HOLD, ReplicaRecorder, kubeconfig_for

NS = 'steward-system'
REPLICAS = 'dependency-watchdog.gardener.cloud/replicas'
MELTDOWN = 'dependency-watchdog.gardener.cloud/meltdown-protection-active'
IGNORE = 'dependency-watchdog.gardener.cloud/ignore-scaling'
OWNER = 'cluster.steward.io/watchdog-owner'
STATE = 'cluster.steward.io/watchdog-state'
STATUS = api_path('v1', 'configmaps', NS, 'steward-watchdog-prober-status')

# DWD's example levels: scale down KCM (0), then MCM (1), then CA (2); scale up CA (0), then KCM and MCM (1).
TARGETS = (('kube-controller-manager', 3, 1, 0), ('machine-controller-manager', 2, 1, 1), ('cluster-autoscaler', 1, 0, 2))


def resource(name: str, up: int, down: int, optional: bool = False, scale_up: Optional[Dict[str, str]] = None,
             scale_down: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """One dependentResourceInfos entry for a Deployment."""
    return {'ref': {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': name}, 'optional': optional,
            'scaleUp': dict({'level': up}, **(scale_up or {})), 'scaleDown': dict({'level': down}, **(scale_down or {}))}


def prober_config(targets=TARGETS, resources: Optional[List[Dict[str, Any]]] = None, **extra: Any) -> Dict[str, Any]:
    """Fast timings: probes every second, leases expire 6s after their last renewal (grace 8s)."""
    config = {'probeInterval': '1s', 'initialDelay': '1s', 'probeTimeout': '5s', 'backoffJitterFactor': 0,
              'kcmNodeMonitorGraceDuration': '8s', 'nodeLeaseFailureFraction': 0.6,
              'dependentResourceInfos': resources or [resource(name, up, down) for name, _replicas, up, down in targets]}
    config.update(extra)
    return config


class Env:
    def __init__(self, kube, tmp_path, nodes: int = 5, mover_delay: float = 0.3):
        self.kube = kube
        self.tmp_path = tmp_path
        self.leases = NodeLeases(kube, nodes).start()
        kube.server.set_status_delay(mover_delay)     # the emulator's status mover plays the workload controllers
        self.recorder = ReplicaRecorder(kube, NS).start()
        self.controllers: List[ControllerProcess] = []

    def deploy(self, targets=TARGETS, annotations: Optional[Dict[str, Dict[str, str]]] = None) -> None:
        for name, replicas, _up, _down in targets:
            self.kube.create(api_path('apps/v1', 'deployments', NS), deployment(name, replicas, (annotations or {}).get(name)))

    def start(self, config: Dict[str, Any], identity: str = 'prober-0', extra: Optional[List[str]] = None) -> ControllerProcess:
        path = self.tmp_path / 'prober.yaml'
        path.write_text(yaml.safe_dump(config))
        # The emulator is slow on a busy machine; DWD's client limits (5 qps, burst 10) would pace the 1s probes.
        args = ['--controllers', 'prober', '--prober-config', str(path), '--kube-api-qps', '50', '--kube-api-burst', '100']
        controller = ControllerProcess(self.kube.server, str(self.tmp_path), identity=identity, args=args + (extra or []))
        self.controllers.append(controller.start())
        return controller

    def kubeconfig_secret(self, name: str, server: str) -> None:
        """Secret `name` with key `kubeconfig` for the probed cluster at `server` (kubeConfigSecretName)."""
        data = base64.b64encode(yaml.safe_dump(kubeconfig_for(server)).encode()).decode()
        body = {'apiVersion': 'v1', 'kind': 'Secret', 'metadata': {'name': name, 'namespace': NS},
                'data': {'kubeconfig': data}}
        path = api_path('v1', 'secrets', NS, name)
        if self.kube.get_or_none(path) is None:
            self.kube.create(api_path('v1', 'secrets', NS), body)
        else:
            self.kube.merge_patch(path, {'data': body['data']})

    def patch(self, name: str, patch: Dict[str, Any]) -> None:
        self.kube.merge_patch(api_path('apps/v1', 'deployments', NS, name), patch)

    def hold(self, name: str, on: bool = True) -> None:
        """Freeze (or release) the target's status: its completion gate cannot pass while held."""
        self.patch(name, {'metadata': {'annotations': {HOLD: 'true' if on else None}}})

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
        for part in (self.recorder, self.leases):
            part.stop()


@pytest.fixture
def env(kube, tmp_path):  # noqa: F811
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
