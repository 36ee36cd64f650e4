# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""steward.cluster.etcd_druid_info in real ansible-playbook runs against the lab's API emulator over HTTP: druid
Etcd objects applied as a druid user writes them, their status written on the status subresource as druid's
controller writes it, and the module's report (filters, the healthy verdict, check mode, the etcd action group's
module_defaults, a refusal naming its option)."""

from __future__ import annotations

from support.ansible import local_play, run_playbook

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

API = 'druid.gardener.cloud/v1alpha1'
TIME = '2026-01-01T00:00:00Z'


def etcd(name, namespace, replicas, role):
    return {'apiVersion': API, 'kind': 'Etcd',
            'metadata': {'name': name, 'namespace': namespace, 'labels': {'app': name, 'role': role}},
            'spec': {'labels': {'app': name, 'role': role}, 'replicas': replicas, 'etcd': {'quota': '8Gi'},
                     'backup': {'store': {'provider': 'aws', 'container': 'etcd-backups', 'prefix': namespace + '--' + name,
                                          'secretRef': {'name': 'etcd-backup-aws'}}}}}


def cond(kind, status, reason):
    return {'type': kind, 'status': status, 'reason': reason, 'message': reason, 'lastTransitionTime': TIME,
            'lastUpdateTime': TIME}


def write_status(kube, name, namespace, ready, members):
    status = {'observedGeneration': 1, 'ready': ready, 'clusterSize': len(members), 'replicas': len(members),
              'currentReplicas': len(members), 'readyReplicas': sum(1 for m in members if m[2] == 'Ready'),
              'conditions': [cond('Ready', 'True' if ready else 'False', 'Quorate' if ready else 'QuorumLost'),
                             cond('AllMembersReady', 'True' if ready else 'False',
                                  'AllMembersReady' if ready else 'NotAllMembersReady'),
                             cond('BackupReady', 'True', 'FullBackupSucceeded')],
              'members': [{'name': n, 'id': i, 'role': r, 'status': s, 'reason': 'LeaseSucceeded' if s == 'Ready'
                           else 'LeaseExpired', 'lastTransitionTime': TIME} for n, i, s, r in members],
              'lastOperation': {'type': 'Reconcile', 'state': 'Succeeded', 'description': 'done',
                                'lastUpdateTime': TIME, 'runID': 'run-1'},
              'lastErrors': [] if ready else [{'code': 'ERR_QUORUM', 'description': 'two members lost',
                                               'observedAt': TIME}]}
    kube.merge_patch(api_path(API, 'etcds', namespace, name, 'status'), {'status': status})


def test_etcd_druid_info_reports_status_and_verdict(kube, tmp_path):
    kubeconfig = kube.server.write_kubeconfig(str(tmp_path / 'kubeconfig'))
    for name, namespace, replicas, role in [('etcd-main', 'shoot--a', 3, 'main'), ('etcd-events', 'shoot--a', 1, 'events'),
                                            ('etcd-main', 'shoot--b', 3, 'main')]:
        kube.create(api_path(API, 'etcds', namespace), etcd(name, namespace, replicas, role))
    write_status(kube, 'etcd-main', 'shoot--a', True, [('etcd-main-0', 'a0', 'Ready', 'Leader'),
                                                       ('etcd-main-1', 'a1', 'Ready', 'Member'),
                                                       ('etcd-main-2', 'a2', 'Ready', 'Member')])
    write_status(kube, 'etcd-main', 'shoot--b', False, [('etcd-main-0', 'b0', 'Ready', 'Leader'),
                                                        ('etcd-main-1', 'b1', 'Unknown', 'Member'),
                                                        ('etcd-main-2', 'b2', 'Unknown', 'Member')])
    play = local_play([
        {'name': 'all', 'steward.cluster.etcd_druid_info': {}},
        {'name': 'one namespace', 'steward.cluster.etcd_druid_info': {'namespace': 'shoot--a'}},
        {'name': 'by label', 'steward.cluster.etcd_druid_info': {'label_selectors': ['role=main', 'app']}},
        {'name': 'by name in check mode', 'check_mode': True,
         'steward.cluster.etcd_druid_info': {'namespace': 'shoot--a', 'name': 'etcd-main'}},
        {'name': 'missing', 'steward.cluster.etcd_druid_info': {'namespace': 'shoot--a', 'name': 'nope'}},
        {'name': 'bad selector', 'ignore_errors': True,
         'steward.cluster.etcd_druid_info': {'label_selectors': ['role in (main']}},
    ], module_defaults={'group/steward.cluster.etcd': {'kubeconfig': kubeconfig, 'request_timeout': 10}})
    result = run_playbook(play)
    assert result.rc == 0, result.stdout[-3000:]
    assert result.changed() == 0

    everything = result.result('all')
    assert [(e['namespace'], e['name']) for e in everything['etcds']] == [
        ('shoot--a', 'etcd-events'), ('shoot--a', 'etcd-main'), ('shoot--b', 'etcd-main')]
    assert everything['healthy'] is False
    events, main_a, main_b = everything['etcds']
    assert events['healthy'] is False and events['problems'][0] == 'not reconciled yet'
    assert main_a['healthy'] is True and main_a['problems'] == []
    assert (main_a['replicas'], main_a['ready'], main_a['cluster_size'], main_a['ready_replicas'], main_a['leader']) == (
        3, True, 3, 3, 'etcd-main-0')
    assert main_a['conditions']['Ready']['reason'] == 'Quorate'
    assert main_a['last_operation']['run_id'] == 'run-1'
    assert main_b['healthy'] is False
    assert main_b['problems'] == ['not ready (1 of 3 replicas ready)', 'Ready=False (QuorumLost)',
                                  'AllMembersReady=False (NotAllMembersReady)']
    assert [m['status'] for m in main_b['members']] == ['Ready', 'Unknown', 'Unknown']
    assert main_b['last_errors'] == [{'code': 'ERR_QUORUM', 'description': 'two members lost', 'observed_at': TIME}]

    assert [e['name'] for e in result.result('one namespace')['etcds']] == ['etcd-events', 'etcd-main']
    assert [(e['namespace'], e['name']) for e in result.result('by label')['etcds']] == [
        ('shoot--a', 'etcd-main'), ('shoot--b', 'etcd-main')]
    checked = result.result('by name in check mode')
    assert checked['healthy'] is True and [e['name'] for e in checked['etcds']] == ['etcd-main']
    missing = result.result('missing')
    assert missing['etcds'] == [] and missing['healthy'] is False
    bad = result.result('bad selector')
    assert bad['failed'] and bad['field'].startswith('label_selectors[0]'), bad
