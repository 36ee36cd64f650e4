"""The early probe: a healthy probe whose leases, left unrenewed, cross nodeLeaseFailureFraction before the next
probe is due brings the next probe forward to the crossing; never closer than a quarter interval, never in the
scaled-down phase, never without a verdict, and a later crossing changes nothing."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import format_micro
from ansible_collections.steward.cluster.plugins.module_utils.watchdog import leases
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.decision import DOWN, ProbeState
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.probe import ProbeOutcome
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.prober_config import parse_prober_config

from steward_controller.prober.loop import EARLY_PROBE_MARGIN, EARLY_PROBE_MIN_GAP, ProberLoop

NOW = 1_800_000_000.0
CONFIG = parse_prober_config({'probeInterval': '10s', 'kcmNodeMonitorGraceDuration': '40s', 'dependentResourceInfos': [
    {'ref': {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': 'kcm'}, 'scaleUp': {'level': 0},
     'scaleDown': {'level': 0}}]})


def outcome(ages):
    """A probe at NOW over leases renewed `ages` seconds ago."""
    names = {'n%d' % i for i in range(len(ages))}
    items = [{'metadata': {'name': 'n%d' % i}, 'spec': {'renewTime': format_micro(NOW - age)}}
             for i, age in enumerate(ages)]
    verdict = leases.evaluate_leases(items, names, NOW, CONFIG.lease_expiry_seconds, CONFIG.node_lease_failure_fraction)
    return ProbeOutcome(started=NOW, finished=NOW, verdict=verdict, nodes=len(ages))


def early_wait(probe, wait, phase='Healthy', now=NOW):
    loop = SimpleNamespace(state=ProbeState(phase), config=CONFIG, clock=lambda: now)
    return ProberLoop.early_wait(loop, probe, wait)


def test_kubelets_stopped_renewing_the_next_probe_comes_at_the_crossing():
    # 6 of 10 leases renewed 26 s ago (they cross at NOW + 4 s), the others just now: due in 11 s, probed in ~4 s
    assert early_wait(outcome([26.0] * 6 + [0.0] * 4), 11.0) == pytest.approx(4.0 + EARLY_PROBE_MARGIN, abs=1e-5)


def test_a_crossing_after_the_next_probe_changes_nothing():
    assert early_wait(outcome([15.0] * 6 + [0.0] * 4), 11.0) == 11.0     # crossing in 15 s
    assert early_wait(outcome([0.0] * 10), 11.0) == 11.0                 # healthy kubelets: crossing in 30 s


def test_a_crossing_due_at_once_waits_a_quarter_interval():
    assert early_wait(outcome([29.99] * 6 + [0.0] * 4), 11.0) == pytest.approx(EARLY_PROBE_MIN_GAP * 10.0)


def test_not_when_scaled_down_failed_or_without_a_verdict():
    stale = outcome([26.0] * 6 + [0.0] * 4)
    assert early_wait(stale, 11.0, phase=DOWN) == 11.0
    assert early_wait(outcome([40.0] * 6 + [0.0] * 4), 11.0) == 11.0     # already failed: nothing to predict
    assert early_wait(ProbeOutcome(started=NOW, finished=NOW), 11.0) == 11.0
