# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A druid user's quorum-loss journeys on the lab's parts, every piece real (the API emulator with the pod runtime,
the controller's `etcd` loop, S3 over HTTP, etcd and `steward-etcd-member` as processes): a 3-member `Etcd` with
backups in S3

  (a) loses two members for good (their etcd hangs: the processes are frozen, so no restart brings them back; their
      PVCs are deleted) -> the loop saves the surviving member's data to the store, stops every member, recreates
      the Leases, member 0 restores alone, the others rejoin as learners: every acknowledged key is there;
  (b) loses all three and every PVC, and an operator asks with a QuorumLossRecoveryTask -> recovered from the
      store: every key up to the last full snapshot is there, the Events say the loss window, the task succeeds.

A member whose etcd process is merely killed is restarted by its pod and keeps its data (no recovery is due, and
the loop waits); freezing is how a member is lost for good here. The frozen processes are killed once the loop has
scaled the StatefulSet to 0, as a kubelet kills what does not stop."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
import requests

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

from lab.pods import images

from test_druid_lab_journey import ETCD, NS, _condition, _wait, druid_lab   # the druid journey's helpers, one copy

pytestmark = pytest.mark.skipif(images.etcd_binary('3.5') is None, reason='no etcd 3.5 binary: run make all')
PODS = '/api/v1/namespaces/%s/pods' % NS
PVCS = '/api/v1/namespaces/%s/persistentvolumeclaims' % NS
TASKS = api_path('druid.gardener.cloud/v1alpha1', 'etcdoperatortasks', NS)
FLAGS = ['--controllers', 'etcd,etcd-tasks', '--etcd-status-sync-period', '1s', '--etcd-member-unknown-threshold', '5s',
         '--etcd-member-notready-threshold', '3s']
BUCKET = 'etcd-quorum'


def _etcdctl(*args, endpoint):
    etcdctl = os.path.join(os.path.dirname(images.etcd_binary('3.5')), 'etcdctl')
    return subprocess.run([etcdctl, '--endpoints', endpoint, '--command-timeout', '10s'] + list(args), check=True,
                          capture_output=True, text=True, timeout=30).stdout


def _pods(session, url):
    return {p['metadata']['name']: p for p in session.get(url + PODS).json()['items']}


def _etcd_pid(pod):
    status = next(s for s in pod['status']['containerStatuses'] if s['name'] == 'etcd')
    return int(status['containerID'].split('://', 1)[1])


def _freeze(session, url, names):
    """The members' etcd containers (the wrapper and etcd, one process group each) hang: SIGSTOP."""
    pods = _pods(session, url)
    groups = [_etcd_pid(pods[n]) for n in names]
    for pid in groups:
        os.killpg(pid, signal.SIGSTOP)
    return groups


def _events(session, url):
    items = session.get(url + '/api/v1/namespaces/%s/events' % NS).json()['items']
    # in the order they were posted (an Event's name ends in random hex: sorting by it shuffled them)
    ordered = sorted(items, key=lambda e: (e.get('eventTime') or '', int(e['metadata'].get('resourceVersion') or 0)))
    return [(e['reason'], e.get('message', '')) for e in ordered if (e.get('involvedObject') or {}).get('name') == 'etcd-main']


def _wait_event(session, url, reason, deadline, count=1):
    """The messages of the Events `reason`, once there are `count` of them."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        found = [m for r, m in _events(session, url) if r == reason]
        if len(found) >= count:
            return found
        time.sleep(0.5)
    raise AssertionError('no Event %s within %ss: %s' % (reason, deadline, _events(session, url)[-15:]))


def _kill_frozen(groups):
    for pid in groups:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _all_keys_everywhere(session, url, keys):
    for name, pod in _pods(session, url).items():
        endpoint = 'http://%s:2379' % pod['status']['podIP']
        got = _etcdctl('get', 'k', '--prefix', '--keys-only', '--consistency=s', endpoint=endpoint).split()
        assert set(keys) <= set(got), '%s misses %s' % (name, sorted(set(keys) - set(got)))


def _create_etcd(session, url, bucket, replicas=3):
    """A druid user's `Etcd` with `replicas` members, backups in the lab's S3 `bucket` (the journeys' one manifest)."""
    answer = session.post(url + api_path('druid.gardener.cloud/v1alpha1', 'etcds', NS), json={
        'apiVersion': 'druid.gardener.cloud/v1alpha1', 'kind': 'Etcd',
        'metadata': {'name': 'etcd-main', 'namespace': NS},
        'spec': {'replicas': replicas, 'labels': {'app': 'etcd-main'},
                 'etcd': {'quota': '2Gi', 'heartbeatDuration': '2s'},
                 'backup': {'fullSnapshotSchedule': '0 */24 * * *', 'deltaSnapshotPeriod': '60s',
                            'store': {'provider': 'aws', 'container': bucket, 'prefix': 'demo--etcd-main',
                                      'secretRef': {'name': 'etcd-backup-aws'}}}}})
    assert answer.status_code == 201, answer.text


def _recovered(session, url, deadline):
    return _wait(session, url, lambda s: s.get('ready') and s.get('clusterSize') == 3 and s.get('readyReplicas') == 3
                 and _condition(s, 'AllMembersReady') == 'True' and 'cluster.steward.io/quorum-loss-recovery' not in (
                     session.get(url + ETCD).json()['metadata'].get('annotations') or {}), deadline,
                 'three members Ready after the recovery')


def test_quorum_loss_of_two_members_and_of_all_three(s3_server, tmp_path):
    frozen = []
    with druid_lab(s3_server, tmp_path, BUCKET, FLAGS) as (kube, session):
        url = kube.url
        try:
            _create_etcd(session, url, BUCKET)
            _recovered(session, url, 120)
            _wait(session, url, lambda s: _condition(s, 'BackupReady') == 'True', 60, 'BackupReady')
            pods = _pods(session, url)
            leader = 'http://%s:2379' % pods['etcd-main-2']['status']['podIP']
            first = ['k%02d' % i for i in range(20)]
            for key in first:
                _etcdctl('put', key, 'v-' + key, endpoint=leader)

            # (a) members 0 and 1 hang for good, their PVCs deleted; member 2 holds every acknowledged key
            time.sleep(1)
            frozen = _freeze(session, url, ['etcd-main-0', 'etcd-main-1'])
            for claim in [c['metadata']['name'] for c in session.get(url + PVCS).json()['items']
                          if c['metadata']['name'].endswith(('etcd-main-0', 'etcd-main-1'))]:
                session.delete(url + PVCS + '/' + claim)
            started = _wait_event(session, url, 'QuorumLossRecoveryStarted', 60)
            assert "recover from member etcd-main-2's data" in started[0] and 'loss window' in started[0]
            _wait_event(session, url, 'QuorumLossSourceSaved', 30)
            _wait_event(session, url, 'QuorumLossMembersStopped', 30)
            _kill_frozen(frozen)
            done = _wait_event(session, url, 'QuorumLossRecovered', 150)
            assert "etcd-main-2's data" in done[0] and 'loss window' in done[0]
            reasons = [r for r, _m in _events(session, url)]
            for step in ('QuorumLossLeasesRecreated', 'QuorumLossFirstMemberStarted', 'QuorumLossMembersRejoining'):
                assert step in reasons
            _recovered(session, url, 60)
            _all_keys_everywhere(session, url, first)

            # (b) all three hang and every PVC is deleted: from the store (a full snapshot taken after the writes)
            pods = _pods(session, url)
            second = ['k%02d' % i for i in range(20, 30)]
            for key in second:
                _etcdctl('put', key, 'v-' + key, endpoint='http://%s:2379' % pods['etcd-main-0']['status']['podIP'])
            saved = requests.get('http://%s:8080/snapshot/full' % pods['etcd-main-0']['status']['podIP'], timeout=60)
            assert saved.status_code == 200, saved.text
            # the on-demand snapshot is verified and counts: the full-snap Lease names its revision (what the
            # recovery below plans from), as for the backup runner's own
            full_lease = session.get(url + api_path('coordination.k8s.io/v1', 'leases', NS, 'etcd-main-full-snap')).json()
            assert full_lease['metadata']['annotations']['cluster.steward.io/verified-revision'] == str(
                saved.json()['end_revision']), (full_lease['metadata'], saved.json())
            frozen = _freeze(session, url, sorted(pods))
            for claim in [c['metadata']['name'] for c in session.get(url + PVCS).json()['items']]:
                session.delete(url + PVCS + '/' + claim)
            _wait(session, url, lambda s: _condition(s, 'Ready') == 'False', 30, 'Ready=False (QuorumLost)')
            answer = session.post(url + TASKS, json={
                'apiVersion': 'druid.gardener.cloud/v1alpha1', 'kind': 'EtcdOperatorTask',
                'metadata': {'name': 'recover', 'namespace': NS},
                'spec': {'type': 'QuorumLossRecoveryTask', 'ownerEtcdRefrence': {'name': 'etcd-main', 'namespace': NS}}})
            assert answer.status_code == 201, answer.text
            started = _wait_event(session, url, 'QuorumLossRecoveryStarted', 60, count=2)
            assert any('verified full snapshot' in m and 'loss window' in m for m in started)
            _wait_event(session, url, 'QuorumLossMembersStopped', 30, count=2)
            _kill_frozen(frozen)
            frozen = []
            done = _wait_event(session, url, 'QuorumLossRecovered', 150, count=2)
            assert any('the verified full snapshot' in m and 'loss window' in m for m in done)
            status = _recovered(session, url, 60)
            assert not [e for e in status.get('lastErrors') or [] if e['code'] == 'ERR_QUORUM_LOST']
            assert status['lastOperation']['state'] in ('Succeeded', 'Processing')
            _all_keys_everywhere(session, url, first + second)
            end = time.monotonic() + 30
            while (session.get(url + TASKS + '/recover').json().get('status') or {}).get('state') != 'Succeeded':
                assert time.monotonic() < end, session.get(url + TASKS + '/recover').json().get('status')
                time.sleep(0.5)
            annotations = session.get(url + ETCD).json()['metadata'].get('annotations') or {}
            assert 'cluster.steward.io/recover-quorum-loss' not in annotations
        finally:
            _kill_frozen(frozen)
