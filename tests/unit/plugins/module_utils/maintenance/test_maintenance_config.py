# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""maintenance.yaml loading: the seed's flatcar example, upstream's format, and errors that say where."""

from __future__ import annotations

import copy

import pytest
import yaml

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config import load_config
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import ConfigError, MaintenanceError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.schedules import Periodic, Scheduled

from support.maintenance import FLATCAR


def base(**changes):
    doc = {'intervals': {'requeue': '1m'},
           'instances': {'check': [{'type': 'hasLabel', 'name': 'approved', 'config': {'key': 'approved', 'value': 'true'}},
                                   {'type': 'wait', 'name': 'settle', 'config': {'duration': '10m'}}],
                         'trigger': [{'type': 'alterLabel', 'name': 'unapprove', 'config': {'key': 'approved', 'remove': True}}],
                         'notify': [{'type': 'slack', 'name': 'tell', 'config': {'hook': 'https://h', 'channel': '#c', 'message': 'hi'},
                                     'schedule': {'type': 'periodic', 'config': {'interval': '1h'}}}]},
           'profiles': [{'name': 'p', 'operational': {'transitions': [{'check': 'approved && settle', 'trigger': 'unapprove',
                                                                       'next': 'maintenance-required'}]}}]}
    for path, value in changes.items():
        target = doc
        keys = path.split('/')
        for key in keys[:-1]:
            target = target[int(key)] if isinstance(target, list) else target[key]
        last = keys[-1]
        if isinstance(target, list):
            target[int(last)] = value
        elif value is DELETE:
            del target[last]
        else:
            target[last] = value
    return doc


DELETE = object()


def test_the_seed_flatcar_example_loads():
    config = load_config(FLATCAR)
    assert config.requeue == 60.0 and config.notify_interval == 5 * 3600.0
    assert config.warnings == ()
    flatcar = config.profiles['flatcar']
    required = flatcar.chains('maintenance-required')
    assert [i.name for i in required.notify] == ['approval_required']
    assert isinstance(required.notify[0].schedule, Periodic) and required.notify[0].schedule.interval == 86400.0
    [transition] = required.transitions
    assert transition.next == 'in-maintenance'
    assert [i.name for i in transition.trigger] == ['remove_approval', 'reboot-ok']
    assert [i.name for i in transition.check.instances] == ['check_approval']
    back = flatcar.chains('in-maintenance').transitions[0]
    assert back.check.text == '!reboot_needed' and back.next == 'operational'
    assert not back.check.cluster_scoped


def test_default_profile_does_nothing_unless_configured():
    config = load_config(base())
    default = config.profiles['default']
    assert all(not default.chains(s).transitions and not default.chains(s).notify for s in default.states)
    doc = base()
    doc['profiles'].append({'name': 'default', 'operational': {'transitions': [{'check': 'approved', 'next': 'in-maintenance'}]}})
    assert load_config(doc).profiles['default'].chains('operational').transitions[0].next == 'in-maintenance'


@pytest.mark.parametrize('changes, message', [
    ({'instances/check/1/type': 'hasLabl'},
     'instances.check[1] (name "settle"): unknown plugin type "hasLabl" (known: affinity, anyLabel, clusterSemver, condition, '
     'hasAnnotation, hasLabel, maxMaintenance, nodeCount, stagger, timeWindow, wait, waitExclude)'),
    ({'instances/check/1/type': 'alterLabel'}, '"alterLabel" is a trigger plugin, list it under instances.trigger'),
    ({'instances/check/1/type': 'prometheusInstant'}, 'plugin type "prometheusInstant" of the maintenance-controller is not supported here'),
    ({'profiles/0/operational/transitions/0/check': 'approved && foo'},
     'profiles[0].operational.transitions[0].check: unknown instance "foo" at position 13'),
    ({'profiles/0/operational/transitions/0/check': 'unapprove'},
     'profiles[0].operational.transitions[0].check: unknown instance "unapprove" at position 1 (it is a trigger instance)'),
    ({'profiles/0/operational/transitions/0/trigger': 'unapprove && nope'},
     'profiles[0].operational.transitions[0].trigger: unknown instance "nope" at position 14'),
    ({'profiles/0/operational/notify': 'approved'},
     'profiles[0].operational.notify: unknown instance "approved" at position 1 (it is a check instance)'),
    ({'profiles/0/operational/transitions/0/check': 'approved && settle)'},
     'profiles[0].operational.transitions[0].check: unexpected ")" at column 19'),
    ({'profiles/0/operational/transitions/0/next': 'maintenance'},
     'profiles[0].operational.transitions[0].next: unknown state "maintenance" (one of operational, maintenance-required, in-maintenance)'),
    ({'profiles/0/operational/transitions/0/next': DELETE}, 'profiles[0].operational.transitions[0].next: required'),
    ({'instances/check/1/config': {'duration': 'soon'}},
     "instances.check[1] (name \"settle\").config.duration: 'soon' is not a duration"),
    ({'instances/check/1/config': {}}, 'instances.check[1] (name "settle").config.duration: required'),
    ({'instances/check/0/config': {'value': 'x'}}, 'instances.check[0] (name "approved").config.key: required'),
    ({'instances/check/1/name': 'approved'}, 'instances.check[1] (name "approved"): duplicate check instance name'),
    ({'instances/check/1/name': 'has space'}, "may not contain whitespace"),
    ({'instances/check/1/name': DELETE}, 'instances.check[1].name: required'),
    ({'intervals/requeue': DELETE}, 'intervals.requeue: required'),
    ({'intervals/requeue': 'often'}, "intervals.requeue: 'often' is not a duration"),
    ({'instances/notify/0/schedule': DELETE}, 'instances.notify[0] (name "tell").schedule: required'),
    ({'instances/notify/0/schedule': {'type': 'hourly'}}, 'instances.notify[0] (name "tell").schedule.type: unknown schedule "hourly"'),
    ({'instances/notify/0/config': {'hook': 'h', 'channel': 'c', 'message': '{{ .State '}},
     'instances.notify[0] (name "tell").config.message: template: line 1, column 1: unclosed action'),
    ({'profiles/0/name': 'a--b'}, 'profiles[0].name: \'a--b\' may not contain "--"'),
])
def test_errors_name_the_field(changes, message):
    with pytest.raises(ConfigError) as err:
        load_config(base(**changes))
    assert message in str(err.value)


@pytest.mark.parametrize('changes, field, rule, value', [
    ({'intervals/requeue': 'often'}, 'intervals.requeue', 'duration', 'often'),
    ({'intervals/requeue': DELETE}, 'intervals.requeue', 'required', None),
    ({'profiles/0/operational/transitions/0/next': 'maintenance'}, 'profiles[0].operational.transitions[0].next', 'one-of', None),
    ({'instances/check/1/name': 'approved'}, 'instances.check[1] (name "approved")', 'unique', None),
])
def test_config_errors_carry_field_and_rule(changes, field, rule, value):
    """Shared checks (durations) and the loader's own raise the same type: a ConfigError, which is a
    MaintenanceError and an InvalidInput, with the field, the rule and the value."""
    with pytest.raises(ConfigError) as err:
        load_config(base(**changes))
    assert isinstance(err.value, MaintenanceError) and isinstance(err.value, InvalidInput)
    assert (err.value.field, err.value.rule, err.value.value) == (field, rule, value)
    assert str(err.value).startswith(field + ': ')


def test_duplicate_profiles():
    doc = base()
    doc['profiles'].append(copy.deepcopy(doc['profiles'][0]))
    with pytest.raises(ConfigError, match=r'^profiles\[1\] \(name "p"\): duplicate profile name'):
        load_config(doc)


@pytest.mark.parametrize('config, message', [
    ({'start': '10:00', 'end': '09:00', 'weekdays': ['monday']}, 'config.end: the end time 09:00 should be after the start time 10:00'),
    ({'start': '25:00', 'end': '26:00', 'weekdays': ['monday']}, "config.start: '25:00' is not a time of day"),
    ({'start': '10:00', 'end': '11:00', 'weekdays': []}, 'config.weekdays: required'),
    ({'start': '10:00', 'end': '11:00', 'weekdays': ['monday', 'someday']}, "config.weekdays[1]: 'someday' is not a weekday"),
    ({'start': '10:00', 'end': '11:00', 'weekdays': ['monday'], 'exclude': ['Dec 24', 'Feb 30']},
     "config.exclude[1]: 'Feb 30' is not a month and day"),
])
def test_bad_time_windows(config, message):
    doc = base(**{'instances/check/1': {'type': 'timeWindow', 'name': 'window', 'config': config}})
    with pytest.raises(ConfigError) as err:
        load_config(doc)
    assert str(err.value).startswith('instances.check[1] (name "window").')
    assert message in str(err.value)


def test_environment_interpolation():
    doc = base(**{'instances/notify/0/config': {'hook': '${SLACK_HOOK}', 'channel': '${CHANNEL:#default}',
                                                'message': 'cost $${HOME} {{ .State }}'}})
    config = load_config(doc, environ={'SLACK_HOOK': 'https://hooks.example/secret'})
    plugin = config.instances['notify']['tell'].plugin
    assert (plugin.hook, plugin.channel, plugin.message) == ('https://hooks.example/secret', '#default', 'cost ${HOME} {{ .State }}')
    with pytest.raises(ConfigError, match=r'^instances\.notify\[0\]\.config\.hook: environment variable SLACK_HOOK is not set'):
        load_config(doc, environ={})


def test_intervals_notify_is_the_schedule_of_older_configs():
    doc = base(**{'instances/notify/0/schedule': DELETE, 'intervals/notify': '5h'})
    schedule = load_config(doc).instances['notify']['tell'].schedule
    assert isinstance(schedule, Periodic) and schedule.interval == 5 * 3600


def test_unknown_keys_are_warnings_not_errors():
    doc = base(**{'instances/check/0/config': {'key': 'approved', 'vaule': 'true'}, 'extra': 1})
    warnings = load_config(doc).warnings
    assert '(top): unknown key "extra" ignored (known: intervals, instances, profiles, dashboard)' in warnings
    assert 'instances.check[0] (name "approved").config: unknown option "vaule" ignored by hasLabel (known: key, value)' in warnings


def test_ucfg_leniency_scalars_and_schedules():
    doc = base(**{'instances/check/0/config': {'key': 'approved', 'value': True},
                  'instances/notify/0/schedule': {'type': 'Scheduled', 'config': {'instant': '9:00', 'weekdays': 'monday'}}})
    config = load_config(doc)
    assert config.instances['check']['approved'].plugin.value == 'true'
    assert config.instances['notify']['tell'].schedule == Scheduled(9 * 3600, frozenset({0}))


def test_empty_and_missing_chains_are_allowed():
    doc = base(**{'profiles/0/operational': {'notify': None, 'transitions': [{'check': '', 'next': 'maintenance-required'}]},
                  'profiles/0/in-maintenance': {'notify': '', 'transitions': None}})
    profile = load_config(doc).profiles['p']
    assert profile.chains('operational').transitions[0].check.expr is None
    assert profile.chains('in-maintenance').transitions == ()


def test_yaml_text_errors():
    with pytest.raises(ConfigError, match='not valid YAML'):
        load_config('intervals: [')
    with pytest.raises(ConfigError, match=r'^instances\.check: expected a list'):
        load_config(yaml.safe_dump(base(**{'instances/check': {'a': 1}})))
