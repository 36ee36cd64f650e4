# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Notification plugins: mail (SMTP), slack (incoming webhook), slackThread (Web API, one thread per
lease period). Messages are Go templates (see gotemplate for the fields); their syntax is checked when
the config loads, their rendering when they are sent."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, List, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.environment import PluginParams
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import (
    ConfigError, PluginError, TemplateError)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.fields import Fields
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.gotemplate import GoTime, Struct, check_syntax, render
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.gotime import seconds_to_ns
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import lease_spec, seconds_left
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.leases import LeaseConflict
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.plugin_base import NotificationPlugin
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.senders import SmtpAuth


def template_data(params: PluginParams) -> Struct:
    """The template's `.`: upstream's plugin.Parameters, as far as a template can use it."""
    profile = Struct({'Current': params.profile, 'Last': params.last_profile or params.profile},
                     text=params.profile, type_name='plugin.ProfileInfo')
    return Struct({'State': params.state, 'Node': params.node, 'Profile': profile,
                   'LastTransition': GoTime(seconds_to_ns(params.last_transition)),
                   'InMaintenance': params.in_maintenance, 'LogDetails': False}, type_name='plugin.Parameters')


def template(fields: Fields, key: str, required: bool = True) -> str:
    text = fields.string(key, required=required)
    try:
        check_syntax(text)
    except TemplateError as exc:
        raise ConfigError(fields.path(key), 'template', str(exc)) from None
    return text


def render_for(params: PluginParams, text: str) -> str:
    return render(text, template_data(params))


@dataclasses.dataclass(frozen=True)
class Mail(NotificationPlugin):
    auth: bool
    address: str
    sender: str
    to: Tuple[str, ...]
    subject: str
    message: str
    identity: str
    user: str
    password: str = dataclasses.field(repr=False)
    type_name = 'mail'

    @classmethod
    def from_config(cls, fields: Fields) -> 'Mail':
        return cls(fields.boolean('auth'), fields.string('address', required=True), fields.string('from', required=True),
                   tuple(fields.string_list('to', required=True)), fields.string('subject'), template(fields, 'message'),
                   fields.string('identity'), fields.string('user'), fields.string('password'))

    def compose(self, params: PluginParams) -> bytes:
        body = render_for(params, self.message)
        headers = 'From: %s\r\nTo: %s\r\nSubject: %s\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n' % (
            self.sender, ','.join(self.to), self.subject)
        text = headers + body.replace('\r\n', '\n').replace('\n', '\r\n')
        return text.encode('utf-8')

    def notify(self, params: PluginParams) -> None:
        auth = SmtpAuth(self.identity, self.user, self.password) if self.auth else None
        params.env.smtp.send(self.address, self.sender, list(self.to), self.compose(params), auth)


@dataclasses.dataclass(frozen=True)
class Slack(NotificationPlugin):
    hook: str = dataclasses.field(repr=False)
    channel: str
    message: str
    type_name = 'slack'

    @classmethod
    def from_config(cls, fields: Fields) -> 'Slack':
        return cls(fields.string('hook', required=True), fields.string('channel', required=True), template(fields, 'message'))

    def notify(self, params: PluginParams) -> None:
        body = json.dumps({'text': render_for(params, self.message), 'channel': self.channel}).encode('utf-8')
        status, answer = params.env.http.post(self.hook, body, {'Content-Type': 'application/json'})
        if status >= 300 or answer.strip() != b'ok':
            raise PluginError('slack webhook answered %s: %s' % (status, answer[:200].decode('utf-8', 'replace')))


def slack_escape(text: str) -> str:
    """What slack-go's MsgOptionText(text, true) does before posting."""
    return text.replace('&', '&amp;').replace('<', '&lt;').replace('>', '&gt;')


@dataclasses.dataclass(frozen=True)
class SlackThread(NotificationPlugin):
    token: str = dataclasses.field(repr=False)
    channel: str
    title: str
    message: str
    lease_name: str
    lease_namespace: str
    period: float
    type_name = 'slackThread'

    @classmethod
    def from_config(cls, fields: Fields) -> 'SlackThread':
        return cls(fields.string('token', required=True), fields.string('channel', required=True), template(fields, 'title'),
                   template(fields, 'message'), fields.string('leaseName', required=True),
                   fields.string('leaseNamespace', required=True), fields.duration('period', required=True))

    def post(self, params: PluginParams, text: str, thread: str = '') -> str:
        payload: dict = {'channel': self.channel, 'text': slack_escape(text)}
        if thread:
            payload['thread_ts'] = thread
        url = params.env.slack_api_url.rstrip('/') + '/chat.postMessage'
        headers = {'Content-Type': 'application/json; charset=utf-8', 'Authorization': 'Bearer ' + self.token}
        status, answer = params.env.http.post(url, json.dumps(payload).encode('utf-8'), headers)
        try:
            reply: Any = json.loads(answer.decode('utf-8') or 'null')
        except ValueError:
            reply = None
        if status >= 300 or not isinstance(reply, dict) or not reply.get('ok'):
            error = reply.get('error') if isinstance(reply, dict) else answer[:200].decode('utf-8', 'replace')
            raise PluginError('slack chat.postMessage answered %s: %s' % (status, error))
        return str(reply.get('ts') or '')

    def start_thread(self, params: PluginParams) -> str:
        thread = self.post(params, render_for(params, self.title))
        self.post(params, render_for(params, self.message), thread)
        return thread

    def notify(self, params: PluginParams) -> None:
        store = params.env.leases
        if store is None:
            raise PluginError('slackThread needs a lease store (Environment.leases)')
        lease = store.get(self.lease_namespace, self.lease_name)
        try:
            if lease is None:
                thread = self.start_thread(params)
                store.create(self.lease_namespace, self.lease_name, lease_spec(thread, params.now, self.period))
            elif seconds_left(lease, params.now) >= 0:
                thread = (lease.get('spec') or {}).get('holderIdentity')
                if not thread:
                    raise PluginError('slack thread lease %s/%s has no holder' % (self.lease_namespace, self.lease_name))
                self.post(params, render_for(params, self.message), thread)
            else:
                thread = self.start_thread(params)
                store.update(self.lease_namespace, self.lease_name, lease_spec(thread, params.now, self.period, acquire=False),
                             (lease.get('metadata') or {}).get('resourceVersion') or '')
        except LeaseConflict as exc:
            raise PluginError('slack thread lease %s/%s: %s' % (self.lease_namespace, self.lease_name, exc)) from None


NOTIFIERS: List[type] = [Mail, Slack, SlackThread]
