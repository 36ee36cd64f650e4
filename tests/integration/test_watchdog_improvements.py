# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What we do better than DWD (reference/watchdog.md §d), with the real controller against the emulator:
hysteresis against flapping, ownership that survives a restart mid-operation and never overwrites someone
else's replicas. (Plans, Events, metrics and completion gates are asserted in the prober tests too.)"""

from __future__ import annotations

import time

from lab.env.node_leases import lease_object, node_object
from support.watchdog import ApiDouble
from support.watchdog_env import (  # noqa: F401  (env: the fixture)  # pylint: disable=unused-import
    MELTDOWN, OWNER, REPLICAS, STATE, all_at, env, prober_config, until)

TWO = [('kcm', 3, 0, 0), ('mcm', 2, 1, 1)]


def hovering_cluster() -> ApiDouble:
    """Ten nodes whose leases alternate, one lease list to the next, between 6 and 5 expired: 0.6 and 0.5 around a
    threshold of 0.6, i.e. failed, healthy, failed, ... on consecutive probes."""
    names = ['worker-%d' % i for i in range(10)]
    double = ApiDouble(nodes=lambda: [node_object(n) for n in names], leases=lambda: [])

    def leases(expired: int):
        return lambda: [lease_object(n, time.time() - (3600 if i < expired else 0)) for i, n in enumerate(names)]
    double.lease_rounds = [leases(6), leases(5)]
    return double


def test_improvement_hysteresis_leases_hovering_at_the_threshold(env):
    """failureThreshold 2 / successThreshold 2: verdicts alternating failed/healthy on every probe scale nothing.
    The same cluster with DWD's behaviour (1 / 1) flaps the targets down and up: the scenario is a real one."""
    double = hovering_cluster()
    try:
        env.deploy(TWO)
        env.kubeconfig_secret('probed', double.url)
        controller = env.start(prober_config(TWO, kubeConfigSecretName='probed', failureThreshold=2, successThreshold=2))
        until(lambda: double.lease_lists >= 10, 60, what='ten probes')
        failed = controller.metric('dwd_prober_probes_total', {'result': 'failed'})
        healthy = controller.metric('dwd_prober_probes_total', {'result': 'healthy'})
        assert failed >= 4 and healthy >= 4
        assert env.recorder.changes == [] and all_at(env, {'kcm': 3, 'mcm': 2})
        assert 'lastOperation' not in env.status()
        controller.stop()

        env.start(prober_config(TWO, kubeConfigSecretName='probed'), identity='prober-dwd')
        until(lambda: env.recorder.count('kcm', 0) >= 1 and env.recorder.count('kcm', 3) >= 1, 60,
              what='DWD-like flapping: down, then up again')
    finally:
        double.stop()


def test_improvement_restart_between_levels_and_someone_elses_replicas(env):
    """Ownership, persisted: killed between two levels, the restarted watchdog finishes the scale-down from the
    annotations alone, touching each target once. Replicas changed by hand while down are left alone and reported,
    and not overwritten on the way up; meltdown-protection-active is set exactly while a target is held down."""
    env.deploy(TWO)
    config = prober_config(resources=[
        {'ref': {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': 'kcm'}, 'optional': False,
         'scaleUp': {'level': 0}, 'scaleDown': {'level': 0, 'timeout': '60s'}},
        {'ref': {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': 'mcm'}, 'optional': False,
         'scaleUp': {'level': 1}, 'scaleDown': {'level': 1}}])
    first = env.start(config)
    env.hold('kcm')                                   # level 0 cannot complete: the watchdog waits in its gate
    env.leases.partition(env.leases.names[:3])
    until(lambda: env.annotations('kcm').get(STATE) == 'scaled-down', 60, what='kcm scaled down, waiting in its gate')
    assert env.replicas('kcm') == 0 and env.replicas('mcm') == 2
    first.kill()                                      # SIGKILL between level 0 and level 1
    env.hold('kcm', False)
    assert env.annotations('mcm') == {} and env.annotations('kcm')[REPLICAS] == '3'

    second = env.start(config, identity='prober-1')
    until(lambda: all_at(env, {'kcm': 0, 'mcm': 0}), 60, what='the restarted watchdog finishing the scale-down')
    assert 'resuming in phase ScaledDown' in second.log()
    env.recorder.caught_up()
    assert env.recorder.count('kcm', 0) == 1 and env.recorder.count('mcm', 0) == 1      # each target scaled once
    assert env.annotations('mcm')[REPLICAS] == '2' and MELTDOWN in env.annotations('mcm')

    env.patch('kcm', {'spec': {'replicas': 2}})       # an operator brings kcm back by hand during the outage
    until(lambda: env.annotations('kcm').get(STATE) == 'released', 30, what='kcm released')
    assert any(e['reason'] == 'ReplicasChangedByOther' and e['type'] == 'Warning' for e in env.events('kcm'))
    assert MELTDOWN not in env.annotations('kcm') and REPLICAS not in env.annotations('kcm')
    time.sleep(2)                                     # more failing probes: kcm is not scaled down again
    assert env.replicas('kcm') == 2 and env.recorder.count('kcm', 0) == 1

    env.leases.heal()
    until(lambda: env.replicas('mcm') == 2, 60, what='mcm restored')
    until(lambda: not any(k in env.annotations(n) for n in ('kcm', 'mcm') for k in (REPLICAS, MELTDOWN, OWNER, STATE)),
          30, what='every marker removed')
    assert env.replicas('kcm') == 2                   # the operator's 2, not the 3 recorded before
    assert env.recorder.caught_up().count('kcm', 3) == 0
