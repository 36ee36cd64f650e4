# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the prober tells: Prometheus metrics (DWD has none; names `dwd_prober_*`), an Event on every target
it acts on and on the status ConfigMap for every plan, and a log line for each. The status ConfigMap itself
is written by loop.py."""

from __future__ import annotations

import logging
import threading
from typing import Any, Dict, Mapping, Tuple

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ansible_collections.steward.cluster.plugins.module_utils.watchdog import plan as p
from ansible_collections.steward.cluster.plugins.module_utils.watchdog import scaler as s
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.decision import SCALE_DOWN

log = logging.getLogger('steward.prober')


class ProberMetrics:
    def __init__(self, registry: CollectorRegistry):
        r = registry
        self.probes = Counter('dwd_prober_probes', 'Probes by result: healthy, failed, skipped (one candidate lease), '
                              'api, nodes, leases, machines, secret (that step failed: no verdict, no scaling), stopped '
                              '(probing is off for the cluster).', ['result'], registry=r)
        self.probe_seconds = Histogram('dwd_prober_probe_duration_seconds', 'Time of one probe (API check, lists, verdict).',
                                       registry=r, buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
        self.candidates = Gauge('dwd_prober_candidate_leases', 'Node leases that counted in the last probe.', registry=r)
        self.expired = Gauge('dwd_prober_expired_leases', 'Candidate node leases expired in the last probe.', registry=r)
        self.fraction = Gauge('dwd_prober_expired_lease_fraction', 'expired / candidate node leases in the last probe '
                              '(compare with dwd_prober_failure_fraction).', registry=r)
        self.threshold = Gauge('dwd_prober_failure_fraction', 'The configured nodeLeaseFailureFraction.', registry=r)
        self.scaled_down = Gauge('dwd_prober_scaled_down', '1 while the prober holds its targets down (phase ScaledDown).',
                                 registry=r)
        self.probing = Gauge('dwd_prober_probing', '1 while probing is on; 0 while the cluster is hibernated, migrating, '
                             'being deleted or without workers.', registry=r)
        self.operations = Counter('dwd_prober_scale_operations', 'Steps on dependent resources by target, direction '
                                  '(down, up) and outcome (succeeded, skipped, failed, timeout, blocked, stopped).',
                                  ['target', 'direction', 'outcome'], registry=r)
        self.latency = Histogram('dwd_prober_decision_to_scale_seconds', 'From the scaling decision to the first scale '
                                 'call of its plan.', ['direction'], registry=r,
                                 buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))


# Event reasons by (direction, outcome, step kind); a Warning where something did not go as planned.
def event_of(result: s.StepResult) -> Tuple[str, bool]:
    step = result.step
    down = step.direction == SCALE_DOWN
    if result.outcome == s.TIMEOUT:
        return 'ScaleTimeout', True
    if result.outcome == s.FAILED:
        return ('TargetNotFound' if step.kind == p.K_NOT_FOUND else 'ScaleFailed'), True
    if result.outcome == s.BLOCKED:
        return 'ScaleBlocked', True
    if step.kind == p.K_CHANGED:
        return 'ReplicasChangedByOther', True
    if step.action == p.SCALE and result.outcome == s.SUCCEEDED:
        return ('ScaledDown' if down else 'ScaledUp'), step.warning
    if step.action == p.ANNOTATE:
        return 'WatchdogMarkers', step.warning
    if step.action == p.DONE and result.outcome == s.SUCCEEDED and step.kind != p.K_ALREADY:
        return ('ScaledDown' if down else 'ScaledUp'), False
    return '', False


class Reporter:
    """Events and metrics for step results (called from the executor's threads)."""

    def __init__(self, runtime: Any, metrics: ProberMetrics, namespace: str):
        self.runtime = runtime
        self.metrics = metrics
        self.namespace = namespace
        self._lock = threading.Lock()
        self._last_problem: Dict[str, str] = {}   # target -> last Warning text (repeated failures: one Event)

    def involved(self, ref: Any) -> Dict[str, Any]:
        return {'apiVersion': ref.api_version, 'kind': ref.kind, 'metadata': {'name': ref.name, 'namespace': self.namespace}}

    def step(self, result: s.StepResult) -> None:
        step = result.step
        self.metrics.operations.labels(str(step.ref), step.direction, result.outcome).inc()
        reason, warning = event_of(result)
        target = str(step.ref)
        text = 'scale %s, level %d: %s%s' % (step.direction, step.level, result.message or step.reason,
                                             ' ' + result.observed if result.observed and result.outcome != s.SKIPPED else '')
        problem = result.outcome in (s.FAILED, s.TIMEOUT, s.BLOCKED)
        with self._lock:
            repeated = problem and self._last_problem.get(target) == text
            if problem:
                self._last_problem[target] = text
            elif result.outcome == s.SUCCEEDED:
                self._last_problem.pop(target, None)
        if not reason or repeated:
            log.debug(text, extra={'object': target, 'outcome': result.outcome})
            return
        self.runtime.report(self.involved(step.ref), reason, text, warning=warning or problem, kind=step.ref.kind,
                            outcome=result.outcome)

    def plan(self, plan: p.Plan, status_object: Mapping[str, Any]) -> None:
        reason = 'ScaleDownPlanned' if plan.direction == SCALE_DOWN else 'ScaleUpPlanned'
        self.runtime.report(status_object, reason, plan.summary(), kind='ConfigMap')
