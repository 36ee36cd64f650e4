"""druid/scale_down.py: which members a scale-down removes from etcd, and when the StatefulSet may shrink."""

from ansible_collections.steward.cluster.plugins.module_utils.druid import scale_down as sd
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import format_micro


NOW = 1_800_000_000.0


def lease(leaving=None, removed=None, since=NOW - 10, holder=None):
    """A member Lease; `leaving` marks it as the loop does (with its LEAVING_SINCE), `holder` its holderIdentity."""
    annotations = {}
    if leaving is not None:
        annotations[sd.LEAVING] = str(leaving)
        if since is not None:
            annotations[sd.LEAVING_SINCE] = format_micro(since)
    if removed is not None:
        annotations[sd.REMOVED] = removed
    return {'metadata': {'annotations': annotations}, 'spec': {'holderIdentity': holder} if holder else {}}


def member(i, healthy=True, learner=False, name=None):
    return {'id': 'a%d' % i, 'name': 'etcd-main-%d' % i if name is None else name, 'healthy': healthy,
            'is_learner': learner}


THREE = [member(0), member(1), member(2)]


def test_nothing_is_removed_without_a_leaving_mark():
    leases = {'etcd-main-%d' % i: lease() for i in range(3)}
    step = sd.plan_removal(THREE, 'a0', leases)
    assert step.action == sd.NOTHING and not step.mark_removed


def test_a_scale_up_or_restart_marks_nothing_so_nothing_goes():
    # a scale-up's new Leases carry create-as-learner, never LEAVING; a member without a Lease is never removed
    step = sd.plan_removal(THREE + [member(3, learner=True)], 'a0', {'etcd-main-0': lease()})
    assert step.action == sd.NOTHING


def test_the_highest_ordinal_goes_first_one_per_period():
    leases = {'etcd-main-0': lease(), 'etcd-main-1': lease(1), 'etcd-main-2': lease(1)}
    step = sd.plan_removal(THREE, 'a0', leases)
    assert (step.action, step.member_id, step.name) == (sd.REMOVE, 'a2', 'etcd-main-2')
    assert 'scales down to 1' in step.reason
    step = sd.plan_removal(THREE[:2], 'a0', leases, {'etcd-main-2': 'a2'})
    assert (step.action, step.member_id) == (sd.REMOVE, 'a1')
    assert step.mark_removed == {'etcd-main-2': 'a2'}      # etcd no longer lists it: tell the loop
    step = sd.plan_removal(THREE[:1], 'a0', dict(leases, **{'etcd-main-2': lease(1, 'a2')}), {'etcd-main-1': 'a1'})
    assert step.action == sd.NOTHING and step.mark_removed == {'etcd-main-1': 'a1'}


def test_an_ordinal_below_the_new_size_is_never_removed():
    # a stray mark on a kept ordinal (its value is the new size, 3) removes nothing
    leases = {'etcd-main-1': lease(3), 'etcd-main-2': lease(3)}
    assert sd.plan_removal(THREE, 'a0', leases).action == sd.NOTHING
    # a mark to 0 (hibernation keeps the membership) removes nothing either
    assert sd.plan_removal(THREE, 'a0', {'etcd-main-2': lease(0)}).action == sd.NOTHING


def test_the_leader_is_never_removed_leadership_moves_to_a_staying_voter_first():
    leases = {'etcd-main-1': lease(1), 'etcd-main-2': lease(1)}
    step = sd.plan_removal(THREE, 'a2', leases)
    assert (step.action, step.target_id) == (sd.TRANSFER, 'a0')
    step = sd.plan_removal([member(0, healthy=False), member(1), member(2)], 'a2', leases)
    assert step.action == sd.NOTHING and 'no staying voter is healthy' in step.reason


def test_no_removal_that_drops_the_remaining_below_quorum():
    # 5 -> 3: members 3 and 4 go; with 0 and 1 unhealthy, removing 4 leaves 2 of 4 healthy (quorum 3)
    five = [member(0, healthy=False), member(1, healthy=False), member(2), member(3), member(4)]
    leases = {'etcd-main-3': lease(3), 'etcd-main-4': lease(3)}
    step = sd.plan_removal(five, 'a2', leases)
    assert step.action == sd.NOTHING and '2 of 4 voting members healthy, quorum needs 3' in step.reason
    # an unhealthy going member may go: the healthy ones keep their quorum
    step = sd.plan_removal([member(0), member(1), member(2, healthy=False)], 'a0', {'etcd-main-2': lease(1)})
    assert (step.action, step.member_id) == (sd.REMOVE, 'a2')


def test_a_learner_goes_first_and_needs_no_quorum_check():
    members = [member(0), member(1, healthy=False), member(2, healthy=False, learner=True)]
    step = sd.plan_removal(members, 'a0', {'etcd-main-1': lease(1), 'etcd-main-2': lease(1)})
    assert (step.action, step.member_id) == (sd.REMOVE, 'a2')


def test_an_unnamed_member_holds_back_the_removed_marks():
    # an unstarted member has no name yet: it may be the one a Lease names, so no Lease is marked removed
    members = [member(0), member(9, name='')]
    step = sd.plan_removal(members, 'a0', {'etcd-main-1': lease(1)})
    assert step.action == sd.NOTHING and step.mark_removed == {}


def test_the_gate_marks_then_waits_then_opens():
    going = ('etcd-main-1', 'etcd-main-2')
    gate = sd.scale_down_gate(going, {'etcd-main-1': lease(), 'etcd-main-2': lease(3)}, 1)
    assert gate.to_mark == going and not gate.ready       # a mark for another size is redone
    gate = sd.scale_down_gate(going, {'etcd-main-1': lease(1), 'etcd-main-2': lease(1, 'a2')}, 1)
    assert (gate.to_mark, gate.waiting, gate.ready) == ((), ('etcd-main-1',), False)
    gate = sd.scale_down_gate(going, {'etcd-main-1': lease(1, ''), 'etcd-main-2': lease(1, 'a2')}, 1)
    assert gate.ready
    assert sd.scale_down_gate(going, {}, 1).ready         # no Lease: no program to wait for
    assert sd.scale_down_gate(going, {'etcd-main-1': lease()}, 0).ready   # to 0: the membership stays


def test_a_mark_without_its_time_is_written_again_and_a_long_wait_is_overdue():
    going = ('etcd-main-1', 'etcd-main-2')
    gate = sd.scale_down_gate(going, {'etcd-main-1': lease(1, since=None), 'etcd-main-2': lease(1, 'a2', since=None)}, 1)
    assert gate.to_mark == ('etcd-main-1',)            # an older controller's mark: its wait gets a start
    leases = {'etcd-main-1': lease(1, since=NOW - 400), 'etcd-main-2': lease(1, since=NOW - 100)}
    gate = sd.scale_down_gate(going, leases, 1, NOW, 300.0)
    assert gate.waiting == going and gate.overdue == ('etcd-main-1',) and gate.waited == 400.0
    assert sd.scale_down_gate(going, leases, 1, NOW, 500.0).overdue == ()
    assert sd.scale_down_gate(going, leases, 1).overdue == ()       # no clock: no deadline judged


def test_only_members_provably_the_going_pods_own_are_left_to_the_loops_removal():
    leases = {'etcd-main-1': lease(1, holder='a1:Member'), 'etcd-main-2': lease(1, holder='ffff:Member'),
              'etcd-main-3': lease(1), 'etcd-main-4': lease(1)}
    members = THREE + [member(3)]
    provable = sd.provable_leases(members, leases)
    # 1: etcd's etcd-main-1 has the ID its sidecar wrote; 2: another ID (not that pod's member); 3: its sidecar never
    # wrote one; 4: etcd does not list it (only marked removed)
    assert sorted(provable) == ['etcd-main-1', 'etcd-main-4']
    step = sd.plan_removal(members, 'a0', provable)
    assert (step.action, step.member_id) == (sd.REMOVE, 'a1') and step.mark_removed == {'etcd-main-4': ''}
    assert sd.holder_id(lease(holder='a1:Leader')) == 'a1' and sd.holder_id(lease()) == ''
