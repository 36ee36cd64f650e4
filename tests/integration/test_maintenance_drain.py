# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cordon, uncordon and drain against the API emulator over HTTP (Eviction API, PodDisruptionBudgets),
and the local SMTP / webhook receivers the notification tests use."""

from __future__ import annotations

import json
import smtplib
import time
import urllib.error
import urllib.request
from email.message import EmailMessage

import pytest
import requests

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError, KubeUnavailable, NotFound
from ansible_collections.steward.cluster.plugins.module_utils.kube.drain import (
    DrainError, cordon, drain, plan_drain, uncordon)

NS = 'default'
PROTECTED = ('kube-system', 'monitoring')


# --- objects ----------------------------------------------------------------------------------------

def add_node(kube, name):
    return kube.create(api_path('v1', 'nodes'), {'apiVersion': 'v1', 'kind': 'Node', 'metadata': {'name': name}})


def add_controller(kube, kind, name, replicas, namespace=NS):
    plural = {'ReplicaSet': 'replicasets', 'StatefulSet': 'statefulsets', 'DaemonSet': 'daemonsets'}[kind]
    body = {'apiVersion': 'apps/v1', 'kind': kind, 'metadata': {'name': name, 'namespace': namespace},
            'spec': {'selector': {'matchLabels': {'app': name}}}}
    if kind != 'DaemonSet':
        body['spec']['replicas'] = replicas
    return kube.create(api_path('apps/v1', plural, namespace), body)


def add_pod(kube, name, node, namespace=NS, owner=None, labels=None, ready=True, phase='Running', annotations=None,
            finalizers=None):
    """A scheduled pod; `owner` is (kind, name) of its controller (None: unmanaged)."""
    md = {'name': name, 'namespace': namespace, 'labels': dict(labels or {})}
    if owner:
        md['ownerReferences'] = [{'apiVersion': 'apps/v1', 'kind': owner[0], 'name': owner[1], 'uid': 'uid-' + owner[1],
                                  'controller': True, 'blockOwnerDeletion': True}]
    if annotations:
        md['annotations'] = annotations
    if finalizers:
        md['finalizers'] = finalizers
    status = {'phase': phase, 'conditions': [{'type': 'Ready', 'status': 'True' if ready else 'False'}]}
    spec = {'nodeName': node, 'containers': [{'name': 'c', 'image': 'x'}]}
    return kube.create(api_path('v1', 'pods', namespace),
                       {'apiVersion': 'v1', 'kind': 'Pod', 'metadata': md, 'spec': spec, 'status': status})


def add_pdb(kube, name, app, namespace=NS, **limits):
    return kube.create(api_path('policy/v1', 'poddisruptionbudgets', namespace), {
        'apiVersion': 'policy/v1', 'kind': 'PodDisruptionBudget', 'metadata': {'name': name, 'namespace': namespace},
        'spec': dict(limits, selector={'matchLabels': {'app': app}})})


def pod_names(kube, node=None):
    pods = kube.list(api_path('v1', 'pods'))
    return sorted('%s/%s' % (p['metadata']['namespace'], p['metadata']['name'])
                  for p in pods if node is None or p['spec'].get('nodeName') == node)


def evict(kube, name, namespace=NS, dry_run=False):
    path = api_path('v1', 'pods', namespace, name, 'eviction')
    body = {'apiVersion': 'policy/v1', 'kind': 'Eviction', 'metadata': {'name': name, 'namespace': namespace}}
    return kube.request('POST', path, body=body, query=[('dryRun', 'All')] if dry_run else None)


@pytest.fixture
def nodes(kube):
    for name in ('n1', 'n2', 'n3'):
        add_node(kube, name)
    return kube


# --- emulator behaviour ---------------------------------------------------------------------------------

def test_pod_list_field_selector_on_node_name_and_phase(nodes):
    kube = nodes
    add_pod(kube, 'a', 'n1', owner=('ReplicaSet', 'web'))
    add_pod(kube, 'b', 'n2', owner=('ReplicaSet', 'web'))
    add_pod(kube, 'c', 'n1', namespace='other', owner=('ReplicaSet', 'web'), phase='Succeeded')
    add_pod(kube, 'pending', '', owner=('ReplicaSet', 'web'), phase='Pending')

    def names(selector, path=api_path('v1', 'pods')):
        return sorted(p['metadata']['name'] for p in kube.request('GET', path, query=[('fieldSelector', selector)])['items'])

    assert names('spec.nodeName=n1') == ['a', 'c']
    assert names('spec.nodeName=n2') == ['b']
    assert names('spec.nodeName=') == ['pending']                       # unscheduled pods
    assert names('spec.nodeName!=n1') == ['b', 'pending']
    assert names('spec.nodeName=n1,status.phase=Running') == ['a']
    assert names('spec.nodeName=n1', api_path('v1', 'pods', 'other')) == ['c']
    assert names('metadata.name=b') == ['b']                            # the existing selectors still work


def test_eviction_api_without_budget_deletes_and_404s(nodes):
    kube = nodes
    add_pod(kube, 'a', 'n1', owner=('ReplicaSet', 'web'))
    answer = evict(kube, 'a', dry_run=True)
    assert answer == {'kind': 'Status', 'apiVersion': 'v1', 'metadata': {}, 'status': 'Success', 'code': 201}
    assert pod_names(kube) == ['default/a']                              # dry run: still there
    assert evict(kube, 'a')['status'] == 'Success'
    assert pod_names(kube) == []
    with pytest.raises(NotFound) as err:
        evict(kube, 'a')
    assert err.value.status == 404 and 'pods "a" not found' in str(err.value)
    add_pod(kube, 'b', 'n1', owner=('ReplicaSet', 'web'))
    with pytest.raises(KubeError) as bad:
        kube.request('POST', api_path('v1', 'pods', NS, 'b', 'eviction'),
                     body={'apiVersion': 'policy/v1', 'kind': 'Eviction', 'metadata': {'name': 'other'}})
    assert bad.value.status == 400
    assert pod_names(kube) == ['default/b']


def test_eviction_api_min_available_refuses_with_429_until_a_replacement_is_ready(nodes):
    kube = nodes
    add_controller(kube, 'ReplicaSet', 'web', 2)
    add_pod(kube, 'web-a', 'n1', owner=('ReplicaSet', 'web'), labels={'app': 'web'})
    add_pod(kube, 'web-b', 'n2', owner=('ReplicaSet', 'web'), labels={'app': 'web'})
    add_pdb(kube, 'web-pdb', 'web', minAvailable=2)
    with pytest.raises(KubeError) as err:
        evict(kube, 'web-a')
    assert err.value.status == 429 and err.value.reason == 'TooManyRequests'
    assert "Cannot evict pod as it would violate the pod's disruption budget." in str(err.value)
    with pytest.raises(KubeError) as dry:
        evict(kube, 'web-a', dry_run=True)
    assert dry.value.status == 429
    add_pod(kube, 'web-c', 'n3', owner=('ReplicaSet', 'web'), labels={'app': 'web'}, ready=False)
    with pytest.raises(KubeError):
        evict(kube, 'web-a')                                             # an unready replacement is not healthy
    kube.merge_patch(api_path('v1', 'pods', NS, 'web-c'), {'status': {'conditions': [{'type': 'Ready', 'status': 'True'}]}})
    assert evict(kube, 'web-a')['code'] == 201
    assert pod_names(kube) == ['default/web-b', 'default/web-c']


def test_eviction_api_max_unavailable_and_percentages_use_the_controller_scale(nodes):
    kube = nodes
    add_controller(kube, 'ReplicaSet', 'api', 3)
    for i in range(3):
        add_pod(kube, 'api-%d' % i, 'n1', owner=('ReplicaSet', 'api'), labels={'app': 'api'})
    add_pdb(kube, 'api-pdb', 'api', maxUnavailable=1)
    assert evict(kube, 'api-0')['code'] == 201
    # expected stays 3 (the ReplicaSet's replicas), healthy is 2: one more would leave 1 < 3 - 1
    with pytest.raises(KubeError) as err:
        evict(kube, 'api-1')
    assert err.value.status == 429

    add_controller(kube, 'StatefulSet', 'db', 4)
    for i in range(4):
        add_pod(kube, 'db-%d' % i, 'n2', owner=('StatefulSet', 'db'), labels={'app': 'db'})
    add_pdb(kube, 'db-pdb', 'db', minAvailable='50%')                   # desired = ceil(4 * 50%) = 2
    assert evict(kube, 'db-0')['code'] == 201
    assert evict(kube, 'db-1')['code'] == 201
    with pytest.raises(KubeError) as err:
        evict(kube, 'db-2')
    assert err.value.status == 429


def test_eviction_api_unready_pending_and_several_budgets(nodes):
    kube = nodes
    add_pod(kube, 'q-0', 'n1', owner=('ReplicaSet', 'q'), labels={'app': 'q'})
    add_pod(kube, 'q-1', 'n1', owner=('ReplicaSet', 'q'), labels={'app': 'q'}, ready=False)
    add_pod(kube, 'q-2', 'n1', owner=('ReplicaSet', 'q'), labels={'app': 'q'}, phase='Pending', ready=False)
    add_pdb(kube, 'q-pdb', 'q', minAvailable=1)
    with pytest.raises(KubeError):
        evict(kube, 'q-0')                                               # the only healthy one
    assert evict(kube, 'q-1')['code'] == 201                             # unready: healthy 1 >= desired 1
    assert evict(kube, 'q-2')['code'] == 201                             # Pending: no budget check
    add_pdb(kube, 'q-pdb-2', 'q', maxUnavailable=0)
    with pytest.raises(KubeUnavailable) as err:
        evict(kube, 'q-0')
    assert err.value.status == 500 and 'more than one PodDisruptionBudget' in str(err.value)
    assert pod_names(kube) == ['default/q-0']


# --- cordon / uncordon ------------------------------------------------------------------------------

def test_cordon_and_uncordon_are_idempotent(nodes):
    kube = nodes
    node = api_path('v1', 'nodes', name='n1')
    assert cordon(kube, 'n1') is True
    assert kube.get(node)['spec']['unschedulable'] is True
    rv = kube.get(node)['metadata']['resourceVersion']
    assert cordon(kube, 'n1') is False
    assert kube.get(node)['metadata']['resourceVersion'] == rv           # nothing written the second time
    assert uncordon(kube, 'n1') is True
    assert 'unschedulable' not in kube.get(node).get('spec', {})
    assert uncordon(kube, 'n1') is False
    with pytest.raises(DrainError, match='node ghost does not exist'):
        cordon(kube, 'ghost')
    with pytest.raises(DrainError, match='node ghost does not exist'):
        uncordon(kube, 'ghost')


# --- drain --------------------------------------------------------------------------------------------

def populate_mixed(kube):
    add_controller(kube, 'ReplicaSet', 'web', 2)
    add_controller(kube, 'DaemonSet', 'agent', 0)
    add_pod(kube, 'web-1', 'n1', owner=('ReplicaSet', 'web'), labels={'app': 'web'})
    add_pod(kube, 'web-2', 'n2', owner=('ReplicaSet', 'web'), labels={'app': 'web'})
    add_pod(kube, 'db-0', 'n1', owner=('StatefulSet', 'db'), labels={'app': 'db'})
    add_pod(kube, 'agent-x', 'n1', owner=('DaemonSet', 'agent'))
    add_pod(kube, 'etcd-n1', 'n1', namespace='kube-system', annotations={'kubernetes.io/config.mirror': 'abc'})
    add_pod(kube, 'prom-0', 'n1', namespace='monitoring', owner=('StatefulSet', 'prom'))
    add_pod(kube, 'job-x', 'n1', owner=('Job', 'job'), phase='Succeeded', ready=False)
    add_pod(kube, 'bare', 'n1')


SKIPPED = ['default/agent-x (DaemonSet pod)', 'default/job-x (terminated (Succeeded))',
           'kube-system/etcd-n1 (mirror pod)', 'monitoring/prom-0 (protected namespace monitoring)']


def test_drain_refuses_unmanaged_pods_without_force_and_evicts_nothing(nodes):
    kube = nodes
    populate_mixed(kube)
    before = pod_names(kube)
    with pytest.raises(DrainError) as err:
        drain(kube, 'n1', timeout=10, eviction_timeout=5, protected_namespaces=PROTECTED, force=False)
    assert str(err.value) == 'cannot drain node n1: pods without a controller (set force to evict them anyway): default/bare'
    assert err.value.result.complete is False and err.value.result.evicted == []
    assert pod_names(kube) == before
    assert kube.get(api_path('v1', 'nodes', name='n1'))['spec']['unschedulable'] is True   # left cordoned, like kubectl


def test_drain_evicts_managed_pods_skips_the_rest_and_forces_unmanaged(nodes):
    kube = nodes
    populate_mixed(kube)
    plan = plan_drain(kube, 'n1', PROTECTED, force=True)
    assert sorted(p['metadata']['name'] for p in plan.evict) == ['bare', 'db-0', 'web-1']
    start = time.monotonic()
    result = drain(kube, 'n1', timeout=10, eviction_timeout=5, protected_namespaces=PROTECTED, force=True)
    elapsed = time.monotonic() - start
    assert result.complete is True and result.cordoned is True
    assert sorted(result.evicted) == ['default/bare', 'default/db-0', 'default/web-1']
    assert sorted(result.skipped) == SKIPPED
    assert result.forced == ['default/bare (no controller, evicted because of force)']
    assert result.message == 'node n1 drained: 3 pod(s) evicted, 4 skipped'
    assert pod_names(kube, 'n1') == ['default/agent-x', 'default/job-x', 'kube-system/etcd-n1', 'monitoring/prom-0']
    assert pod_names(kube, 'n2') == ['default/web-2']                    # other nodes untouched
    assert elapsed < 5
    again = drain(kube, 'n1', timeout=10, eviction_timeout=5, protected_namespaces=PROTECTED, force=False)
    assert again.evicted == [] and again.complete is True and again.cordoned is False


def test_drain_waits_while_a_budget_blocks_then_completes_when_a_replacement_runs(nodes):
    kube = nodes
    add_controller(kube, 'ReplicaSet', 'web', 2)
    add_pod(kube, 'web-a', 'n1', owner=('ReplicaSet', 'web'), labels={'app': 'web'})
    add_pod(kube, 'web-b', 'n2', owner=('ReplicaSet', 'web'), labels={'app': 'web'})
    add_pod(kube, 'other', 'n1', owner=('ReplicaSet', 'other'), labels={'app': 'other'})
    add_pdb(kube, 'web-pdb', 'web', minAvailable=2)
    sleeps = []

    def sleep(seconds):
        # Plays the ReplicaSet: the first retry finds web-a refused (429) while `other` is already evicted.
        if not sleeps:
            assert pod_names(kube, 'n1') == ['default/web-a']
            add_pod(kube, 'web-c', 'n3', owner=('ReplicaSet', 'web'), labels={'app': 'web'})
        sleeps.append(seconds)
        time.sleep(seconds)

    result = drain(kube, 'n1', timeout=20, eviction_timeout=10, protected_namespaces=(), force=False, sleep=sleep)
    assert result.complete is True
    assert result.evicted == ['default/other', 'default/web-a']
    assert len(sleeps) == 1 and sleeps[0] == pytest.approx(0.2)
    assert pod_names(kube) == ['default/web-b', 'default/web-c']


def test_drain_times_out_naming_the_pod_and_its_budget(nodes):
    kube = nodes
    add_pod(kube, 'db-0', 'n1', owner=('StatefulSet', 'db'), labels={'app': 'db'})
    add_pod(kube, 'cache-0', 'n1', owner=('StatefulSet', 'cache'), labels={'app': 'cache'})
    add_pdb(kube, 'db-pdb', 'db', minAvailable=1)
    start = time.monotonic()
    with pytest.raises(DrainError) as err:
        drain(kube, 'n1', timeout=1.5, eviction_timeout=1.0, protected_namespaces=(), force=False)
    elapsed = time.monotonic() - start
    assert 1.0 <= elapsed < 2.5                                          # the per-pod eviction timeout ends it
    assert str(err.value) == ('drain of node n1 did not finish: 1 pod(s) left: default/db-0: eviction refused for 1s by '
                              'PodDisruptionBudget default/db-pdb (minAvailable=1)')
    assert err.value.result.evicted == ['default/cache-0'] and err.value.result.complete is False
    assert pod_names(kube, 'n1') == ['default/db-0']


def test_drain_waits_for_terminating_pods_and_accepts_a_replacement_with_the_same_name(nodes):
    kube = nodes
    add_pod(kube, 'sts-0', 'n1', owner=('StatefulSet', 'sts'), labels={'app': 'sts'}, finalizers=['example.com/hold'])
    old_uid = kube.get(api_path('v1', 'pods', NS, 'sts-0'))['metadata']['uid']
    with pytest.raises(DrainError) as err:
        drain(kube, 'n1', timeout=0.5, eviction_timeout=0.5, protected_namespaces=(), force=False)
    assert str(err.value) == ('drain of node n1 did not finish: 1 pod(s) left: default/sts-0: '
                              'evicted but still terminating after the drain timeout of 0.5s')
    pod = kube.get(api_path('v1', 'pods', NS, 'sts-0'))
    assert pod['metadata']['deletionTimestamp']                          # eviction honours finalizers

    kube.merge_patch(api_path('v1', 'pods', NS, 'sts-0'), {'metadata': {'finalizers': None}})
    add_pod(kube, 'sts-1', 'n1', owner=('StatefulSet', 'sts'), labels={'app': 'sts'}, finalizers=['example.com/hold'])
    calls = []

    def sleep(seconds):
        # The finalizer goes, and the StatefulSet recreates sts-1 (same name, new uid) on another node.
        if not calls:
            kube.merge_patch(api_path('v1', 'pods', NS, 'sts-1'), {'metadata': {'finalizers': None}})
            add_pod(kube, 'sts-1', 'n2', owner=('StatefulSet', 'sts'), labels={'app': 'sts'})
        calls.append(seconds)

    result = drain(kube, 'n1', timeout=5, eviction_timeout=5, protected_namespaces=(), force=False, sleep=sleep)
    assert result.complete is True and result.evicted == ['default/sts-1'] and len(calls) == 1
    assert pod_names(kube) == ['default/sts-1']
    assert kube.get(api_path('v1', 'pods', NS, 'sts-1'))['spec']['nodeName'] == 'n2'
    assert old_uid != kube.get(api_path('v1', 'pods', NS, 'sts-1'))['metadata']['uid']


def test_drain_of_a_missing_node_raises(kube):
    with pytest.raises(DrainError, match='node ghost does not exist'):
        drain(kube, 'ghost', timeout=1, eviction_timeout=1, protected_namespaces=(), force=False)


# --- notification receivers ----------------------------------------------------------------------------------

def mail(subject, body, to=('ops@example.com', 'dev@example.com')):
    msg = EmailMessage()
    msg['From'] = 'steward@example.com'
    msg['To'] = ', '.join(to)
    msg['Subject'] = subject
    msg.set_content(body)
    return msg


def test_smtp_receiver_without_auth(smtp_server):
    with smtplib.SMTP(smtp_server.host, smtp_server.port, timeout=5) as smtp:
        refused = smtp.send_message(mail('node n1 requires maintenance', 'Approve it.\n.leading dot\n'))
    assert refused == {}
    got = smtp_server.wait_for(1)
    assert got[0].mail_from == 'steward@example.com'
    assert got[0].rcpt_tos == ['ops@example.com', 'dev@example.com']
    assert got[0].subject == 'node n1 requires maintenance'
    assert got[0].body == 'Approve it.\n.leading dot\n'                     # dot-stuffing undone
    assert got[0].auth_user is None


@pytest.mark.parametrize('mechanism', ['PLAIN', 'LOGIN'])
def test_smtp_receiver_with_auth(mechanism, smtp_server):
    with smtplib.SMTP(smtp_server.host, smtp_server.port, timeout=5) as smtp:
        smtp.ehlo()
        assert smtp.has_extn('auth') and smtp.esmtp_features['auth'].split() == ['PLAIN', 'LOGIN']
        with pytest.raises(smtplib.SMTPAuthenticationError):
            smtp.user, smtp.password = 'steward', 'wrong'
            smtp.auth(mechanism, getattr(smtp, 'auth_' + mechanism.lower()))
        smtp.user, smtp.password = 'steward', 'secret'
        code, _unused = smtp.auth(mechanism, getattr(smtp, 'auth_' + mechanism.lower()))
        assert code == 235
        smtp.send_message(mail('started', 'Maintenance started.', to=('ops@example.com',)))
    got = smtp_server.wait_for(1)
    assert got[0].auth_user == 'steward' and got[0].body == 'Maintenance started.\n'
    assert smtp_server.auth_attempts == [(mechanism, 'steward'), (mechanism, 'steward')]


def test_smtp_receiver_can_require_auth():
    from support.receivers import SMTPReceiver
    with SMTPReceiver(users={'u': 'p'}, require_auth=True) as server:
        with smtplib.SMTP(server.host, server.port, timeout=5) as smtp:
            with pytest.raises(smtplib.SMTPSenderRefused) as err:
                smtp.sendmail('a@example.com', ['b@example.com'], b'Subject: x\r\n\r\nbody\r\n')
            assert err.value.smtp_code == 530
            smtp.login('u', 'p')
            smtp.sendmail('a@example.com', ['b@example.com'], b'Subject: x\r\n\r\nbody\r\n')
        assert [m.subject for m in server.wait_for(1)] == ['x']


def test_webhook_receiver_records_json_posts_and_fails_on_demand(webhook_server):
    hook = webhook_server.url + '/services/T000/B000/XXX'
    req = urllib.request.Request(hook, data=json.dumps({'channel': '#ops', 'text': 'n1 needs approval'}).encode(),
                                 headers={'Content-Type': 'application/json'})
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.status == 200 and resp.read() == b'ok'
    webhook_server.fail(500, times=1)
    assert requests.post(hook, json={'text': 'lost'}, timeout=5).status_code == 500
    assert requests.post(hook, json={'text': 'back'}, timeout=5).status_code == 200
    webhook_server.fail(503)
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(urllib.request.Request(hook, data=b'{}', headers={'Content-Type': 'application/json'}), timeout=5)
    assert err.value.code == 503
    webhook_server.recover()
    posts = webhook_server.posts('/services/T000/B000/XXX')
    assert [(p.status, p.text) for p in posts] == [(200, 'n1 needs approval'), (500, 'lost'), (200, 'back'), (503, None)]
    assert posts[0].json == {'channel': '#ops', 'text': 'n1 needs approval'}


def test_webhook_receiver_emulates_slack_chat_post_message_threads(webhook_server):
    from support.receivers import WebhookReceiver
    api = webhook_server.slack_api_url + 'chat.postMessage'
    first = requests.post(api, json={'channel': 'C1', 'text': 'node n1: maintenance'}, headers={'Authorization': 'Bearer t'},
                          timeout=5).json()
    assert first['ok'] is True and first['channel'] == 'C1' and first['message']['text'] == 'node n1: maintenance'
    reply = requests.post(api, data={'channel': 'C1', 'text': 'in-maintenance', 'thread_ts': first['ts']}, timeout=5).json()
    assert reply['ok'] is True and float(reply['ts']) > float(first['ts']) and reply['message']['thread_ts'] == first['ts']
    assert requests.post(api, json={'text': 'no channel'}, timeout=5).json() == {'ok': False, 'error': 'channel_not_found'}
    posts = webhook_server.wait_for(3, path='/api/chat.postMessage')
    assert [p.thread_ts for p in posts] == [None, first['ts'], None]
    assert [p.ts for p in posts] == [first['ts'], reply['ts'], None]
    with WebhookReceiver(tokens=['xoxb-good']) as guarded:
        url = guarded.slack_api_url + 'chat.postMessage'
        assert requests.post(url, json={'channel': 'C1', 'text': 'x'}, timeout=5).json() == {'ok': False, 'error': 'invalid_auth'}
        ok = requests.post(url, json={'channel': 'C1', 'text': 'x'}, headers={'Authorization': 'Bearer xoxb-good'}, timeout=5)
        assert ok.json()['ok'] is True
