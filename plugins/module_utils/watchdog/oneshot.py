# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One probe now, and what follows from it: the engine behind `steward.cluster.watchdog_probe`, built from the
same pieces as the controller's prober loop (probe.probe_sequence, plan.build_plan, scaler.Scaler).

`action`:
* `auto`: act on this probe's verdict alone: failed -> scale down, healthy -> scale up, skipped (one candidate
  lease) or no verdict -> nothing. `failureThreshold` / `successThreshold` need a run of probes, which one call
  is not: the module reports them but does not wait for them. Probing stopped for the cluster's lifecycle
  (hibernated, migrating, namespace deleting, no Nodes) means nothing is done.
* `scale_down` / `scale_up`: the operator's decision, applied whatever the probe says (the probe still runs
  and is reported); the ownership rules hold as always (someone else's replicas are never overwritten).
* `none`: probe and plan only.

Check mode computes the plan from the targets as they are and writes nothing.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient
from ansible_collections.steward.cluster.plugins.module_utils.watchdog import leases
from ansible_collections.steward.cluster.plugins.module_utils.watchdog import plan as p
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.decision import SCALE_DOWN, SCALE_UP
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.probe import ProbeOutcome, probe_sequence
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.prober_config import ProberConfig
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.scaler import FAILED, SUCCEEDED, TIMEOUT, Scaler
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.targets import Targets

AUTO = 'auto'
ACTIONS = {AUTO: None, 'scale_down': SCALE_DOWN, 'scale_up': SCALE_UP, 'none': None}


def choose(action: str, outcome: ProbeOutcome, stopped: str) -> tuple:
    """(direction or None, reason) for this call."""
    if action != AUTO:
        direction = ACTIONS[action]
        return direction, ('requested (action=%s)' % action) if direction else 'action=none: probe and plan only'
    if stopped:
        return None, 'probing is off for this cluster: %s' % stopped
    if outcome.error is not None:
        return None, 'no verdict: %s' % outcome.error
    verdict = outcome.verdict
    if verdict.verdict == leases.FAILED:
        return SCALE_DOWN, 'lease probe failed: %s' % verdict.reason
    if verdict.verdict == leases.HEALTHY:
        return SCALE_UP, 'lease probe succeeded: %s' % verdict.reason
    return None, 'lease probe skipped: %s' % verdict.reason


def run_once(client: KubeClient, config: ProberConfig, namespace: str, owner: str, action: str = AUTO,
             check_mode: bool = False, wait: bool = True, clock: Callable[[], float] = time.time) -> Dict[str, Any]:
    """Probe, decide, plan and (unless check mode) apply. The result holds `probe`, `direction`, `reason`,
    `plan`, `operation` (the step results; [] in check mode), `changed`, `failed_steps` and `replicas`
    (before/after per target, for --diff)."""
    outcome, stopped = probe_sequence(client, config, namespace, clock, always=True)
    direction, reason = choose(action, outcome, stopped)
    scaler = Scaler(Targets(client, namespace), config.dependent_resources, owner, clock=clock, wait_for_gates=wait)
    observations = scaler.observe_all()
    result: Dict[str, Any] = {'probe': outcome.as_dict(), 'stopped': stopped, 'direction': direction, 'reason': reason,
                              'plan': None, 'operation': [], 'changed': False, 'failed_steps': [],
                              'replicas': {'before': _replicas(observations), 'after': _replicas(observations)}}
    if direction is None:
        return result
    plan = p.build_plan(direction, list(config.dependent_resources), observations, owner, reason)
    result['plan'] = dict(plan.as_dict(), summary=plan.summary())
    result['changed'] = bool(plan.changes)
    after = dict(result['replicas']['before'])
    for step in plan.steps:
        if step.action == p.SCALE:
            after[str(step.ref)] = step.replicas_after
    result['replicas']['after'] = after
    if check_mode:
        result['failed_steps'] = [s.as_dict() for s in plan.steps if s.action == p.FAIL]
        return result
    results = scaler.run(plan)
    result['operation'] = [r.as_dict() for r in results]
    result['failed_steps'] = [r.as_dict() for r in results if r.outcome in (FAILED, TIMEOUT)]
    result['changed'] = any(r.scale_sent_at is not None or (
        r.outcome == SUCCEEDED and r.step.action in (p.ANNOTATE, p.DONE) and bool(r.step.annotations or r.step.after))
        for r in results)
    result['replicas']['after'] = _replicas(scaler.observe_all())
    return result


def _replicas(observations: Dict[Any, p.Observation]) -> Dict[str, Optional[int]]:
    return {str(ref): (obs.replicas if obs.exists and not obs.error else None) for ref, obs in observations.items()}


def failure_message(result: Dict[str, Any]) -> List[str]:
    return ['%s: %s' % (s['target'], s.get('message') or s.get('reason')) for s in result['failed_steps']]
