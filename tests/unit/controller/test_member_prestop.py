# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The member program's side of the etcd container's preStop hook: GET /leader/handoff (over real HTTP to the
program's server) makes the member unready and moves leadership off it once, bounded by --leader-handoff-timeout;
SIGTERM's own hand-off then waits for it instead of racing it. The hand-off itself is the engine's
(move_leadership_away, tests/integration/test_etcd_rolling_member.py); here a heartbeat stand-in records the calls."""

from __future__ import annotations

import threading
import time
import types

import requests

from ansible_collections.steward.cluster.plugins.module_utils.druid import components as c

from steward_controller.member.server import MemberState, serve


class Heartbeat:
    def __init__(self, answer, delay=0.0):
        self.answer, self.delay, self.calls = answer, delay, []

    def hand_off(self, timeout):
        self.calls.append(timeout)
        time.sleep(self.delay)
        return self.answer


def _state(heartbeat, handoff=True):
    initializer = types.SimpleNamespace(options=types.SimpleNamespace(client_url='http://127.0.0.1:1'), last={})
    state = MemberState(initializer, {})
    state.initialized, state.heartbeat, state.handoff, state.handoff_timeout = True, heartbeat, handoff, 7.0
    return state


def test_the_hook_hands_leadership_off_once_and_the_member_turns_unready():
    heartbeat = Heartbeat('8e9e05c52164694d', delay=0.3)
    state = _state(heartbeat)
    server = serve(state, '127.0.0.1', 0)
    try:
        url = 'http://127.0.0.1:%d%s' % (server.server_address[1], c.HANDOFF_PATH)
        later = []
        sigterm = threading.Thread(target=lambda: (time.sleep(0.1), later.append(state.prepare_stop())))
        sigterm.start()                          # SIGTERM's hand-off comes while the hook's runs
        answer = requests.get(url, timeout=5)
        sigterm.join(5)
        assert answer.status_code == 200 and answer.json() == {'handedTo': '8e9e05c52164694d'}
        assert heartbeat.calls == [7.0] and later == [None]      # once, within --leader-handoff-timeout
        assert state.stopping and not state.healthy()
        assert requests.get(url, timeout=5).json() == {'handedTo': None}
    finally:
        server.shutdown()


def test_no_hand_off_when_it_is_switched_off_or_the_member_never_started():
    heartbeat = Heartbeat('x')
    state = _state(heartbeat, handoff=False)
    assert state.prepare_stop() is None and state.stopping
    state = _state(heartbeat)
    state.initialized = False
    assert state.prepare_stop() is None and heartbeat.calls == []


def test_the_statefulset_renders_the_hook_on_the_etcd_container_against_the_programs_port():
    from ansible_collections.steward.cluster.plugins.module_utils.druid.spec import parse_etcd
    from support.druid_samples import sample
    spec = parse_etcd(sample(replicas=3))
    containers = {ct['name']: ct for ct in c.statefulset(spec, 3, 'x')['spec']['template']['spec']['containers']}
    assert containers['etcd']['lifecycle'] == {'preStop': {'httpGet': {'path': c.HANDOFF_PATH,
                                                                       'port': spec.backup.port}}}
    assert 'lifecycle' not in containers['backup-restore']
    assert {'name': 'server', 'containerPort': spec.backup.port, 'protocol': 'TCP'} in containers['backup-restore']['ports']
