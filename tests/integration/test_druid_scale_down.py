# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A druid user's scale-down on the lab's parts, every piece real (the API emulator with the pod runtime, the
controller's `etcd` loop, S3 over HTTP, etcd and `steward-etcd-member` as processes): a 3-member `Etcd` with keys is
scaled to 1 with the reconcile annotation -> the remaining member lists ONE member (the removed ordinals' etcd
membership is gone, not left as two dead peers that take its quorum), it serves writes, and every key is there."""

from __future__ import annotations

import json
import time

import pytest

from lab.pods import images

from test_druid_lab_journey import ETCD, _condition, _wait, druid_lab   # the druid journeys' helpers, one copy
from test_druid_quorum_loss_journey import _create_etcd, _etcdctl, _pods, _recovered

pytestmark = pytest.mark.skipif(images.etcd_binary('3.5') is None, reason='no etcd 3.5 binary: run make all')
FLAGS = ['--controllers', 'etcd', '--etcd-status-sync-period', '1s']
BUCKET = 'etcd-scale-down'
MERGE = {'Content-Type': 'application/merge-patch+json'}


def _member_names(endpoint):
    members = json.loads(_etcdctl('member', 'list', '-w', 'json', endpoint=endpoint)).get('members') or []
    return sorted(m.get('name', '') for m in members)


def test_scaling_from_three_to_one_removes_the_removed_ordinals_members(s3_server, tmp_path):
    with druid_lab(s3_server, tmp_path, BUCKET, FLAGS) as (kube, session):
        url = kube.url
        _create_etcd(session, url, BUCKET)
        _recovered(session, url, 120)
        survivor = 'http://%s:2379' % _pods(session, url)['etcd-main-0']['status']['podIP']
        keys = ['k%02d' % i for i in range(20)]
        for key in keys:
            _etcdctl('put', key, 'v-' + key, endpoint=survivor)
        assert _member_names(survivor) == ['etcd-main-0', 'etcd-main-1', 'etcd-main-2']

        started = time.monotonic()
        answer = session.patch(url + ETCD, headers=MERGE, json={
            'metadata': {'annotations': {'gardener.cloud/operation': 'reconcile'}}, 'spec': {'replicas': 1}})
        assert answer.status_code == 200, answer.text
        end, names = time.monotonic() + 90, None
        while time.monotonic() < end:
            try:
                names = _member_names(survivor)
            except Exception:   # noqa: BLE001 - etcdctl while the membership changes; tried again
                names = None
            if names == ['etcd-main-0'] and sorted(_pods(session, url)) == ['etcd-main-0']:
                break
            time.sleep(1)
        assert names == ['etcd-main-0'], 'etcd still lists %s %.0f s after the scale-down' % (
            names, time.monotonic() - started)
        print('scale-down 3 -> 1: one member listed and one pod left after %.1f s' % (time.monotonic() - started))
        # the going Leases are deleted once their pods are gone (row 3): status lists the one member left
        status = _wait(session, url, lambda s: s.get('ready') and s.get('clusterSize') == 1
                       and _condition(s, 'AllMembersReady') == 'True'
                       and [m['name'] for m in s.get('members') or []] == ['etcd-main-0'], 60, 'one member Ready')
        assert status['members'][0]['role'] == 'Leader'
        reasons = [e['reason'] for e in session.get(url + '/api/v1/namespaces/demo/events').json()['items']
                   if (e.get('involvedObject') or {}).get('name') == 'etcd-main']
        assert {'MembersLeaving', 'ScaledDown', 'SuperfluousLeasesDeleted'} <= set(reasons), reasons
        _etcdctl('put', 'after-scale-down', 'yes', endpoint=survivor)
        got = _etcdctl('get', 'k', '--prefix', '--keys-only', endpoint=survivor).split()
        assert set(keys) <= set(got), sorted(set(keys) - set(got))
        assert _etcdctl('get', 'after-scale-down', '--print-value-only', endpoint=survivor) == 'yes\n'
