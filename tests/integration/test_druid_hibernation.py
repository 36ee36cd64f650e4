# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hibernation on the lab's parts (the API emulator with the pod runtime, the controller's `etcd` loop): an `Etcd` of
three members holds keys, is scaled to 0 (Gardener's hibernation: the pods go, their volumes stay) and woken again;
the same members come back on their data (on a new image tag given with the wake), every key there. Woken with `spec.etcd.peerUrlTls` newly asked, they wake
over the http peer URLs their data names and then turn peer TLS on."""

from __future__ import annotations

import base64
import time

import pytest
import requests

from lab.pods import images
from support.druid_lab import MERGE, WRAPPER, DruidLab


def _b64(text):
    return base64.b64encode(text.encode()).decode()


def _scale(lab, replicas, extra=None):
    spec = dict({'replicas': replicas}, **(extra or {}))
    answer = lab.session.patch(lab.kube.url + lab.etcd_path, headers=MERGE, json={
        'metadata': {'annotations': {'gardener.cloud/operation': 'reconcile'}}, 'spec': spec})
    assert answer.status_code == 200, answer.text


def _member_ids(lab):
    for url in lab.client_urls():
        try:
            answer = requests.post(url + '/v3/cluster/member/list', json={}, timeout=5)
            if answer.status_code == 200:
                return sorted(m['ID'] for m in answer.json().get('members') or [])
        except requests.RequestException:
            continue
    return []


@pytest.mark.skipif(images.etcd_binary('3.5') is None, reason='no etcd 3.5 binary: run make all')
def test_an_etcd_scaled_to_zero_wakes_up_on_its_data(tmp_path):
    lab = DruidLab(str(tmp_path))
    try:
        lab.start()
        lab.create(3, 'v3.5.21')
        lab.wait(lambda: lab.all_ready(3), 240, 'three members Ready')
        url = lab.client_urls()[0]
        for i in range(20):
            put = requests.post(url + '/v3/kv/put', json={'key': _b64('k/%02d' % i), 'value': _b64('v%d' % i)},
                                timeout=10)
            assert put.status_code == 200, put.text
        ids = _member_ids(lab)
        assert len(ids) == 3

        _scale(lab, 0)
        lab.wait(lambda: not lab.pods(), 120, 'every pod gone')
        # hibernated: the members' Leases go with their pods (none is taken for a lost member), nothing is recovered
        lab.wait(lambda: not lab.status().get('members'), 60, 'no member left in the status')
        assert not lab.events('QuorumLossRecoveryPlanned') and not lab.events('QuorumLossRecoveryStarted')
        assert lab.status()['replicas'] == 0
        # woken with a new image tag in the same apply: the members start on the new template (no pod runs, nothing
        # to roll), not on the old one
        _scale(lab, 3, {'etcd': {'image': WRAPPER + 'v3.5.22'}})
        lab.wait(lambda: lab.all_ready(3), 240, 'three members Ready after waking')
        assert _member_ids(lab) == ids            # the same members, on their data
        images_now = {p['metadata']['name']: next(c['image'] for c in p['spec']['containers'] if c['name'] == 'etcd')
                      for p in lab.pods()}
        assert set(images_now.values()) == {WRAPPER + 'v3.5.22'}, images_now
        woke = [e.get('message') or '' for e in lab.events('ScaledUp')]
        assert any(m.startswith('waking from 0 replicas: scaling up to 3 with pod template') for m in woke), woke
        assert not lab.events('MemberRestarted')
        expected = {'k/%02d' % i: 'v%d' % i for i in range(20)}
        for member_url in lab.client_urls():
            deadline = time.monotonic() + 15
            while lab.read_prefix(member_url, 'k/') != expected and time.monotonic() < deadline:
                time.sleep(0.5)
            assert lab.read_prefix(member_url, 'k/') == expected, member_url
    finally:
        lab.stop()


def _peer_urls(lab):
    for url in lab.client_urls():
        try:
            answer = requests.post(url + '/v3/cluster/member/list', json={}, timeout=5)
            if answer.status_code == 200:
                return sorted(u for m in answer.json().get('members') or [] for u in m.get('peerURLs') or [])
        except requests.RequestException:
            continue
    return []


@pytest.mark.skipif(images.etcd_binary('3.5') is None, reason='no etcd 3.5 binary: run make all')
def test_an_etcd_woken_with_peer_tls_newly_asked_wakes_over_http_then_turns_it_on(tmp_path):
    """The members' data names http peer URLs: woken with https listeners only they could never reach each other.
    They wake over http, then the template with peer TLS rolls them and each program updates its member's URLs."""
    lab = DruidLab(str(tmp_path))
    try:
        lab.start()
        pem = lab.pod_pki(str(tmp_path / 'pki'))
        lab.secret('ca-etcd-peer', {'ca.crt': pem['ca.crt']})
        lab.secret('etcd-peer-server-tls', {'tls.crt': pem['server.crt'], 'tls.key': pem['server.key']},
                   'kubernetes.io/tls')
        lab.create(3, 'v3.5.21')
        lab.wait(lambda: lab.all_ready(3), 240, 'three members Ready')
        url = lab.client_urls()[0]
        for i in range(10):
            put = requests.post(url + '/v3/kv/put', json={'key': _b64('t/%02d' % i), 'value': _b64('v%d' % i)},
                                timeout=10)
            assert put.status_code == 200, put.text
        ids = _member_ids(lab)
        assert all(u.startswith('http://') for u in _peer_urls(lab))
        _scale(lab, 0)
        lab.wait(lambda: not lab.pods(), 120, 'every pod gone')
        lab.wait(lambda: not lab.status().get('members'), 60, 'no member left in the status')
        assert lab.status()['peerUrlTLSEnabled'] is False     # kept while hibernated: what the data names

        _scale(lab, 3, {'etcd': {'peerUrlTls': {'tlsCASecretRef': {'name': 'ca-etcd-peer'},
                                                'serverTLSSecretRef': {'name': 'etcd-peer-server-tls'}}}})
        lab.wait(lambda: lab.all_ready(3) and lab.status().get('peerUrlTLSEnabled') is True, 360,
                 'three members Ready on https peer URLs')
        peer_urls = _peer_urls(lab)
        assert len(peer_urls) == 3 and all(u.startswith('https://') for u in peer_urls), peer_urls
        assert _member_ids(lab) == ids
        expected = {'t/%02d' % i: 'v%d' % i for i in range(10)}
        for member_url in lab.client_urls():
            deadline = time.monotonic() + 15
            while lab.read_prefix(member_url, 't/') != expected and time.monotonic() < deadline:
                time.sleep(0.5)
            assert lab.read_prefix(member_url, 't/') == expected, member_url
        woke = [e.get('message') or '' for e in lab.events('ScaledUp')]
        assert any('waking from 0 replicas' in m and 'over http peer URLs' in m for m in woke), woke
    finally:
        lab.stop()
