# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet-freeze contract end to end (issue 15 §2, docs/watchdog.md "The machine controller's fleet freeze"):
one real controller process running both loops, `--controllers machines,prober`, over the machines bench (the
API emulator, EC2 over HTTP, kubelets registering a Node per instance) with node Leases renewed by the test.
The machines loop's own fleet freeze is switched off (`--machine-fleet-freeze-fraction 1`), so only the
prober's `meltdown-protection-active` annotation stands between a partition and machine replacement.

Order as in a real outage: the leases expire first (DWD steps in at 0.75 x the node monitor grace), then the
Nodes turn Ready=Unknown; the machines' health timeout (6s here) passes while the targets are held down."""

from __future__ import annotations

import time

import pytest
import yaml

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

from lab.env.controller import ControllerProcess, wait_for
from lab.env.machines_bench import FAST_FLAGS, REGION, MachinesBench
from lab.env.node_leases import NodeLeases, deployment

MELTDOWN = 'dependency-watchdog.gardener.cloud/meltdown-protection-active'
TARGETS = (('kube-controller-manager', 2, 1, 0), ('machine-controller-manager', 1, 1, 1))


@pytest.fixture
def bench(kube, ec2, tmp_path):
    b = MachinesBench(kube, ec2.url, str(tmp_path))
    kube.server.set_status_delay(0.3)        # the emulator's status mover plays the deployment controller
    yield b
    b.stop()


def frozen(bench):
    md = bench.kube.get(bench.path('machinedeployments', 'pool'))
    return next((c for c in (md.get('status') or {}).get('conditions') or []
                 if c['type'] == 'Frozen' and c['status'] == 'True'), None)


def test_a_prober_scale_down_freezes_machine_replacement_until_it_scales_back(bench, tmp_path):
    ns = bench.namespace
    deployments = api_path('apps/v1', 'deployments', ns)
    for name, replicas, _up, _down in TARGETS:
        bench.kube.create(deployments, deployment(name, replicas))
    config = tmp_path / 'prober.yaml'
    config.write_text(yaml.safe_dump({
        'probeInterval': '1s', 'initialDelay': '1s', 'probeTimeout': '5s', 'backoffJitterFactor': 0,
        'kcmNodeMonitorGraceDuration': '8s', 'nodeLeaseFailureFraction': 0.6,
        'dependentResourceInfos': [{'ref': {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': name},
                                    'optional': False, 'scaleUp': {'level': up}, 'scaleDown': {'level': down}}
                                   for name, _replicas, up, down in TARGETS]}))
    bench.create_class()
    bench.create_deployment(replicas=3)
    controller = ControllerProcess(
        bench.kube.server, str(tmp_path), identity='machines-prober',
        args=['--controllers', 'machines,prober'] + FAST_FLAGS + [
            '--machine-fleet-freeze-fraction', '1', '--prober-config', str(config), '--namespace', ns,
            '--kube-api-qps', '50', '--kube-api-burst', '100'],
        extra_env={'AWS_ENDPOINT_URL': bench.ec2_url, 'AWS_DEFAULT_REGION': REGION}).start()
    bench.controllers.append(controller)
    machines = {m['metadata']['name'] for m in bench.wait_running(3)}
    nodes = bench.kubelets.node_names()
    leases = NodeLeases(bench.kube, names=nodes, period=1.0).start()
    try:
        status = api_path('v1', 'configmaps', ns, 'steward-watchdog-prober-status')
        wait_for(lambda: ((bench.kube.get_or_none(status) or {}).get('data') or {}).get('lastProbeResult') == 'healthy',
                 60, 0.5, what='a first healthy probe')

        def targets():
            return {d['metadata']['name']: (d['spec']['replicas'], MELTDOWN in (d['metadata'].get('annotations') or {}))
                    for d in bench.kube.list(deployments)}

        victims = nodes[:2]
        leases.expire(victims)                              # 2 of 3 leases expired: 0.67 >= 0.6
        wait_for(lambda: targets() == {'kube-controller-manager': (0, True), 'machine-controller-manager': (0, True)},
                 60, 0.5, what='both targets held down with the meltdown marker')
        cond = wait_for(lambda: frozen(bench), 30, 0.5, what='the machines loop frozen by the watchdog')
        assert cond['reason'] == 'DependencyWatchdogMeltdownProtection'
        assert 'Deployment/kube-controller-manager' in cond['message']

        bench.kubelets.partition(victims)                   # the node lifecycle controller marks them Unknown
        time.sleep(10)                                      # past the 6s health timeout: no replacement
        assert {m['metadata']['name'] for m in bench.machines()} == machines
        assert 'Failed' not in bench.phases() and len(bench.all_instances()) == 3

        bench.kubelets.heal()
        leases.heal()
        wait_for(lambda: targets() == {'kube-controller-manager': (2, False), 'machine-controller-manager': (1, False)},
                 60, 0.5, what='targets restored, markers removed')
        wait_for(lambda: frozen(bench) is None and bench.phases() == ['Running'] * 3, 60, 0.5, what='the freeze lifted')
        assert {m['metadata']['name'] for m in bench.machines()} == machines      # none was replaced
    finally:
        leases.stop()
