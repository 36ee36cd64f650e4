# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The state machine over simulated time: the seed's flatcar example end to end, profiles, chains, data."""

from __future__ import annotations

import copy
import json

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.times import format_rfc3339_ns
from ansible_collections.steward.cluster.plugins.module_utils.kube import drain as kube_drain
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config import load_config
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.data import parse_data
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.environment import Environment
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.gotime import seconds_to_ns
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.state import ErrorKind, metadata_patch, reconcile

from support.maintenance import (
    APPROVED, FLATCAR, REBOOT_NEEDED, REBOOT_OK, T0, FakeHttp, MemoryApi, apply_patch, make_node)

MIN = 60.0
PROFILE = 'cloud.sap/maintenance-profile'
STATE = 'cloud.sap/maintenance-state'
DATA = 'cloud.sap/maintenance-data'


class Sim:
    """One node, reconciled every `requeue` seconds; the patch is applied like the API server would."""

    def __init__(self, config_text, node, env=None, now=T0):
        self.config = load_config(config_text)
        self.node = node
        self.env = env or Environment(http=FakeHttp())
        self.now = now

    def step(self, seconds=MIN):
        result = reconcile(self.node, self.config, self.now, self.env)
        self.node = apply_patch(self.node, result.patch)
        self.now += seconds
        return result

    @property
    def labels(self):
        return self.node['metadata']['labels']

    @property
    def annotations(self):
        return self.node['metadata']['annotations']

    def data(self):
        return parse_data(self.annotations[DATA])


def messages(result):
    return [e.message for e in result.errors]


def test_flatcar_example_end_to_end():
    http = FakeHttp()
    sim = Sim(FLATCAR, make_node('worker-1', {PROFILE: 'flatcar'}), Environment(http=http))
    first = sim.step()
    assert first.state == 'operational' and sim.labels[STATE] == 'operational'
    assert first.transitions == [] and first.errors == []
    assert sim.data().profiles['flatcar'].transition == seconds_to_ns(T0)      # attached now

    # The update agent asks for a reboot.
    sim.annotations[REBOOT_NEEDED] = 'true'
    at_required = sim.now
    result = sim.step()
    assert [(t.profile, t.source, t.target) for t in result.transitions] == [('flatcar', 'operational', 'maintenance-required')]
    assert sim.labels[STATE] == 'maintenance-required'
    assert http.calls == []                                  # notifications come on the next reconcile

    result = sim.step()
    assert [n.instance for n in result.notifications] == ['approval_required']
    assert http.calls[0]['json']['text'].startswith('The node worker-1 requires maintenance. Manual approval is required.')
    assert '`kubectl annotate node worker-1 cloud.sap/maintenance-approved=true`' in http.calls[0]['json']['text']
    for _unused in range(5):                                 # no approval yet: nothing moves, nothing is resent
        assert sim.step().patch == {}
    assert len(http.calls) == 1

    # Approved: triggers remove the approval and set reboot-ok, the node goes in-maintenance.
    sim.annotations[APPROVED] = 'true'
    at_maintenance = sim.now
    result = sim.step()
    assert [(t.source, t.target) for t in result.transitions] == [('maintenance-required', 'in-maintenance')]
    assert sim.labels[STATE] == 'in-maintenance'
    assert APPROVED not in sim.annotations and sim.annotations[REBOOT_OK] == 'true'
    assert result.patch['metadata']['annotations'][APPROVED] is None        # a merge patch deletes with null
    sim.step()
    assert http.calls[-1]['json']['text'] == 'Maintenance for node worker-1 has started.\n'

    # The node rebooted, the agent removed reboot-needed: back to operational, reboot-ok removed.
    del sim.annotations[REBOOT_NEEDED]
    at_operational = sim.now
    result = sim.step()
    assert [(t.source, t.target) for t in result.transitions] == [('in-maintenance', 'operational')]
    assert sim.labels[STATE] == 'operational' and REBOOT_OK not in sim.annotations
    data = sim.data()
    assert data.profiles['flatcar'].current == 'operational'
    assert data.profiles['flatcar'].previous == 'in-maintenance'
    assert data.profiles['flatcar'].transition == seconds_to_ns(at_operational)
    assert data.notifications == {'approval_required': seconds_to_ns(at_required + MIN),
                                  'maintenance_started': seconds_to_ns(at_maintenance + MIN)}
    sim.step()
    assert sim.data().profiles['flatcar'].previous == 'operational'
    assert sim.step().patch == {}                            # settled: nothing to write
    assert len(http.calls) == 2


def test_periodic_reminder_while_waiting_for_approval():
    http = FakeHttp()
    sim = Sim(FLATCAR, make_node('w', {PROFILE: 'flatcar'}, {REBOOT_NEEDED: 'true'}), Environment(http=http))
    sim.step(MIN)           # -> maintenance-required
    sim.step(23 * 3600)     # notified; then 23h pass
    assert len(http.calls) == 1
    sim.step(3600)          # 23h after the notification: not yet
    assert len(http.calls) == 1
    sim.step(MIN)           # 24h after: remind
    assert len(http.calls) == 2


def test_reconcile_does_not_modify_its_input():
    node = make_node('w', {PROFILE: 'flatcar'}, {REBOOT_NEEDED: 'true'})
    before = copy.deepcopy(node)
    result = reconcile(node, load_config(FLATCAR), T0, Environment(http=FakeHttp()))
    assert node == before
    assert result.patch['metadata']['labels'] == {STATE: 'maintenance-required'}
    assert set(result.patch['metadata']['annotations']) == {DATA}


def test_a_transition_with_triggers_does_not_modify_its_input_either():
    # the working copy shares spec and status with the input (only metadata is copied): triggers write a deep copy
    config = '''
intervals: {requeue: 1m}
instances:
  check: [{type: hasLabel, name: go, config: {key: go}}]
  trigger: [{type: alterLabel, name: mark, config: {key: marked, value: "yes"}},
            {type: alterAnnotation, name: note, config: {key: noted, value: "yes"}}]
profiles:
- name: p
  operational: {transitions: [{check: go, trigger: mark && note, next: in-maintenance}]}
'''
    node = make_node('w', {PROFILE: 'p', 'go': 'y'})
    node['spec'] = {'taints': [{'key': 'k', 'effect': 'NoSchedule'}]}
    node['status'] = {'conditions': [{'type': 'Ready', 'status': 'True'}]}
    before = copy.deepcopy(node)
    result = reconcile(node, load_config(config), T0, Environment())
    assert node == before
    assert [t.target for t in result.transitions] == ['in-maintenance']
    assert result.patch['metadata']['labels']['marked'] == 'yes' and result.patch['metadata']['annotations']['noted'] == 'yes'


EXCLUSIVE = '''
intervals: {requeue: 1m}
instances:
  check:
  - {type: hasLabel, name: go, config: {key: go}}
  - {type: hasLabel, name: done, config: {key: done}}
  trigger:
  - {type: alterLabel, name: mark_a, config: {key: entered-a, value: "yes"}}
  - {type: alterLabel, name: mark_b, config: {key: entered-b, value: "yes"}}
profiles:
- name: a
  operational: {transitions: [{check: go, next: maintenance-required}]}
  maintenance-required: {transitions: [{check: go, trigger: mark_a, next: in-maintenance}]}
  in-maintenance: {transitions: [{check: done, next: operational}]}
- name: b
  operational: {transitions: [{check: go, next: maintenance-required}]}
  maintenance-required: {transitions: [{check: go, trigger: mark_b, next: in-maintenance}]}
  in-maintenance: {transitions: [{check: done, next: operational}]}
'''


def states(sim):
    return {name: p.current for name, p in sim.data().profiles.items()}


def test_only_one_profile_in_maintenance_at_a_time():
    sim = Sim(EXCLUSIVE, make_node('w', {PROFILE: 'a--b', 'go': 'y'}))
    sim.step()
    assert states(sim) == {'a': 'maintenance-required', 'b': 'maintenance-required'}
    result = sim.step()
    assert states(sim) == {'a': 'in-maintenance', 'b': 'maintenance-required'}     # both passed, a came first
    assert [e.blocked for e in result.profiles[1].evaluations] == ['another profile of this node is in-maintenance']
    assert sim.labels['entered-a'] == 'yes' and 'entered-b' not in sim.labels
    assert sim.labels[STATE] == 'in-maintenance'
    for _unused in range(3):
        sim.step()
    assert states(sim) == {'a': 'in-maintenance', 'b': 'maintenance-required'}
    sim.labels['done'] = 'y'
    del sim.labels['go']
    sim.step()
    assert states(sim) == {'a': 'operational', 'b': 'maintenance-required'}
    assert sim.labels[STATE] == 'maintenance-required'        # the most critical state of the profiles
    sim.labels['go'] = 'y'
    del sim.labels['done']
    sim.step()
    assert states(sim)['b'] == 'in-maintenance' and sim.labels['entered-b'] == 'yes'


def test_profiles_are_attached_and_detached_with_the_label():
    sim = Sim(EXCLUSIVE, make_node('w', {PROFILE: 'a--b--unknown', 'go': 'y'}))
    sim.step()
    assert sorted(sim.data().profiles) == ['a', 'b']          # unknown names are ignored, as upstream
    sim.labels[PROFILE] = 'b'
    sim.step()
    assert sorted(sim.data().profiles) == ['b']
    del sim.labels[PROFILE]
    result = sim.step()
    assert sorted(sim.data().profiles) == ['default'] and result.state == 'operational'


def test_a_failing_trigger_aborts_the_transition_and_its_node_changes(monkeypatch):
    config = '''
intervals: {requeue: 1m}
instances:
  check: [{type: hasLabel, name: go, config: {key: go}}]
  trigger:
  - {type: alterLabel, name: mark, config: {key: marked, value: "yes"}}
  - {type: cordon, name: cordon}
profiles:
- name: p
  operational: {transitions: [{check: go, trigger: mark && cordon, next: in-maintenance}]}
'''
    calls = []

    def failing_cordon(client, name):
        calls.append(name)
        raise kube_drain.DrainError('node %s does not exist' % name)

    monkeypatch.setattr(kube_drain, 'cordon', failing_cordon)
    sim = Sim(config, make_node('w', {PROFILE: 'p', 'go': 'y'}), Environment(kube='CLIENT'))
    result = sim.step()
    assert calls == ['w']
    assert result.transitions == [] and sim.labels[STATE] == 'operational' and 'marked' not in sim.labels
    assert {e.kind for e in result.errors} == {ErrorKind.TRIGGER}
    assert messages(result) == ['profile p: transition operational -> in-maintenance aborted: trigger cordon (cordon) failed: '
                                'cordon w: node w does not exist']
    monkeypatch.setattr(kube_drain, 'cordon', lambda client, name: True)
    result = sim.step()
    assert sim.labels[STATE] == 'in-maintenance' and sim.labels['marked'] == 'yes'


def test_a_failing_check_stops_the_profile_but_not_the_others():
    config = '''
intervals: {requeue: 1m}
instances:
  check:
  - {type: clusterSemver, name: newer, config: {key: version}}
  - {type: hasLabel, name: go, config: {key: go}}
profiles:
- name: broken
  operational:
    transitions:
    - {check: newer, next: maintenance-required}
    - {check: go, next: maintenance-required}
- name: fine
  operational: {transitions: [{check: go, next: maintenance-required}]}
'''
    sim = Sim(config, make_node('w', {PROFILE: 'broken--fine', 'go': 'y'}))
    result = sim.step()
    assert states(sim) == {'broken': 'operational', 'fine': 'maintenance-required'}
    assert {e.kind for e in result.errors} == {ErrorKind.CHECK}
    assert messages(result) == ['profile broken: transition operational -> maintenance-required: check newer (clusterSemver) '
                                'failed: node does not have label version containing a version']
    evaluations = result.profiles[0].evaluations
    assert [e.passed for e in evaluations] == [False, True] and evaluations[0].checks['newer']['error']


def test_enter_chain_runs_once_after_entering_and_retries_on_failure(monkeypatch):
    config = '''
intervals: {requeue: 1m}
instances:
  check: [{type: hasLabel, name: go, config: {key: go}}]
  trigger: [{type: uncordon, name: uncordon}, {type: alterLabel, name: note, config: {key: entered, value: "1"}}]
profiles:
- name: p
  operational: {enter: note && uncordon}
  in-maintenance: {transitions: [{check: go, next: operational}]}
'''
    data = json.dumps({'Profiles': {'p': {'Transition': '2026-01-01T00:00:00Z', 'Current': 'in-maintenance',
                                          'Previous': 'in-maintenance'}}, 'Notifications': {}})
    sim = Sim(config, make_node('w', {PROFILE: 'p', 'go': 'y'}, {DATA: data}), Environment(kube='CLIENT'))
    calls = []
    outcomes = iter([RuntimeError('API down'), True])

    def flaky_uncordon(client, name):
        calls.append(name)
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(kube_drain, 'uncordon', flaky_uncordon)
    sim.step()                                    # in-maintenance -> operational
    assert calls == [] and states(sim) == {'p': 'operational'}
    result = sim.step()                           # entering operational: uncordon fails
    assert calls == ['w'] and 'entered' not in sim.labels
    assert {e.kind for e in result.errors} == {ErrorKind.TRIGGER}
    assert messages(result) == ['profile p: entering operational: trigger uncordon (uncordon) failed: RuntimeError: API down']
    assert sim.data().profiles['p'].previous == 'in-maintenance'
    sim.step()                                    # retried, succeeds
    assert calls == ['w', 'w'] and sim.labels['entered'] == '1'
    assert sim.data().profiles['p'].previous == 'operational'
    sim.step()
    assert calls == ['w', 'w']                    # not again


NOTIFY = '''
intervals: {requeue: 1m}
instances:
  check: [{type: hasLabel, name: go, config: {key: go}}]
  notify:
  - type: slack
    name: hello
    config: {hook: "https://h", channel: "#c", message: "{{ .Node.Name }} {{ .State }} {{ .Profile.Current }}/{{ .Profile.Last }}"}
    schedule: {type: oneshot}
  - type: slack
    name: broken
    config: {hook: "https://h", channel: "#c", message: "{{ .NoSuchField }}"}
    schedule: {type: oneshot}
profiles:
- name: p
  operational: {transitions: [{check: go, next: maintenance-required}]}
  maintenance-required: {notify: broken && hello}
'''


def test_failing_notifications_are_reported_retried_and_never_block():
    http = FakeHttp((500, b'down'))
    sim = Sim(NOTIFY, make_node('w', {PROFILE: 'p', 'go': 'y'}), Environment(http=http))
    sim.step()
    result = sim.step()
    assert {e.kind for e in result.errors} == {ErrorKind.NOTIFICATION}
    assert messages(result) == [
        "profile p: notification broken (slack) failed: template: line 1, column 4: can't evaluate field NoSuchField in type plugin.Parameters",
        'profile p: notification hello (slack) failed: slack webhook answered 500: down']
    assert sim.data().notifications == {}
    http.answer = (200, b'ok')
    result = sim.step()                           # oneshot: the change was not announced yet, so retry
    assert [n.instance for n in result.notifications] == ['hello']
    assert http.calls[-1]['json']['text'] == 'w maintenance-required p/p'
    sim.step()
    assert len(http.calls) == 2                   # sent once


def test_upstream_data_is_kept_byte_for_byte_and_old_formats_are_rewritten():
    upstream = ('{"Profiles":{"flatcar":{"Transition":"2025-12-31T23:00:00.123456789Z","Current":"operational",'
                '"Previous":"operational"}},"Notifications":{"approval_required":"2025-12-30T10:00:00Z"}}')
    node = make_node('w', {PROFILE: 'flatcar', STATE: 'operational'}, {DATA: upstream})
    config = load_config(FLATCAR)
    assert reconcile(node, config, T0, Environment()).patch == {}
    v1 = json.dumps({'LastTransition': '2025-12-31T23:00:00Z', 'LastNotificationTimes': {},
                     'ProfileStates': {'flatcar': 'maintenance-required'}, 'PreviousStates': {'flatcar': 'maintenance-required'}})
    node = make_node('w', {PROFILE: 'flatcar', STATE: 'maintenance-required'}, {DATA: v1, APPROVED: 'true'})
    result = reconcile(node, config, T0, Environment(http=FakeHttp()))
    rewritten = json.loads(result.patch['metadata']['annotations'][DATA])
    assert rewritten['Profiles']['flatcar'] == {'Transition': format_rfc3339_ns(seconds_to_ns(T0)), 'Current': 'in-maintenance',
                                                'Previous': 'maintenance-required'}


def test_unreadable_data_leaves_the_node_alone():
    node = make_node('w', {PROFILE: 'flatcar'}, {REBOOT_NEEDED: 'true', DATA: '{"Profiles": 5}'})
    result = reconcile(node, load_config(FLATCAR), T0, Environment())
    assert result.patch == {} and result.transitions == []
    assert {e.kind for e in result.errors} == {ErrorKind.DATA}
    assert messages(result) == ['node w: data.Profiles: expected a JSON object, got int; leaving the node alone']


def test_wait_counts_from_the_profiles_own_transition():
    config = '''
intervals: {requeue: 1m}
instances:
  check: [{type: wait, name: soak, config: {duration: 10m}}, {type: hasLabel, name: go, config: {key: go}}]
profiles:
- name: p
  operational: {transitions: [{check: go, next: maintenance-required}]}
  maintenance-required: {transitions: [{check: soak, next: in-maintenance}]}
'''
    sim = Sim(config, make_node('w', {PROFILE: 'p', 'go': 'y'}))
    sim.step(MIN)
    entered = sim.now - MIN
    while sim.now <= entered + 600:
        sim.step(MIN)
        assert states(sim)['p'] == 'maintenance-required'
    sim.step(MIN)
    assert states(sim)['p'] == 'in-maintenance'


def test_commit_gets_the_patch_and_failures_are_reported():
    api = MemoryApi([make_node('w', {PROFILE: 'flatcar'}, {REBOOT_NEEDED: 'true'})])
    env = Environment(commit=api.patch)
    result = reconcile(api.get('w'), load_config(FLATCAR), T0, env)
    assert result.committed and api.get('w')['metadata']['labels'][STATE] == 'maintenance-required'
    assert api.patches == [('w', result.patch)]

    def refuse(name, patch):
        raise ConnectionError('API server went away')

    node = make_node('v', {PROFILE: 'flatcar'}, {REBOOT_NEEDED: 'true'})
    result = reconcile(node, load_config(FLATCAR), T0, Environment(commit=refuse))
    assert not result.committed
    assert {e.kind for e in result.errors} == {ErrorKind.COMMIT}
    assert messages(result) == ['commit of node v failed: ConnectionError: API server went away']


def test_metadata_patch():
    small = {'metadata': {'labels': {'a': '1', 'b': '2'}, 'annotations': {}}}
    large = {'metadata': {'labels': {'a': '1', 'b': '3', 'c': '4'}, 'annotations': {'x': ''}}}
    assert metadata_patch(small, large) == {'metadata': {'labels': {'b': '3', 'c': '4'}, 'annotations': {'x': ''}}}
    assert metadata_patch(large, small) == {'metadata': {'labels': {'b': '2', 'c': None}, 'annotations': {'x': None}}}
    assert metadata_patch(small, small) == {}


@pytest.mark.parametrize('label, expected', [('', ['default']), ('a--a--b', ['a', 'b'])])
def test_profile_label_parsing(label, expected):
    node = make_node('w', {PROFILE: label} if label else {})
    result = reconcile(node, load_config(EXCLUSIVE), T0, Environment())
    assert [p.name for p in result.profiles] == expected


GATED = '''
intervals: {requeue: 1m}
instances:
  check:
  - {type: hasLabel, name: go, config: {key: go}}
  - {type: nodeCount, name: enough, config: {count: 1}}
profiles:
- name: local
  operational: {transitions: [{check: go, next: maintenance-required}]}
- name: cluster
  operational: {transitions: [{check: go && enough, next: maintenance-required}]}
'''


def test_gated_transitions_wait_when_the_gate_cannot_be_entered():
    class Timeout(Exception):
        pass

    def broken_gate():
        raise Timeout('lease kube-system/maintenance is held by replica-2')

    api = MemoryApi([make_node('w', {PROFILE: 'local--cluster', 'go': 'y'})])
    env = Environment(nodes=api.list, gate=broken_gate, commit=api.patch)
    result = reconcile(api.get('w'), load_config(GATED), T0, env)
    assert [(t.profile, t.gated) for t in result.transitions] == [('local', False)]
    assert result.committed and not result.gated
    assert {e.kind for e in result.errors} == {ErrorKind.GATE}
    assert messages(result) == ['gate: Timeout: lease kube-system/maintenance is held by replica-2; '
                                'cluster-scoped transitions wait for the next reconcile']
    stored = parse_data(api.get('w')['metadata']['annotations'][DATA])
    assert {n: p.current for n, p in stored.profiles.items()} == {'local': 'maintenance-required', 'cluster': 'operational'}
    env.gate = Environment().gate
    result = reconcile(api.get('w'), load_config(GATED), T0 + 60, env)
    assert [(t.profile, t.gated) for t in result.transitions] == [('cluster', True)]


def test_summary_is_json_for_logs_and_status():
    node = make_node('w', {PROFILE: 'flatcar'}, {REBOOT_NEEDED: 'true'})
    summary = json.loads(json.dumps(reconcile(node, load_config(FLATCAR), T0, Environment()).summary()))
    assert summary['transitions'] == [{'profile': 'flatcar', 'source': 'operational', 'target': 'maintenance-required', 'gated': False}]
    assert summary['profiles'][0]['transitions'][0]['checks']['reboot_needed'] == {'type': 'hasAnnotation', 'passed': True, 'info': {}}
    assert (summary['state'], summary['committed'], summary['errors']) == ('maintenance-required', False, [])
