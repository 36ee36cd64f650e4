# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every check plugin: config (with field-named errors) and verdicts, as tables over plain node dicts."""

from __future__ import annotations

import datetime

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import format_micro
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.checks_cluster import (
    Affinity, AnyLabel, ClusterSemver, MaxMaintenance, NodeCount)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.checks_node import (
    Condition, HasAnnotation, HasLabel, TimeWindow, Wait, WaitExclude, counted_seconds)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.data import NodeData, ProfileData, format_data
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.environment import Environment, PluginParams
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import ConfigError, PluginError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.fields import Fields
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.gotime import seconds_to_ns
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.leases import MemoryLeaseStore
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.semver import parse_version
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.stagger import Stagger

from support.maintenance import make_node

HOUR = 3600.0
DAY = 86400.0


def ts(text):
    return datetime.datetime.fromisoformat(text).replace(tzinfo=datetime.timezone.utc).timestamp()


def build(cls, config):
    return cls.from_config(Fields(config, 'c'))


def params(node=None, now=0.0, state='operational', profile='p', last=0.0, nodes=(), env=None, in_maintenance=False):
    env = env or Environment(nodes=lambda: list(nodes))
    return PluginParams(node=node or make_node(), profile=profile, state=state, last_transition=last,
                        in_maintenance=in_maintenance, now=now, env=env)


def other(name, state='operational', profiles='p', labels=None, data=None):
    all_labels = {'cloud.sap/maintenance-state': state, 'cloud.sap/maintenance-profile': profiles}
    all_labels.update(labels or {})
    annotations = {'cloud.sap/maintenance-data': format_data(data)} if data else {}
    return make_node(name, all_labels, annotations)


# --- node-local ------------------------------------------------------------------------------------

@pytest.mark.parametrize('cls, section', [(HasAnnotation, 'annotations'), (HasLabel, 'labels')])
@pytest.mark.parametrize('config, present, expected', [
    ({'key': 'k'}, {'k': 'anything'}, True),
    ({'key': 'k'}, {'k': ''}, True),
    ({'key': 'k'}, {}, False),
    ({'key': 'k', 'value': 'true'}, {'k': 'true'}, True),
    ({'key': 'k', 'value': 'true'}, {'k': 'false'}, False),
    ({'key': 'k', 'value': True}, {'k': 'true'}, True),   # unquoted YAML true reads as "true"
    ({'key': 'k', 'value': ''}, {'k': 'x'}, True),        # empty value: only the key is checked
])
def test_has_annotation_and_label(cls, section, config, present, expected):
    node = make_node(**{section: present})
    assert build(cls, config).check(params(node)).passed is expected


def test_has_label_looks_at_labels_only():
    assert build(HasLabel, {'key': 'k'}).check(params(make_node(annotations={'k': 'v'}))).passed is False


@pytest.mark.parametrize('conditions, expected', [
    ([{'type': 'Ready', 'status': 'True'}], True),
    ([{'type': 'Ready', 'status': 'False'}], False),
    ([{'type': 'DiskPressure', 'status': 'True'}], False),
    ([], False),
])
def test_condition(conditions, expected):
    check = build(Condition, {'type': 'Ready', 'status': 'True'})
    assert check.check(params(make_node(conditions=conditions))).passed is expected


def test_condition_requires_both_fields():
    with pytest.raises(ConfigError, match='^c.status: required'):
        build(Condition, {'type': 'Ready'})


WINDOW = {'start': '10:00', 'end': '14:00', 'weekdays': ['mon', 'wednesday'], 'exclude': ['Dec 24']}


@pytest.mark.parametrize('when, expected', [
    ('2025-12-01T12:00:00', True),        # Monday, inside
    ('2025-12-03T10:00:01', True),        # Wednesday
    ('2025-12-01T10:00:00', False),       # start itself is outside (strict, as upstream)
    ('2025-12-01T14:00:00', False),
    ('2025-12-01T09:59:59', False),
    ('2025-12-02T12:00:00', False),       # Tuesday
    ('2025-12-24T12:00:00', False),       # Wednesday, excluded date
    ('2026-12-24T12:00:00', False),       # a Thursday anyway
])
def test_time_window(when, expected):
    assert build(TimeWindow, WINDOW).check(params(now=ts(when))).passed is expected


@pytest.mark.parametrize('elapsed, expected', [(HOUR - 1, False), (HOUR, False), (HOUR + 0.001, True)])
def test_wait_is_strictly_longer(elapsed, expected):
    assert build(Wait, {'duration': '1h'}).check(params(now=1000.0 + elapsed, last=1000.0)).passed is expected


@pytest.mark.parametrize('start, end, seconds', [
    ('2026-01-05T12:00:00', '2026-01-05T13:00:00', HOUR),                 # Monday to Monday
    ('2026-01-10T12:00:00', '2026-01-10T13:00:00', 0),                    # within Saturday
    ('2026-01-09T22:00:00', '2026-01-12T02:00:00', 4 * HOUR),             # Fri 22:00 .. Mon 02:00, weekend stands still
    ('2026-01-05T00:00:00', '2026-01-12T00:00:00', 5 * DAY),              # a full week: five working days
    ('2026-01-05T00:00:00', '2027-01-04T00:00:00', 52 * 5 * DAY),         # 52 weeks
])
def test_wait_exclude_counts_only_non_excluded_days(start, end, seconds):
    assert counted_seconds(ts(start), ts(end), frozenset({5, 6})) == seconds


def test_wait_exclude_check():
    check = build(WaitExclude, {'duration': '3h', 'exclude': ['saturday', 'sunday']})
    friday_evening = ts('2026-01-09T22:00:00')
    assert check.check(params(now=ts('2026-01-12T00:59:00'), last=friday_evening)).passed is False   # 2h59m counted
    assert check.check(params(now=ts('2026-01-12T01:00:01'), last=friday_evening)).passed is True


# --- cluster ---------------------------------------------------------------------------------------

@pytest.mark.parametrize('low, high', [
    ('1.2.3', '1.2.4'), ('1.2.3', '1.10.0'), ('1.0.0-alpha', '1.0.0'), ('1.0.0-alpha', '1.0.0-alpha.1'),
    ('1.0.0-alpha.1', '1.0.0-alpha.beta'), ('1.0.0-beta.2', '1.0.0-beta.11'), ('1.0.0-rc.1', '1.0.0'),
])
def test_semver_precedence(low, high):
    assert parse_version(low) < parse_version(high)
    assert parse_version(high) >= parse_version(low) and parse_version(high) != parse_version(low)


@pytest.mark.parametrize('bad', ['v1.2.3', '1.2', '01.2.3', '1.2.3-01', '1.2.3.4', ''])
def test_semver_rejects(bad):
    with pytest.raises(ValueError):
        parse_version(bad)


def test_cluster_semver():
    nodes = [other('a', labels={'v': '1.2.3'}), other('b', labels={'v': '1.3.0'}, profiles='q'),
             other('c', labels={'v': 'garbage'}), other('d')]
    own = other('me', labels={'v': '1.2.3'})
    check = build(ClusterSemver, {'key': 'v'})
    result = check.check(params(own, nodes=nodes + [own]))
    assert (result.passed, result.info) == (True, {'version': '1.2.3', 'highest': '1.3.0'})
    scoped = build(ClusterSemver, {'key': 'v', 'profileScoped': True})
    assert scoped.check(params(own, nodes=nodes + [own])).passed is False     # 1.3.0 is in profile q only
    up_to_date = other('me', labels={'v': '1.3.0'})
    assert check.check(params(up_to_date, nodes=nodes)).passed is False
    with pytest.raises(PluginError, match='does not have label v'):
        check.check(params(other('me'), nodes=nodes))
    with pytest.raises(PluginError, match='failed to parse'):
        check.check(params(other('me', labels={'v': 'x'}), nodes=nodes))


def data_with(profile, transition_at, state='in-maintenance'):
    return NodeData({profile: ProfileData(seconds_to_ns(transition_at), state, state)})


@pytest.mark.parametrize('config, expected_count', [
    ({'max': 2}, 3),                                            # all in-maintenance nodes
    ({'max': 2, 'profile': 'p'}, 2),                            # only nodes with profile p (also in A--p)
    ({'max': 2, 'groupBy': ['zone']}, 2),                       # same zone as the node checked
    ({'max': 2, 'groupLabel': 'zone'}, 2),                      # deprecated spelling
    ({'max': 2, 'groupBy': ['zone', 'rack']}, 1),
    ({'max': 2, 'skipAfter': '1h'}, 1),                         # transitioned within the last hour
    ({'max': 2, 'profile': 'q', 'skipAfter': '1h'}, 0),
])
def test_max_maintenance(config, expected_count):
    now = 100 * HOUR
    nodes = [other('a', 'in-maintenance', 'p', {'zone': 'z1', 'rack': 'r1'}, data_with('p', now - 10)),
             other('b', 'in-maintenance', 'A--p', {'zone': 'z1', 'rack': 'r2'}, data_with('p', now - 2 * HOUR)),
             other('c', 'in-maintenance', 'q', {'zone': 'z2'}, data_with('q', now - 3 * HOUR)),
             other('d', 'maintenance-required', 'p', {'zone': 'z1'}),
             other('e', 'operational', 'p', {'zone': 'z1'})]
    own = other('me', 'maintenance-required', 'p', {'zone': 'z1', 'rack': 'r1'})
    result = build(MaxMaintenance, config).check(params(own, now=now, nodes=nodes))
    assert result.info['maintained'] == expected_count
    assert result.passed is (expected_count < 2)


def test_max_maintenance_scope_info_and_config_errors():
    nodes = [other('a', 'in-maintenance', labels={'zone': 'z1'})]
    result = build(MaxMaintenance, {'max': 1, 'groupBy': ['zone']}).check(params(other('me', labels={'zone': 'z1'}), nodes=nodes))
    assert result.info == {'scope': 'nodes matching the zone=z1 label selector', 'maintained': 1, 'max': 1, 'nodes': ['a']}
    with pytest.raises(ConfigError, match='^c.max: required'):
        build(MaxMaintenance, {})
    with pytest.raises(ConfigError, match="^c.max: expected a whole number, got 'two'"):
        build(MaxMaintenance, {'max': 'two'})


def test_max_maintenance_counts_from_the_callers_index_when_given():
    # the index (the controller's cache keeps one) answers instead of a walk over every node; scoping still applies
    nodes = [other('a', 'in-maintenance', labels={'zone': 'z1'}), other('b', 'operational', labels={'zone': 'z1'})]
    index = [other('x', 'in-maintenance', labels={'zone': 'z1'}), other('y', 'in-maintenance', labels={'zone': 'z2'})]
    env = Environment(nodes=lambda: list(nodes), nodes_in_maintenance=lambda: list(index))
    result = build(MaxMaintenance, {'max': 2, 'groupBy': ['zone']}).check(params(other('me', labels={'zone': 'z1'}), env=env))
    assert result.info['nodes'] == ['x'] and result.passed


def test_max_maintenance_without_an_index_walks_each_node_list_once_and_sees_every_new_list():
    # a cache returns one list object until something changes: the walk is remembered for that object only
    nodes = [other('a', 'in-maintenance'), other('b', 'operational')]
    walks = []

    class Counted(list):
        def __iter__(self):
            walks.append(1)
            return super().__iter__()

    listing = Counted(nodes)
    env = Environment(nodes=lambda: listing)
    check = build(MaxMaintenance, {'max': 2})
    for _unused in range(3):
        assert check.check(params(other('me'), env=env)).info['nodes'] == ['a']
    assert len(walks) == 1   # one walk for three checks
    listing = Counted(nodes + [other('c', 'in-maintenance')])   # changed: a new list object
    assert check.check(params(other('me'), env=env)).info['nodes'] == ['a', 'c']
    assert len(walks) == 2


def test_a_view_reads_its_source_once_for_the_count_and_the_list():
    # inside the gate the source is a LIST from the API: maxMaintenance and nodeCount in one phase share one read
    reads = []

    def listing():
        reads.append(1)
        return [other('a', 'in-maintenance'), other('b')]

    env = Environment(nodes=listing)
    shared = params(other('me'), env=env)
    assert build(MaxMaintenance, {'max': 2}).check(shared).info['maintained'] == 1
    assert build(NodeCount, {'count': 2}).check(shared).passed
    assert len(reads) == 1


@pytest.mark.parametrize('count, expected', [(2, True), (3, True), (4, False)])
def test_node_count(count, expected):
    assert build(NodeCount, {'count': count}).check(params(nodes=[other('a'), other('b'), other('c')])).passed is expected


def test_any_label():
    nodes = [other('a', labels={'canary': 'done'}), other('b')]
    assert build(AnyLabel, {'key': 'canary'}).check(params(nodes=nodes)).info == {'node': 'a'}
    assert build(AnyLabel, {'key': 'canary', 'value': 'done'}).check(params(nodes=nodes)).passed is True
    assert build(AnyLabel, {'key': 'canary', 'value': 'started'}).check(params(nodes=nodes)).passed is False


def affinity_pod(node):
    term = {'weight': 1, 'preference': {'matchExpressions': [
        {'key': 'cloud.sap/maintenance-state', 'operator': 'In', 'values': ['operational']}]}}
    return {'metadata': {'name': 'critical-' + node}, 'spec': {'nodeName': node, 'affinity': {
        'nodeAffinity': {'preferredDuringSchedulingIgnoredDuringExecution': [term]}}}}


def affinity_case(pods_on, states, min_operational=0):
    nodes = [other(name, data=NodeData({'p': ProfileData(0, state, state)})) for name, state in states.items()]
    env = Environment(nodes=lambda: nodes, pods_on_node=lambda name: [affinity_pod(name)] if name in pods_on else [])
    check = build(Affinity, {'minOperational': min_operational} if min_operational else None)
    return check.check(params(other('me'), state='maintenance-required', env=env))


def test_affinity():
    states = {'me': 'maintenance-required', 'x': 'maintenance-required', 'y': 'operational'}
    assert affinity_case(set(), states).info == {'reason': 'no pods with affinity'}
    blocked = affinity_case({'me'}, states)                    # x has no critical pods: maintain x first
    assert (blocked.passed, blocked.info) == (False, {'reason': 'pods without affinity on: x'})
    assert affinity_case({'me', 'x'}, states).passed is True  # everyone waiting has critical pods
    assert affinity_case({'me'}, states, min_operational=1).info == {'reason': 'minOperational exceeded', 'operational': 1}
    assert affinity_case({'me'}, states, min_operational=2).passed is False


def test_affinity_only_in_maintenance_required():
    with pytest.raises(PluginError, match='is not in maintenance-required but operational state'):
        build(Affinity, None).check(params(other('me'), state='operational'))


# --- stagger ---------------------------------------------------------------------------------------

def test_stagger_passes_then_holds_for_its_duration_per_lease():
    leases = MemoryLeaseStore()
    env = Environment(leases=leases)
    check = build(Stagger, {'duration': '10m', 'leaseName': 'stagger', 'leaseNamespace': 'kube-system', 'parallel': 2})
    now = 1000000.0
    first = check.check(params(other('a'), now=now, env=env))
    assert (first.passed, first.info) == (True, {'lease': 'stagger-0'})
    check.on_transition(params(other('a'), now=now, env=env), first)
    lease = leases.get('kube-system', 'stagger-0')
    assert lease['spec']['holderIdentity'] == 'a' and lease['spec']['leaseDurationSeconds'] == 600
    assert lease['spec']['renewTime'] == format_micro(now)
    second = check.check(params(other('b'), now=now + 1, env=env))
    assert second.info == {'lease': 'stagger-1'}
    check.on_transition(params(other('b'), now=now + 1, env=env), second)
    third = check.check(params(other('c'), now=now + 2, env=env))
    assert (third.passed, third.info) == (False, {'availableInSec': [598.0, 599.0]})
    assert check.check(params(other('c'), now=now + 600, env=env)).passed is False     # not strictly past yet
    later = check.check(params(other('c'), now=now + 600.5, env=env))
    assert later.info == {'lease': 'stagger-0'}
    check.on_transition(params(other('c'), now=now + 600.5, env=env), later)
    assert leases.get('kube-system', 'stagger-0')['spec']['leaseTransitions'] == 1


def test_stagger_refuses_a_lease_taken_between_check_and_transition():
    leases = MemoryLeaseStore()
    env = Environment(leases=leases)
    check = build(Stagger, {'duration': '1h', 'leaseName': 's', 'leaseNamespace': 'ns'})
    seen_by_a = check.check(params(other('a'), now=10.0, env=env))
    seen_by_b = check.check(params(other('b'), now=10.0, env=env))
    assert seen_by_a.passed and seen_by_b.passed
    check.on_transition(params(other('a'), now=10.0, env=env), seen_by_a)
    with pytest.raises(PluginError, match='taken by a meanwhile'):
        check.on_transition(params(other('b'), now=10.0, env=env), seen_by_b)


def test_stagger_config_and_missing_store():
    with pytest.raises(ConfigError, match='^c.leaseNamespace: required'):
        build(Stagger, {'duration': '1h', 'leaseName': 's'})
    with pytest.raises(ConfigError, match='^c.parallel: must be at least 1'):
        build(Stagger, {'duration': '1h', 'leaseName': 's', 'leaseNamespace': 'n', 'parallel': 0})
    with pytest.raises(PluginError, match='needs a lease store'):
        build(Stagger, {'duration': '1h', 'leaseName': 's', 'leaseNamespace': 'n'}).check(params(env=Environment()))
