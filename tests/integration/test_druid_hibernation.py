# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hibernation on the lab's parts (the API emulator with the pod runtime, the controller's `etcd` loop): an `Etcd` of
three members holds keys, is scaled to 0 (Gardener's hibernation: the pods go, their volumes stay) and woken again;
the same members come back on their data (on a new image tag given with the wake), every key there. Woken with
`spec.etcd.peerUrlTls` newly asked, they wake over the http peer URLs their data names and then turn peer TLS on."""

from __future__ import annotations

import pytest

from lab.pods import images
from support.druid_lab import MERGE, WRAPPER, DruidLab


def _scale(lab, replicas, etcd=None):
    """A druid user's change of replicas (and of `spec.etcd`), with the reconcile annotation."""
    spec = dict({'replicas': replicas}, **({'etcd': etcd} if etcd else {}))
    answer = lab.session.patch(lab.kube.url + lab.etcd_path, headers=MERGE, json={
        'metadata': {'annotations': {'gardener.cloud/operation': 'reconcile'}}, 'spec': spec})
    assert answer.status_code == 200, answer.text


def _member_ids(lab):
    return sorted(m['ID'] for m in lab.member_list())


def _peer_urls(lab):
    return sorted(u for m in lab.member_list() for u in m.get('peerURLs') or [])


def _hibernate(lab):
    """Scale to 0 and wait until it is hibernated: no pod, and no member left in the status (the members' Leases go
    with their pods: none is taken for a lost member, nothing is recovered)."""
    _scale(lab, 0)
    lab.wait(lambda: not lab.pods(), 120, 'every pod gone')
    lab.wait(lambda: not lab.status().get('members'), 60, 'no member left in the status')
    assert not lab.events('QuorumLossRecoveryPlanned') and not lab.events('QuorumLossRecoveryStarted')
    assert lab.status()['replicas'] == 0


@pytest.mark.skipif(images.etcd_binary('3.5') is None, reason='no etcd 3.5 binary: run make all')
def test_an_etcd_scaled_to_zero_wakes_up_on_its_data(tmp_path):
    lab = DruidLab(str(tmp_path))
    try:
        lab.start()
        lab.create(3, 'v3.5.21')
        lab.wait(lambda: lab.all_ready(3), 240, 'three members Ready')
        expected = lab.put_keys('k/', 20)
        ids = _member_ids(lab)
        assert len(ids) == 3
        _hibernate(lab)

        # woken with a new image tag in the same apply: the members start on the new template (no pod runs, nothing
        # to roll), not on the old one
        _scale(lab, 3, {'image': WRAPPER + 'v3.5.22'})
        lab.wait(lambda: lab.all_ready(3), 240, 'three members Ready after waking')
        assert _member_ids(lab) == ids            # the same members, on their data
        images_now = {p['metadata']['name']: next(c['image'] for c in p['spec']['containers'] if c['name'] == 'etcd')
                      for p in lab.pods()}
        assert set(images_now.values()) == {WRAPPER + 'v3.5.22'}, images_now
        woke = [e.get('message') or '' for e in lab.events('ScaledUp')]
        assert any(m.startswith('waking from 0 replicas: scaling up to 3 with pod template') for m in woke), woke
        assert not lab.events('MemberRestarted')
        lab.assert_keys_everywhere('k/', expected)
    finally:
        lab.stop()


@pytest.mark.skipif(images.etcd_binary('3.5') is None, reason='no etcd 3.5 binary: run make all')
def test_an_etcd_woken_with_peer_tls_newly_asked_wakes_over_http_then_turns_it_on(tmp_path):
    """The members' data names http peer URLs: woken with https listeners only they could never reach each other.
    They wake over http, then the template with peer TLS rolls them and each program updates its member's URLs."""
    lab = DruidLab(str(tmp_path))
    try:
        lab.start()
        peer_tls = lab.peer_tls_secrets(str(tmp_path / 'pki'))
        lab.create(3, 'v3.5.21')
        lab.wait(lambda: lab.all_ready(3), 240, 'three members Ready')
        expected = lab.put_keys('t/', 10)
        ids = _member_ids(lab)
        assert all(u.startswith('http://') for u in _peer_urls(lab))
        _hibernate(lab)
        assert lab.status()['peerUrlTLSEnabled'] is False     # kept while hibernated: what the data names

        _scale(lab, 3, {'peerUrlTls': peer_tls})
        lab.wait(lambda: lab.all_ready(3) and lab.status().get('peerUrlTLSEnabled') is True, 360,
                 'three members Ready on https peer URLs')
        peer_urls = _peer_urls(lab)
        assert len(peer_urls) == 3 and all(u.startswith('https://') for u in peer_urls), peer_urls
        assert _member_ids(lab) == ids
        lab.assert_keys_everywhere('t/', expected)
        woke = [e.get('message') or '' for e in lab.events('ScaledUp')]
        assert any('waking from 0 replicas' in m and 'over http peer URLs' in m for m in woke), woke
    finally:
        lab.stop()
