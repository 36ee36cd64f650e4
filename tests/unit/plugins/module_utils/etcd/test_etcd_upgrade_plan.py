# -*- coding: utf-8 -*-
"""plan_upgrade: the verdict (each refusal by its typed reason) and the order of the steps, over plain data."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.plan import Refusal, plan_upgrade
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.versions import (
    image_version,
    move_kind,
    parse_version,
    split_image,
)

NOW = 1_800_000_000.0
FRESH = {'snapshot': {'name': 'Full-1', 'taken_at': NOW - 60, 'verified': True}}


def member(label, version='3.4.23', **extra):
    m = {'id': {'etcd1': 'a1', 'etcd2': 'b2', 'etcd3': 'c3'}.get(label, label), 'name': label, 'version': version,
         'is_learner': False, 'healthy': True, 'reachable': True, 'revision': 10, 'db_size': 1000,
         'member_ids_seen': ['a1', 'b2', 'c3']}
    m.update(extra)
    return m


def state(*members, leader='a1', **extra):
    s = {'members': list(members) or [member('etcd1'), member('etcd2'), member('etcd3')], 'leader': leader,
         'alarms': []}
    s.update(extra)
    return s


def reasons(plan):
    return [r['reason'] for r in plan['verdict']['refusals']]


def test_followers_first_leader_last_with_a_leader_move():
    plan = plan_upgrade(state(leader='b2'), '3.5.1', FRESH, NOW)
    assert plan['verdict']['ok'] and plan['target_version'] == '3.5.1'
    assert [s['name'] for s in plan['steps']] == ['etcd1', 'etcd3', 'etcd2']
    assert plan['steps'][-1]['actions'] == ['move-leader', 'stop', 'swap', 'start', 'wait-caught-up']
    assert plan['steps'][0]['actions'] == ['stop', 'swap', 'start', 'wait-caught-up']
    assert plan['take_snapshot'] is False


def test_versions_etcd_advises_against_are_a_warning_not_a_refusal():
    plan = plan_upgrade(state(), '3.5.1', FRESH, NOW)
    assert plan['verdict']['ok']
    assert '3.5.1 is not recommended for production' in plan['verdict']['warnings'][0]
    assert plan_upgrade(state(), '3.5.21', FRESH, NOW)['verdict']['warnings'] == []


@pytest.mark.parametrize('versions,target,reason', [
    (('3.3.27',) * 3, '3.5.21', Refusal.SKIPS_MINOR),
    (('3.5.1',) * 3, '3.4.23', Refusal.DOWNGRADE),
    (('3.5.21',) * 3, '3.6.0', Refusal.BELOW_MINIMUM_PATCH),
    (('3.4.23', '3.4.23', 'garbage'), '3.5.1', Refusal.UNKNOWN_VERSION),
])
def test_illegal_version_paths_are_refused_by_reason(versions, target, reason):
    members = [member(n, v) for n, v in zip(('etcd1', 'etcd2', 'etcd3'), versions)]
    plan = plan_upgrade(state(*members), target, FRESH, NOW)
    assert not plan['verdict']['ok']
    assert reason.value in reasons(plan)


def test_the_documented_minimum_patch_lets_the_minor_through():
    members = [member(n, '3.5.26') for n in ('etcd1', 'etcd2', 'etcd3')]
    assert plan_upgrade(state(*members), '3.6.0', FRESH, NOW)['verdict']['ok']


def test_auth_enabled_refuses_34_to_35_only():
    assert Refusal.AUTH_ENABLED.value in reasons(plan_upgrade(state(auth_enabled=True), '3.5.1', FRESH, NOW))
    members = [member(n, '3.4.20') for n in ('etcd1', 'etcd2', 'etcd3')]
    assert plan_upgrade(state(*members, auth_enabled=True), '3.4.23', FRESH, NOW)['verdict']['ok']


@pytest.mark.parametrize('change,reason', [
    ({'is_learner': True}, Refusal.LEARNER),
    ({'name': ''}, Refusal.NOT_STARTED),
    ({'healthy': False, 'version': None, 'reachable': False}, Refusal.MEMBER_DOWN),
    ({'member_ids_seen': ['a1', 'b2']}, Refusal.MEMBERSHIP_DIFFERS),
    ({'quota_bytes': 1500}, Refusal.QUOTA_HEADROOM),
    ({'disk_free_bytes': 1999}, Refusal.DISK_HEADROOM),
])
def test_member_refusals_name_reason_and_member(change, reason):
    plan = plan_upgrade(state(member('etcd1'), member('etcd2', **change), member('etcd3')), '3.5.1', FRESH, NOW)
    assert reasons(plan) == [reason.value]
    refusal = plan['verdict']['refusals'][0]
    assert refusal['member'] in ('etcd2', None) and refusal['message']


def test_headroom_of_exactly_twice_the_database_passes():
    plan = plan_upgrade(state(member('etcd1', quota_bytes=2000, disk_free_bytes=2000), member('etcd2'),
                              member('etcd3')), '3.5.1', FRESH, NOW)
    assert plan['verdict']['ok']


def test_an_active_alarm_refuses():
    plan = plan_upgrade(state(alarms=[{'member_id': 'a1', 'alarm': 'NOSPACE'}]), '3.5.1', FRESH, NOW)
    assert reasons(plan) == [Refusal.ALARM.value] and 'NOSPACE on a1' in plan['verdict']['refusals'][0]['message']


def test_snapshot_gate_takes_one_or_refuses_when_told_not_to():
    stale = {'snapshot': {'name': 'Full-0', 'taken_at': NOW - 7200, 'verified': True}}
    plan = plan_upgrade(state(), '3.5.1', stale, NOW)
    assert plan['verdict']['ok'] and plan['take_snapshot'] is True
    plan = plan_upgrade(state(), '3.5.1', dict(stale, take_snapshot=False), NOW)
    assert reasons(plan) == [Refusal.NO_RECENT_SNAPSHOT.value]
    unverified = {'snapshot': {'name': 'Full-2', 'taken_at': NOW, 'verified': False}, 'take_snapshot': False}
    assert reasons(plan_upgrade(state(), '3.5.1', unverified, NOW)) == [Refusal.NO_RECENT_SNAPSHOT.value]


def test_resume_skips_members_at_the_target_and_finishes_the_one_in_flight_first():
    members = [member('etcd1', '3.5.1'), member('etcd2', None, healthy=False, reachable=False), member('etcd3')]
    plan = plan_upgrade(state(*members, in_flight='b2', leader='c3'), '3.5.1', FRESH, NOW)
    assert plan['verdict']['ok'], plan['verdict']
    assert plan['done'] == ['etcd1']
    assert [(s['name'], s['resume']) for s in plan['steps']] == [('etcd2', True), ('etcd3', False)]


def test_a_member_in_flight_that_serves_at_the_target_is_never_restarted_again():
    members = [member('etcd1', '3.5.1'), member('etcd2', '3.5.1'), member('etcd3')]
    plan = plan_upgrade(state(*members, in_flight='b2'), '3.5.1', FRESH, NOW)
    assert plan['done'] == ['etcd1', 'etcd2'] and [s['name'] for s in plan['steps']] == ['etcd3']


def test_all_at_target_is_an_empty_plan_without_a_snapshot():
    members = [member(n, '3.5.1') for n in ('etcd1', 'etcd2', 'etcd3')]
    plan = plan_upgrade(state(*members), '3.5.1', {}, NOW)
    assert plan['steps'] == [] and plan['take_snapshot'] is False and plan['verdict']['ok']


@pytest.mark.parametrize('options,field', [({'headroom_factor': 0.5}, 'headroom_factor'),
                                           ({'snapshot_max_age': 0}, 'snapshot_max_age'),
                                           ({'cert_window': -1}, 'cert_window'),
                                           ({'swap': 'rpm'}, 'swap')])
def test_bad_options_name_the_field(options, field):
    with pytest.raises(InvalidInput) as err:
        plan_upgrade(state(), '3.5.1', options, NOW)
    assert err.value.field == field


def test_bad_target_names_the_field():
    with pytest.raises(InvalidInput) as err:
        plan_upgrade(state(), 'latest', {}, NOW)
    assert err.value.field == 'target_version'


@pytest.mark.parametrize('a,b,kind', [('3.4.23', '3.4.23', 'same'), ('3.4.20', '3.4.23', 'patch'),
                                      ('3.4.23', '3.5.0', 'minor'), ('3.4.23', '3.6.0', 'skip'),
                                      ('3.5.1', '3.4.23', 'downgrade'), ('3.5.1', '4.0.0', 'skip')])
def test_move_kinds(a, b, kind):
    assert move_kind(parse_version(a), parse_version(b)) == kind


def test_parse_version_forms():
    assert parse_version('v3.5.1') == (3, 5, 1) and parse_version('3.5') == (3, 5, 0)
    assert parse_version('3.6.0-rc.1') == (3, 6, 0) and parse_version('') is None


def test_a_certificate_ending_within_the_window_refuses_naming_it_and_its_not_after():
    ends = NOW + 3600
    cert = {'path': '/etc/kubernetes/pki/etcd/peer.crt', 'not_after': ends, 'not_after_text': '2027-01-15T08:00:00Z'}
    plan = plan_upgrade(state(member('etcd1'), member('etcd2', certs=[cert]), member('etcd3')), '3.5.1', FRESH, NOW)
    assert reasons(plan) == [Refusal.CERT_EXPIRING.value]
    refusal = plan['verdict']['refusals'][0]
    assert refusal['member'] == 'etcd2'
    assert '/etc/kubernetes/pki/etcd/peer.crt' in refusal['message'] and '2027-01-15T08:00:00Z' in refusal['message']
    assert '86400s' in refusal['message']   # the default window, named
    # a narrower window lets the same certificate through; one already expired refuses with any window
    assert plan_upgrade(state(member('etcd1'), member('etcd2', certs=[cert]), member('etcd3')), '3.5.1',
                        dict(FRESH, cert_window=1800), NOW)['verdict']['ok']
    expired = dict(cert, not_after=NOW - 1)
    assert reasons(plan_upgrade(state(member('etcd1', certs=[expired]), member('etcd2'), member('etcd3')), '3.5.1',
                                dict(FRESH, cert_window=0), NOW)) == [Refusal.CERT_EXPIRING.value]


def test_the_step_names_the_swap_kind_and_the_order_does_not_depend_on_it():
    binary = plan_upgrade(state(), '3.5.1', FRESH, NOW)
    image = plan_upgrade(state(), '3.5.1', dict(FRESH, swap='image'), NOW)
    assert binary['swap'] == 'binary' and image['swap'] == 'image'
    assert {s['swap'] for s in image['steps']} == {'image'}
    assert [s['name'] for s in image['steps']] == [s['name'] for s in binary['steps']] == ['etcd2', 'etcd3', 'etcd1']


@pytest.mark.parametrize('image,version', [
    ('registry.k8s.io/etcd:3.5.16-0', (3, 5, 16)), ('quay.io/coreos/etcd:v3.4.23', (3, 4, 23)),
    ('localhost:5000/etcd:3.5.1@sha256:abc', (3, 5, 1)), ('etcd:3.4.23', (3, 4, 23)),
    ('registry.k8s.io/etcd', None), ('registry.k8s.io/etcd:latest', None), ('localhost:5000/etcd', None),
    ('', None), ('etcd:3.5', None)])
def test_image_version_reads_the_tag(image, version):
    assert image_version(image) == version


def test_split_image_keeps_a_registry_port_out_of_the_tag():
    assert split_image('localhost:5000/etcd:3.5.1') == ('localhost:5000/etcd', '3.5.1')
    assert split_image('localhost:5000/etcd') == ('localhost:5000/etcd', None)
