# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parity with sapcc/maintenance-controller's own test cases, restated in our words.

Each table names the upstream test file whose behaviour it pins (plugin/impl/*_test.go, plugin/*_test.go,
common/weekday_test.go, state/*_test.go). Configs go through `load_config` (our YAML reader, as a user's
maintenance.yaml would), verdicts through the plugins or `reconcile`. Where we deliberately differ from
upstream the case says so and docs/maintenance.md lists the difference.
"""

from __future__ import annotations

import datetime

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.checks_node import WaitExclude
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config import load_config
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.data import (
    NodeData, ProfileData, format_data, parse_data)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.environment import Environment, PluginParams
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import ConfigError, DataError, PluginError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.gotime import (
    ZERO_TIME_NS, parse_weekday, seconds_to_ns)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.notifiers import render_for
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.schedules import ScheduleInput
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.state import reconcile

from support.maintenance import FakeHttp, apply_patch, make_node

PROFILE = 'cloud.sap/maintenance-profile'
STATE = 'cloud.sap/maintenance-state'
DATA = 'cloud.sap/maintenance-data'
MIN = 60.0
HOUR = 3600.0


def utc(*args):
    return datetime.datetime(*args, tzinfo=datetime.timezone.utc).timestamp()


NOW = utc(2026, 3, 2, 12, 0)   # a Monday


def one_instance(kind, plugin_type, config_yaml, schedule_yaml=None):
    """The plugin of a maintenance.yaml holding just this instance, read the way a user's file is read."""
    lines = ['intervals: {requeue: 1m}', 'instances:', '  %s:' % kind,
             '  - type: %s' % plugin_type, '    name: it', '    config:']
    lines += ['      ' + line for line in config_yaml.splitlines()] or ['      null']
    if kind == 'notify':
        lines += ['    schedule:'] + ['      ' + line for line in (schedule_yaml or 'type: periodic').splitlines()]
    config = load_config('\n'.join(lines) + '\n', environ={})
    instance = config.instances[kind]['it']
    return instance.schedule if schedule_yaml else instance.plugin


def schedule_of(schedule_yaml):
    return one_instance('notify', 'slack', 'hook: http://example.com\nchannel: c\nmessage: m', schedule_yaml)


def params(node=None, now=NOW, state='operational', profile='p', last=0.0, nodes=(), env=None):
    env = env or Environment(nodes=lambda: list(nodes))
    return PluginParams(node=node or make_node(), profile=profile, state=state, last_transition=last,
                        in_maintenance=False, now=now, env=env)


def in_maintenance(name, labels=None, data=None, raw_data=None):
    all_labels = {STATE: 'in-maintenance'}
    all_labels.update(labels or {})
    annotations = {}
    if data is not None:
        annotations[DATA] = format_data(data)
    if raw_data is not None:
        annotations[DATA] = raw_data
    return make_node(name, all_labels, annotations)


# --- plugin/impl/annotation_test.go, plugin/impl/label_test.go ---------------------------------------

@pytest.mark.parametrize('plugin_type, section', [('hasAnnotation', 'annotations'), ('hasLabel', 'labels')])
@pytest.mark.parametrize('config_yaml, expected', [
    ('key: key', True),                     # an empty value only checks the key
    ('key: key\nvalue: value', True),
    ('key: key\nvalue: assdas', False),
    ('key: sdasdasda', False),
])
def test_has_annotation_and_label(plugin_type, section, config_yaml, expected):
    """Upstream: hasAnnotation/hasLabel match the key, and the value when one is configured."""
    check = one_instance('check', plugin_type, config_yaml)
    node = make_node(**{section: {'key': 'value'}})
    assert check.check(params(node)).passed is expected


@pytest.mark.parametrize('plugin_type, section', [('alterAnnotation', 'annotations'), ('alterLabel', 'labels')])
@pytest.mark.parametrize('config_yaml, expected', [
    ('key: key\nvalue: value\nremove: true', {}),
    ('key: key2\nvalue: value\nremove: false', {'key': 'value', 'key2': 'value'}),
    ('key: key\nvalue: abc', {'key': 'abc'}),
])
def test_alter_annotation_and_label(plugin_type, section, config_yaml, expected):
    """Upstream: alterAnnotation/alterLabel remove, add or overwrite the key on the node."""
    trigger = one_instance('trigger', plugin_type, config_yaml)
    node = make_node(**{section: {'key': 'value'}})
    trigger.trigger(params(node))
    assert node['metadata'][section] == expected


def test_alter_and_has_parse_their_config():
    """Upstream: the key/value/remove options of the label and annotation plugins are read as given."""
    alter = one_instance('trigger', 'alterAnnotation', 'key: key\nvalue: value\nremove: true')
    assert (alter.key, alter.value, alter.remove) == ('key', 'value', True)
    has = one_instance('check', 'hasLabel', 'key: key\nvalue: value')
    assert (has.key, has.value) == ('key', 'value')
    any_label = one_instance('check', 'anyLabel', 'key: key\nvalue: test')
    assert (any_label.key, any_label.value) == ('key', 'test')


# --- plugin/impl/condition_test.go ------------------------------------------------------------------

@pytest.mark.parametrize('config_yaml, expected', [
    ('type: Ready\nstatus: "True"', True),
    ('type: Ready\nstatus: Unknown', False),
    ('type: DiskPressure\nstatus: "True"', False),
])
def test_condition(config_yaml, expected):
    """Upstream: condition passes only when the named condition has the configured status."""
    check = one_instance('check', 'condition', config_yaml)
    node = make_node(conditions=[{'type': 'Ready', 'status': 'True'}])
    assert check.check(params(node)).passed is expected


def test_condition_parses_its_config():
    """Upstream: condition reads type and status."""
    check = one_instance('check', 'condition', 'type: Ready\nstatus: "True"')
    assert (check.condition_type, check.status) == ('Ready', 'True')


# --- plugin/impl/timewindow_test.go -----------------------------------------------------------------

def test_time_window_parses_its_config_with_unquoted_times():
    """Upstream: start/end as hh:mm, weekdays, excluded dates; go-yaml keeps an unquoted 19:30 a text."""
    check = one_instance('check', 'timeWindow', 'weekdays: [mon]\nstart: 11:00\nend: 19:30\nexclude: ["Feb 3"]')
    assert (check.start, check.end, check.weekdays, check.exclude) == (11 * HOUR, 19.5 * HOUR, frozenset({0}), ((2, 3),))


@pytest.mark.parametrize('config_yaml', [
    'start: "11:00"\nend: "19:30"',                       # no weekdays
    'weekdays: [mon]\nstart: "18:00"\nend: "17:30"',      # start after end
])
def test_time_window_refuses_bad_config(config_yaml):
    """Upstream: a time window needs weekdays, and its end may not be before its start."""
    with pytest.raises(ConfigError):
        one_instance('check', 'timeWindow', config_yaml)


WINDOW = 'weekdays: [monday, tuesday]\nstart: "10:30"\nend: "15:20"'


@pytest.mark.parametrize('config_yaml, when, expected', [
    (WINDOW, utc(2020, 6, 29, 11, 0), True),           # monday 11:00
    (WINDOW, utc(2020, 6, 30, 15, 0), True),           # tuesday 15:00
    (WINDOW, utc(2020, 6, 30, 15, 30), False),         # tuesday after the end
    (WINDOW, utc(2020, 6, 29, 10, 29), False),         # monday before the start
    (WINDOW, utc(2020, 6, 25, 11, 0), False),          # thursday
    (WINDOW, utc(2020, 6, 25, 15, 0), False),
    (WINDOW + '\nexclude: ["Feb 2"]', utc(2021, 2, 2, 15, 0), False),   # an excluded tuesday
])
def test_time_window(config_yaml, when, expected):
    """Upstream: timeWindow passes on the weekdays strictly between start and end, except excluded dates."""
    assert one_instance('check', 'timeWindow', config_yaml).check(params(now=when)).passed is expected


# --- plugin/impl/wait_test.go -----------------------------------------------------------------------

def test_wait_and_wait_exclude_parse_their_config():
    """Upstream: Go durations (0h12m), weekday names for waitExclude."""
    assert one_instance('check', 'wait', 'duration: 0h12m').duration == 12 * MIN
    wait_exclude = one_instance('check', 'waitExclude', 'duration: 17m\nexclude: ["tue"]')
    assert (wait_exclude.duration, wait_exclude.exclude) == (17 * MIN, frozenset({1}))


@pytest.mark.parametrize('duration, elapsed, expected', [('10m', 12 * MIN, True), ('15m', 12 * MIN, False)])
def test_wait(duration, elapsed, expected):
    """Upstream: wait passes once more than the duration passed since the profile's last transition."""
    check = one_instance('check', 'wait', 'duration: %s' % duration)
    assert check.check(params(now=NOW, last=NOW - elapsed)).passed is expected


@pytest.mark.parametrize('config_yaml, last, now, expected', [
    (None, utc(2022, 3, 15, 10, 0), utc(2022, 3, 15, 10, 30), False),      # one hour, nothing excluded
    (None, utc(2022, 3, 15, 10, 0), utc(2022, 3, 15, 11, 30), True),
    ('duration: 30h\nexclude: [mon, wed]', utc(2022, 3, 6, 12, 0), utc(2022, 3, 8, 17, 0), False),   # sun -> tue
    ('duration: 30h\nexclude: [mon, wed]', utc(2022, 3, 6, 12, 0), utc(2022, 3, 8, 18, 10), True),
    ('duration: 30h\nexclude: [mon, wed]', utc(2022, 3, 7, 12, 0), utc(2022, 3, 10, 5, 0), False),   # mon -> thu
    ('duration: 30h\nexclude: [mon, wed]', utc(2022, 3, 7, 12, 0), utc(2022, 3, 10, 6, 10), True),
    ('duration: 30h\nexclude: [mon, wed]', utc(2022, 3, 5, 22, 0), utc(2022, 3, 7, 17, 0), False),   # sat -> mon
    ('duration: 1s\nexclude: [mon, wed]', utc(2022, 3, 6, 12, 0), utc(2022, 3, 6, 12, 0, 2), True),
])
def test_wait_exclude(config_yaml, last, now, expected):
    """Upstream: waitExclude counts time only on days that are not excluded."""
    check = WaitExclude(HOUR, frozenset()) if config_yaml is None else one_instance('check', 'waitExclude', config_yaml)
    assert check.check(params(now=now, last=last)).passed is expected


def test_wait_exclude_is_monotonic_where_upstream_is_not():
    """Deliberate difference: upstream subtracts an excluded day twice once its time of day passes the last
    transition's, so a check that passed at 11:59 fails again at 12:00; ours never goes back to failing."""
    check = one_instance('check', 'waitExclude', 'duration: 10h\nexclude: [mon]')
    last = utc(2022, 3, 6, 12, 0)   # sunday noon: 12 counted hours by midnight
    verdicts = [check.check(params(now=utc(2022, 3, 7, hour, 0), last=last)).passed for hour in range(0, 24)]
    assert verdicts == [True] * 24


# --- plugin/impl/maxmaintenance_test.go -------------------------------------------------------------

def test_max_maintenance_parses_current_and_legacy_config():
    """Upstream: max, groupBy; the legacy groupLabel is added to groupBy; profile and skipAfter."""
    current = one_instance('check', 'maxMaintenance', 'max: 481\ngroupBy: ["firstLabel", "secondLabel"]')
    assert (current.max, current.group_by) == (481, ('firstLabel', 'secondLabel'))
    legacy = one_instance('check', 'maxMaintenance', 'max: 296\nprofile: kappa\nskipAfter: 20s\ngroupLabel: group')
    assert (legacy.max, legacy.profile, legacy.skip_after, legacy.group_by) == (296, 'kappa', 20.0, ('group',))


def recent(seconds_ago):
    return NodeData({'profile': ProfileData(seconds_to_ns(NOW - seconds_ago), 'in-maintenance', 'in-maintenance')})


@pytest.mark.parametrize('config_yaml, own_labels, cluster, expected', [
    ('max: 2', {}, [in_maintenance('a')], True),
    ('max: 2', {}, [in_maintenance('a'), in_maintenance('b')], False),
    ('max: 1\nprofile: profile', {}, [in_maintenance('a', {PROFILE: 'profile'}), in_maintenance('b')], False),
    ('max: 1\nskipAfter: 5s', {}, [in_maintenance('a', {PROFILE: 'profile'}, recent(20))], True),
    ('max: 1\nskipAfter: 50s', {}, [in_maintenance('a', {PROFILE: 'profile'}, recent(20))], False),
    ('max: 1\nskipAfter: 5s\nprofile: profile', {}, [in_maintenance('a', {PROFILE: 'profile'}, recent(20))], True),
    ('max: 1\nskipAfter: 50s\nprofile: profile', {}, [in_maintenance('a', {PROFILE: 'profile'}, recent(20))], False),
    ('max: 1\ngroupBy: [group]', {'group': 'a'}, [in_maintenance('b', {'group': 'a'})], False),
    ('max: 1\ngroupBy: [group]', {'group': 'a'}, [in_maintenance('b')], True),
    ('max: 1\ngroupBy: [group]', {'group': 'b'}, [in_maintenance('c', {'group': 'c'})], True),
    ('max: 1\ngroupBy: [group]', {'group': ''}, [in_maintenance('d', {'group': 'd'})], False),   # empty: whole cluster
])
def test_max_maintenance(config_yaml, own_labels, cluster, expected):
    """Upstream: fewer than max in-maintenance nodes, filtered by profile, groupBy labels and skipAfter."""
    check = one_instance('check', 'maxMaintenance', config_yaml)
    operational = [make_node('other', {STATE: 'operational', 'group': 'a', PROFILE: 'profile'})]
    node = make_node('self', own_labels)
    assert check.check(params(node, nodes=cluster + operational)).passed is expected


def test_max_maintenance_with_skip_after_fails_on_unreadable_data():
    """Upstream: with skipAfter a counted node whose data cannot be read is an error, never silently skipped."""
    check = one_instance('check', 'maxMaintenance', 'max: 5\nskipAfter: 1h')
    with pytest.raises(PluginError, match='in-maintenance node a'):
        check.check(params(nodes=[in_maintenance('a', raw_data='{not json')]))


# --- plugin/impl/nodecount_test.go, semver_test.go, stagger_test.go, affinity_test.go ---------------

def test_cluster_checks_parse_their_config():
    """Upstream: nodeCount count; clusterSemver key and profileScoped (YAML `yes`); stagger defaults to one
    lease; affinity accepts a null config (minOperational 0)."""
    assert one_instance('check', 'nodeCount', 'count: 154').count == 154
    semver = one_instance('check', 'clusterSemver', 'key: alge\nprofileScoped: yes')
    assert (semver.key, semver.profile_scoped) == ('alge', True)
    stagger = one_instance('check', 'stagger', 'duration: 1m\nleaseName: mc-lease\nleaseNamespace: default')
    assert (stagger.duration, stagger.parallel, stagger.lease_name, stagger.lease_namespace) == (60.0, 1, 'mc-lease', 'default')
    assert one_instance('check', 'affinity', 'minOperational: 5').min_operational == 5
    assert one_instance('check', 'affinity', '').min_operational == 0


def test_node_count_has_no_after_transition_effect():
    """Upstream: nodeCount's after-evaluation hook never fails."""
    check = one_instance('check', 'nodeCount', 'count: 1')
    result = check.check(params(nodes=[make_node('a')]))
    assert result.passed is True
    assert check.on_transition(params(), result) is None


# --- plugin/impl/mail_test.go, plugin/impl/slack_test.go -------------------------------------------

def test_notification_plugins_parse_their_config():
    """Upstream: mail (a single `to` is a list of one), slack webhook and slackThread options."""
    mail = one_instance('notify', 'mail', 'auth: true\naddress: addr\nfrom: from\nidentity: ident\nmessage: msg\n'
                                          'password: pw\nto: to\nuser: user\nsubject: sub')
    assert (mail.address, mail.auth, mail.sender, mail.identity, mail.message, mail.password, mail.to, mail.user,
            mail.subject) == ('addr', True, 'from', 'ident', 'msg', 'pw', ('to',), 'user', 'sub')
    slack = one_instance('notify', 'slack', 'hook: http://example.com\nchannel: thechannel\nmessage: msg')
    assert (slack.hook, slack.channel, slack.message) == ('http://example.com', 'thechannel', 'msg')
    thread = one_instance('notify', 'slackThread', 'token: token\nchannel: thechannel\ntitle: title\nmessage: msg\n'
                                                   'leaseName: lease\nleaseNamespace: default\nperiod: 1m')
    assert (thread.token, thread.channel, thread.title, thread.message, thread.lease_name, thread.lease_namespace,
            thread.period) == ('token', 'thechannel', 'title', 'msg', 'lease', 'default', 60.0)


def test_mail_header_lists_recipients_comma_separated():
    """Upstream: the mail starts with From, To (comma-separated) and Subject headers, then a blank line."""
    mail = one_instance('notify', 'mail', 'address: a:25\nfrom: From\nto: [To1, To2]\nsubject: Sub\nmessage: body')
    text = mail.compose(params()).decode('utf-8')
    head, body = text.split('\r\n\r\n', 1)
    assert head.split('\r\n')[:3] == ['From: From', 'To: To1,To2', 'Subject: Sub'] and body == 'body'


def test_slack_posts_channel_and_text():
    """Upstream: the webhook gets JSON with the channel and a non-empty text."""
    http = FakeHttp()
    slack = one_instance('notify', 'slack', 'hook: http://localhost/hook\nchannel: thechannel\nmessage: abc')
    slack.notify(params(make_node('targetnode'), env=Environment(http=http)))
    assert [(c['url'], c['json']['channel'], c['json']['text']) for c in http.calls] == [('http://localhost/hook', 'thechannel', 'abc')]


# --- plugin/notification_test.go (schedules, templates) --------------------------------------------

def test_render_state_template():
    """Upstream: `{{.State}}` renders the profile's state."""
    assert render_for(params(state='def'), '{{.State}}') == 'def'


def test_schedules_parse_their_config():
    """Upstream: periodic interval (default 1h), scheduled instant and weekdays, oneshot delay (default 1m)."""
    assert schedule_of('type: periodic\nconfig: {interval: 5m}').interval == 5 * MIN
    assert schedule_of('type: periodic').interval == HOUR
    scheduled = schedule_of('type: scheduled\nconfig: {instant: "15:23", weekdays: ["fri", "sat"]}')
    assert (scheduled.instant, scheduled.weekdays) == (15 * HOUR + 23 * MIN, frozenset({4, 5}))
    assert schedule_of('type: oneshot\nconfig: {delay: 3h}').delay == 3 * HOUR
    assert schedule_of('type: oneshot').delay == MIN


def sent(seconds):
    return seconds_to_ns(seconds)


MONDAY_NOON = utc(2022, 2, 21, 12, 0)


@pytest.mark.parametrize('now, last_sent, expected', [
    (MONDAY_NOON + 24 * HOUR - HOUR, sent(MONDAY_NOON - 2 * HOUR), False),   # tuesday 11:00
    (MONDAY_NOON + 24 * HOUR + HOUR, sent(MONDAY_NOON), False),              # tuesday 13:00
    (MONDAY_NOON - HOUR, sent(MONDAY_NOON - 26 * HOUR), False),              # monday before the instant
    (MONDAY_NOON + HOUR, sent(MONDAY_NOON - 24 * HOUR), True),               # monday after it
    (MONDAY_NOON + HOUR, ZERO_TIME_NS, True),                                # never sent
    (MONDAY_NOON + 2 * HOUR, sent(MONDAY_NOON + HOUR), False),               # once a day
])
def test_scheduled(now, last_sent, expected):
    """Upstream: scheduled notifies once a day at or after the instant, on the configured weekdays."""
    schedule = schedule_of('type: scheduled\nconfig: {instant: "12:00", weekdays: [monday]}')
    assert schedule.should_notify(ScheduleInput('operational', 'operational', now, last_sent, sent(NOW))) is expected


def test_scheduled_compares_whole_dates():
    """Deliberate difference: the last send on the same day of another month does not suppress today's
    (upstream compares only the day of the month)."""
    schedule = schedule_of('type: scheduled\nconfig: {instant: "12:00", weekdays: [monday]}')
    month_before = sent(utc(2022, 1, 21, 13, 0))
    assert schedule.should_notify(ScheduleInput('operational', 'operational', MONDAY_NOON + HOUR, month_before, 0)) is True


@pytest.mark.parametrize('delay, current, previous, last_sent, change, expected', [
    ('5m', 'operational', 'in-maintenance', NOW, NOW, False),              # the delay did not pass
    ('0s', 'operational', 'in-maintenance', NOW - MIN, NOW, True),         # changed, delay passed
    ('0s', 'operational', 'in-maintenance', NOW, NOW, True),               # a send at the change was for the old state
    ('0s', 'operational', 'in-maintenance', NOW - MIN, NOW - 2 * MIN, False),   # already sent for this state
    ('0s', 'operational', 'in-maintenance', NOW, None, False),             # no state change recorded
])
def test_oneshot(delay, current, previous, last_sent, change, expected):
    """Upstream: oneshot sends once per state change, once the delay passed since the change."""
    schedule = schedule_of('type: oneshot\nconfig: {delay: %s}' % delay)
    at = ScheduleInput(current, previous, NOW, sent(last_sent), ZERO_TIME_NS if change is None else sent(change))
    assert schedule.should_notify(at) is expected


def test_unknown_schedule_type_is_refused():
    """Upstream: a notification instance with an unknown schedule type does not load."""
    with pytest.raises(ConfigError, match='unknown schedule'):
        schedule_of('type: unknown\nconfig: null')


# --- common/weekday_test.go -------------------------------------------------------------------------

@pytest.mark.parametrize('text, expected', [('monday', 0), ('wed', 2), ('Sunday', 6)])
def test_weekdays(text, expected):
    """Upstream: full and three-letter weekday names, any case."""
    assert parse_weekday(text, 'w') == expected


def test_unknown_weekday():
    """Upstream: anything else is an error."""
    with pytest.raises(ConfigError):
        parse_weekday('abcde', 'w')


# --- plugin/plugin_test.go (instances and chains in the config) ------------------------------------

BASE = 'intervals: {requeue: 1m}\n'


@pytest.mark.parametrize('instances_yaml', [
    'check:\n- someCheckPlugin:\n  invalid:\n    name: test',          # type as a key, two entries
    'check:\n- someCheckPlugin:',                                     # no configuration at all
    'check:\n- someCheckPlugin:\n    config: {key: somekey}',          # no name
    'check:\n- type: hasLabel\n  config: {key: k}',                    # no name, known type
    'check:\n- type: someCheckPlugin\n  name: test\n  config: null',   # unknown type
    'notify:\n- someNotificationPlugin:\n    name: an_instance',
    'notify:\n- type: slack\n  name: n\n  config: {hook: h, channel: c, message: m}',   # no schedule
    'trigger:\n- someTriggerPlugin:\n  invalid:\n    name: test',
    'trigger:\n- type: someTriggerPlugin\n  name: test\n  config: null',
])
def test_invalid_instances_are_refused(instances_yaml):
    """Upstream: instances need a registered type, a name and (notifications) a schedule."""
    text = BASE + 'instances:\n' + '\n'.join('  ' + line for line in instances_yaml.splitlines()) + '\n'
    with pytest.raises(ConfigError):
        load_config(text, environ={})


INSTANCES = '''instances:
  check: [{type: hasLabel, name: instance, config: {key: k}}]
  trigger: [{type: alterLabel, name: instance, config: {key: t, value: v}}]
  notify:
  - type: slack
    name: instance
    config: {hook: http://example.com, channel: c, message: m}
    schedule: {type: scheduled, config: {instant: 11:00, weekdays: ["tue"]}}
'''


def chains_config(check='', trigger='', notify=''):
    profile = 'profiles:\n- name: p\n  operational:\n    notify: "%s"\n    transitions:\n    - {check: "%s", trigger: "%s", next: in-maintenance}\n'
    return load_config(BASE + INSTANCES + profile % (notify, check, trigger), environ={})


def test_instances_and_chains_load():
    """Upstream: instances of each kind load (the scheduled one with an unquoted instant); chains name them."""
    config = chains_config('instance && !(instance || instance)', 'instance && instance', 'instance && instance')
    chains = config.profiles['p'].chains('operational')
    assert config.instances['notify']['instance'].schedule.instant == 11 * HOUR
    assert [i.name for i in chains.transitions[0].trigger] == ['instance', 'instance']
    assert [i.name for i in chains.notify] == ['instance', 'instance']
    assert chains.transitions[0].check.text == 'instance && !(instance || instance)'


def test_empty_chains_load():
    """Upstream: empty check, trigger and notification chains are allowed."""
    transition = chains_config().profiles['p'].chains('operational').transitions[0]
    assert (transition.check.expr, transition.trigger) == (None, ())


@pytest.mark.parametrize('kind', ['check', 'trigger', 'notify'])
def test_chains_with_unknown_instances_are_refused(kind):
    """Upstream: a chain naming an instance that does not exist does not load."""
    with pytest.raises(ConfigError, match='unknown instance "invalid"'):
        chains_config(**{kind: 'invalid&&invalid'})


# --- plugin/check_test.go, plugin/trigger_test.go, state/state_test.go (chains at work) ------------

CHAIN_CONFIG = BASE + '''instances:
  check:
  - {type: hasLabel, name: yes_, config: {key: present}}
  - {type: hasLabel, name: no_, config: {key: absent}}
  - {type: clusterSemver, name: broken, config: {key: absent}}
  trigger:
  - {type: alterLabel, name: mark_a, config: {key: a, value: "1"}}
  - {type: alterLabel, name: mark_b, config: {key: b, value: "1"}}
  - {type: cordon, name: failing}
  - {type: alterLabel, name: enter_mark, config: {key: entered, value: "1"}}
  notify:
  - type: slack
    name: note
    config: {hook: http://example.com/hook, channel: c, message: "{{ .State }}"}
    schedule: {type: periodic, config: {interval: 1h}}
profiles:
- name: p
  operational:
    transitions: [%s]
  maintenance-required:
    enter: enter_mark
    notify: note
'''


def run_once(transitions, data=None, env=None, labels=None):
    node_labels = {PROFILE: 'p', 'present': 'x'}
    node_labels.update(labels or {})
    annotations = {DATA: format_data(data)} if data else {}
    node = make_node('n', node_labels, annotations)
    result = reconcile(node, load_config(CHAIN_CONFIG % transitions, environ={}), NOW, env or Environment(http=FakeHttp()))
    return result, apply_patch(node, result.patch)


@pytest.mark.parametrize('expression, moves', [
    ('', True),                                      # an empty chain passes
    ('yes_ && yes_ && yes_', True),
    ('yes_ && no_ && yes_ && no_', False),
    ('yes_ || yes_ || yes_', True),
    ('yes_ || no_ || yes_', True),
    ('!yes_', False),
    ('yes_ && !(no_ || no_)', True),
])
def test_check_chain_expressions(expression, moves):
    """Upstream: check chains are boolean expressions of instance results."""
    result, node = run_once('{check: "%s", next: maintenance-required}' % expression)
    assert result.errors == []
    assert (node['metadata']['labels'][STATE] == 'maintenance-required') is moves


def test_check_error_fails_the_chain_and_blocks_every_transition():
    """Upstream: an erroring check fails its transition and, while any transition errors, none is taken."""
    result, node = run_once('{check: "yes_ && broken", next: in-maintenance}, {check: yes_, next: maintenance-required}')
    assert node['metadata']['labels'][STATE] == 'operational' and result.transitions == []
    assert len(result.errors) == 1 and 'broken' in result.errors[0].message
    assert [e.passed for e in result.profiles[0].evaluations] == [False, True]


def test_trigger_chain_runs_in_order_and_a_failure_aborts_it():
    """Upstream: trigger chains run every instance in order; a failing one fails the transition, which stays."""
    result, node = run_once('{check: yes_, trigger: "mark_a && mark_b", next: maintenance-required}')
    labels = node['metadata']['labels']
    assert (labels['a'], labels['b'], labels[STATE]) == ('1', '1', 'maintenance-required')
    result, node = run_once('{check: yes_, trigger: "mark_a && failing && mark_b", next: maintenance-required}')
    labels = node['metadata']['labels']
    assert labels[STATE] == 'operational' and 'a' not in labels and 'b' not in labels   # none of the chain's changes
    assert len(result.errors) == 1 and 'failing' in result.errors[0].message


def data_for(current, previous, note_sent=None):
    notifications = {} if note_sent is None else {'note': seconds_to_ns(note_sent)}
    return NodeData({'p': ProfileData(seconds_to_ns(NOW - HOUR), current, previous)}, notifications)


@pytest.mark.parametrize('current, previous, note_sent, sends', [
    ('maintenance-required', 'maintenance-required', NOW - MIN, False),          # interval not passed
    ('maintenance-required', 'operational', NOW - MIN, True),                   # the state changed
    ('maintenance-required', 'maintenance-required', None, True),               # never sent
    ('maintenance-required', 'maintenance-required', utc(2000, 4, 13, 2, 3, 4), True),
])
def test_periodic_notifications_in_the_state_machine(current, previous, note_sent, sends):
    """Upstream (NotifyDefault, required_test): periodic notifies on a change, then every interval."""
    http = FakeHttp()
    run_once('', data_for(current, previous, note_sent), Environment(http=http))
    assert len(http.calls) == (1 if sends else 0)


def test_enter_chain_runs_only_after_a_state_change():
    """Upstream (Apply): the enter chain runs when Previous differs from Current, not otherwise."""
    _result, node = run_once('', data_for('maintenance-required', 'operational'))
    assert node['metadata']['labels'].get('entered') == '1'
    _result, node = run_once('', data_for('maintenance-required', 'maintenance-required'))
    assert 'entered' not in node['metadata']['labels']


def test_failing_notification_is_reported_but_does_not_block():
    """Upstream (Apply) stops the profile when a notification fails; deliberately, ours reports the failure
    and still decides the transition (a chat outage must not hold nodes in maintenance)."""
    http = FakeHttp(answer=(500, b'down'))
    config_text = CHAIN_CONFIG.replace('enter: enter_mark\n', 'transitions: [{check: yes_, next: operational}]\n') % ''
    node = make_node('n', {PROFILE: 'p', 'present': 'x'}, {DATA: format_data(data_for('maintenance-required', 'operational'))})
    result = reconcile(node, load_config(config_text, environ={}), NOW, Environment(http=http))
    assert len(http.calls) == 1 and any('note' in e.message for e in result.errors)
    assert [(t.source, t.target) for t in result.transitions] == [('maintenance-required', 'operational')]


# --- state/state_test.go (data annotation), state/*_test.go (profiles) -----------------------------

def test_data_parsing():
    """Upstream (ParseData, ParseMigrateData, ValidateLabel): {} reads, broken JSON and unknown states do
    not, and the v1 format migrates per profile."""
    assert parse_data('{}').notifications == {}
    with pytest.raises(DataError):
        parse_data('{{}')
    with pytest.raises(DataError):
        parse_data('{"Profiles": {"p": {"Transition": "2023-06-01T14:00:00Z", "Current": "hello", "Previous": "operational"}}}')
    v1 = parse_data('{"LastTransition": "2023-06-01T14:00:00Z", "LastNotificationTimes": {"n": "2023-06-01T15:00:00Z"},'
                    ' "ProfileStates": {"p": "operational"}, "PreviousStates": {"p": "in-maintenance"}}')
    entry = v1.profiles['p']
    assert (entry.current, entry.previous, entry.transition) == ('operational', 'in-maintenance', seconds_to_ns(utc(2023, 6, 1, 14)))
    assert v1.notifications == {'n': seconds_to_ns(utc(2023, 6, 1, 15))}


def test_profiles_are_maintained():
    """Upstream (MaintainProfileStates): data of detached profiles is dropped, new ones start operational now."""
    stale = NodeData({'gone': ProfileData(seconds_to_ns(NOW - HOUR), 'in-maintenance', 'in-maintenance')})
    result, node = run_once('', stale)
    data = parse_data(node['metadata']['annotations'][DATA])
    assert list(data.profiles) == ['p']
    assert (data.profiles['p'].current, data.profiles['p'].transition) == ('operational', seconds_to_ns(NOW))
    assert node['metadata']['labels'][STATE] == 'operational' and result.errors == []


def test_only_one_profile_in_maintenance():
    """Upstream (Transition.Execute): a transition into in-maintenance is refused while another profile of
    the node is in-maintenance."""
    text = BASE + '''instances:
  check: [{type: hasLabel, name: go, config: {key: present}}]
profiles:
- name: a
  operational: {transitions: [{check: go, next: in-maintenance}]}
- name: b
  operational: {transitions: [{check: go, next: in-maintenance}]}
'''
    both = NodeData({'a': ProfileData(seconds_to_ns(NOW - HOUR), 'in-maintenance', 'in-maintenance'),
                     'b': ProfileData(seconds_to_ns(NOW - HOUR), 'operational', 'operational')})
    node = make_node('n', {PROFILE: 'a--b', 'present': 'x'}, {DATA: format_data(both)})
    result = reconcile(node, load_config(text, environ={}), NOW, Environment())
    assert result.transitions == [] and result.errors == []
    assert result.profiles[1].evaluations[0].blocked == 'another profile of this node is in-maintenance'
