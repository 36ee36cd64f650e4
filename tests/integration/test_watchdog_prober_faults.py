# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The prober when things go wrong, with the real controller against the emulator (DWD's acceptance tests P6 to
P10; P11, the flags, is in tests/unit/controller/prober): the probed cluster unreachable or refusing the lease
list (reached through kubeConfigSecretName, served by a test double), the cluster's lifecycle stopping the probe,
missing targets, initialDelay and timeout."""

from __future__ import annotations

import time

import requests

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

from lab.env.ports import free_port
from lab.env.node_leases import lease_object, node_object
from support.watchdog import ApiDouble
from support.watchdog_env import (  # noqa: F401  (env: the fixture)  # pylint: disable=unused-import
    NS, all_at, env, last_operation, prober_config, resource, step_of, until)

TWO = [('kcm', 3, 0, 0), ('mcm', 2, 1, 1)]


def expired_cluster(count: int = 5) -> ApiDouble:
    """A probed cluster whose node leases all expired long ago: a working probe would scale everything down."""
    names = ['worker-%d' % i for i in range(count)]
    return ApiDouble(nodes=lambda: [node_object(n) for n in names],
                     leases=lambda: [lease_object(n, time.time() - 3600) for n in names])


def probes(controller, result: str) -> float:
    return controller.metric('dwd_prober_probes_total', {'result': result}) or 0.0


def test_dwd_p6_p7_no_verdict_no_scaling(env):
    """P6: the probed API server unreachable (connection refused, then 503): no lease probe, nothing scaled.
    P7: the lease list refused (403, then 429 TooManyRequests): nothing scaled; after a 429 the next probe waits
    for backoffDurationForThrottledRequests. Once the cluster answers, its expired leases do scale down (so the
    test can tell "refused" from "no reason to scale"). Also: health on its own port (--health-port, DWD :9644)."""
    double = expired_cluster()
    try:
        env.deploy(TWO)
        env.kubeconfig_secret('probed', 'http://127.0.0.1:%d' % free_port())   # nothing listens there
        health = free_port()
        controller = env.start(prober_config(TWO, kubeConfigSecretName='probed', backoffDurationForThrottledRequests='3s'),
                               extra=['--health-port', str(health)])
        until(lambda: probes(controller, 'api') >= 2, 30, what='API probes failing (connection refused)')
        assert requests.get('http://127.0.0.1:%d/healthz' % health, timeout=5).status_code == 200

        env.kubeconfig_secret('probed', double.url)
        double.fail('/version', 503)
        until(lambda: len(double.times('/version')) >= 2, 30, what='API probes failing (503)')
        double.heal()
        double.fail('/apis/coordination.k8s.io', 403)
        until(lambda: len(double.times('/apis/coordination.k8s.io')) >= 2, 30, what='lease lists refused (403)')
        assert probes(controller, 'leases') >= 2
        double.fail('/apis/coordination.k8s.io', 429)
        throttled_from = len(double.times('/apis/coordination.k8s.io'))
        until(lambda: len(double.times('/apis/coordination.k8s.io')) >= throttled_from + 3, 40, what='throttled lists')
        gaps = [b - a for a, b in zip(double.times('/apis/coordination.k8s.io')[throttled_from:],
                                      double.times('/apis/coordination.k8s.io')[throttled_from + 1:])]
        assert min(gaps) >= 2.9, gaps             # 3s back-off instead of the 1s probe interval
        assert all_at(env, {'kcm': 3, 'mcm': 2}) and env.recorder.changes == []
        assert env.status()['phase'] == 'Healthy' and env.status()['lastProbeResult'] == 'leases'

        double.heal()
        until(lambda: all_at(env, {'kcm': 0, 'mcm': 0}), 60, what='scale-down once the cluster answers')
    finally:
        double.stop()


def test_dwd_p8_probing_follows_the_cluster_lifecycle(env):
    """P8: while the namespace (our Cluster object) is hibernated, or the probed cluster has no Nodes, or the namespace
    is being deleted, probing stops: no scale action, one log line. Probing comes back only after initialDelay."""
    env.kube.create(api_path('v1', 'namespaces'), {'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {
        'name': NS, 'annotations': {'cluster.steward.io/hibernated': 'true'}, 'finalizers': ['kubernetes']}})
    env.deploy(TWO)
    env.leases.partition(env.leases.names[:4])
    controller = env.start(prober_config(TWO, initialDelay='3s'))
    until(lambda: env.status().get('probing') == 'false', 40, what='probing stopped (hibernated)')
    assert env.status()['stoppedReason'].startswith('hibernated')
    until(lambda: probes(controller, 'stopped') >= 3, 30, what='a few stopped probes')
    assert all_at(env, {'kcm': 3, 'mcm': 2}) and controller.metric('dwd_prober_probing') == 0.0
    assert controller.log().count('probing stopped for this cluster') == 1

    woken = time.time()
    env.kube.merge_patch(api_path('v1', 'namespaces', name=NS), {'metadata': {'annotations': {
        'cluster.steward.io/hibernated': None}}})
    until(lambda: all_at(env, {'kcm': 0, 'mcm': 0}), 60, what='scale-down after hibernation')
    operation = until(lambda: last_operation(env, 'down'), 30, what='the scale-down in the status')
    assert step_of(operation, 'kcm')['scaleCallAt'] - woken >= 3.0     # initialDelay after probing resumed

    for name in env.leases.names:                      # no workers: every Node gone
        env.kube.delete(api_path('v1', 'nodes', name=name))
    env.leases.heal()
    until(lambda: env.status().get('stoppedReason', '').startswith('no workers'), 30, what='probing stopped (no workers)')
    time.sleep(2)
    assert all_at(env, {'kcm': 0, 'mcm': 0})         # leases renewed, yet nothing scaled up without workers

    env.kube.delete(api_path('v1', 'namespaces', name=NS))   # the finalizer keeps it: being deleted
    until(lambda: env.status().get('stoppedReason') == 'the namespace is being deleted', 30, what='probing stopped (deleting)')


def test_dwd_p9_missing_optional_and_mandatory_targets(env):
    """P9: a missing optional target is skipped and the others are scaled; a missing mandatory one is reported
    (Warning Event TargetNotFound) and fails its step. Scaling down goes on past it; scaling up waits for it."""
    env.deploy([('kcm', 3, 0, 0), ('ca', 1, 1, 1)])
    resources = [resource('kcm', 0, 0), resource('gone-optional', 0, 0, optional=True), resource('gone-mandatory', 0, 0),
                 resource('ca', 1, 1)]
    controller = env.start(prober_config(resources=resources))
    env.leases.partition(env.leases.names[:3])
    until(lambda: all_at(env, {'kcm': 0, 'ca': 0}), 60, what='the present targets scaled down')
    operation = until(lambda: last_operation(env, 'down'), 30, what='the scale-down in the status')
    assert operation['outcomes'] == {'succeeded': 2, 'skipped': 1, 'failed': 1}
    assert step_of(operation, 'gone-optional')['kind'] == 'not-found'
    warnings = [e for e in env.events('gone-mandatory') if e['reason'] == 'TargetNotFound']
    assert warnings and warnings[0]['type'] == 'Warning' and 'mandatory' in warnings[0]['message']
    assert controller.metric('dwd_prober_scale_operations_total', {
        'target': 'Deployment/gone-mandatory', 'direction': 'down', 'outcome': 'failed'}) >= 1

    env.leases.heal()
    until(lambda: env.replicas('kcm') == 3, 60, what='level 0 scaled up')
    operation = until(lambda: last_operation(env, 'up'), 30, what='the scale-up in the status')
    assert step_of(operation, 'ca')['outcome'] == 'blocked' and env.replicas('ca') == 0
    assert any(e['reason'] == 'ScaleBlocked' for e in env.events('ca'))
    env.deploy([('gone-mandatory', 0, 0, 0)])        # the mandatory target appears (at 0: scaled up to 1, as DWD)
    until(lambda: all_at(env, {'ca': 1, 'gone-mandatory': 1}), 60, what='level 1 once level 0 is complete')


def test_dwd_p10_initial_delay_timeout_and_completion_gates(env):
    """P10: a scale call goes out no earlier than the target's initialDelay after its level starts; a target that
    does not reach its goal within timeout is reported (Warning ScaleTimeout, metric outcome timeout). On scale-down
    the next level still runs; on scale-up it waits until the late level completes on a later probe."""
    env.deploy(TWO)
    resources = [resource('kcm', 0, 0, scale_down={'initialDelay': '2s'}, scale_up={'timeout': '2s'}),
                 resource('mcm', 1, 1, scale_down={'timeout': '2s'})]
    controller = env.start(prober_config(resources=resources))
    env.hold('mcm')
    env.leases.partition(env.leases.names[:3])
    operation = until(lambda: last_operation(env, 'down'), 60, what='the scale-down in the status')
    kcm, mcm = step_of(operation, 'kcm'), step_of(operation, 'mcm')
    assert kcm['scaleCallAt'] - kcm['startedAt'] >= 2.0 and operation['decisionToFirstScaleSeconds'] >= 2.0
    assert (kcm['outcome'], mcm['outcome']) == ('succeeded', 'timeout')
    assert mcm['scaleCallAt'] >= kcm['finishedAt']
    assert [e['type'] for e in env.events('mcm') if e['reason'] == 'ScaleTimeout'] == ['Warning']
    assert controller.metric('dwd_prober_scale_operations_total', {
        'target': 'Deployment/mcm', 'direction': 'down', 'outcome': 'timeout'}) == 1.0
    env.hold('mcm', False)

    env.hold('kcm')                                   # kcm's pods do not come up: mcm must wait
    env.leases.heal()
    operation = until(lambda: last_operation(env, 'up'), 60, what='the scale-up in the status')
    assert (step_of(operation, 'kcm')['outcome'], step_of(operation, 'mcm')['outcome']) == ('timeout', 'blocked')
    time.sleep(2)
    assert env.replicas('mcm') == 0 and env.replicas('kcm') == 3
    env.hold('kcm', False)
    until(lambda: env.replicas('mcm') == 2, 60, what='mcm scaled up once kcm is ready')
    until(lambda: 'cluster.steward.io/watchdog-state' not in env.annotations('kcm'), 30, what='kcm markers removed')
