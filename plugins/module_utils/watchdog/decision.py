# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hysteresis: when a sequence of probe verdicts turns into a scale-down or a scale-up.

The prober is in one of two phases: HEALTHY (targets are up) or DOWN (we scaled them down). A probe
verdict is FAILED, HEALTHY, or inconclusive (the API server or the lease list did not answer, or only one
candidate lease: nothing is learnt, the counters stay as they are).

* HEALTHY phase: a failed probe counts; at `failureThreshold` consecutive failures the phase turns DOWN
  and the targets are scaled down. A successful probe resets the failure count and, once
  `successThreshold` successes are in a row, re-applies the scale-up (DWD restores any target found at 0
  on every successful probe; with the thresholds that only happens after a steady run of successes).
* DOWN phase: a failed probe re-applies the scale-down (finishing what an interrupted run left); a
  successful one counts, and at `successThreshold` consecutive successes the phase turns HEALTHY and the
  targets are scaled up.

With both thresholds 1 (the defaults) every probe acts on its own verdict: DWD's behaviour. With 2 and 2,
leases hovering around the threshold (fail, succeed, fail, ...) never scale anything.

After a restart the phase comes from the targets' annotations (a target we scaled down means DOWN), so
the counters start at zero but an operation in flight is finished rather than forgotten.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.watchdog import constants as c
from ansible_collections.steward.cluster.plugins.module_utils.watchdog import leases

HEALTHY = 'Healthy'
DOWN = 'ScaledDown'
SCALE_DOWN = 'down'
SCALE_UP = 'up'


@dataclasses.dataclass(frozen=True)
class ProbeState:
    phase: str = HEALTHY
    failures: int = 0     # consecutive failed lease probes
    successes: int = 0    # consecutive successful lease probes


@dataclasses.dataclass(frozen=True)
class Decision:
    state: ProbeState
    action: Optional[str]   # SCALE_DOWN, SCALE_UP or None
    reason: str


def decide(state: ProbeState, verdict: Optional[str], failure_threshold: int = 1, success_threshold: int = 1) -> Decision:
    """The next state and what to do, for one probe's lease verdict (None: the probe was inconclusive)."""
    if verdict == leases.FAILED:
        failures = state.failures + 1
        if state.phase == DOWN:
            return Decision(ProbeState(DOWN, failures, 0), SCALE_DOWN, 'lease probe failed; targets stay down')
        if failures >= failure_threshold:
            return Decision(ProbeState(DOWN, failures, 0), SCALE_DOWN,
                            'lease probe failed %d time(s) in a row (failureThreshold %d)' % (failures, failure_threshold))
        return Decision(ProbeState(HEALTHY, failures, 0), None,
                        'lease probe failed %d of %d time(s) needed to scale down' % (failures, failure_threshold))
    if verdict == leases.HEALTHY:
        successes = state.successes + 1
        if successes >= success_threshold:
            why = ('lease probe succeeded %d time(s) in a row (successThreshold %d)' % (successes, success_threshold))
            return Decision(ProbeState(HEALTHY, 0, successes), SCALE_UP, why)
        return Decision(ProbeState(state.phase, 0, successes), None,
                        'lease probe succeeded %d of %d time(s) needed to scale up' % (successes, success_threshold))
    return Decision(state, None, 'probe inconclusive; nothing counted')


def stopped_reason(namespace: Optional[Mapping[str, Any]], nodes: Optional[int] = None) -> str:
    """Why probing is off for the cluster ('' when it is on), as DWD stops a probe for its Cluster object (DWD-P-01):
    the watchdog's namespace is being deleted, or annotated hibernated / migrating, or the probed cluster has no
    Nodes (`nodes` = 0: no workers). A namespace that cannot be read (None) stops nothing."""
    meta = (namespace or {}).get('metadata') or {}
    annotations = meta.get('annotations') or {}
    if meta.get('deletionTimestamp'):
        return 'the namespace is being deleted'
    if str(annotations.get(c.HIBERNATED_ANNOTATION, '')).lower() == 'true':
        return 'hibernated (%s)' % c.HIBERNATED_ANNOTATION
    if str(annotations.get(c.MIGRATING_ANNOTATION, '')).lower() == 'true':
        return 'control plane migrating (%s)' % c.MIGRATING_ANNOTATION
    if nodes == 0:
        return 'no workers (the probed cluster has no Nodes)'
    return ''
