"""etcd_druid_info: its options parsed before any request (druid/params.py) and the report of one Etcd
(druid/status.describe_etcd, the module a thin shell over it): conditions by type, members, last operation and errors, and the healthy verdict with the
problems that make it false."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.druid.params import parse_etcd_druid_info
from ansible_collections.steward.cluster.plugins.module_utils.druid.status import describe_etcd, etcd_report


def params(**kw):
    return dict(dict(namespace=None, name=None, label_selectors=[]), **kw)


def test_options_are_parsed_as_the_api_server_reads_them():
    assert parse_etcd_druid_info(params()) == dict(namespace=None, name=None, label_selector=None)
    assert parse_etcd_druid_info(params(namespace='shoot--dev', name='etcd-main',
                                        label_selectors=['role=main', 'app in (etcd, main)'])) == dict(
        namespace='shoot--dev', name='etcd-main', label_selector='role=main,app in (etcd, main)')


@pytest.mark.parametrize('options, field, rule', [
    (dict(namespace='Shoot/Dev'), 'namespace', 'dns-label'),
    (dict(name='Etcd_Main'), 'name', 'dns-subdomain'),
    (dict(label_selectors=['a in (b']), 'label_selectors[0].matchExpressions[0].key', 'qualified-name'),
    (dict(label_selectors=['role=main', 'x,,y']), 'label_selectors[1]', 'label-selector'),
    (dict(label_selectors=['  ']), 'label_selectors[0]', 'label-selector'),
])
def test_bad_options_are_refused_naming_the_option(options, field, rule):
    with pytest.raises(InvalidInput) as caught:
        parse_etcd_druid_info(params(**options))
    assert caught.value.field == field and caught.value.rule == rule, (caught.value.field, caught.value.rule)


def cond(kind, status, reason):
    return {'type': kind, 'status': status, 'reason': reason, 'message': kind + ' says ' + reason,
            'lastTransitionTime': '2026-01-01T00:00:00Z', 'lastUpdateTime': '2026-01-01T00:00:15Z'}


HEALTHY = {
    'apiVersion': 'druid.gardener.cloud/v1alpha1', 'kind': 'Etcd',
    'metadata': {'name': 'etcd-main', 'namespace': 'shoot--dev', 'generation': 2,
                 'annotations': {'gardener.cloud/operation': 'reconcile'}},
    'spec': {'replicas': 3, 'labels': {'role': 'main'}, 'etcd': {},
             'backup': {'store': {'provider': 'aws', 'prefix': 'shoot--dev/etcd-main'}}},
    'status': {
        'observedGeneration': 2, 'ready': True, 'clusterSize': 3, 'replicas': 3, 'currentReplicas': 3, 'readyReplicas': 3,
        'conditions': [cond('Ready', 'True', 'Quorate'), cond('AllMembersReady', 'True', 'AllMembersReady'),
                       cond('BackupReady', 'True', 'FullBackupSucceeded')],
        'members': [{'name': 'etcd-main-%d' % i, 'id': 'a%d' % i, 'role': 'Leader' if i == 1 else 'Member',
                     'status': 'Ready', 'reason': 'LeaseSucceeded', 'lastTransitionTime': '2026-01-01T00:00:00Z'}
                    for i in range(3)],
        'lastOperation': {'type': 'Reconcile', 'state': 'Succeeded', 'description': 'reconciled',
                          'lastUpdateTime': '2026-01-01T00:00:10Z', 'runID': 'r-1'},
        'lastErrors': []}}


def changed(**change):
    etcd = copy.deepcopy(HEALTHY)
    for path, value in change.items():
        node = etcd
        keys = path.split('__')
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value
    return etcd


def test_a_healthy_etcd_is_reported_as_druid_writes_it():
    report = describe_etcd(HEALTHY)
    assert report['healthy'] is True and report['problems'] == []
    assert (report['name'], report['namespace'], report['replicas'], report['ready'], report['cluster_size'],
            report['ready_replicas'], report['current_replicas']) == ('etcd-main', 'shoot--dev', 3, True, 3, 3, 3)
    assert report['conditions']['Ready'] == {'status': 'True', 'reason': 'Quorate', 'message': 'Ready says Quorate',
                                             'last_transition_time': '2026-01-01T00:00:00Z',
                                             'last_update_time': '2026-01-01T00:00:15Z'}
    assert sorted(report['conditions']) == ['AllMembersReady', 'BackupReady', 'Ready']
    assert report['leader'] == 'etcd-main-1' and [m['id'] for m in report['members']] == ['a0', 'a1', 'a2']
    assert report['members'][0] == {'name': 'etcd-main-0', 'id': 'a0', 'role': 'Member', 'status': 'Ready',
                                    'reason': 'LeaseSucceeded', 'last_transition_time': '2026-01-01T00:00:00Z'}
    assert report['last_operation'] == {'type': 'Reconcile', 'state': 'Succeeded', 'description': 'reconciled',
                                        'last_update_time': '2026-01-01T00:00:10Z', 'run_id': 'r-1'}
    assert report['last_errors'] == [] and report['reconcile_requested'] is True and report['suspended'] is False


@pytest.mark.parametrize('etcd, problems', [
    (changed(status__conditions=[cond('Ready', 'False', 'QuorumLost'), cond('AllMembersReady', 'False', 'NotAllMembersReady'),
                                 cond('BackupReady', 'True', 'FullBackupSucceeded')], status__ready=False,
             status__readyReplicas=1),
     ['not ready (1 of 3 replicas ready)', 'Ready=False (QuorumLost)', 'AllMembersReady=False (NotAllMembersReady)']),
    (changed(status__conditions=[cond('Ready', 'True', 'Quorate'), cond('AllMembersReady', 'True', 'AllMembersReady'),
                                 cond('BackupReady', 'False', 'FullBackupFailed')]),
     ['BackupReady=False (FullBackupFailed)']),
    (changed(status__conditions=[cond('Ready', 'True', 'Quorate'), cond('AllMembersReady', 'True', 'AllMembersReady')]),
     ['BackupReady not reported']),
    (changed(metadata__generation=3), ['generation 3 not reconciled yet (observed 2)']),
    (changed(metadata__deletionTimestamp='2026-01-01T00:01:00Z'), ['being deleted']),
    (changed(spec__replicas=0, status__ready=False, status__readyReplicas=0),
     ['hibernated (replicas 0)', 'not ready (0 of 0 replicas ready)']),
])
def test_the_verdict_names_what_is_wrong(etcd, problems):
    report = describe_etcd(etcd)
    assert report['healthy'] is False and report['problems'] == problems


def test_backup_ready_is_required_only_with_a_store_and_a_new_etcd_is_not_reconciled_yet():
    no_store = changed(spec__backup={}, status__conditions=[cond('Ready', 'True', 'Quorate'),
                                                            cond('AllMembersReady', 'True', 'AllMembersReady')])
    assert describe_etcd(no_store)['healthy'] is True
    new = {'metadata': {'name': 'e', 'namespace': 'n', 'generation': 1}, 'spec': {'replicas': 1}}
    report = describe_etcd(new)
    assert report['problems'] == ['not reconciled yet', 'not ready (0 of 1 replicas ready)', 'Ready not reported',
                                  'AllMembersReady not reported']
    assert (report['ready'], report['cluster_size'], report['members'], report['last_operation'], report['leader']) == (
        False, None, [], None, None)


def test_the_report_filters_by_name_sorts_and_is_healthy_only_with_every_etcd_healthy():
    other = changed(metadata__namespace='shoot--a', metadata__name='etcd-events')
    sick = changed(metadata__name='etcd-events', metadata__deletionTimestamp='2026-01-01T00:01:00Z')
    report = etcd_report([HEALTHY, sick, other])
    assert [(e['namespace'], e['name']) for e in report['etcds']] == [
        ('shoot--a', 'etcd-events'), ('shoot--dev', 'etcd-events'), ('shoot--dev', 'etcd-main')]
    assert report['healthy'] is False
    assert etcd_report([HEALTHY, sick], 'etcd-main')['healthy'] is True
    assert etcd_report([HEALTHY], 'nope') == {'etcds': [], 'healthy': False}
