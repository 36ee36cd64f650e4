"""The prober's Event reasons per step outcome, its probe timing (DWD's jitter, the throttling back-off), and one
Warning for a failure repeated on every probe."""

from __future__ import annotations

import types

import kubernetes
import pytest

from ansible_collections.steward.cluster.plugins.module_utils.watchdog import plan as p
from ansible_collections.steward.cluster.plugins.module_utils.watchdog import scaler as s
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.prober_config import parse_prober_config

from steward_controller.core.metrics import Health, Metrics
from steward_controller.prober.loop import ProberLoop
from steward_controller.prober.report import Reporter, ProberMetrics, event_of

CONFIG = parse_prober_config({'probeInterval': '10s', 'backoffJitterFactor': 0.2,
                              'backoffDurationForThrottledRequests': '30s', 'dependentResourceInfos': [
                                  {'ref': {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': 'kcm'},
                                   'scaleUp': {'level': 0}, 'scaleDown': {'level': 0}}]})
REF = CONFIG.dependent_resources[0].ref


def result(direction, action, kind, outcome, warning=False):
    step = p.Step(ref=REF, direction=direction, level=0, action=action, kind=kind, reason='r', warning=warning)
    return s.StepResult(step, outcome, 'm')


@pytest.mark.parametrize('res, reason, warning', [
    (result('down', p.SCALE, p.K_SCALE, s.SUCCEEDED), 'ScaledDown', False),
    (result('up', p.SCALE, p.K_SCALE, s.SUCCEEDED), 'ScaledUp', False),
    (result('up', p.DONE, p.K_RESUME, s.SUCCEEDED), 'ScaledUp', False),
    (result('down', p.DONE, p.K_ALREADY, s.SUCCEEDED), '', False),          # nothing new: no Event
    (result('down', p.SCALE, p.K_SCALE, s.TIMEOUT), 'ScaleTimeout', True),
    (result('down', p.FAIL, p.K_NOT_FOUND, s.FAILED), 'TargetNotFound', True),
    (result('down', p.SCALE, p.K_SCALE, s.FAILED), 'ScaleFailed', True),
    (result('up', p.SCALE, p.K_SCALE, s.BLOCKED), 'ScaleBlocked', True),
    (result('down', p.ANNOTATE, p.K_CHANGED, s.SUCCEEDED, True), 'ReplicasChangedByOther', True),
    (result('up', p.SKIP, p.K_ALREADY, s.SKIPPED), '', False),
])
def test_event_reasons(res, reason, warning):
    assert event_of(res) == (reason, warning)


class Recorder:
    def __init__(self):
        self.events = []

    def report(self, body, reason, message, warning=False, kind='', outcome=''):
        self.events.append((reason, warning))


def test_a_failure_repeated_on_every_probe_is_one_event():
    from prometheus_client import CollectorRegistry
    runtime = Recorder()
    reporter = Reporter(runtime, ProberMetrics(CollectorRegistry()), 'ns')
    failure = result('down', p.FAIL, p.K_NOT_FOUND, s.FAILED)
    for _ in range(3):
        reporter.step(failure)
    assert runtime.events == [('TargetNotFound', True)]
    reporter.step(result('down', p.SCALE, p.K_SCALE, s.SUCCEEDED))
    reporter.step(failure)                                            # after a success: news again
    assert runtime.events[-1] == ('TargetNotFound', True) and len(runtime.events) == 3


def test_probe_timing_jitter_and_throttling():
    configuration = kubernetes.client.Configuration()
    configuration.host = 'http://127.0.0.1:1'
    runtime = types.SimpleNamespace(
        client=types.SimpleNamespace(configuration=configuration, timeout=5.0), metrics=Metrics(), health=Health(),
        settings=types.SimpleNamespace(namespace='ns'))
    options = types.SimpleNamespace(config=CONFIG, name='prober', qps=5.0, burst=10)
    draws = iter([0.0, 1.0, 0.5])
    loop = ProberLoop(runtime, options, jitter=lambda: next(draws))
    assert [loop.next_wait(False) for _ in range(3)] == [10.0, 12.0, 11.0]   # interval x (1 + factor x U[0,1))
    loop.jitter = lambda: 0.0
    assert loop.next_wait(True) == 30.0                                        # the throttling back-off wins
