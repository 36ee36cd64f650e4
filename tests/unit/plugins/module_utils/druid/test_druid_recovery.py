"""druid/recovery.py: a planned quorum-loss recovery executed one step per pass, resumable from the Etcd's annotation,
never deleting a PVC; and plan.py's row 1 when an operator asks (no not-ready grace)."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.druid import plan as p
from ansible_collections.steward.cluster.plugins.module_utils.druid import recovery as r
from ansible_collections.steward.cluster.plugins.module_utils.druid import status as st

from test_druid_plan import NOW, not_ready_for, world   # the planner's test world, one copy


def step(w, state, previous=None):
    observed = w.observed()
    status = st.compute_status(w.spec, observed, previous, NOW)
    return r.next_step(w.spec, status, observed, state, NOW)


MEMBER = r.State(phase=r.SAVE_SOURCE, source='member', member='etcd-main-0', revision=150, loss_window=10,
                 started=int(NOW))


def test_a_planned_recovery_from_a_member_starts_by_recording_the_plan():
    w = world(ready=[True, False, False], ages=[1.0, 400.0, 400.0], revisions=[150, 160, 155], verified_rev=100)
    planned = w.run()
    action = r.start(w.spec, planned, NOW)
    assert isinstance(action, r.RecoveryStarted) and action.changes and action.event == 'QuorumLossRecoveryStarted'
    assert action.state == MEMBER and 'loss window 10' in action.message
    assert r.read_state({r.STATE: action.state.to_json()}) == MEMBER


def test_a_snapshot_source_skips_saving_a_member():
    w = world(ready=[False, False, False], ages=[400.0, 400.0, 400.0], revisions=[130, 131, 131], verified_rev=120)
    action = r.start(w.spec, w.run(), NOW)
    assert (action.state.phase, action.state.source, action.state.revision, action.state.loss_window) == (
        r.STOP, 'snapshot', 120, 11)


def test_a_survivor_whose_pod_is_not_ready_is_the_source_while_its_sidecar_renews_its_lease():
    # without quorum druid's readiness probe fails on every member; the survivor's Lease is still renewed
    w = world(ready=[False, False, False], ages=[1.0, 400.0, 400.0], revisions=[150, 160, 155], verified_rev=100)
    action = w.run(previous=not_ready_for(400))
    assert isinstance(action, p.RecoverQuorum) and (action.source, action.member) == ('member', 'etcd-main-0')


def test_a_member_source_without_a_store_is_refused_before_anything_changes():
    w = world(ready=[True, False, False], ages=[1.0, 400.0, 400.0], revisions=[150, None, None], backups=False)
    planned = w.run()
    assert isinstance(planned, p.RecoverQuorum) and planned.source == 'member'
    action = r.start(w.spec, planned, NOW)
    assert isinstance(action, p.NeedsRecovery) and not action.changes and 'spec.backup.store' in action.message


def test_the_source_member_saves_its_data_then_the_members_stop():
    w = world(ready=[True, False, False], ages=[1.0, 400.0, 400.0])
    action = step(w, MEMBER)
    assert isinstance(action, r.SaveSource) and (action.pod, action.port) == ('etcd-main-0', 8080)
    assert action.state.phase == r.STOP
    action = step(w, action.state)
    assert isinstance(action, r.StopMembers) and action.state.phase == r.STOP and '3 -> 0' in action.message


def test_a_source_member_whose_pod_is_not_ready_still_saves_while_its_lease_is_renewed():
    w = world(ready=[False, False, False], ages=[1.0, 400.0, 400.0])
    assert isinstance(step(w, MEMBER), r.SaveSource)


def test_a_source_member_gone_before_its_data_was_saved_aborts_with_nothing_changed():
    w = world(ready=[False, False, False], ages=[400.0, 400.0, 400.0])
    action = step(w, MEMBER)
    assert isinstance(action, r.Aborted) and action.state is None and 'etcd-main-0' in action.message
    w = world(ready=[True, False, False], ages=[1.0, 400.0, 400.0])
    del w.pods['etcd-main-0']
    assert isinstance(step(w, MEMBER), r.Aborted)


def stopped(w):
    w.sts = dict(w.sts, spec=dict(w.sts['spec'], replicas=0))
    return w


def test_leases_are_recreated_only_once_no_member_pod_runs():
    state = MEMBER.at(r.STOP)
    w = stopped(world(ready=[False, False, False], ages=[400.0, 400.0, 400.0]))
    action = step(w, state)
    assert isinstance(action, p.Wait) and not action.changes and 'etcd-main-0' in action.message
    w.pods = {}
    action = step(w, state)
    assert isinstance(action, r.RecreateLeases)
    assert action.delete == ('etcd-main-0', 'etcd-main-1', 'etcd-main-2') == action.create
    assert action.first == 'etcd-main-0' and action.state.phase == r.START_ONE
    assert r.restore_marker_patch(action.state) == {'metadata': {'annotations': {r.RESTORE_MARKER: str(int(NOW))}}}


def test_the_first_member_starts_alone_and_the_others_rejoin_once_it_is_ready():
    state = MEMBER.at(r.START_ONE)
    w = stopped(world(ready=[False, False, False]))
    w.pods, w.leases = {}, {}
    assert isinstance(step(w, state), r.StartFirstMember)
    alone = world(replicas=1, spec_replicas=3, ready=[False])
    action = step(alone, state)
    assert isinstance(action, p.Wait) and 'etcd-main-0' in action.message
    alone = world(replicas=1, spec_replicas=3)
    action = step(alone, state)
    assert isinstance(action, r.RejoinMembers) and action.learners == ('etcd-main-1', 'etcd-main-2')
    assert (action.first, action.to, action.state.phase) == ('etcd-main-0', 3, r.REJOIN)
    assert r.restore_marker_patch(None) == {'metadata': {'annotations': {r.RESTORE_MARKER: None}}}


def test_recovered_once_every_member_is_ready_and_the_window_is_said():
    state = MEMBER.at(r.REJOIN)
    action = step(world(ready=[True, True, False]), state)
    assert isinstance(action, p.Wait) and '2 of 3' in action.message
    action = step(world(), state)
    assert isinstance(action, r.Recovered) and action.state is None and not action.warning
    assert "etcd-main-0's data at revision 150; loss window 10" in action.message


def test_a_rejoin_interrupted_before_the_scale_is_done_again():
    w = world(replicas=1, spec_replicas=3)
    action = step(w, MEMBER.at(r.REJOIN))
    assert isinstance(action, r.RejoinMembers) and action.to == 3 and action.state.phase == r.REJOIN


def test_a_single_member_etcd_is_recovered_when_its_member_serves():
    w = world(replicas=1)
    action = step(w, MEMBER.at(r.START_ONE))
    assert isinstance(action, r.Recovered)


@pytest.mark.parametrize('text', ['{', '{"phase": "later", "source": "member"}', '{"phase": "stop"}', '[1]'])
def test_an_unreadable_state_names_the_annotation(text):
    with pytest.raises(r.RecoveryStateError, match=r.STATE):
        r.read_state({r.STATE: text})


def test_no_state_without_the_annotation():
    assert r.read_state({}) is None and r.read_state(None) is None


def test_an_operator_request_skips_the_not_ready_grace_but_not_the_source_rule():
    w = world(ready=[True, False, False], ages=[1.0, 90.0, 90.0], revisions=[150, None, None])
    assert isinstance(w.run(previous=not_ready_for(30)), p.Wait)
    action = w.run(previous=not_ready_for(30), options=p.Options(recovery_requested=True))
    assert isinstance(action, p.RecoverQuorum) and action.source == 'member'
    w = world(ready=[True, False, False], ages=[1.0, 90.0, 90.0], backups=False)
    action = w.run(previous=not_ready_for(30), options=p.Options(recovery_requested=True))
    assert isinstance(action, p.NeedsRecovery)


def test_every_step_has_its_own_event_reason():
    reasons = [k.event for k in r.STEP_KINDS]
    plan_reasons = {k.event for k in vars(p).values() if isinstance(k, type) and issubclass(k, p.Action)}
    assert len(set(reasons)) == len(reasons) and not set(reasons) & plan_reasons
    assert all(reason.startswith('QuorumLoss') for reason in reasons)


def test_members_that_renew_their_leases_are_never_evidence_of_a_loss():
    # a new cluster's pods before their readiness probe's first success, or a partition: unready, but alive
    w = world(ready=[False, False, False], ages=[1.0, 1.0, 1.0], revisions=[5, 5, 5], verified_rev=1)
    previous = {'members': [{'name': 'etcd-main-%d' % i, 'status': 'NotReady',
                             'lastTransitionTime': not_ready_for(400)['members'][0]['lastTransitionTime']}
                            for i in range(3)]}
    action = w.run(previous=previous, options=p.Options(recovery_requested=True))
    assert isinstance(action, p.Wait) and not action.changes
