"""Lease decisions (leader election, mutex), conditions and label selectors, as tables."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.conditions import set_condition
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import (
    ACQUIRE, HOLD, WAIT, decide, format_micro, parse_micro)

NOW = 1795000000.0


def lease(holder, renewed_ago, duration=15):
    spec = {'holderIdentity': holder, 'leaseDurationSeconds': duration}
    if renewed_ago is not None:
        spec['renewTime'] = format_micro(NOW - renewed_ago)
    return {'spec': spec}


@pytest.mark.parametrize('obj, action', [
    (None, ACQUIRE),                      # no lease yet
    (lease('', 1), ACQUIRE),              # released
    (lease('me', 1), HOLD),
    (lease('me', 100), HOLD),             # ours even if expired: renew it
    (lease('other', 1), WAIT),
    (lease('other', 14.9), WAIT),
    (lease('other', 15), ACQUIRE),        # expired exactly at renew + duration
    (lease('other', None), ACQUIRE),      # never renewed: no claim
])
def test_decide(obj, action):
    assert decide(obj, 'me', NOW).action == action


def test_micro_time_round_trip():
    assert parse_micro(format_micro(NOW + 0.25)) == pytest.approx(NOW + 0.25)
    assert parse_micro('2026-11-22T10:00:00Z') == 1795341600.0
    assert parse_micro('garbage') is None


def test_condition_transition_time_moves_only_on_flips():
    c = set_condition([], 'BackupReady', 'True', 'FullBackupSucceeded', 'ok', 100)
    c = set_condition(c, 'Other', 'True', 'R', 'm', 150)
    c2 = set_condition(c, 'BackupReady', 'True', 'IncrementalBackupSucceeded', 'ok', 200)
    ready = [x for x in c2 if x['type'] == 'BackupReady'][0]
    assert ready['lastTransitionTime'] == c[0]['lastTransitionTime'] and ready['lastUpdateTime'] != ready['lastTransitionTime']
    c3 = set_condition(c2, 'BackupReady', 'False', 'FullBackupFailed', 'no', 300)
    flipped = [x for x in c3 if x['type'] == 'BackupReady'][0]
    assert flipped['lastTransitionTime'] == flipped['lastUpdateTime'] and [x['type'] for x in c3] == ['BackupReady', 'Other']


def test_api_path():
    assert api_path('v1', 'nodes', name='n1') == '/api/v1/nodes/n1'
    assert api_path('coordination.k8s.io/v1', 'leases', 'ns', 'l', 'status') == \
        '/apis/coordination.k8s.io/v1/namespaces/ns/leases/l/status'


def test_health_goes_stale_and_ready_needs_the_api():
    from steward_controller.core.metrics import Health  # controller/ is on PYTHONPATH (Makefile)
    now = [1000.0]
    health = Health(clock=lambda: now[0], stale_after=60)
    assert health.live()[0] and not health.ready()[0]  # nothing registered yet; API never answered
    health.beat('operator-loop')
    health.api_ok()
    assert health.live() == (True, 'ok') and health.ready()[0]
    now[0] += 61
    assert health.live() == (False, 'stale: operator-loop') and not health.ready()[0]


def test_lease_spec_and_seconds_left():
    """The Lease arithmetic maintenance's stagger and Slack-thread leases use (kube/lease, one home)."""
    from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import lease_spec, seconds_left
    spec = lease_spec('node-1', 100.0, 60.5, transitions=2)
    assert spec == {'holderIdentity': 'node-1', 'renewTime': '1970-01-01T00:01:40.000000Z', 'leaseDurationSeconds': 60,
                    'acquireTime': '1970-01-01T00:01:40.000000Z', 'leaseTransitions': 2}
    assert 'acquireTime' not in lease_spec('node-1', 100.0, 60, acquire=False)
    assert seconds_left({'spec': spec}, 130.0) == 30.0
    assert seconds_left({'spec': spec}, 170.0) == -10.0
    assert seconds_left(None, 0.0) == -1.0 and seconds_left({'spec': {'leaseDurationSeconds': 5}}, 0.0) == -1.0
