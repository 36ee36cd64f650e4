# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Apply a plan level by level: the targets of one level together (one thread each), the next level when
every target of this one is done, with DWD's `initialDelay` and `timeout` per target and a completion gate.

For each target, after its `initialDelay` (counted from the start of its level, which is never before the
decision): read it again (a step of the first level with no initialDelay uses the plan's own reading, taken
milliseconds before: every write carries the resourceVersion read, so a change in between is a Conflict and
the retry reads afresh), decide its step again with the same rules as the plan (plan.step_for), write,
and wait until the gate says done (plan.goal_reached) or the deadline `level start + initialDelay + timeout`
passes. A write refused with Conflict (someone wrote in between) is retried with a fresh read, at most
MAX_ATTEMPTS times, within the same deadline.

What a failed or timed-out level means (docs/watchdog.md "Completion gates"):
* scale-down: it is reported and the next level still runs (stopping dependants is the point of an outage);
* scale-up: it is reported and the levels after it wait (`blocked`); the next successful probe tries again,
  so a dependant only starts once what it depends on is up.

Our annotations are written in two steps. Scale-down: intent (replicas, meltdown marker, owner,
`scaling-down`), scale to 0, then `scaled-down`. Scale-up: `scaling-up` (plan.prepare), scale, the gate,
then the markers go. A restart at any point leaves a state the rules finish exactly once.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import Conflict, KubeError
from ansible_collections.steward.cluster.plugins.module_utils.watchdog import plan as p
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.decision import SCALE_DOWN, SCALE_UP
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.prober_config import DependentResource, TargetRef
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.targets import Targets

SUCCEEDED = 'succeeded'   # written (or already there) and the gate passed
SKIPPED = 'skipped'
FAILED = 'failed'
TIMEOUT = 'timeout'
BLOCKED = 'blocked'       # scale-up: not started because an earlier level failed or timed out
STOPPED = 'stopped'       # the process is shutting down
OUTCOMES = (SUCCEEDED, SKIPPED, FAILED, TIMEOUT, BLOCKED, STOPPED)

MAX_ATTEMPTS = 3          # DWD's defaultMaxResourceScalingAttempts
CONFLICT_BACKOFF = 0.1    # DWD's defaultScaleResourceBackoff
GATE_POLL = 0.2           # the completion gate reads the target after this, then twice as long each time ...
GATE_POLL_MAX = 1.0       # ... up to DWD's resourceCheckInterval
_GATED_KINDS = (p.K_SCALE, p.K_RESUME, p.K_ALREADY)


@dataclasses.dataclass
class StepResult:
    step: p.Step                       # as acted on (decided again right before acting)
    outcome: str
    message: str
    started: float = 0.0
    finished: float = 0.0
    scale_sent_at: Optional[float] = None   # when the scale call went out (None: no scale call)
    observed: str = ''                      # the gate's last reading

    def as_dict(self) -> Dict[str, Any]:
        out = self.step.as_dict()
        out.update({'outcome': self.outcome, 'message': self.message, 'startedAt': round(self.started, 3),
                    'finishedAt': round(self.finished, 3)})
        if self.scale_sent_at is not None:
            out['scaleCallAt'] = round(self.scale_sent_at, 3)
        if self.observed:
            out['observed'] = self.observed
        return out


class Scaler:
    """Applies plans for the targets of one prober config."""

    def __init__(self, targets: Targets, resources: Sequence[DependentResource], owner: str,
                 clock: Callable[[], float] = time.time, stop: Optional[threading.Event] = None,
                 on_result: Optional[Callable[[StepResult], None]] = None, wait_for_gates: bool = True,
                 gate_poll: float = GATE_POLL, on_wait: Optional[Callable[[], None]] = None):
        self.targets = targets
        self.resources: Dict[TargetRef, DependentResource] = {r.ref: r for r in resources}
        self.owner = owner
        self.clock = clock
        self.stop = stop or threading.Event()
        self.on_result = on_result
        self.wait_for_gates = wait_for_gates
        self.gate_poll = gate_poll
        self.on_wait = on_wait   # called at least once a second while waiting (a liveness beat)
        # the observations the last plan was built from, for the first attempt of each step of the first level run
        # right after it (run pops them): reading the same targets again a few ms later only delays the scale call
        self._planned: Dict[TargetRef, p.Observation] = {}

    # --- reading ------------------------------------------------------------------------------
    def observe_all(self) -> Dict[TargetRef, p.Observation]:
        """Every target, read at once (one thread per target: two GETs each, and the decision waits for them)."""
        refs = list(self.resources)
        if len(refs) <= 1:
            return {ref: self.targets.observe(ref) for ref in refs}
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(refs), thread_name_prefix='observe') as pool:
            return dict(zip(refs, pool.map(self.targets.observe, refs)))

    def plan(self, direction: str, reason: str) -> p.Plan:
        observations = self.observe_all()
        self._planned = dict(observations)
        return p.build_plan(direction, list(self.resources.values()), observations, self.owner, reason)

    # --- acting -------------------------------------------------------------------------------
    def run(self, plan: p.Plan) -> List[StepResult]:
        """Every level in order; returns one result per step (blocked ones included)."""
        results: List[StepResult] = []
        planned, self._planned = self._planned, {}
        if plan.prepare:
            planned = {}   # the scale-up intent writes first: read again
        for step in plan.prepare:
            self._prepare(step)
        blocked_by: Optional[str] = None
        for level, steps in plan.levels:
            if blocked_by or self.stop.is_set():
                outcome = STOPPED if self.stop.is_set() else BLOCKED
                why = 'shutting down' if outcome == STOPPED else 'waits for level %s (%s)' % (blocked_by, outcome)
                now = self.clock()
                for step in steps:
                    results.append(self._done(StepResult(step, outcome, why, now, now)))
                continue
            level_results = self._level(steps, planned)
            planned = {}   # later levels start after this one's gates: they read afresh
            results.extend(level_results)
            if plan.direction == SCALE_UP and any(r.outcome in (FAILED, TIMEOUT) for r in level_results):
                blocked_by = str(level)
        return results

    def _level(self, steps: Sequence[p.Step], planned: Mapping[TargetRef, p.Observation]) -> List[StepResult]:
        start = self.clock()
        if len(steps) == 1:
            return [self._step(steps[0], start, planned.get(steps[0].ref))]
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(steps), thread_name_prefix='scale') as pool:
            return list(pool.map(lambda s: self._step(s, start, planned.get(s.ref)), steps))

    def _prepare(self, step: p.Step) -> None:
        """The scale-up intent on a target we hold down; best effort (the step itself decides again)."""
        obs = self.targets.observe(step.ref)
        if p.held_down(obs, self.owner):
            try:
                self.targets.annotate(step.ref, step.annotations, obs.resource_version)
            except KubeError:
                pass

    def _step(self, planned: p.Step, level_start: float, seen: Optional[p.Observation] = None) -> StepResult:
        """`seen`: the plan's observation of the target, used for the first attempt when the step starts at once
        (no initialDelay) and it was read without error. Safe to act on: every write carries its resourceVersion,
        so a target changed since then answers Conflict and the next attempt reads it afresh."""
        started = self.clock()
        if planned.initial_delay > 0 or seen is None or seen.error or not seen.resource_version:
            seen = None
        if not self._sleep_until(level_start + planned.initial_delay):
            return self._done(StepResult(planned, STOPPED, 'shutting down', started, self.clock()))
        deadline = level_start + planned.initial_delay + planned.timeout
        resource = self.resources[planned.ref]
        result = StepResult(planned, FAILED, '', started)
        for attempt in range(1, MAX_ATTEMPTS + 1):
            obs = seen if attempt == 1 and seen is not None else self.targets.observe(planned.ref)
            step = p.step_for(planned.direction, resource, obs, self.owner)
            result.step = step
            try:
                self._act(step, obs, result)
                break
            except Conflict as exc:
                result.outcome, result.message = FAILED, 'changed by someone else while writing (%s)' % exc
                if attempt == MAX_ATTEMPTS or self.clock() + CONFLICT_BACKOFF >= deadline:
                    break
                if not self._sleep_until(self.clock() + CONFLICT_BACKOFF * attempt):
                    result.outcome, result.message = STOPPED, 'shutting down'
                    break
            except KubeError as exc:
                result.outcome, result.message = FAILED, str(exc)
                break
        else:  # pragma: no cover - the loop always breaks
            pass
        if result.outcome == SUCCEEDED and step.kind in _GATED_KINDS and step.action != p.SKIP:
            self._gate(step, deadline, result)
        result.finished = self.clock()
        return self._done(result)

    def _act(self, step: p.Step, obs: p.Observation, result: StepResult) -> None:
        """The writes of one step (raises Conflict / KubeError); sets the outcome when nothing was left to do."""
        if step.action == p.SKIP:
            result.outcome, result.message = SKIPPED, step.reason
            return
        if step.action == p.FAIL:
            result.outcome, result.message = FAILED, step.reason
            return
        version = obs.resource_version
        if step.annotations:
            answer = self.targets.annotate(step.ref, step.annotations, version)
            version = str(((answer or {}).get('metadata') or {}).get('resourceVersion') or '')
        if step.action == p.SCALE:
            result.scale_sent_at = self.clock()
            self.targets.scale(step.ref, step.replicas_after or 0, version)
            if step.direction == SCALE_DOWN and step.after:
                self.targets.annotate(step.ref, step.after, '')
        result.outcome, result.message = SUCCEEDED, step.reason

    def _gate(self, step: p.Step, deadline: float, result: StepResult) -> None:
        """Wait for the goal; on scale-up, our markers go once it is reached."""
        poll = self.gate_poll
        while True:
            obj = self.targets.get(step.ref) or {}
            reached, seen = p.goal_reached(step.direction, step.replicas_after, obj)
            result.observed = seen
            if reached or not self.wait_for_gates:
                break
            if self.clock() >= deadline:
                result.outcome = TIMEOUT
                result.message = 'did not reach %s within %gs of its level starting %s' % (
                    'status.replicas 0' if step.direction == SCALE_DOWN else
                    'status.replicas %s with a ready replica' % step.replicas_after,
                    step.initial_delay + step.timeout, seen)
                return
            if not self._sleep_until(min(deadline, self.clock() + poll)):
                result.outcome, result.message = STOPPED, 'shutting down while waiting for the target'
                return
            poll = min(poll * 2, GATE_POLL_MAX)
        if step.direction == SCALE_UP and step.after:
            try:
                self.targets.annotate(step.ref, step.after, '')
            except KubeError as exc:
                result.message += '; markers not removed yet (%s)' % exc

    def _sleep_until(self, when: float) -> bool:
        """False when stopped before `when`."""
        while True:
            if self.on_wait is not None:
                self.on_wait()
            left = when - self.clock()
            if left <= 0:
                return not self.stop.is_set()
            if self.stop.wait(min(left, 1.0)):
                return False

    def _done(self, result: StepResult) -> StepResult:
        if self.on_result is not None:
            self.on_result(result)
        return result


def first_scale_call(results: Sequence[StepResult]) -> Optional[float]:
    times = [r.scale_sent_at for r in results if r.scale_sent_at is not None]
    return min(times) if times else None


def summarize(results: Sequence[StepResult]) -> Mapping[str, int]:
    counts: Dict[str, int] = {}
    for r in results:
        counts[r.outcome] = counts.get(r.outcome, 0) + 1
    return counts
