"""druid/status.py: members from Leases and pods (ETCD-16), clusterSize (ETCD-17), conditions and counts."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.druid import components as c
from ansible_collections.steward.cluster.plugins.module_utils.druid import status as st
from ansible_collections.steward.cluster.plugins.module_utils.druid.spec import parse_etcd
from ansible_collections.steward.cluster.plugins.module_utils.kube.conditions import get_condition
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import format_micro

from support.druid_samples import sample

NOW = 1_800_000_000.0


def lease(holder, renewed_ago=1.0, annotations=None):
    obj = {'metadata': {'annotations': dict(annotations or {})}, 'spec': {}}
    if holder is not None:
        obj['spec']['holderIdentity'] = holder
    if renewed_ago is not None:
        obj['spec']['renewTime'] = format_micro(NOW - renewed_ago)
    return obj


def pod(ready=True):
    return {'status': {'conditions': [{'type': 'Ready', 'status': 'True' if ready else 'False'}]}}


def world(n=3, holders=None, ages=None, ready=None, snap=True, sts_ready=None):
    names = ['etcd-main-%d' % i for i in range(n)]
    holders = holders or ['%x:%s' % (0xa0 + i, 'Leader' if i == 0 else 'Member') for i in range(n)]
    ages = ages or [1.0] * n
    ready = ready if ready is not None else [True] * n
    snaps = {}
    if snap:
        snaps = {'full-snap': lease('100', 600.0), 'delta-snap': lease('140', 30.0)}
    return st.Observed(
        statefulset={'status': {'replicas': n, 'readyReplicas': sum(ready) if sts_ready is None else sts_ready,
                                'currentReplicas': n, 'updatedReplicas': n}},
        pods={name: pod(r) for name, r in zip(names, ready)},
        member_leases={name: lease(h, a) for name, h, a in zip(names, holders, ages)},
        snapshot_leases=snaps,
        pvcs={'main-etcd-' + name: {'status': {'phase': 'Bound'}} for name in names})


def cond(status, type_):
    found = get_condition(status['conditions'], type_)
    return (found['status'], found['reason'])


@pytest.fixture
def spec3():
    return parse_etcd(sample(replicas=3))


def test_healthy_three(spec3):
    s = st.compute_status(spec3, world(), None, NOW)
    assert [(m['name'], m['id'], m['role'], m['status'], m['reason']) for m in s['members']] == [
        ('etcd-main-0', 'a0', 'Leader', 'Ready', 'LeaseSucceeded'),
        ('etcd-main-1', 'a1', 'Member', 'Ready', 'LeaseSucceeded'),
        ('etcd-main-2', 'a2', 'Member', 'Ready', 'LeaseSucceeded')]
    assert s['clusterSize'] == 3 and s['ready'] is True and s['readyReplicas'] == 3
    assert cond(s, 'Ready') == ('True', 'Quorate') and cond(s, 'AllMembersReady') == ('True', 'AllMembersReady')
    assert cond(s, 'BackupReady') == ('True', 'IncrementalBackupSucceeded')
    assert cond(s, 'DataVolumesReady') == ('True', 'NoErrorsFound')
    assert s['etcd'] == {'apiVersion': 'apps/v1', 'kind': 'StatefulSet', 'name': 'etcd-main'}
    assert s['serviceName'] == 'etcd-main-client' and s['peerUrlTLSEnabled'] is False
    assert s['labelSelector'] == {'matchLabels': {'app': 'etcd-statefulset', 'role': 'main'}}
    assert s['selector'] in ('app=etcd-statefulset,role=main', 'role=main,app=etcd-statefulset')


@pytest.mark.parametrize('age, ready, expected', [
    (1.0, True, ('Ready', 'LeaseSucceeded')),
    (1.0, False, ('NotReady', 'PodNotReady')),
    (61.0, True, ('Unknown', 'LeaseExpired')),
    (61.0, False, ('NotReady', 'PodNotReady')),
    (361.0, True, ('NotReady', 'UnknownGracePeriodExceeded')),
    (None, True, ('Unknown', 'LeaseExpired')),
])
def test_one_member_state(spec3, age, ready, expected):
    s = st.compute_status(spec3, world(ages=[1.0, 1.0, age], ready=[True, True, ready]), None, NOW)
    m = s['members'][2]
    assert (m['status'], m['reason']) == expected
    assert cond(s, 'Ready') == ('True', 'Quorate')                       # acceptance 7: one down keeps quorum
    if expected[0] == 'Ready':
        assert cond(s, 'AllMembersReady') == ('True', 'AllMembersReady')
    else:
        assert cond(s, 'AllMembersReady') == ('False', 'NotAllMembersReady')
        assert 'etcd-main-2 %s' % expected[1] in get_condition(s['conditions'], 'AllMembersReady')['message']


def test_thresholds_are_flags(spec3):
    s = st.compute_status(spec3, world(ages=[1.0, 1.0, 20.0]), None, NOW, st.Thresholds(unknown=10.0, notready=5.0))
    assert s['members'][2]['reason'] == 'UnknownGracePeriodExceeded'


def test_two_of_three_down_is_quorum_lost(spec3):
    s = st.compute_status(spec3, world(ages=[1.0, 400.0, 400.0]), None, NOW)
    assert cond(s, 'Ready') == ('False', 'QuorumLost') and s['clusterSize'] == 3 and s['ready'] is False


def test_empty_holders_are_not_members_yet(spec3):
    s = st.compute_status(spec3, world(holders=['a0:Leader', '', 'garbage']), None, NOW)
    assert [m['name'] for m in s['members']] == ['etcd-main-0']
    assert s['clusterSize'] == 1                                     # quorate with the members it has (ETCD-17)
    assert cond(s, 'Ready') == ('True', 'Quorate')
    msg = get_condition(s['conditions'], 'AllMembersReady')['message']
    assert 'etcd-main-1 not reporting' in msg and 'etcd-main-2 not reporting' in msg


def test_bootstrap_cluster_size_is_replicas(spec3):
    s = st.compute_status(spec3, world(holders=['', '', '']), None, NOW)
    assert s['members'] == [] and s['clusterSize'] == 3
    assert cond(s, 'Ready')[0] == 'False'


def test_transition_time_kept_while_status_unchanged(spec3):
    first = st.compute_status(spec3, world(), None, NOW - 100)
    second = st.compute_status(spec3, world(), first, NOW)
    assert second['members'][0]['lastTransitionTime'] == first['members'][0]['lastTransitionTime']
    third = st.compute_status(spec3, world(ready=[False, True, True]), second, NOW)
    assert third['members'][0]['lastTransitionTime'] != first['members'][0]['lastTransitionTime']


def test_backup_ready(spec3):
    stale_full = world()
    stale_full.snapshot_leases['full-snap'] = lease('100', 25 * 3600.0)
    assert cond(st.compute_status(spec3, stale_full, None, NOW), 'BackupReady') == ('False', 'FullBackupFailed')
    stale_delta = world()
    stale_delta.snapshot_leases['delta-snap'] = lease('140', 3 * 300.0 + 1)
    assert cond(st.compute_status(spec3, stale_delta, None, NOW), 'BackupReady') == ('False', 'IncrementalBackupFailed')
    only_full = world()
    only_full.snapshot_leases['delta-snap'] = lease(None, None)
    only_full.snapshot_leases['full-snap'] = lease('100', 10.0)
    assert cond(st.compute_status(spec3, only_full, None, NOW), 'BackupReady') == ('True', 'FullBackupSucceeded')
    never = world(snap=False)
    assert cond(st.compute_status(spec3, never, None, NOW), 'BackupReady') == ('Unknown', 'Unknown')
    no_store = parse_etcd(sample(replicas=3, backup={'port': 8080}))
    assert get_condition(st.compute_status(no_store, world(), None, NOW)['conditions'], 'BackupReady') is None


def test_verified_backup_from_the_full_snap_lease():
    w = world()
    assert st.verified_backup(w) is None
    verified = {st.VERIFIED_REVISION: '100', st.VERIFIED_AT: format_micro(NOW - 5)}
    w.snapshot_leases['full-snap'] = lease('100', 10.0, verified)
    assert st.verified_backup(w) == {'revision': 100, 'at': pytest.approx(NOW - 5)}


def test_data_volumes(spec3):
    w = world()
    del w.pvcs['main-etcd-etcd-main-1']
    assert cond(st.compute_status(spec3, w, None, NOW), 'DataVolumesReady') == ('False', 'PersistentVolumeClaimMissing')
    w.pvcs['main-etcd-etcd-main-1'] = {'status': {'phase': 'Lost'}}
    assert cond(st.compute_status(spec3, w, None, NOW), 'DataVolumesReady') == ('False', 'PersistentVolumeClaimLost')


def test_reconcile_fields_are_kept(spec3):
    prev = {'observedGeneration': 4, 'lastOperation': {'type': 'Reconcile'}, 'lastErrors': []}
    s = st.compute_status(spec3, world(), prev, NOW)
    assert (s['observedGeneration'], s['lastOperation'], s['lastErrors']) == (4, {'type': 'Reconcile'}, [])


def test_a_scale_ups_learners_do_not_count_toward_the_quorum(spec3):
    # found on the lab: scaling 1 -> 3, the two new members joined as learners, their pods not yet Ready; the status
    # said QuorumLost "1 of 3 members Ready" (and the loop warned "quorum lost") while the one voter served
    w = world(ready=[True, False, False])
    for name in ('etcd-main-1', 'etcd-main-2'):
        w.member_leases[name]['metadata']['annotations']['cluster.steward.io/learner'] = 'true'
    s = st.compute_status(spec3, w, None, NOW)
    assert cond(s, 'Ready') == ('True', 'Quorate')
    ready = get_condition(s['conditions'], 'Ready')['message']
    assert '1 of 1 members Ready' in ready and 'etcd-main-1, etcd-main-2 joining as learners' in ready
    assert cond(s, 'AllMembersReady') == ('False', 'NotAllMembersReady')
    # promoted (the program writes "false" on its next heartbeat) and still unready: two of three voters are down
    for name in ('etcd-main-1', 'etcd-main-2'):
        w.member_leases[name]['metadata']['annotations']['cluster.steward.io/learner'] = 'false'
    assert cond(st.compute_status(spec3, w, None, NOW), 'Ready') == ('False', 'QuorumLost')


def test_a_member_that_came_back_under_a_new_id_is_named_once():
    before = [{'name': 'etcd-main-0', 'id': 'a0'}, {'name': 'etcd-main-1', 'id': 'a1'}]
    after = [{'name': 'etcd-main-0', 'id': 'a0'}, {'name': 'etcd-main-1', 'id': 'b1'}, {'name': 'etcd-main-2', 'id': 'a2'}]
    assert st.replaced_members(before, after) == [
        'etcd-main-1 is a new etcd member b1 (was a1): it came back without its data and rejoined from the others']
    assert st.replaced_members(after, after) == [] and st.replaced_members([], after) == []


def test_peer_url_tls_enabled_says_what_the_members_leases_say():
    """druid: "the status of enabling TLS for peer communication across all etcd-members": asked for, and every
    running member's Lease says etcd lists https peer URLs for it (a scale-up waiting for peer TLS reads False)."""
    obj = sample(replicas=3)
    obj['spec']['etcd']['peerUrlTls'] = {'tlsCASecretRef': {'name': 'ca'}, 'serverTLSSecretRef': {'name': 'server'}}
    spec = parse_etcd(obj)
    observed = world()
    observed.statefulset['spec'] = {'replicas': 3}
    for name in ('etcd-main-0', 'etcd-main-1'):
        observed.member_leases[name]['metadata']['annotations'][c.TLS_ENABLED] = 'true'
    assert st.compute_status(spec, observed, None, NOW)['peerUrlTLSEnabled'] is False
    observed.member_leases['etcd-main-2']['metadata']['annotations'][c.TLS_ENABLED] = 'true'
    assert st.compute_status(spec, observed, None, NOW)['peerUrlTLSEnabled'] is True
    observed.member_leases['etcd-main-2']['metadata']['annotations'][c.TLS_ENABLED] = 'false'
    observed.statefulset['spec'] = {'replicas': 2}    # only the running members count
    assert st.compute_status(spec, observed, None, NOW)['peerUrlTLSEnabled'] is True
    assert st.compute_status(parse_etcd(sample(replicas=3)), observed, None, NOW)['peerUrlTLSEnabled'] is False
