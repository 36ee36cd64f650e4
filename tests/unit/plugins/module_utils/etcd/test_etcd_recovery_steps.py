"""recovery_steps' decisions without etcd: which part a host plays, when a joiner's turn comes (from etcd's member
list as the gateway answers it), where membership changes go, and the plan checks; check mode acts on nothing.
The systemd path of service.py against a stand-in for systemctl."""

from __future__ import annotations

import os
import subprocess

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.process import ProcessSpec
from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery.recovery import plan_recovery
from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery.recovery_steps import (
    PART_JOINER,
    PART_LEARNER,
    PART_NONE,
    PART_RESTORED,
    PART_SEED,
    PART_SURVIVOR,
    MemberSetup,
    check_plan,
    cluster_endpoints,
    host_part,
    recover_host,
    waiting_for,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.service import SystemdService


def host(name, **facts):
    base = {'name': name, 'member_name': name, 'host_reachable': True, 'peer_url': 'http://%s:2380' % name,
            'client_url': 'http://%s:2379' % name}
    base.update(facts)
    return base


def survivor_plan():
    return plan_recovery([host('e1', responding=True, raft_index=40, cluster_id='c1', member_id='a1'),
                          host('e2'), host('e3')], store_configured=False).to_dict()


def member(name, learner=False):
    return {'name': name, 'peerURLs': ['http://%s:2380' % name], 'isLearner': learner}


def test_parts_of_a_lost_quorum():
    plan = survivor_plan()
    assert plan['action'] == 'force_new_cluster' and plan['rejoin'] == ['e2', 'e3']
    assert [host_part(plan, h) for h in ('e1', 'e2', 'e3', 'e4')] == [PART_SURVIVOR, PART_JOINER, PART_JOINER, PART_NONE]
    assert plan['members']['e2'] == {'name': 'e2', 'peer_url': 'http://e2:2380', 'client_url': 'http://e2:2379'}
    assert cluster_endpoints(plan) == ['http://e1:2379']  # only the survivor anchors the new cluster


def test_parts_with_quorum_and_of_a_restore():
    members = [{'id': 'a1', 'name': 'e1', 'peer_urls': ['http://e1:2380']},
               {'id': 'a2', 'name': 'e2', 'peer_urls': ['http://e2:2380']},
               {'id': 'a3', 'name': 'e3', 'peer_urls': ['http://e3:2380']},
               {'id': 'a4', 'name': 'e4', 'peer_urls': ['http://e4:2380'], 'is_learner': True}]
    healthy = dict(responding=True, healthy=True, cluster_id='c1', members=members)
    plan = plan_recovery([host('e1', member_id='a1', **healthy), host('e2', member_id='a2', **healthy), host('e3'),
                          host('e4', member_id='a4', is_learner=True, **healthy)], store_configured=False).to_dict()
    assert plan['action'] == 'replace_members' and plan['remove'] == [{'host': 'e3', 'member_id': 'a3'}]
    assert [host_part(plan, h) for h in ('e1', 'e2', 'e3', 'e4')] == [PART_SEED, PART_NONE, PART_JOINER, PART_LEARNER]
    assert cluster_endpoints(plan) == ['http://e1:2379', 'http://e2:2379']
    restore = plan_recovery([host('e1'), host('e2'), host('e3')], store_configured=True).to_dict()
    assert {host_part(restore, h) for h in ('e1', 'e2', 'e3')} == {PART_RESTORED}


def test_a_joiners_turn_comes_when_every_joiner_before_it_votes():
    plan = survivor_plan()
    assert waiting_for(plan, 'e2', [member('e1')]) == []  # the first joiner waits for nobody (but the cluster)
    assert waiting_for(plan, 'e3', [member('e1')]) == ['e2']
    assert waiting_for(plan, 'e3', [member('e1'), member('e2', learner=True)]) == ['e2'], 'a learner is not enough'
    assert waiting_for(plan, 'e3', [member('e1'), {'name': '', 'peerURLs': ['HTTP://E2:2380/']}]) == []


def test_check_plan_refuses_what_would_make_it_act_blindly():
    plan = survivor_plan()
    assert check_plan(plan, 'e2') is plan
    with pytest.raises(InvalidInput) as bad:
        check_plan(dict(plan, initial_cluster={}), 'e2')
    assert bad.value.field == 'plan.initial_cluster'
    with pytest.raises(InvalidInput) as bad:
        check_plan(dict(plan, action='format_disks'), 'e2')
    assert bad.value.field == 'plan.action' and bad.value.rule == 'choice'
    with pytest.raises(InvalidInput) as bad:
        check_plan(dict(plan, remove=[{'host': 'e2'}]), 'e2')
    assert bad.value.field == 'plan.remove[0].member_id'


class Untouchable:
    """A service that fails the test if anything is started or stopped."""

    def __init__(self, running=True):
        self._running = running

    def describe(self):
        return 'stand-in'

    def running(self):
        return self._running

    def stop(self):
        raise AssertionError('check mode stopped something')

    def start(self, wait):
        raise AssertionError('check mode started something')

    def wait(self, timeout):
        raise AssertionError('check mode waited')


def setup_in(tmp_path):
    data = tmp_path / 'data'
    (data / 'member').mkdir(parents=True)
    return MemberSetup(name='e2', client_url='http://e2:2379', peer_url='http://e2:2380', data_dir=str(data),
                       config_file=str(tmp_path / 'etcd.conf.yml'), config={'name': 'e2'},
                       fingerprint_path=str(tmp_path / 'fp'), fingerprint='abc')


def test_check_mode_lists_the_steps_and_touches_nothing(tmp_path):
    setup = setup_in(tmp_path)
    result = recover_host(survivor_plan(), 'e2', setup, Untouchable(), EtcdConnection(endpoints=('http://e1:2379',)),
                          now=1.0, check_mode=True)
    assert result['changed'] and result['part'] == PART_JOINER and result['steps'] == []
    assert result['actions'][0] == 'stop stand-in' and 'move %s aside' % setup.data_dir in result['actions'][1]
    assert os.listdir(str(tmp_path)) == ['data'] and os.listdir(setup.data_dir) == ['member']
    nothing = recover_host(survivor_plan(), 'e4', setup, Untouchable(), EtcdConnection(endpoints=('http://e1:2379',)),
                           now=1.0)
    assert not nothing['changed'] and nothing['part'] == PART_NONE


class FakeSystemctl:
    """What systemctl answers for one unit: active or not, failed or not; records the calls."""

    def __init__(self, active=False, failed=False, start_rc=0):
        self.active, self.failed, self.start_rc = active, failed, start_rc
        self.calls = []

    def __call__(self, argv, **_kw):
        self.calls.append(argv[1:])
        verb = argv[1]
        rc = {'is-active': 0 if self.active else 3, 'is-failed': 0 if self.failed else 1,
              'start': self.start_rc}.get(verb, 0)
        if verb == 'stop':
            self.active = False
        return subprocess.CompletedProcess(argv, rc, '', 'Job for etcd.service failed.' if rc and verb == 'start' else '')


def systemd(fake, tmp_path):
    spec = ProcessSpec(pid_file=str(tmp_path / 'unused.pid'), wait_url='http://127.0.0.1:9', wait_timeout=1)
    return SystemdService('etcd', spec, run=fake)


def test_systemd_stop_only_stops_a_running_unit(tmp_path):
    idle = FakeSystemctl(active=False)
    assert systemd(idle, tmp_path).stop() is None and idle.calls == [['is-active', '--quiet', 'etcd']]
    running = FakeSystemctl(active=True)
    assert systemd(running, tmp_path).stop() == 'systemctl stop' and ['stop', 'etcd'] in running.calls


def test_systemd_start_without_waiting_for_the_others_and_a_failed_unit(tmp_path):
    fake = FakeSystemctl(failed=True)
    service = systemd(fake, tmp_path)
    service.start(wait=False)
    assert fake.calls == [['start', '--no-block', 'etcd']]
    with pytest.raises(EtcdError, match='journalctl -u etcd'):  # the unit failed: say where its log is
        service.wait(5, sleep=lambda _s: None)
    with pytest.raises(EtcdError, match='Job for etcd.service failed'):
        systemd(FakeSystemctl(start_rc=1), tmp_path).start(wait=True)


class Learner:
    """A new member as the recovery sees it: serving from a given poll on, restarted on request."""

    def __init__(self, serves_after_polls=None, serves_after_restart=True):
        self.polls, self.restarts = 0, 0
        self.serves_after_polls, self.serves_after_restart = serves_after_polls, serves_after_restart

    def describe(self):
        return 'learner stand-in'

    def serving(self):
        self.polls += 1
        if self.restarts and self.serves_after_restart:
            return True
        return self.serves_after_polls is not None and self.polls > self.serves_after_polls

    def stop(self):
        return 'SIGTERM'

    def start(self, wait):
        assert not wait
        self.restarts += 1


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def snapshot_received(tmp_path):
    """A data dir whose member was sent the leader's snapshot at time 0 (the stand-in clock's start)."""
    snap = tmp_path / 'member' / 'snap'
    snap.mkdir(parents=True)
    (snap / '000000000000000b-00000000000003f9.snap').write_bytes(b'raft snapshot')
    os.utime(str(snap / '000000000000000b-00000000000003f9.snap'), (0, 0))
    return str(tmp_path)


def test_a_learner_that_serves_is_left_alone(tmp_path):
    from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery.recovery_steps import _learner_serving
    clock, learner = Clock(), Learner(serves_after_polls=3)
    assert _learner_serving(learner, snapshot_received(tmp_path), 60, clock, clock.sleep, clock) is False
    assert learner.restarts == 0


def test_a_learner_stuck_after_the_leaders_snapshot_is_restarted_once(tmp_path):
    from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery.recovery_steps import (
        SNAPSHOT_GRACE, _learner_serving)
    clock, learner = Clock(), Learner(serves_after_polls=None)
    assert _learner_serving(learner, snapshot_received(tmp_path), 60, clock, clock.sleep, clock) is True
    assert learner.restarts == 1 and SNAPSHOT_GRACE <= clock.now < SNAPSHOT_GRACE + 0.2
    # without a snapshot there is nothing to blame: no restart, and the deadline holds
    clock, stuck = Clock(), Learner(serves_after_polls=None)
    with pytest.raises(EtcdError, match='does not serve after 3s'):
        _learner_serving(stuck, str(tmp_path / 'fresh'), 3, clock, clock.sleep, clock)
    assert stuck.restarts == 0
    clock, never = Clock(), Learner(serves_after_polls=None, serves_after_restart=False)
    with pytest.raises(EtcdError, match='restarted once'):
        _learner_serving(never, snapshot_received(tmp_path / 'again'), 3, clock, clock.sleep, clock)
    assert never.restarts == 1
