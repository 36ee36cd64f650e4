# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""steward.cluster.watchdog_deploy (role steward.cluster.watchdog) in real ansible-playbook runs with kubernetes.core
against the API emulator, and the manifests of controller/deploy/watchdog checked against the controller."""

from __future__ import annotations

import glob
import os
from types import SimpleNamespace

import pytest
import yaml

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.prober_config import parse_prober_config
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.weeder_config import parse_weeder_config

from support.ansible import REPO, run_playbook
from lab.kube.api import repo_path

from steward_controller.core.settings import environment_variables

PLAYBOOK = 'steward.cluster.watchdog_deploy'
NS = 'ops'
RBAC = 'rbac.authorization.k8s.io/v1'
DEPLOY_DIR = repo_path('controller', 'deploy', 'watchdog')
PROBER = {'kubeConfigSecretName': 'probe-kubeconfig', 'kcmNodeMonitorGraceDuration': '40s', 'failureThreshold': 2,
          'dependentResourceInfos': [{'ref': {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': 'kcm'},
                                      'optional': False, 'scaleUp': {'level': 0}, 'scaleDown': {'level': 0}}]}


@pytest.fixture(scope='module', autouse=True)
def kubernetes_core():
    if not os.path.exists(os.path.join(REPO, '.build', 'collections', 'ansible_collections', 'kubernetes', 'core',
                                       'MANIFEST.json')):
        pytest.fail('kubernetes.core is not installed in .build/collections: run `make all`')


@pytest.fixture
def cluster(bare_kube, tmp_path):
    bare_kube.create(api_path('v1', 'namespaces'), {'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': NS}})
    return SimpleNamespace(client=bare_kube, kubeconfig=bare_kube.server.write_kubeconfig(str(tmp_path / 'kubeconfig')))


def deploy(cluster, **variables):
    extra = {'watchdog_kubeconfig': cluster.kubeconfig, 'watchdog_wait': False, 'watchdog_namespace': NS,
             'watchdog_prober_config': PROBER}
    extra.update(variables)
    return run_playbook(PLAYBOOK, extra_vars=extra)


def ok(result):
    assert result.rc == 0, 'rc=%s\nstderr=%s\nstdout=%s' % (result.rc, result.stderr[-3000:], result.stdout[-5000:])
    return result


def get(cluster, api_version, plural, namespace, name):
    return cluster.client.get_or_none(api_path(api_version, plural, namespace, name))


def objects(cluster):
    """Everything the role manages, by a short key (None when absent)."""
    keys = {
        'prober-sa': ('v1', 'serviceaccounts', NS, 'steward-watchdog-prober'),
        'weeder-sa': ('v1', 'serviceaccounts', NS, 'steward-watchdog-weeder'),
        'prober-role': (RBAC, 'roles', NS, 'steward-watchdog-prober'),
        'prober-leases-role': (RBAC, 'roles', 'kube-node-lease', 'steward-watchdog-prober-node-leases-' + NS),
        'prober-leases-binding': (RBAC, 'rolebindings', 'kube-node-lease', 'steward-watchdog-prober-node-leases-' + NS),
        'prober-clusterrole': (RBAC, 'clusterroles', None, 'steward-watchdog-prober-' + NS),
        'prober-clusterrolebinding': (RBAC, 'clusterrolebindings', None, 'steward-watchdog-prober-' + NS),
        'weeder-role': (RBAC, 'roles', NS, 'steward-watchdog-weeder'),
        'prober-config': ('v1', 'configmaps', NS, 'steward-watchdog-prober-config'),
        'weeder-config': ('v1', 'configmaps', NS, 'steward-watchdog-weeder-config'),
        'prober': ('apps/v1', 'deployments', NS, 'steward-watchdog-prober'),
        'weeder': ('apps/v1', 'deployments', NS, 'steward-watchdog-weeder'),
    }
    return {key: get(cluster, *where) for key, where in keys.items()}


def env_of(deployment):
    return {e['name']: e.get('value', e.get('valueFrom')) for e in deployment['spec']['template']['spec']['containers'][0]['env']}


def contents(cluster):
    """Every object without its resourceVersion (kubernetes.core's apply patches even when nothing changes; a real
    API server then writes nothing, the emulator still moves resourceVersion on) and its status: the emulator's
    status mover (as a deployment controller would) writes a Deployment's status a moment after the role wrote its
    spec, which a fast run can overtake."""
    return {k: v if v is None else dict({f: x for f, x in v.items() if f != 'status'},
                                        metadata={m: x for m, x in v['metadata'].items() if m != 'resourceVersion'})
            for k, v in objects(cluster).items()}


def refusing_play(cluster):
    """One run: two refused deployments (each in a block whose rescue keeps the message), then a good one that
    switches the weeder off and changes the prober's config (fewer ansible-playbook runs: they are slow)."""
    base = {'watchdog_kubeconfig': cluster.kubeconfig, 'watchdog_wait': False, 'watchdog_namespace': NS,
            'watchdog_prober_config': PROBER}
    cases = [dict(base, watchdog_prober_config=dict(PROBER, nodeLeaseFailureFraction=0)),
             dict(base, watchdog_namespace='nowhere')]
    tasks = [{'name': 'messages', 'ansible.builtin.set_fact': {'said': []}}]
    for index, variables in enumerate(cases):
        tasks.append({'block': [{'name': 'deploy %d' % index, 'ansible.builtin.include_role': {'name': 'steward.cluster.watchdog'},
                                 'vars': variables}],
                      'rescue': [{'name': 'keep %d' % index, 'ansible.builtin.set_fact': {
                          'said': '{{ said + [ansible_failed_result.msg] }}'}}]})
    tasks.append({'name': 'what the role said', 'ansible.builtin.debug': {'msg': '{{ said }}'}})
    tasks.append({'name': 'weeder off, prober config changed', 'ansible.builtin.include_role': {'name': 'steward.cluster.watchdog'},
                  'vars': dict(base, watchdog_prober_config=dict(PROBER, failureThreshold=3), watchdog_weeder_enabled=False)})
    return [{'hosts': 'localhost', 'connection': 'local', 'gather_facts': False, 'tasks': tasks}]


@pytest.mark.timeout(900)   # four playbook runs of kubernetes.core on a shared 2-core machine
def test_deploy_check_idempotent_refuse_and_remove(cluster):
    ok(deploy(cluster))
    objs = objects(cluster)
    assert all(objs.values()), [k for k, v in objs.items() if v is None]
    assert parse_prober_config(objs['prober-config']['data']['dep-config.yaml']).failure_threshold == 2
    assert parse_weeder_config(objs['weeder-config']['data']['dep-config.yaml']).watch_duration == 300.0
    rules = objs['prober-role']['rules']
    assert {'apiGroups': [''], 'resources': ['secrets'], 'resourceNames': ['probe-kubeconfig'], 'verbs': ['get']} in rules
    assert {'apiGroups': ['apps'], 'resources': ['deployments/scale', 'statefulsets/scale'],
            'verbs': ['get', 'patch']} in rules
    assert [r for r in objs['prober-clusterrole']['rules'] if 'namespaces' in r['resources']][0]['resourceNames'] == [NS]
    assert objs['prober-clusterrolebinding']['roleRef']['name'] == 'steward-watchdog-prober-' + NS
    assert objs['prober-leases-role']['rules'] == [{'apiGroups': ['coordination.k8s.io'], 'resources': ['leases'],
                                                    'verbs': ['list']}]
    assert objs['prober-leases-binding']['subjects'][0]['namespace'] == NS
    assert [r['verbs'] for r in objs['weeder-role']['rules'] if r['resources'] == ['pods']] == [['list', 'watch', 'delete']]
    prober, weeder = objs['prober'], objs['weeder']
    env = env_of(prober)
    assert env['STEWARD_CONTROLLERS'] == 'prober' and env['STEWARD_PROBER_CONFIG'].endswith('dep-config.yaml')
    assert (env['STEWARD_HTTP_PORT'], env['STEWARD_HEALTH_PORT']) == ('9643', '9644')
    assert (env['STEWARD_KUBE_API_QPS'], env['STEWARD_KUBE_API_BURST']) == ('5', '10')
    assert env['STEWARD_PROBER_NAME'] == 'steward-watchdog-prober'
    assert env_of(weeder)['STEWARD_CONTROLLERS'] == 'weeder'
    checksum = prober['spec']['template']['metadata']['annotations']['cluster.steward.io/config-sha256']

    before = contents(cluster)
    assert ok(deploy(cluster)).changed() == 0 and contents(cluster) == before

    refusals = ok(run_playbook(refusing_play(cluster)))        # a bad config, a missing namespace: both refused
    messages = refusals.result('what the role said')['msg']
    assert 'invalid prober config: nodeLeaseFailureFraction: must be greater than 0' in messages[0]
    assert 'namespace nowhere does not exist' in messages[1]
    # The role applies (and removes) its objects in one kubernetes.core.k8s run each: one result per object.
    changed = [r['result']['kind'] + ' ' + r['result']['metadata']['name'] for t in refusals.tasks()
               if t['task']['name'].endswith(('Apply the watchdog', 'Remove a disabled component'))
               for r in (t['hosts'].get('localhost') or {}).get('result', {}).get('results', []) if r.get('changed')]
    assert sorted(changed) == ['ConfigMap steward-watchdog-prober-config', 'ConfigMap steward-watchdog-weeder-config',
                               'Deployment steward-watchdog-prober', 'Deployment steward-watchdog-weeder',
                               'Role steward-watchdog-weeder', 'RoleBinding steward-watchdog-weeder',
                               'Service steward-watchdog-weeder', 'ServiceAccount steward-watchdog-weeder']
    objs = objects(cluster)
    assert objs['weeder'] is None and objs['weeder-role'] is None and objs['weeder-sa'] is None
    assert objs['prober']['spec']['template']['metadata']['annotations']['cluster.steward.io/config-sha256'] != checksum

    ok(deploy(cluster, watchdog_state='absent'))
    assert all(v is None for v in objects(cluster).values())
    assert get(cluster, 'v1', 'namespaces', None, NS) is not None   # the namespace holds the protected controllers


def test_manifests_agree_with_the_controller():
    """kustomization.yaml lists every manifest; the Deployments set only settings the controller reads, with DWD's
    ports (metrics 9643, health 9644) and rate limits; the example configs load with the controller's parser."""
    with open(os.path.join(DEPLOY_DIR, 'kustomization.yaml')) as f:
        listed = yaml.safe_load(f)['resources']
    on_disk = sorted(os.path.basename(p) for p in glob.glob(os.path.join(DEPLOY_DIR, '*.yaml'))
                     if not p.endswith('kustomization.yaml'))
    assert sorted(listed) == on_disk
    known = set(environment_variables())   # every flag's variable (core/settings.py and each loop's own)
    for component, parse in (('prober', parse_prober_config), ('weeder', parse_weeder_config)):
        with open(os.path.join(DEPLOY_DIR, '%s-deployment.yaml' % component)) as f:
            (dep,) = [d for d in yaml.safe_load_all(f) if d]
        (container,) = dep['spec']['template']['spec']['containers']
        names = {e['name'] for e in container['env']}
        assert names <= known | {'STEWARD_IDENTITY', 'STEWARD_NAMESPACE'}, names - known
        env = env_of(dep)
        assert (env['STEWARD_HTTP_PORT'], env['STEWARD_HEALTH_PORT']) == ('9643', '9644')
        assert {p['name']: p['containerPort'] for p in container['ports']} == {'metrics': 9643, 'health': 9644}
        assert container['livenessProbe']['httpGet']['port'] == 'health'
        with open(os.path.join(DEPLOY_DIR, '%s-configmap.yaml' % component)) as f:
            parse(yaml.safe_load(f)['data']['dep-config.yaml'])
