"""machine_deployment, machine_info and the machine_pool playbook in real ansible-playbook runs against the API
emulator over HTTP; the pool test runs the real controller against EC2 on moto, as the lab does."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

from support.ansible import local_play, run_playbook
from lab.env.machines_bench import MachinesBench, REGION, wait_for
from lab.env.machines_aws import provider_spec, secret_data

API = 'machine.sapcloud.io/v1alpha1'
NS = 'shoot--mod'


@pytest.fixture
def kubeconfig(kube, tmp_path):
    return kube.server.write_kubeconfig(str(tmp_path / 'kubeconfig'))


def step(title, module, kubeconfig, **args):
    """One task of a play; task keywords (check_mode, diff, ignore_errors) go in with a leading underscore."""
    keywords = {k[1:]: args.pop(k) for k in list(args) if k.startswith('_')}
    args.setdefault('kubeconfig', kubeconfig)
    return dict({'name': title, 'steward.cluster.' + module: args}, **keywords)


def run(kubeconfig, module, **args):
    result = run_playbook(local_play([step(module, module, kubeconfig, **args)]))
    return result, result.result(module)


def test_create_scale_idempotence_check_mode_diff_and_delete(kube, kubeconfig):
    """One play, each task in its own mode (task-level check_mode and diff), read back after each."""
    path = api_path(API, 'machinedeployments', NS, 'workers')
    md = dict(name='workers', namespace=NS)
    plays = local_play([
        step('check', 'machine_deployment', kubeconfig, _check_mode=True, class_name='c1', replicas=2, **md),
        step('create', 'machine_deployment', kubeconfig, class_name='c1', replicas=2, health_timeout='5m',
             node_labels={'pool': 'workers'}, **md),
        step('again', 'machine_deployment', kubeconfig, class_name='c1', replicas=2, **md),
        step('scale', 'machine_deployment', kubeconfig, _diff=True, replicas=4, **md),
        step('bad', 'machine_deployment', kubeconfig, _ignore_errors=True, drain_timeout='two hours', **md),
        step('read', 'machine_info', kubeconfig, namespace=NS),
        step('delete', 'machine_deployment', kubeconfig, state='absent', **md),
    ])
    result = run_playbook(plays)
    check, create, again, scale, bad = (result.result(t) for t in ('check', 'create', 'again', 'scale', 'bad'))
    assert check['changed'] and check['operation'] == 'create' and check['machine_deployment']['spec']['replicas'] == 2
    assert create['changed'] and create['operation'] == 'create'
    created = create['machine_deployment']
    assert created['spec']['selector'] == {'matchLabels': {'name': 'workers'}}
    assert created['spec']['template']['spec']['healthTimeout'] == '5m'
    assert created['spec']['template']['spec']['nodeTemplate'] == {'metadata': {'labels': {'pool': 'workers'}}}
    assert not again['changed'] and again['operation'] == 'none'
    assert scale['changed'] and scale['patch'] == {'spec': {'replicas': 4}}
    assert scale['diff']['before']['spec']['replicas'] == 2 and scale['diff']['after']['spec']['replicas'] == 4
    assert scale['machine_deployment']['spec']['template']['spec']['healthTimeout'] == '5m'    # untouched
    assert bad['failed'] and bad['field'] == 'drain_timeout' and bad['rule'] == 'duration'
    assert result.result('read')['machine_deployments'][0]['replicas'] == 4                   # the bad task changed nothing
    assert result.result('delete')['operation'] == 'delete' and kube.get_or_none(path) is None


def test_machine_info_reports_phase_node_provider_id_and_last_operation(kube, kubeconfig):
    md = kube.create(api_path(API, 'machinedeployments', NS), {
        'apiVersion': API, 'kind': 'MachineDeployment', 'metadata': {'name': 'pool', 'namespace': NS}, 'spec': {'replicas': 1}})
    ms = kube.create(api_path(API, 'machinesets', NS), {'apiVersion': API, 'kind': 'MachineSet', 'metadata': {
        'name': 'pool-abc', 'namespace': NS, 'ownerReferences': [{'apiVersion': API, 'kind': 'MachineDeployment', 'name': 'pool',
                                                                  'uid': md['metadata']['uid'], 'controller': True}]}, 'spec': {}})
    kube.create(api_path(API, 'machines', NS), {'apiVersion': API, 'kind': 'Machine', 'metadata': {
        'name': 'pool-abc-1', 'namespace': NS, 'labels': {'node': 'ip-10-0-0-1', 'name': 'pool'},
        'ownerReferences': [{'apiVersion': API, 'kind': 'MachineSet', 'name': 'pool-abc', 'uid': ms['metadata']['uid'],
                             'controller': True}]}, 'spec': {'providerID': 'aws:///eu-west-1/i-1', 'class': {'name': 'c'}}})
    kube.merge_patch(api_path(API, 'machines', NS, 'pool-abc-1', 'status'), {'status': {
        'currentStatus': {'phase': 'Running'}, 'lastOperation': {'type': 'Create', 'state': 'Successful',
                                                                 'description': 'Machine is now ready'}}})
    result = run_playbook(local_play([step('pool', 'machine_info', kubeconfig, namespace=NS, machine_deployment='pool'),
                                      step('failed', 'machine_info', kubeconfig, namespace=NS, phase=['Failed'])]))
    out = result.result('pool')
    [m] = out['machines']
    assert (m['name'], m['phase'], m['node'], m['provider_id'], m['machine_set'], m['machine_deployment']) == (
        'pool-abc-1', 'Running', 'ip-10-0-0-1', 'aws:///eu-west-1/i-1', 'pool-abc', 'pool')
    assert m['last_operation']['description'] == 'Machine is now ready' and not out['changed']
    assert out['machine_deployments'][0]['name'] == 'pool'
    assert result.result('failed')['machines'] == []


def test_machine_pool_playbook_creates_scales_and_removes_a_pool(kube, kubeconfig, ec2, tmp_path):
    bench = MachinesBench(kube, ec2.url, str(tmp_path), namespace=NS)
    try:
        bench.controller()
        pool = {'pool_name': 'workers', 'pool_namespace': NS, 'pool_replicas': 2, 'pool_provider': 'AWS',
                'pool_provider_spec': provider_spec(bench.net, REGION, bench.cluster), 'pool_user_data': '#cloud-config\n',
                'pool_credentials': {k: v for k, v in secret_data().items() if k != 'userData'},
                'pool_kubeconfig': kubeconfig, 'pool_wait_timeout': 300,
                'pool_deployment': {'health_timeout': '10m'}}
        result = run_playbook('steward.cluster.machine_pool', extra_vars=pool)
        assert result.rc == 0, result.stdout[-3000:]
        assert result.result('The machine deployment')['readiness']['ready']
        assert len(result.result('The machines')['machines']) == 2 and len(bench.running_instances()) == 2
        secret = result.result('The machine secret (user data and credentials)')
        assert 'steward-test-secret' not in str(secret)                       # no_log
        _rc, scaled = run(kubeconfig, 'machine_deployment', name='workers', namespace=NS, replicas=1, wait=True, wait_timeout=300)
        assert scaled['readiness']['ready'] and scaled['readiness']['available'] == 1
        wait_for(lambda: len(bench.running_instances()) == 1, 120, 1.0, what='one instance left')
        result = run_playbook('steward.cluster.machine_pool', extra_vars=dict(pool, pool_state='absent'))
        assert result.rc == 0, result.stdout[-3000:]
        assert bench.running_instances() == [] and bench.machines() == []
        assert kube.get_or_none(api_path(API, 'machineclasses', NS, 'workers')) is None
        assert kube.get_or_none(api_path('v1', 'secrets', NS, 'workers-machine-secret')) is None
    finally:
        bench.stop()
