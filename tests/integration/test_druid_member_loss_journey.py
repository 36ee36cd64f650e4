# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A druid user's member-loss journey on the lab's parts, every piece real (the API emulator with the pod runtime,
the controller's `etcd` loop, S3 over HTTP, etcd and `steward-etcd-member` as processes):

  a 3-member `Etcd` loses one member with its disk (its etcd killed, its PVC and pod deleted) -> the pod comes back
  on a new, empty PVC and joins as a new member (a new member ID; the stale entry removed), the other two keep their
  IDs, every acknowledged key is on every member and the conditions say AllMembersReady again; then the `Etcd` is
  deleted -> every component it owned goes, the finalizer last, and no member process is left running."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

from lab.pods import images

from test_druid_lab_journey import ETCD, NS, _condition, _wait, druid_lab   # the druid journey's helpers, one copy
from test_druid_quorum_loss_journey import (PODS, PVCS, _all_keys_everywhere, _create_etcd, _etcd_pid, _etcdctl, _pods,
                                            _recovered)

pytestmark = pytest.mark.skipif(images.etcd_binary('3.5') is None, reason='no etcd 3.5 binary: run make all')
FLAGS = ['--controllers', 'etcd', '--etcd-status-sync-period', '1s', '--etcd-member-unknown-threshold', '5s',
         '--etcd-member-notready-threshold', '3s']
BUCKET = 'etcd-member-loss'


def _member_ids(endpoint):
    """{member name: hex ID} as etcd lists them (learners included)."""
    members = json.loads(_etcdctl('member', 'list', '-w', 'json', endpoint=endpoint)).get('members') or []
    return {m.get('name', ''): '%x' % m['ID'] for m in members}


def _alive(pid):
    """Running, not a zombie its parent has yet to reap."""
    try:
        with open('/proc/%d/stat' % pid) as stat:
            return stat.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def test_a_member_lost_with_its_disk_comes_back_as_a_new_member_and_deleting_the_etcd_removes_everything(
        s3_server, tmp_path):
    with druid_lab(s3_server, tmp_path, BUCKET, FLAGS) as (kube, session):
        url = kube.url
        _create_etcd(session, url, BUCKET)
        _recovered(session, url, 120)
        _wait(session, url, lambda s: _condition(s, 'BackupReady') == 'True', 60, 'BackupReady')
        pods = _pods(session, url)
        survivor = 'http://%s:2379' % pods['etcd-main-0']['status']['podIP']
        keys = ['k%02d' % i for i in range(20)]
        for key in keys:
            _etcdctl('put', key, 'v-' + key, endpoint=survivor)
        before = _member_ids(survivor)
        assert sorted(before) == ['etcd-main-0', 'etcd-main-1', 'etcd-main-2'], before

        # member 1 lost with its disk: etcd killed, then its PVC and its pod deleted (as a node failure does)
        lost_pid = _etcd_pid(pods['etcd-main-1'])
        os.killpg(lost_pid, signal.SIGKILL)
        for claim in [c['metadata']['name'] for c in session.get(url + PVCS).json()['items']
                      if c['metadata']['name'].endswith('etcd-main-1')]:
            assert session.delete(url + PVCS + '/' + claim).status_code in (200, 202)
        assert session.delete(url + PODS + '/etcd-main-1').status_code in (200, 202)

        def replaced():
            ids = _member_ids(survivor)
            return (ids.get('etcd-main-1') not in (None, before['etcd-main-1']) and len(ids) == 3) and ids
        end, after = time.monotonic() + 120, None
        while time.monotonic() < end and not after:
            try:
                after = replaced()
            except Exception:   # noqa: BLE001 - etcdctl while the membership changes; tried again
                after = None
            time.sleep(0.5)
        assert after, 'member etcd-main-1 not replaced by a new member within 120 s: %s' % _member_ids(survivor)
        assert after['etcd-main-0'] == before['etcd-main-0'] and after['etcd-main-2'] == before['etcd-main-2'], (
            before, after)
        status = _recovered(session, url, 90)
        assert _condition(status, 'AllMembersReady') == 'True'
        _all_keys_everywhere(session, url, keys)
        claims = [c['metadata']['name'] for c in session.get(url + PVCS).json()['items']]
        assert len([c for c in claims if c.endswith('etcd-main-1')]) == 1, claims
        # an Event says what was done: the member named with its old and new id (the status saw both)
        replaced_events = [e['message'] for e in session.get(url + '/api/v1/namespaces/%s/events' % NS).json()['items']
                           if e.get('reason') == 'MemberReplaced']
        assert [m for m in replaced_events if m.startswith('etcd-main-1 is a new etcd member %s (was %s)' % (
            after['etcd-main-1'], before['etcd-main-1']))], replaced_events

        # the Etcd deleted: every owned component goes, then the finalizer, and no member process stays
        pids = [_etcd_pid(p) for p in _pods(session, url).values()]
        assert session.delete(url + ETCD).status_code in (200, 202)
        end = time.monotonic() + 90
        while time.monotonic() < end and session.get(url + ETCD).status_code != 404:
            time.sleep(0.25)
        assert session.get(url + ETCD).status_code == 404, session.get(url + ETCD).json().get('metadata')
        owned = [
            api_path('apps/v1', 'statefulsets', NS, 'etcd-main'),
            api_path('v1', 'services', NS, 'etcd-main-client'),
            api_path('v1', 'services', NS, 'etcd-main-peer'),
            api_path('coordination.k8s.io/v1', 'leases', NS, 'etcd-main-0'),
            api_path('coordination.k8s.io/v1', 'leases', NS, 'etcd-main-full-snap'),
            api_path('coordination.k8s.io/v1', 'leases', NS, 'etcd-main-delta-snap'),
        ]
        assert [p for p in owned if session.get(url + p).status_code != 404] == []
        end = time.monotonic() + 60
        while time.monotonic() < end and (_pods(session, url) or any(_alive(p) for p in pids)):
            time.sleep(0.25)
        assert not _pods(session, url) and not [p for p in pids if _alive(p)]
