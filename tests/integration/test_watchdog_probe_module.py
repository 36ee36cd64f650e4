# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""steward.cluster.watchdog_probe through real ansible-playbook runs against the API emulator: check mode shows
the plan and writes nothing, the real run scales by level with the ownership annotations, runs again change
nothing, action=scale_up brings everything back, and bad input fails naming the option or field."""

from __future__ import annotations

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

from support.ansible import local_play, run_playbook
from lab.env.node_leases import NodeLeases, deployment

NS = 'steward-system'
REPLICAS = 'dependency-watchdog.gardener.cloud/replicas'
STATE = 'cluster.steward.io/watchdog-state'
CONFIG = {'kcmNodeMonitorGraceDuration': '10m', 'nodeLeaseFailureFraction': 0.6, 'dependentResourceInfos': [
    {'ref': {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': 'kcm'}, 'optional': False,
     'scaleUp': {'level': 1}, 'scaleDown': {'level': 0}},
    {'ref': {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': 'mcm'}, 'optional': False,
     'scaleUp': {'level': 0}, 'scaleDown': {'level': 1}}]}


@pytest.fixture
def cluster(kube, tmp_path):
    leases = NodeLeases(kube, 5)          # not renewed: with a 10m grace they stay fresh unless expired on purpose
    for name, replicas in (('kcm', 3), ('mcm', 2)):
        kube.create(api_path('apps/v1', 'deployments', NS), deployment(name, replicas))
    kube.server.set_status_delay(0.2)    # the emulator's status mover: completion gates pass quickly
    kubeconfig = kube.server.write_kubeconfig(str(tmp_path / 'kubeconfig.json'))
    yield kube, leases, kubeconfig


def replicas(kube, name):
    return kube.get(api_path('apps/v1', 'deployments', NS, name))['spec']['replicas']


def annotations(kube, name):
    return kube.get(api_path('apps/v1', 'deployments', NS, name))['metadata'].get('annotations') or {}


def play(kubeconfig, *tasks):
    return local_play(list(tasks), module_defaults={'group/steward.cluster.watchdog': {
        'kubeconfig': kubeconfig, 'namespace': NS, 'config': CONFIG}})


def task(name, check=False, **args):
    return {'name': name, 'check_mode': check, 'diff': True, 'steward.cluster.watchdog_probe': args}


def test_check_real_idempotent_and_scale_up(cluster):
    kube, leases, kubeconfig = cluster
    result = run_playbook(play(kubeconfig, task('healthy', check=True)))
    assert result.rc == 0, result.stdout[-3000:]
    healthy = result.result('healthy')
    assert healthy['probe']['result'] == 'healthy' and healthy['direction'] == 'up' and healthy['changed'] is False

    leases.expire(leases.names[:3])
    result = run_playbook(play(kubeconfig, task('check', check=True), task('real'), task('again check', check=True),
                               task('again')))
    assert result.rc == 0, result.stdout[-3000:]
    check = result.result('check')
    assert check['changed'] is True and check['probe']['result'] == 'failed' and check['probe']['expired'] == 3
    assert check['plan']['summary'].startswith('scale down: level 0: Deployment/kcm 3->0; level 1: Deployment/mcm 2->0')
    assert check['diff'] == {'before': {'Deployment/kcm': 3, 'Deployment/mcm': 2},
                             'after': {'Deployment/kcm': 0, 'Deployment/mcm': 0}}
    assert check['operation'] == []
    real = result.result('real')
    assert real['changed'] is True and [s['outcome'] for s in real['operation']] == ['succeeded', 'succeeded']
    assert real['diff']['after'] == {'Deployment/kcm': 0, 'Deployment/mcm': 0}
    assert replicas(kube, 'kcm') == 0 and annotations(kube, 'kcm')[REPLICAS] == '3'
    assert annotations(kube, 'mcm')[STATE] == 'scaled-down'
    for name in ('again check', 'again'):
        again = result.result(name)
        assert again['changed'] is False and again['direction'] == 'down', name

    # The leases are still expired, so only the operator's decision brings them back: in the scaleUp levels.
    result = run_playbook(play(kubeconfig, task('up check', check=True, action='scale_up'), task('up', action='scale_up')))
    assert result.rc == 0, result.stdout[-3000:]
    assert result.result('up check')['plan']['summary'].startswith('scale up: level 0: Deployment/mcm 0->2; level 1: '
                                                                   'Deployment/kcm 0->3')
    up = result.result('up')
    assert up['changed'] is True and up['diff']['after'] == {'Deployment/kcm': 3, 'Deployment/mcm': 2}
    assert (replicas(kube, 'kcm'), replicas(kube, 'mcm')) == (3, 2)
    assert REPLICAS not in annotations(kube, 'kcm') and STATE not in annotations(kube, 'mcm')


def test_errors_name_the_option_and_a_missing_target_fails_after_the_rest(cluster, tmp_path):
    kube, leases, kubeconfig = cluster
    broken = dict(CONFIG, probeInterval='soon')
    missing = dict(CONFIG, dependentResourceInfos=CONFIG['dependentResourceInfos'] + [
        {'ref': {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': 'gone'}, 'scaleUp': {'level': 0},
         'scaleDown': {'level': 0}}])
    config_file = tmp_path / 'dep-config.yaml'
    config_file.write_text('dependentResourceInfos:\n  - ref: {apiVersion: apps/v1, kind: Deployment, name: kcm}\n')
    leases.expire(leases.names)
    tasks = [dict(task('bad field', config=broken), ignore_errors=True),
             dict(task('bad namespace', namespace='Not_A_Namespace'), ignore_errors=True),
             dict(task('missing target', config=missing), ignore_errors=True)]
    from_file = {'name': 'bad file', 'ignore_errors': True, 'steward.cluster.watchdog_probe': {
        'kubeconfig': kubeconfig, 'namespace': NS, 'config_file': str(config_file)}}
    result = run_playbook(local_play(tasks, module_defaults={'group/steward.cluster.watchdog': {
        'kubeconfig': kubeconfig, 'namespace': NS, 'config': CONFIG}}) + local_play([from_file]))
    bad = result.result('bad field')
    assert bad['failed'] and bad['msg'].startswith("config.probeInterval: 'soon' is not a duration") and bad['rule'] == 'duration'
    assert result.result('bad namespace')['field'] == 'namespace'
    bad_file = result.result('bad file')
    assert bad_file['field'] == 'config_file' and 'dependentResourceInfos[0].scaleUp: is required' in bad_file['msg']
    gone = result.result('missing target')      # the task after the bad ones: they changed nothing
    assert gone['replicas']['before'] == {'Deployment/kcm': 3, 'Deployment/mcm': 2, 'Deployment/gone': None}
    assert gone['failed'] and gone['msg'] == 'failed: Deployment/gone: not found; the config marks it mandatory'
    assert (replicas(kube, 'kcm'), replicas(kube, 'mcm')) == (0, 0)   # the rest of the plan was done
