"""The `etcd` loop's side of a quorum-loss recovery: a recorded recovery takes the pass, a planned one starts unless
spec reconciliation is suspended, an unreadable record stops the loop for that Etcd, the state is written after
each step and removed (with an operator's request) at the end."""

import types

from ansible_collections.steward.cluster.plugins.module_utils.druid import plan as p
from ansible_collections.steward.cluster.plugins.module_utils.druid import recovery as r
from ansible_collections.steward.cluster.plugins.module_utils.druid import spec as s
from ansible_collections.steward.cluster.plugins.module_utils.druid import status as st

from support.druid_samples import sample
from steward_controller.etcd_druid import DruidOptions
from steward_controller.etcd_druid.loop import EtcdDruidLoop

NOW = 1_800_000_000.0
PLANNED = p.RecoverQuorum('quorum lost for good', source='snapshot', snapshot_revision=100, newest_revision=110,
                          loss_window=10)


class Client:
    def __init__(self):
        self.patches = []

    def merge_patch(self, path, body, resource_version=None):
        self.patches.append((path, body))
        return body


def loop():
    runtime = types.SimpleNamespace(client=Client(), health=types.SimpleNamespace(beat=lambda k: None),
                                    clock=lambda: NOW, report=lambda *a, **k: None)
    return EtcdDruidLoop(runtime, DruidOptions())


def etcd(annotations=None):
    obj = sample(replicas=3)
    obj['metadata']['annotations'] = dict(annotations or {})
    return obj


def gate(decision=s.RECONCILE):
    return s.Gate(decision, 'spec reconciliation is suspended' if decision == s.SKIP_SUSPENDED else '')


def action_of(lp, obj, planned=PLANNED, decision=s.RECONCILE, status=None):
    spec = s.parse_etcd(obj)
    return lp.recovery_action(obj, spec, status or {}, st.Observed(), planned, gate(decision), NOW)


def test_a_planned_recovery_starts_unless_suspended():
    lp = loop()
    started = action_of(lp, etcd())
    assert isinstance(started, r.RecoveryStarted) and started.state.phase == r.STOP and started.state.loss_window == 10
    held = action_of(lp, etcd(), decision=s.SKIP_SUSPENDED)
    assert isinstance(held, p.Wait) and not held.changes and 'suspended' in held.message


def test_a_recorded_recovery_takes_the_pass_and_an_unreadable_one_stops_it():
    lp = loop()
    state = r.State(phase=r.STOP, source='snapshot', revision=100, loss_window=10, started=int(NOW))
    step = action_of(lp, etcd({r.STATE: state.to_json()}), planned=p.Nothing('in sync'))
    assert isinstance(step, p.Wait) and 'StatefulSet' in step.message     # no StatefulSet observed: an operator looks
    stuck = action_of(lp, etcd({r.STATE: '{not json'}))
    assert isinstance(stuck, p.Wait) and r.STATE in stuck.message and not stuck.changes


def test_the_state_is_written_after_a_step_and_removed_at_the_end():
    lp = loop()
    obj = etcd({r.STATE: 'x', r.REQUEST: 'task'})
    state = r.State(phase=r.START_ONE, source='snapshot', revision=100, started=int(NOW))
    lp.record_recovery(obj, r.StartFirstMember('m', state=state))
    lp.record_recovery(obj, r.Recovered('done', state=None))
    (_path1, first), (_path2, last) = lp.client.patches
    assert first == {'metadata': {'annotations': {r.STATE: state.to_json()}}}
    assert last == {'metadata': {'annotations': {r.STATE: None, r.REQUEST: None}}}


def test_an_operators_request_goes_once_the_etcd_is_ready():
    lp = loop()
    ready = {'conditions': [{'type': 'Ready', 'status': 'True'}]}
    assert isinstance(action_of(lp, etcd({r.REQUEST: 'task'}), planned=p.Nothing('in sync'), status=ready), p.Nothing)
    assert lp.client.patches[-1][1] == {'metadata': {'annotations': {r.REQUEST: None}}}
