# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Notification plugins (mail, slack, slackThread) with fake transports, and the three schedules."""

from __future__ import annotations

import json

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import format_micro
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.environment import Environment, PluginParams
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import ConfigError, PluginError, TemplateError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.fields import Fields
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.gotime import NS, ZERO_TIME_NS
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.leases import MemoryLeaseStore
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.notifiers import Mail, Slack, SlackThread
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.schedules import (
    Oneshot, Periodic, ScheduleInput, Scheduled)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.senders import SmtpAuth

from support.maintenance import FakeHttp, FakeSmtp, make_node


def params(env, now=1000.0, state='maintenance-required'):
    return PluginParams(node=make_node('n1'), profile='flatcar', state=state, last_transition=900.0, in_maintenance=False,
                        now=now, env=env, last_profile='os')


def build(cls, config):
    return cls.from_config(Fields(config, 'c'))


MAIL = {'auth': True, 'address': 'smtp.example:587', 'from': 'mc@example', 'to': ['ops@example', 'dev@example'],
        'subject': 'maintenance', 'message': 'Node {{ .Node.Name }} is {{ .State }} ({{ .Profile.Current }}, last {{ .Profile.Last }})',
        'identity': 'id', 'user': 'u', 'password': 's3cr3t'}


def test_mail():
    smtp = FakeSmtp()
    build(Mail, MAIL).notify(params(Environment(smtp=smtp)))
    [sent] = smtp.sent
    assert (sent['address'], sent['from'], sent['to'], sent['auth']) == ('smtp.example:587', 'mc@example',
                                                                         ['ops@example', 'dev@example'], SmtpAuth('id', 'u', 's3cr3t'))
    assert sent['message'] == (b'From: mc@example\r\nTo: ops@example,dev@example\r\nSubject: maintenance\r\nMIME-Version: 1.0\r\n'
                               b'Content-Type: text/plain; charset=utf-8\r\n\r\nNode n1 is maintenance-required (flatcar, last os)')


def test_mail_without_auth_and_config_errors():
    smtp = FakeSmtp()
    build(Mail, dict(MAIL, auth=False)).notify(params(Environment(smtp=smtp)))
    assert smtp.sent[0]['auth'] is None
    with pytest.raises(ConfigError, match='^c.to: required'):
        build(Mail, {k: v for k, v in MAIL.items() if k != 'to'})
    with pytest.raises(ConfigError, match='^c.message: template: line 1, column 1: unclosed action'):
        build(Mail, dict(MAIL, message='{{ .State'))
    assert 's3cr3t' not in repr(build(Mail, MAIL))   # secrets stay out of logs


def test_slack_webhook():
    http = FakeHttp()
    build(Slack, {'hook': 'https://hooks.example/x', 'channel': '#ops', 'message': '{{ .Node.Name }}: {{ .State }}'}).notify(
        params(Environment(http=http)))
    [call] = http.calls
    assert call['url'] == 'https://hooks.example/x'
    assert call['json'] == {'text': 'n1: maintenance-required', 'channel': '#ops'}
    assert call['headers']['Content-Type'] == 'application/json'


@pytest.mark.parametrize('answer', [(200, b'invalid_payload'), (500, b'ok'), (404, b'no_service')])
def test_slack_webhook_refusal_is_an_error(answer):
    plugin = build(Slack, {'hook': 'h', 'channel': '#ops', 'message': 'm'})
    with pytest.raises(PluginError, match='slack webhook answered'):
        plugin.notify(params(Environment(http=FakeHttp(answer))))


def test_template_failure_at_send_time_is_a_template_error():
    plugin = build(Slack, {'hook': 'h', 'channel': '#ops', 'message': '{{ .NoSuchField }}'})
    with pytest.raises(TemplateError, match="can't evaluate field NoSuchField"):
        plugin.notify(params(Environment(http=FakeHttp())))


class SlackApi:
    def __init__(self):
        self.count = 0

    def __call__(self, url, body):
        self.count += 1
        return 200, json.dumps({'ok': True, 'ts': '1700000000.%06d' % self.count}).encode()


THREAD = {'token': 'xoxb-1', 'channel': 'C1', 'title': 'Maintenance of {{ .Node.Name }}', 'message': '{{ .State }} <&>',
          'leaseName': 'slack-thread', 'leaseNamespace': 'kube-system', 'period': '1h'}


def test_slack_thread_groups_messages_per_lease_period():
    http, leases = FakeHttp(SlackApi()), MemoryLeaseStore()
    env = Environment(http=http, leases=leases, slack_api_url='http://slack.test/api/')
    plugin = build(SlackThread, THREAD)
    plugin.notify(params(env, now=1000.0))
    assert [c['json'] for c in http.calls] == [
        {'channel': 'C1', 'text': 'Maintenance of n1'},
        {'channel': 'C1', 'text': 'maintenance-required &lt;&amp;&gt;', 'thread_ts': '1700000000.000001'}]
    assert http.calls[0]['url'] == 'http://slack.test/api/chat.postMessage'
    assert http.calls[0]['headers']['Authorization'] == 'Bearer xoxb-1'
    lease = leases.get('kube-system', 'slack-thread')
    assert lease['spec']['holderIdentity'] == '1700000000.000001' and lease['spec']['leaseDurationSeconds'] == 3600
    plugin.notify(params(env, now=1000.0 + 3600))                 # still within the period: reply in the thread
    assert http.calls[2]['json']['thread_ts'] == '1700000000.000001' and len(http.calls) == 3
    plugin.notify(params(env, now=1000.0 + 3601))                 # period over: a new thread
    assert http.calls[3]['json'] == {'channel': 'C1', 'text': 'Maintenance of n1'}
    assert http.calls[4]['json']['thread_ts'] == '1700000000.000004'
    lease = leases.get('kube-system', 'slack-thread')
    assert lease['spec']['holderIdentity'] == '1700000000.000004' and lease['spec']['renewTime'] == format_micro(4601.0)


def test_slack_api_errors():
    http = FakeHttp((200, b'{"ok": false, "error": "channel_not_found"}'))
    plugin = build(SlackThread, THREAD)
    with pytest.raises(PluginError, match='channel_not_found'):
        plugin.notify(params(Environment(http=http, leases=MemoryLeaseStore())))
    with pytest.raises(ConfigError, match='^c.period: required'):
        build(SlackThread, {k: v for k, v in THREAD.items() if k != 'period'})


# --- schedules -------------------------------------------------------------------------------------

def at(current, previous, now, last_sent=None, change=0.0):
    return ScheduleInput(current, previous, now, None if last_sent is None else int(last_sent * NS), int(change * NS))


H = 3600.0


@pytest.mark.parametrize('inp, expected', [
    (at('maintenance-required', 'operational', 10 * H, last_sent=9 * H), True),     # just changed state
    (at('maintenance-required', 'maintenance-required', 10 * H, last_sent=9 * H), False),
    (at('maintenance-required', 'maintenance-required', 10 * H, last_sent=8 * H), True),   # interval (2h) passed
    (at('maintenance-required', 'maintenance-required', 10 * H), True),             # never sent
    (at('operational', 'operational', 10 * H, last_sent=1 * H), False),              # operational: only on change
    (at('operational', 'in-maintenance', 10 * H, last_sent=9.9 * H), True),
])
def test_periodic(inp, expected):
    assert Periodic(2 * H).should_notify(inp) is expected


MONDAY_9 = 1767571200.0 + 9 * H      # 2026-01-05 09:00 UTC, a Monday


@pytest.mark.parametrize('inp, expected', [
    (at('x', 'x', MONDAY_9), True),
    (at('x', 'x', MONDAY_9 - 60), False),                       # before the instant
    (at('x', 'x', MONDAY_9, last_sent=MONDAY_9 - 1 * H), False),  # already sent today
    (at('x', 'x', MONDAY_9, last_sent=MONDAY_9 - 24 * H), True),
    (at('x', 'x', MONDAY_9, last_sent=MONDAY_9 - 28 * 24 * H), True),   # same day of another month (upstream would not)
    (at('x', 'x', MONDAY_9 + 24 * H), False),                   # Tuesday
    (ScheduleInput('x', 'x', MONDAY_9, ZERO_TIME_NS, 0), True),
])
def test_scheduled(inp, expected):
    assert Scheduled(9 * 3600, frozenset({0, 2})).should_notify(inp) is expected


@pytest.mark.parametrize('delay, inp, expected', [
    (0, at('in-maintenance', 'maintenance-required', 100.0, change=100.0), True),
    (0, at('in-maintenance', 'in-maintenance', 200.0, last_sent=160.0, change=100.0), False),   # once per change
    (0, at('in-maintenance', 'in-maintenance', 200.0, last_sent=100.0, change=100.0), True),    # sent at the change: the state before
    (60, at('in-maintenance', 'maintenance-required', 130.0, change=100.0), False),
    (60, at('in-maintenance', 'in-maintenance', 160.0, change=100.0), True),                    # after the delay
    (60, at('in-maintenance', 'in-maintenance', 160.0, last_sent=50.0, change=100.0), True),    # sent for the previous state
])
def test_oneshot(delay, inp, expected):
    assert Oneshot(delay).should_notify(inp) is expected


def test_schedule_config():
    assert Periodic.from_config(Fields(None, 's')) == Periodic(3600.0)
    assert Oneshot.from_config(Fields({'delay': '5m'}, 's')) == Oneshot(300.0)
    assert Oneshot.from_config(Fields(None, 's')) == Oneshot(60.0)    # upstream's default delay is a minute
    with pytest.raises(ConfigError, match='^s.weekdays: required'):
        Scheduled.from_config(Fields({'instant': '10:00'}, 's'))
    with pytest.raises(ConfigError, match="^s.instant: '10' is not a time of day"):
        Scheduled.from_config(Fields({'instant': '10', 'weekdays': ['mon']}, 's'))
