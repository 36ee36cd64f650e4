"""steward.cluster.controller_deploy (role steward.cluster.controller) in real ansible-playbook runs with
kubernetes.core against the Kubernetes API emulator over HTTP (lab/kube/api.py).

Each test gets its own, empty emulator (no CRDs): the role installs them. The emulator has no pods, so
controller_wait is false (nothing would ever roll out). Assertions read the objects back from the API.
"""

from __future__ import annotations

import glob
import os
from types import SimpleNamespace

import pytest
import yaml

from support.ansible import REPO, run_playbook
from lab.kube.api import repo_path

from steward_controller.core.settings import environment_variables

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

PLAYBOOK = 'steward.cluster.controller_deploy'
NS = 'steward-system'
CRDS = ['etcdbackups.cluster.steward.io', 'sabakanintegrations.cluster.steward.io', 'repairentries.cluster.steward.io',
        'machineclasses.machine.sapcloud.io', 'machines.machine.sapcloud.io', 'machinesets.machine.sapcloud.io',
        'machinedeployments.machine.sapcloud.io', 'etcds.druid.gardener.cloud', 'etcdcopybackupstasks.druid.gardener.cloud',
        'etcdoperatortasks.druid.gardener.cloud']
CRD_API = ('apiextensions.k8s.io/v1', 'customresourcedefinitions')
RBAC = 'rbac.authorization.k8s.io/v1'
# (apiVersion, plural, namespaced, name) of everything but the CRDs, in the order the role applies them.
WORKLOAD = [
    ('v1', 'serviceaccounts', True, 'steward-controller'),
    (RBAC, 'clusterroles', False, 'steward-controller'),
    (RBAC, 'clusterrolebindings', False, 'steward-controller'),
    (RBAC, 'clusterroles', False, 'steward-controller-machines'),
    (RBAC, 'clusterrolebindings', False, 'steward-controller-machines'),
    (RBAC, 'clusterroles', False, 'steward-controller-etcd'),
    (RBAC, 'clusterrolebindings', False, 'steward-controller-etcd'),
    (RBAC, 'clusterroles', False, 'steward-controller-machine-claims'),
    (RBAC, 'clusterrolebindings', False, 'steward-controller-machine-claims'),
    (RBAC, 'roles', True, 'steward-controller-leases'),
    (RBAC, 'rolebindings', True, 'steward-controller-leases'),
    (RBAC, 'clusterroles', False, 'steward-cluster-view'),
    (RBAC, 'clusterroles', False, 'steward-cluster-edit'),
    (RBAC, 'clusterroles', False, 'steward-cluster-edit-resources'),
    ('apps/v1', 'deployments', True, 'steward-controller'),
    ('v1', 'services', True, 'steward-controller-metrics'),
    ('policy/v1', 'poddisruptionbudgets', True, 'steward-controller'),
]
APPLY_TASK = 'Apply the CRDs and the controller'


@pytest.fixture(scope='module', autouse=True)
def kubernetes_core():
    path = os.path.join(REPO, '.build', 'collections', 'ansible_collections', 'kubernetes', 'core', 'MANIFEST.json')
    if not os.path.exists(path):
        pytest.fail('kubernetes.core is not installed in .build/collections: run `make all`')


@pytest.fixture
def cluster(bare_kube, tmp_path):
    """A fresh emulator (no CRDs, no namespaces), a client for assertions and a kubeconfig for the playbook."""
    return SimpleNamespace(server=bare_kube.server, client=bare_kube,
                           kubeconfig=bare_kube.server.write_kubeconfig(str(tmp_path / 'kubeconfig')))


def deploy(cluster, *, check=False, diff=False, **variables):
    extra = {'controller_kubeconfig': cluster.kubeconfig, 'controller_wait': False}
    extra.update(variables)
    return run_playbook(PLAYBOOK, check=check, diff=diff, extra_vars=extra)


def task(result, suffix):
    """The result of the (last) role task whose name ends with `suffix` (role tasks are prefixed with the role)."""
    found = [t['hosts']['localhost'] for t in result.tasks()
             if t['task']['name'].endswith(suffix) and 'localhost' in t['hosts']]
    assert found, 'no task %r; rc=%s stderr=%s stdout=%s' % (suffix, result.rc, result.stderr[-2000:], result.stdout[-3000:])
    return found[-1]


def object_results(result, suffix=APPLY_TASK):
    """One result per object of a kubernetes.core.k8s task given a list of definitions (the role applies all its
    objects in one module run): result.results, or the task result itself when the list had one object."""
    found = task(result, suffix)
    return found['result']['results'] if 'results' in found.get('result', {}) else [found]


def changed_items(result, suffix=APPLY_TASK):
    return sorted('%s %s' % (r['result']['kind'], r['result']['metadata']['name'])
                  for r in object_results(result, suffix) if r.get('changed'))


def ok(result):
    assert result.rc == 0, 'rc=%s\nstderr=%s\nstdout=%s' % (result.rc, result.stderr[-3000:], result.stdout[-5000:])
    return result


def get(cluster, api_version, plural, namespace=None, name=None):
    return cluster.client.get_or_none(api_path(api_version, plural, namespace, name))


def workload(cluster, namespace=NS):
    """{plural: object or None} for everything the role deploys besides the CRDs and the namespace (a second object
    of a kind is keyed `plural/name`)."""
    out = {}
    for api, plural, namespaced, name in WORKLOAD:
        out[plural if plural not in out else '%s/%s' % (plural, name)] = get(cluster, api, plural, namespace if namespaced else None, name)
    return out


def crds(cluster):
    return sorted(c['metadata']['name'] for c in cluster.client.list(api_path(*CRD_API)))


def everything(cluster, namespace=NS):
    objs = dict(workload(cluster, namespace), namespace=get(cluster, 'v1', 'namespaces', None, namespace))
    objs.update({name: get(cluster, CRD_API[0], CRD_API[1], None, name) for name in CRDS})
    return objs


def versions(cluster, namespace=NS):
    """resourceVersion of every object: unchanged when nothing was written at all."""
    return {k: (v or {}).get('metadata', {}).get('resourceVersion') for k, v in everything(cluster, namespace).items()}


def contents(cluster, namespace=NS):
    """Every object without its resourceVersion and status: the emulator's status mover (as a deployment
    controller would) writes a Deployment's status a moment after the role wrote its spec."""
    out = {}
    for key, obj in everything(cluster, namespace).items():
        if obj is not None:
            obj = {k: v for k, v in obj.items() if k != 'status'}
            obj['metadata'] = {k: v for k, v in obj['metadata'].items() if k != 'resourceVersion'}
        out[key] = obj
    return out


def env_of(deployment):
    container = deployment['spec']['template']['spec']['containers'][0]
    return {e['name']: e.get('value', e.get('valueFrom')) for e in container.get('env', [])}


def test_check_mode_creates_nothing(cluster):
    result = ok(deploy(cluster, check=True, diff=True))
    assert result.changed() > 0
    assert crds(cluster) == []
    assert get(cluster, 'v1', 'namespaces', None, NS) is None
    assert all(obj is None for obj in workload(cluster).values())
    # The namespace does not exist yet, so its objects cannot be dry-run by the server: they are listed instead.
    listed = task(result, 'Objects that would be created in the new namespace')
    assert listed.get('changed') and 'Deployment steward-controller' in listed['msg']
    assert sorted(changed_items(result)) == sorted(['CustomResourceDefinition %s' % n for n in CRDS] + [
        'ClusterRole steward-controller', 'ClusterRoleBinding steward-controller',
        'ClusterRole steward-controller-machines', 'ClusterRoleBinding steward-controller-machines',
        'ClusterRole steward-controller-machine-claims', 'ClusterRoleBinding steward-controller-machine-claims',
        'ClusterRole steward-controller-etcd', 'ClusterRoleBinding steward-controller-etcd',
        'ClusterRole steward-cluster-view', 'ClusterRole steward-cluster-edit', 'ClusterRole steward-cluster-edit-resources',
        'Namespace steward-system'])


def test_deploy_is_idempotent_patches_changes_and_removes_all_but_the_crds(cluster):
    first = ok(deploy(cluster))
    assert first.changed() == 1 and len(changed_items(first)) == len(CRDS) + len(WORKLOAD) + 1
    assert crds(cluster) == sorted(CRDS)
    namespace = get(cluster, 'v1', 'namespaces', None, NS)
    assert namespace['metadata']['labels']['pod-security.kubernetes.io/enforce'] == 'restricted'
    objs = workload(cluster)
    assert all(objs.values()), objs

    dep = objs['deployments']
    spec = dep['spec']
    pod = spec['template']['spec']
    (container,) = pod['containers']
    assert spec['replicas'] == 2
    assert container['image'] == 'ghcr.io/steward-cluster/steward-controller:0.1.0'
    assert container['command'] == ['steward-controller']
    assert container['ports'] == [{'name': 'metrics', 'containerPort': 8080, 'protocol': 'TCP'}]
    assert container['livenessProbe']['httpGet'] == {'path': '/healthz', 'port': 'metrics'}
    assert container['readinessProbe']['httpGet'] == {'path': '/readyz', 'port': 'metrics'}
    assert set(container['resources']) == {'requests', 'limits'}
    assert pod['securityContext']['runAsNonRoot'] is True and pod['securityContext']['runAsUser'] == 65532
    assert pod['securityContext']['seccompProfile'] == {'type': 'RuntimeDefault'}
    csc = container['securityContext']
    assert csc['readOnlyRootFilesystem'] is True and csc['allowPrivilegeEscalation'] is False
    assert csc['capabilities'] == {'drop': ['ALL']} and csc['runAsNonRoot'] is True
    assert csc['seccompProfile'] == {'type': 'RuntimeDefault'}
    assert pod['serviceAccountName'] == 'steward-controller'
    assert pod['terminationGracePeriodSeconds'] == 30
    assert {m['mountPath'] for m in container['volumeMounts']} == {'/work', '/tmp'}
    assert all('emptyDir' in v for v in pod['volumes'])
    assert pod['topologySpreadConstraints'][0]['topologyKey'] == 'kubernetes.io/hostname'
    assert pod['affinity']['podAntiAffinity']
    env = env_of(dep)
    assert env['STEWARD_NAMESPACE'] == {'fieldRef': {'fieldPath': 'metadata.namespace'}}
    assert env['STEWARD_IDENTITY'] == {'fieldRef': {'fieldPath': 'metadata.name'}}
    assert env['STEWARD_WORK_DIR'] == '/work'
    assert (env['STEWARD_LEASE_DURATION'], env['STEWARD_RENEW_DEADLINE'], env['STEWARD_RETRY_PERIOD']) == ('15', '10', '2')

    service = objs['services']
    assert service['metadata']['annotations']['prometheus.io/scrape'] == 'true'
    assert service['metadata']['annotations']['prometheus.io/port'] == '8080'
    assert service['spec']['ports'][0]['targetPort'] == 'metrics'
    assert service['spec']['selector'] == spec['selector']['matchLabels']
    assert objs['poddisruptionbudgets']['spec']['minAvailable'] == 1
    assert objs['poddisruptionbudgets']['spec']['selector'] == spec['selector']
    # Leases only through the namespaced Role, and the sabakan machine claims through their own ClusterRole.
    cluster_rules = objs['clusterroles']['rules']
    assert not [r for r in cluster_rules if 'coordination.k8s.io' in r['apiGroups']]
    assert objs['clusterroles/steward-controller-machine-claims']['rules'] == [
        {'apiGroups': ['coordination.k8s.io'], 'resources': ['leases'], 'verbs': ['get', 'list', 'create', 'delete']}]
    assert objs['roles']['rules'] == [{'apiGroups': ['coordination.k8s.io'], 'resources': ['leases'],
                                      'verbs': ['get', 'create', 'patch']}]
    machine_rules = objs['clusterroles/steward-controller-machines']['rules']   # the machines loop apart
    assert all(r['apiGroups'] != ['machine.sapcloud.io'] for r in cluster_rules)
    assert {'apiGroups': ['machine.sapcloud.io'], 'resources': ['machinedeployments'], 'verbs': ['list', 'watch', 'patch']} \
        in machine_rules
    for binding in (objs['clusterrolebindings'], objs['rolebindings'], objs['clusterrolebindings/steward-controller-machines']):
        assert binding['subjects'] == [{'kind': 'ServiceAccount', 'name': 'steward-controller', 'namespace': NS}]

    # Second run: nothing to do, nothing changed.
    before = contents(cluster)
    second = ok(deploy(cluster))
    assert second.changed() == 0, changed_items(second)
    assert contents(cluster) == before

    # A changed variable: check mode with --diff shows the patch and writes nothing (server-side dry run) ...
    written = versions(cluster)
    preview = ok(deploy(cluster, check=True, diff=True, controller_replicas=3))
    assert changed_items(preview) == ['Deployment steward-controller']
    (item,) = [r for r in object_results(preview) if r.get('changed')]
    assert item['diff']['after']['spec'] == {'replicas': 3} and item['diff']['before']['spec'] == {'replicas': 2}
    # --diff prints it (the task returns `diff`, which Ansible's callbacks display), for the changed object only.
    shown = task(preview, 'Show the changes of the CRDs and the controller')['results']
    assert [r['diff']['after']['spec'] for r in shown] == [{'replicas': 3}]
    assert versions(cluster) == written
    assert get(cluster, 'apps/v1', 'deployments', NS, 'steward-controller')['spec']['replicas'] == 2

    # ... and the real run patches only the Deployment.
    scaled = ok(deploy(cluster, controller_replicas=3))
    assert changed_items(scaled) == ['Deployment steward-controller']
    dep3 = get(cluster, 'apps/v1', 'deployments', NS, 'steward-controller')
    assert dep3['spec']['replicas'] == 3
    assert dep3['metadata']['generation'] == dep['metadata']['generation'] + 1
    after = contents(cluster)
    assert {k for k in after if after[k] != before[k]} == {'deployments'}
    assert ok(deploy(cluster, controller_replicas=3)).changed() == 0

    # Removal: check mode deletes nothing; then everything but the CRDs goes; a second removal is a no-op.
    written = versions(cluster)
    ok(deploy(cluster, check=True, controller_state='absent'))
    assert versions(cluster) == written
    removed = ok(deploy(cluster, controller_state='absent'))
    assert removed.changed() == 1
    assert all(obj is None for obj in workload(cluster).values())
    assert get(cluster, 'v1', 'namespaces', None, NS) is None
    assert crds(cluster) == sorted(CRDS)
    assert ok(deploy(cluster, controller_state='absent')).changed() == 0


def test_settings_reach_the_deployment_and_a_single_replica_has_no_pdb(cluster):
    settings = {
        'controller_namespace': 'ops', 'controller_replicas': 1, 'controller_image': 'registry.example/steward:dev',
        'controller_image_pull_policy': 'Always', 'controller_log_level': 'debug', 'controller_log_format': 'plain',
        'controller_watch_namespaces': ['team-a', 'team-b'], 'controller_lease_duration': 30,
        'controller_renew_deadline': 20, 'controller_retry_period': 5, 'controller_work_dir_size_limit': '20Gi',
        'controller_resources': {'requests': {'cpu': '50m', 'memory': '128Mi'}},
        'controller_extra_env': [{'name': 'AWS_REGION', 'value': 'eu-west-1'},
                                 {'name': 'STEWARD_LOG_FORMAT', 'value': 'json'}],
        'controller_extra_volumes': [{'name': 'backups', 'persistentVolumeClaim': {'claimName': 'etcd-backups'}}],
        'controller_extra_volume_mounts': [{'name': 'backups', 'mountPath': '/backups'}],
    }
    ok(deploy(cluster, **settings))
    objs = workload(cluster, 'ops')
    assert objs['poddisruptionbudgets'] is None
    assert get(cluster, 'v1', 'namespaces', None, 'ops') is not None
    assert all(objs[p] for p in ('serviceaccounts', 'roles', 'rolebindings', 'deployments', 'services'))
    assert workload(cluster, NS)['deployments'] is None
    for binding in (objs['clusterrolebindings'], objs['rolebindings'], objs['clusterrolebindings/steward-controller-machines']):
        assert binding['subjects'][0]['namespace'] == 'ops'
    dep = objs['deployments']
    (container,) = dep['spec']['template']['spec']['containers']
    assert dep['spec']['replicas'] == 1
    assert (container['image'], container['imagePullPolicy']) == ('registry.example/steward:dev', 'Always')
    assert container['resources'] == {'requests': {'cpu': '50m', 'memory': '128Mi'}}
    volumes = {v['name']: v for v in dep['spec']['template']['spec']['volumes']}
    assert volumes['work']['emptyDir'] == {'sizeLimit': '20Gi'}
    assert volumes['backups']['persistentVolumeClaim'] == {'claimName': 'etcd-backups'}
    assert [m['mountPath'] for m in container['volumeMounts']] == ['/work', '/tmp', '/backups']
    env = env_of(dep)
    assert env['STEWARD_LOG_LEVEL'] == 'DEBUG'
    assert env['STEWARD_LOG_FORMAT'] == 'json'  # the extra entry wins over controller_log_format
    assert env['STEWARD_WATCH_NAMESPACES'] == 'team-a,team-b'
    assert (env['STEWARD_LEASE_DURATION'], env['STEWARD_RENEW_DEADLINE'], env['STEWARD_RETRY_PERIOD']) == ('30', '20', '5')
    assert env['AWS_REGION'] == 'eu-west-1'
    assert [e['name'] for e in container['env']].count('STEWARD_LOG_FORMAT') == 1
    assert ok(deploy(cluster, **settings)).changed() == 0

    # Two replicas bring the PodDisruptionBudget; back to one removes it. An env entry dropped from the
    # variables is dropped on the server too (apply, not a plain merge).
    settings.update(controller_replicas=2, controller_extra_env=[])
    ok(deploy(cluster, **settings))
    assert workload(cluster, 'ops')['poddisruptionbudgets']['spec']['minAvailable'] == 1
    env = env_of(get(cluster, 'apps/v1', 'deployments', 'ops', 'steward-controller'))
    assert 'AWS_REGION' not in env and env['STEWARD_LOG_FORMAT'] == 'plain'
    settings.update(controller_replicas=1)
    single = ok(deploy(cluster, **settings))
    assert task(single, 'Remove the PodDisruptionBudget of a single replica (it would block node drains)')['changed']
    assert workload(cluster, 'ops')['poddisruptionbudgets'] is None


def test_existing_namespace_is_used_and_kept_and_crds_are_removed_only_without_custom_resources(cluster):
    """Two scenarios on one deployment (each playbook run costs seconds): a namespace the role did not create is
    used and kept; controller_remove_crds refuses while custom resources exist and changes nothing, then removes."""
    cluster.client.create(api_path('v1', 'namespaces'), {'apiVersion': 'v1', 'kind': 'Namespace',
                                                         'metadata': {'name': 'platform', 'labels': {'team': 'infra'}}})
    existing = {'controller_namespace': 'platform', 'controller_create_namespace': False}
    result = ok(deploy(cluster, **existing))
    assert 'Namespace platform' not in changed_items(result)
    assert get(cluster, 'v1', 'namespaces', None, 'platform')['metadata']['labels'] == {'team': 'infra'}
    assert workload(cluster, 'platform')['deployments'] is not None

    backup = {'apiVersion': 'cluster.steward.io/v1alpha1', 'kind': 'EtcdBackup',
              'metadata': {'name': 'main', 'namespace': 'default'},
              'spec': {'etcd': {'endpoints': ['https://10.0.0.1:2379']},
                       'store': {'provider': 'Local', 'prefix': 'main', 'path': '/backups'}}}
    cluster.client.create(api_path('cluster.steward.io/v1alpha1', 'etcdbackups', 'default'), backup)
    refused = deploy(cluster, controller_state='absent', controller_remove_crds=True, **existing)
    assert refused.rc != 0
    assert 'EtcdBackup default/main' in task(refused, 'Refuse to delete CRDs that still have objects')['msg']
    assert crds(cluster) == sorted(CRDS) and workload(cluster, 'platform')['deployments'] is not None  # nothing changed

    cluster.client.delete(api_path('cluster.steward.io/v1alpha1', 'etcdbackups', 'default', 'main'))
    ok(deploy(cluster, controller_state='absent', controller_remove_crds=True, **existing))
    assert crds(cluster) == []
    assert get(cluster, 'v1', 'namespaces', None, 'platform') is not None
    assert all(obj is None for obj in workload(cluster, 'platform').values())


def test_inconsistent_lease_timings_are_refused_before_anything_is_applied(cluster):
    result = deploy(cluster, controller_lease_duration=10, controller_renew_deadline=10)
    assert result.rc != 0
    assert 'controller_renew_deadline' in task(result, 'Check the settings')['msg']
    assert crds(cluster) == [] and get(cluster, 'v1', 'namespaces', None, NS) is None


def test_manifests_agree_with_the_controller_and_kustomization():
    """The Deployment sets only settings the controller reads; kustomization.yaml lists every manifest."""
    deploy_dir = repo_path('controller', 'deploy')
    with open(os.path.join(deploy_dir, 'kustomization.yaml')) as f:
        listed = yaml.safe_load(f)['resources']
    on_disk = sorted(os.path.relpath(p, deploy_dir) for p in glob.glob(os.path.join(deploy_dir, '*.yaml'))
                     + glob.glob(os.path.join(deploy_dir, 'crds', '*.yaml')) if not p.endswith('kustomization.yaml'))
    assert sorted(listed) == on_disk
    known = set(environment_variables())   # every flag's variable (core/settings.py and each loop's own)
    with open(os.path.join(deploy_dir, 'deployment.yaml')) as f:
        (dep,) = [d for d in yaml.safe_load_all(f) if d]
    names = {e['name'] for e in dep['spec']['template']['spec']['containers'][0]['env']}
    assert {n for n in names if n.startswith('STEWARD_')} <= known
    assert {'STEWARD_NAMESPACE', 'STEWARD_IDENTITY', 'STEWARD_WORK_DIR', 'STEWARD_LOG_FORMAT', 'STEWARD_LOG_LEVEL',
            'STEWARD_WATCH_NAMESPACES', 'STEWARD_LEASE_DURATION', 'STEWARD_RENEW_DEADLINE',
            'STEWARD_RETRY_PERIOD'} <= names


def test_emulator_namespaces_and_server_side_dry_run(cluster):
    """The two API server behaviours the role relies on that kmock lacks (lab/kube/api.py)."""
    client = cluster.client
    namespaces = api_path('v1', 'namespaces')
    created = client.create(namespaces, {'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': 'one'}})
    assert created['metadata']['uid']
    assert client.get(api_path('v1', 'namespaces', None, 'one'))['metadata']['name'] == 'one'
    assert [n['metadata']['name'] for n in client.list(namespaces)] == ['one']
    client.merge_patch(api_path('v1', 'namespaces', None, 'one'), {'metadata': {'labels': {'a': 'b'}}})
    assert client.get(api_path('v1', 'namespaces', None, 'one'))['metadata']['labels'] == {'a': 'b'}
    # Namespaced resources under /api/v1/namespaces/<ns>/... are untouched by the namespaces fix.
    cm = {'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'c'}, 'data': {'k': 'v'}}
    client.create(api_path('v1', 'configmaps', 'one'), cm)
    assert client.get(api_path('v1', 'configmaps', 'one', 'c'))['data'] == {'k': 'v'}

    dry = [('dryRun', 'All')]
    path = api_path('v1', 'configmaps', 'one', 'c')
    rv = client.get(path)['metadata']['resourceVersion']
    answer = client.request('PATCH', path, body={'data': {'k': 'w'}}, query=dry,
                            content_type='application/merge-patch+json')
    assert answer['data'] == {'k': 'w'}
    client.request('DELETE', path, query=dry)
    answer = client.request('POST', api_path('v1', 'configmaps', 'one'), query=dry,
                            body=dict(cm, metadata={'name': 'd'}))
    assert answer['metadata']['name'] == 'd'
    client.request('DELETE', api_path('v1', 'namespaces', None, 'one'), query=dry)
    stored = client.get(path)
    assert stored['data'] == {'k': 'v'} and stored['metadata']['resourceVersion'] == rv
    assert client.get_or_none(api_path('v1', 'configmaps', 'one', 'd')) is None
    assert client.get_or_none(api_path('v1', 'namespaces', None, 'one')) is not None
    client.delete(api_path('v1', 'namespaces', None, 'one'))
    assert client.get_or_none(api_path('v1', 'namespaces', None, 'one')) is None
