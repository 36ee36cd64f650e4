"""Hysteresis: DWD's behaviour at 1/1, no action at all for leases hovering around the threshold at 2/2."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.watchdog import leases
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.decision import (
    DOWN, HEALTHY, SCALE_DOWN, SCALE_UP, ProbeState, decide)

F, H, N = leases.FAILED, leases.HEALTHY, None


def run(verdicts, k=1, m=1, state=None):
    state = state or ProbeState()
    actions = []
    for verdict in verdicts:
        decision = decide(state, verdict, k, m)
        state = decision.state
        actions.append(decision.action)
    return actions, state


def test_defaults_act_on_every_probe_like_dwd():
    actions, state = run([F, F, H, H])
    assert actions == [SCALE_DOWN, SCALE_DOWN, SCALE_UP, SCALE_UP]
    assert state.phase == HEALTHY


def test_hovering_leases_with_two_and_two_scale_nothing():
    actions, state = run([F, H] * 10, k=2, m=2)
    assert actions == [None] * 20
    assert state.phase == HEALTHY


def test_k_failures_then_m_successes():
    actions, state = run([F, F, F, H, H], k=3, m=2)
    assert actions == [None, None, SCALE_DOWN, None, SCALE_UP]
    assert state == ProbeState(HEALTHY, 0, 2)


def test_down_phase_reapplies_scale_down_and_needs_m_successes():
    actions, state = run([F, H, F, H, H, H], k=1, m=2)
    assert actions == [SCALE_DOWN, None, SCALE_DOWN, None, SCALE_UP, SCALE_UP]


@pytest.mark.parametrize('phase', [HEALTHY, DOWN])
def test_inconclusive_probes_count_nothing(phase):
    state = ProbeState(phase, 1, 0)
    decision = decide(state, N, 2, 2)
    assert decision.action is None and decision.state == state
    assert decide(state, leases.SKIPPED, 2, 2).state == state


def test_restart_in_down_phase_finishes_the_scale_down_on_the_next_failure():
    actions, _ = run([F], k=3, m=3, state=ProbeState(DOWN))
    assert actions == [SCALE_DOWN]


@pytest.mark.parametrize('namespace, nodes, stopped', [
    ({'metadata': {'name': 'ns'}}, 3, ''),
    (None, None, ''),
    ({'metadata': {'deletionTimestamp': '2026-01-01T00:00:00Z'}}, 3, 'the namespace is being deleted'),
    ({'metadata': {'annotations': {'cluster.steward.io/hibernated': 'true'}}}, 3, 'hibernated'),
    ({'metadata': {'annotations': {'cluster.steward.io/hibernated': 'false'}}}, 3, ''),
    ({'metadata': {'annotations': {'cluster.steward.io/migrating': 'True'}}}, 3, 'control plane migrating'),
    ({'metadata': {}}, 0, 'no workers'),
])
def test_probing_stops_for_the_clusters_lifecycle(namespace, nodes, stopped):
    from ansible_collections.steward.cluster.plugins.module_utils.watchdog.decision import stopped_reason
    reason = stopped_reason(namespace, nodes)
    assert reason.startswith(stopped) if stopped else reason == ''
