# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real side-effect implementations over real sockets: smtplib to a local SMTP server, urllib to a
local webhook / Slack Web API double, and Leases through KubeClient on the Kubernetes API emulator."""

from __future__ import annotations

import time

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config import load_config
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.environment import Environment
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import PluginError
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import lease_spec
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.leases import KubeLeaseStore, LeaseConflict
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.senders import (
    SmtpAuth, SmtplibSender, UrllibPoster)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.state import reconcile

from support.bad_input import Drip
from support.maintenance import T0, apply_patch, make_node

CONFIG = '''
intervals: {requeue: 1m}
instances:
  check:
  - {type: hasLabel, name: go, config: {key: go}}
  - {type: stagger, name: stagger, config: {duration: 1h, leaseName: mc, leaseNamespace: kube-system}}
  notify:
  - type: mail
    name: mail
    config:
      auth: true
      address: "${SMTP}"
      from: maintenance@example.org
      to: [ops@example.org]
      subject: node maintenance
      identity: ops
      user: steward
      password: secret
      message: "Node {{ .Node.Name }} is {{ .State }}"
    schedule: {type: oneshot}
  - type: slack
    name: hook
    config: {hook: "${HOOK}", channel: "#ops", message: "{{ .Node.Name }}: {{ .State }}"}
    schedule: {type: oneshot}
  - type: slackThread
    name: thread
    config: {token: xoxb-test, channel: C1, title: "Maintenance {{ .Profile }}", message: "{{ .Node.Name }} {{ .State }}",
             leaseName: slack-thread, leaseNamespace: kube-system, period: 1h}
    schedule: {type: oneshot}
profiles:
- name: p
  operational: {transitions: [{check: go && stagger, next: maintenance-required}]}
  maintenance-required: {notify: mail && hook && thread}
'''


def test_smtplib_sender_with_plain_auth(smtp_server):
    SmtplibSender(timeout=10).send(smtp_server.address, 'a@example.org', ['b@example.org', 'c@example.org'],
                                   b'Subject: hi\r\n\r\nbody\r\n', SmtpAuth('ops', 'steward', 'secret'))
    [mail] = smtp_server.wait_for(1)
    assert (mail.mail_from, mail.rcpt_tos, mail.auth_user, mail.auth_identity) == (
        'a@example.org', ['b@example.org', 'c@example.org'], 'steward', 'ops')
    assert mail.subject == 'hi'


def test_smtplib_sender_failures_are_plugin_errors(smtp_server):
    with pytest.raises(PluginError, match='SMTP'):
        SmtplibSender(timeout=10).send(smtp_server.address, 'a@example.org', ['b@example.org'], b'x', SmtpAuth('', 'steward', 'wrong'))
    with pytest.raises(PluginError, match='must be host:port'):
        SmtplibSender().send('localhost', 'a', ['b'], b'x', None)


def test_urllib_poster(webhook_server):
    status, body = UrllibPoster(timeout=10).post(webhook_server.url + '/hook', b'{"text": "x"}', {'Content-Type': 'application/json'})
    assert (status, body) == (200, b'ok')
    webhook_server.fail(503)
    status, body = UrllibPoster(timeout=10).post(webhook_server.url + '/hook', b'{}', {'Content-Type': 'application/json'})
    assert status == 503
    with pytest.raises(PluginError, match=r'POST http://127\.0\.0\.1:1/\.\.\.'):
        UrllibPoster(timeout=5).post('http://127.0.0.1:1/secret-path', b'{}', {})


def test_kube_lease_store_compare_and_swap(kube):
    store = KubeLeaseStore(kube)
    assert store.get('kube-system', 'mc-0') is None
    created = store.create('kube-system', 'mc-0', lease_spec('a', 100.0, 3600, 0))
    with pytest.raises(LeaseConflict):
        store.create('kube-system', 'mc-0', lease_spec('b', 100.0, 3600, 0))
    version = created['metadata']['resourceVersion']
    updated = store.update('kube-system', 'mc-0', {'holderIdentity': 'b'}, version)
    assert updated['spec']['holderIdentity'] == 'b' and updated['spec']['leaseDurationSeconds'] == 3600
    with pytest.raises(LeaseConflict):
        store.update('kube-system', 'mc-0', {'holderIdentity': 'c'}, version)     # stale resourceVersion


def test_reconcile_with_real_transports(kube, smtp_server, webhook_server):
    config = load_config(CONFIG, environ={'SMTP': smtp_server.address, 'HOOK': webhook_server.url + '/services/T/B/X'})
    env = Environment(leases=KubeLeaseStore(kube), smtp=SmtplibSender(timeout=10), http=UrllibPoster(timeout=10),
                      slack_api_url=webhook_server.slack_api_url)
    node = make_node('worker-7', {'cloud.sap/maintenance-profile': 'p', 'go': 'y'})
    first = reconcile(node, config, T0, env)
    assert [t.target for t in first.transitions] == ['maintenance-required'] and first.errors == []
    lease = KubeLeaseStore(kube).get('kube-system', 'mc-0')
    assert lease['spec']['holderIdentity'] == 'worker-7' and lease['spec']['leaseDurationSeconds'] == 3600
    node = apply_patch(node, first.patch)
    second = reconcile(node, config, T0 + 60, env)
    assert second.errors == [] and [n.instance for n in second.notifications] == ['mail', 'hook', 'thread']
    [mail] = smtp_server.wait_for(1)
    assert mail.subject == 'node maintenance' and mail.body == 'Node worker-7 is maintenance-required\n'   # SMTP ends data with CRLF
    assert mail.auth_user == 'steward' and mail.rcpt_tos == ['ops@example.org']
    hook = webhook_server.posts('/services/T/B/X')
    assert [p.json for p in hook] == [{'text': 'worker-7: maintenance-required', 'channel': '#ops'}]
    title, reply = webhook_server.posts('/api/chat.postMessage')
    assert (title.text, reply.text, reply.thread_ts) == ('Maintenance p', 'worker-7 maintenance-required', title.ts)
    assert KubeLeaseStore(kube).get('kube-system', 'slack-thread')['spec']['holderIdentity'] == title.ts
    # Another node within the hour: the stagger lease holds it back.
    other = reconcile(make_node('worker-8', {'cloud.sap/maintenance-profile': 'p', 'go': 'y'}), config, T0 + 120, env)
    assert other.transitions == [] and other.profiles[0].evaluations[0].checks['stagger']['passed'] is False


# --- every send under one deadline (issue 23 §4) --------------------------------------------------
# The drip sends a byte every half second for far longer than this; the per-read socket timeout never fires.
SEND_TIMEOUT = 1.0
SLACK = 2.0   # a loaded 2-core machine wakes threads late


@pytest.mark.parametrize('headers', [True, False], ids=['slow-headers', 'slow-body'])
def test_a_webhook_that_drips_its_answer_is_cut_at_the_deadline(headers):
    server = Drip(headers=headers)
    try:
        started = time.monotonic()
        with pytest.raises(PluginError, match=r'POST http://127\.0\.0\.1:%d/\.\.\.: POST at .* gave up after' % server.port):
            UrllibPoster(timeout=SEND_TIMEOUT).post('http://127.0.0.1:%d/secret-path' % server.port, b'{}', {})
        took = time.monotonic() - started
        assert SEND_TIMEOUT <= took < SEND_TIMEOUT + SLACK, took
    finally:
        server.close()


def smtp_greeting(conn):
    """An SMTP peer that sends its greeting a byte every half second."""
    return b'220 ' + b'x' * 200 + b'\r\n'


def smtp_ehlo(conn):
    """An SMTP peer that greets at once, then drips its answer to EHLO."""
    conn.sendall(b'220 slow.example.org ESMTP\r\n')
    conn.recv(1024)
    return b'250-slow.example.org\r\n' * 50


@pytest.mark.parametrize('stall_after_greeting', [False, True], ids=['greeting', 'ehlo'])
def test_an_smtp_peer_that_stalls_is_cut_at_the_deadline(stall_after_greeting):
    peer = Drip(script=smtp_ehlo if stall_after_greeting else smtp_greeting)
    try:
        started = time.monotonic()
        with pytest.raises(PluginError, match='SMTP 127.0.0.1:[0-9]+: SMTP send at 127.0.0.1:[0-9]+ gave up after'):
            SmtplibSender(timeout=SEND_TIMEOUT).send('127.0.0.1:%d' % peer.port, 'a@example.org', ['b@example.org'], b'x', None)
        took = time.monotonic() - started
        assert SEND_TIMEOUT <= took < SEND_TIMEOUT + SLACK, took
    finally:
        peer.close()
