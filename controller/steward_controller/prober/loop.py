# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The prober: one thread that probes the cluster and scales the dependent resources (DWD's prober).

Timing as DWD (wait.JitterUntil, sliding): the first probe `initialDelay` after the loop starts, then one
every `probeInterval` + up to `backoffJitterFactor` x `probeInterval`, counted from the end of the previous
probe (a scale operation in flight delays the next probe; it never overlaps one); after an HTTP 429 the
next probe waits at least `backoffDurationForThrottledRequests`. One addition: a healthy probe whose leases,
left unrenewed, reach the failure fraction before the next probe is due brings that probe forward to the
crossing (`early_wait`), so an outage is acted on when it crosses, not up to a probe cycle later.

Each probe: is probing on for the cluster (the namespace) and the probe itself (API server, Nodes, Leases,
Machines; no Nodes stops probing too), both probe.probe_sequence; the hysteresis (decision.decide); if it says
so, the plan from the targets as they are (plan.build_plan), logged and posted as an Event on the status
ConfigMap, then applied level by level (scaler.Scaler), every step an Event on its target and a metric;
last the status ConfigMap `<--prober-name>-status` in `--namespace`.

Start (and restart) takes the phase from the targets' annotations: a target we hold down means the
outage was on when we stopped, so the next failed probe finishes the scale-down and a scale-up needs
`successThreshold` successes, exactly as if the process had not restarted.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Any, Callable, Dict, Optional

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import AlreadyExists, KubeError, NotFound
from ansible_collections.steward.cluster.plugins.module_utils.kube.ratelimit import RateLimitedClient, client_go_bucket
from ansible_collections.steward.cluster.plugins.module_utils.watchdog import plan as p
from ansible_collections.steward.cluster.plugins.module_utils.watchdog import status
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.decision import DOWN, ProbeState, decide
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.probe import ProbeOutcome, probe_sequence
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.scaler import Scaler, first_scale_call, summarize
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.targets import Targets

from steward_controller.core.background import BackgroundLoop, register_background
from steward_controller.core.runtime import Runtime
from steward_controller.prober.report import ProberMetrics, Reporter

log = logging.getLogger('steward.prober')
HEALTH_KEY = 'prober-loop'
STOP_SECONDS = 10.0
# An early probe (ProberLoop.early_wait) comes at least this fraction of probeInterval after the previous one,
# and this long after the predicted crossing (the verdict's `now` is read after the lists, later still).
EARLY_PROBE_MIN_GAP = 0.25
EARLY_PROBE_MARGIN = 0.05


def register(registry: Any, runtime: Runtime) -> None:
    options = runtime.settings.options('prober')
    if options is None or options.config is None:
        log.info('the prober is off (no --prober-config)')
        return
    loop = ProberLoop(runtime, options)
    register_background(registry, 'prober', loop.start, loop.stop)


class ProberLoop:
    def __init__(self, runtime: Runtime, options: Any, clock: Callable[[], float] = time.time,
                 jitter: Callable[[], float] = random.random):
        self.runtime = runtime
        self.config = options.config
        self.owner = options.name
        self.namespace = runtime.settings.namespace
        self.clock = clock
        self.jitter = jitter
        self.seed = RateLimitedClient(runtime.client.configuration, client_go_bucket(options.qps, options.burst),
                                      timeout=runtime.client.timeout)
        self.metrics = ProberMetrics(runtime.metrics.registry)
        self.metrics.threshold.set(self.config.node_lease_failure_fraction)
        self.reporter = Reporter(runtime, self.metrics, self.namespace)
        self.background = BackgroundLoop('prober', runtime.health, HEALTH_KEY, clock)
        self.stopped = self.background.stopped
        self.beat = self.background.beat
        self.sleep = self.background.sleep
        self.scaler = Scaler(Targets(self.seed, self.namespace), self.config.dependent_resources, self.owner,
                             clock=clock, stop=self.stopped, on_result=self.reporter.step, on_wait=self.beat)
        self.state = ProbeState()
        self.off_reason: Optional[str] = None   # why probing is off ('' on; None before the first probe)
        self.last_plan = ''
        self.last_error = ''
        self.last_verdict = ''
        self.resumed = False     # the phase was taken from the targets' annotations
        self.status_object = {'apiVersion': 'v1', 'kind': 'ConfigMap',
                              'metadata': {'name': status.status_name(self.owner), 'namespace': self.namespace}}

    # --- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        for warning in self.config.warnings:
            log.warning('prober config: unknown field %s ignored (as DWD does)', warning)
        log.info('prober started', extra={'namespace': self.namespace, 'owner': self.owner,
                                          'targets': [str(r.ref) for r in self.config.dependent_resources]})
        self.beat()
        self.background.spawn(self.run, 'prober')

    def stop(self) -> None:
        self.background.stop(STOP_SECONDS)

    def run(self) -> None:
        if self.sleep(self.config.initial_delay):
            # a bug must not end the watchdog: logged, and the next probe comes an interval later
            self.background.repeat(self.step, 'probe failed unexpectedly', self.config.probe_interval, beating=True)

    def step(self) -> float:
        if not self.resumed:
            self.resumed = self.resume()
        return self.probe_once()

    def resume(self) -> bool:
        """The phase from the targets: DOWN when one carries our scaled-down marker. False when a target could not
        be read (tried again before the next probe: a held-down target must not be taken for a healthy one)."""
        observations = self.scaler.observe_all()
        unreadable = sorted(str(ref) for ref, obs in observations.items() if obs.error)
        held = sorted(str(ref) for ref, obs in observations.items() if p.held_down(obs, self.owner))
        if held:
            self.state = ProbeState(DOWN)
            log.info('resuming in phase %s: targets held down by %s: %s', DOWN, self.owner, ', '.join(held))
        self.metrics.scaled_down.set(1 if self.state.phase == DOWN else 0)
        if unreadable and not held:
            log.warning('cannot read %s yet; their ownership markers decide the phase', ', '.join(unreadable))
            return False
        return True

    def next_wait(self, throttled: bool) -> float:
        interval = self.config.probe_interval
        wait = interval + self.jitter() * self.config.backoff_jitter_factor * interval
        return max(wait, self.config.throttled_backoff) if throttled else wait

    # --- one probe ----------------------------------------------------------------------------
    def probe_once(self) -> float:
        """One probe and what follows from it; returns the seconds to wait before the next one."""
        self.beat()
        # coming back from off, only the namespace is looked at: as for a new probe, wait initialDelay first
        outcome, off = probe_sequence(self.seed, self.config, self.namespace, self.clock,
                                      namespace_only=bool(self.off_reason))
        if outcome is None:
            if off:
                self.set_off(off)
                return self.next_wait(False)
            log.info('probing resumes after %gs (initialDelay)', self.config.initial_delay)
            self.off_reason = ''
            self.metrics.probing.set(1)
            return self.config.initial_delay
        self.off_reason = ''
        self.metrics.probing.set(1)
        self.metrics.probes.labels(outcome.result).inc()
        self.metrics.probe_seconds.observe(max(0.0, outcome.finished - outcome.started))
        if off:                       # the probe found no Nodes
            self.set_off(off)
            return self.next_wait(False)
        self.record(outcome)
        decision = decide(self.state, outcome.verdict.verdict if outcome.verdict is not None and outcome.error is None
                          else None, self.config.failure_threshold, self.config.success_threshold)
        self.state = decision.state
        data = status.probe_data(self.state, outcome.as_dict(), self.clock())
        if decision.action is not None:
            data.update(self.act(decision.action, decision.reason))
        self.metrics.scaled_down.set(1 if self.state.phase == DOWN else 0)
        self.write_status(data)
        if outcome.error is not None:
            return self.next_wait(outcome.error.throttled)
        return self.early_wait(outcome, self.next_wait(False))

    def early_wait(self, outcome: ProbeOutcome, wait: float) -> float:
        """`wait`, or less when this healthy probe's own leases say the threshold will be crossed before then.

        With no lease renewed from now on, the leases just read reach `nodeLeaseFailureFraction` at a known
        instant (LeaseVerdict.crossing_at): in an outage the kubelets stop renewing ~30 s (0.75 x grace) before
        that, so a probe or three see it coming. The next probe is then made at that instant instead of up to
        probeInterval x (1 + jitter) after it; it reads the leases afresh and decides by the same rules (a lease
        renewed meanwhile counts as renewed, failureThreshold still counts probes). Never sooner than
        EARLY_PROBE_MIN_GAP x probeInterval: a crossing due right away waits that long."""
        if self.state.phase == DOWN or outcome.verdict is None:
            return wait
        crossing = outcome.verdict.crossing_at()
        if crossing is None:
            return wait
        early = max(crossing + EARLY_PROBE_MARGIN - self.clock(), EARLY_PROBE_MIN_GAP * self.config.probe_interval)
        if early < wait:
            log.debug('leases cross the threshold in %.2fs: next probe then, not in %.2fs', early, wait)
            return early
        return wait

    def set_off(self, why: str) -> None:
        self.metrics.probes.labels('stopped').inc()
        self.metrics.probing.set(0)
        if why != self.off_reason:
            log.info('probing stopped for this cluster: %s; nothing is scaled while it lasts', why)
            self.write_status(status.probe_data(self.state, {'result': 'stopped'}, self.clock(), stopped=why))
        self.off_reason = why

    def record(self, outcome: ProbeOutcome) -> None:
        if outcome.error is not None:
            text = str(outcome.error)
            if text != self.last_error:
                log.warning(text, extra={'stage': outcome.error.stage, 'throttled': outcome.error.throttled})
            self.last_error = text
            return
        if self.last_error:
            log.info('probe succeeds again')
        self.last_error = ''
        verdict = outcome.verdict
        self.metrics.candidates.set(verdict.candidates)
        self.metrics.expired.set(verdict.expired)
        if verdict.fraction is not None:
            self.metrics.fraction.set(verdict.fraction)
        if verdict.verdict != self.last_verdict:   # a change of verdict is news; the same verdict again is not
            log.info('lease probe %s: %s', verdict.verdict, verdict.reason, extra={'phase': self.state.phase})
        else:
            log.debug('lease probe %s: %s', verdict.verdict, verdict.reason)
        self.last_verdict = verdict.verdict

    def act(self, direction: str, reason: str) -> Dict[str, str]:
        """Plan, log, Event, apply; returns the status keys of the plan and the operation."""
        decided = self.clock()
        plan = self.scaler.plan(direction, reason)
        if all(step.action == p.SKIP for step in plan.steps):
            return {}
        summary = plan.summary()
        news = bool(plan.changes) or summary != self.last_plan
        self.last_plan = summary
        event: Optional[threading.Thread] = None
        if news:
            log.info(summary, extra={'plan': plan.as_dict()})
            # the plan's Event is posted beside the first level, not before it: the scale call waits for nothing
            # but the targets (the Event is news for people; the status keys below hold the plan either way)
            event = threading.Thread(target=self.reporter.plan, args=(plan, self.status_object),
                                     name='prober-plan-event', daemon=True)
            event.start()
        try:
            results = self.scaler.run(plan)
        finally:
            if event is not None:
                event.join()
        finished = self.clock()
        first = first_scale_call(results)
        if first is not None:
            self.metrics.latency.labels(direction).observe(max(0.0, first - decided))
        data = status.plan_data(plan.as_dict(), decided) if news else {}
        data.update(status.operation_data(direction, [r.as_dict() for r in results], decided, finished, first))
        if news:
            log.info('scale %s finished: %s', direction, ', '.join('%s %d' % kv for kv in sorted(summarize(results).items())))
        return data

    def write_status(self, data: Dict[str, str]) -> None:
        name = status.status_name(self.owner)
        path = api_path('v1', 'configmaps', self.namespace, name)
        try:
            try:
                self.seed.merge_patch(path, {'data': data})
            except NotFound:
                try:
                    self.seed.create(api_path('v1', 'configmaps', self.namespace),
                                     status.configmap(self.namespace, self.owner, data))
                except AlreadyExists:
                    self.seed.merge_patch(path, {'data': data})
            self.runtime.health.api_ok()
        except KubeError as exc:
            log.warning('cannot write the status ConfigMap %s/%s: %s', self.namespace, name, exc)
