"""The machine modules' pure parts: options -> MachineDeployment (checked before the cluster is contacted), the
change as a merge patch (only given options), readiness, machine descriptions; and the modules' wiring."""

import ast
import os

import pytest
import yaml

from ansible_collections.steward.cluster.plugins.doc_fragments.kube_connection import ModuleDocFragment
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.kube.args import KUBE_CONNECTION_SPEC
from ansible_collections.steward.cluster.plugins.module_utils.machines.ansible_view import (
    desired_deployment, describe_machine, plan_change)
from ansible_collections.steward.cluster.plugins.module_utils.kube.mcm import readiness

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))))


def params(**kw):
    base = {'name': 'workers', 'namespace': 'shoot--x', 'state': 'present', 'max_surge': 1, 'max_unavailable': 1}
    base.update(kw)
    return base


def existing(**spec):
    body = desired_deployment(params(class_name='c1', replicas=3))
    md = plan_change(None, body, 'present').body
    md['metadata'].update(uid='u', resourceVersion='7', generation=2)
    md['spec'].update(spec)
    md['status'] = {'replicas': 3}
    return md


def test_a_new_deployment_gets_mcms_conventions():
    change = plan_change(None, desired_deployment(params(class_name='c1', replicas=3, health_timeout='30s')), 'present')
    body = change.body
    assert change.action == 'create' and change.changed
    assert body['spec']['selector'] == {'matchLabels': {'name': 'workers'}}
    assert body['spec']['template']['metadata']['labels'] == {'name': 'workers'}
    assert body['spec']['template']['spec'] == {'class': {'kind': 'MachineClass', 'name': 'c1'}, 'healthTimeout': '30s'}
    assert body['spec']['strategy'] == {'type': 'RollingUpdate', 'rollingUpdate': {'maxSurge': 1, 'maxUnavailable': 1}}
    assert change.after['spec']['replicas'] == 3 and change.before == {}


def test_only_given_options_change_an_existing_deployment():
    change = plan_change(existing(), desired_deployment(params(replicas=5)), 'present')
    assert change.action == 'patch' and change.body == {'spec': {'replicas': 5}}
    assert change.before['spec']['replicas'] == 3 and change.after['spec']['replicas'] == 5
    assert 'resourceVersion' not in change.after['metadata'] and 'status' not in change.after
    same = plan_change(existing(), desired_deployment(params(replicas=3, class_name='c1')), 'present')
    assert same.action == 'none' and not same.changed


def test_node_template_and_timeouts_go_into_the_template():
    desired = desired_deployment(params(node_labels={'pool': 'a'}, node_taints=[{'key': 'k', 'effect': 'NoSchedule'}],
                                        drain_timeout='1h', node_conditions=['DiskPressure'], paused=True))
    spec = desired['spec']
    assert spec['template']['spec']['nodeTemplate'] == {'metadata': {'labels': {'pool': 'a'}},
                                                        'spec': {'taints': [{'key': 'k', 'effect': 'NoSchedule'}]}}
    assert spec['template']['spec']['drainTimeout'] == '1h' and spec['template']['spec']['nodeConditions'] == 'DiskPressure'
    assert spec['paused'] is True


def test_node_labels_and_annotations_are_set_as_a_whole_and_a_dropped_key_is_removed():
    """The options say what the controller puts on each Node: a key the task no longer names is removed (a merge
    patch alone would keep it on the template, and so on the Nodes); the Node sync then takes it off the Nodes."""
    md = existing()
    md['spec']['template']['spec']['nodeTemplate'] = {'metadata': {'labels': {'pool': 'a', 'tier': 'web'},
                                                                   'annotations': {'team': 'x'}}}
    change = plan_change(md, desired_deployment(params(node_labels={'pool': 'a'}, node_annotations={})), 'present')
    assert change.action == 'patch'
    assert change.body['spec']['template']['spec']['nodeTemplate']['metadata'] == {'labels': {'tier': None},
                                                                                   'annotations': {'team': None}}
    assert change.after['spec']['template']['spec']['nodeTemplate']['metadata'] == {'labels': {'pool': 'a'}, 'annotations': {}}
    md['spec']['template']['spec']['nodeTemplate'] = change.after['spec']['template']['spec']['nodeTemplate']
    assert plan_change(md, desired_deployment(params(node_labels={'pool': 'a'}, node_annotations={})), 'present').action == 'none'
    relabelled = plan_change(existing(), desired_deployment(params(labels={'x': '1'})), 'present')
    assert relabelled.after['spec']['template']['metadata']['labels'] == {'name': 'workers', 'x': '1'}
    assert plan_change(existing(), desired_deployment(params(node_labels={'pool': 'b'})), 'present').body == {
        'spec': {'template': {'spec': {'nodeTemplate': {'metadata': {'labels': {'pool': 'b'}}}}}}}


@pytest.mark.parametrize('changes, field', [
    ({'name': 'Bad_Name'}, 'name'),
    ({'namespace': 'a.b'}, 'namespace'),
    ({'replicas': -1}, 'replicas'),
    ({'health_timeout': '10 minutes'}, 'health_timeout'),
    ({'drain_timeout': '0s'}, 'drain_timeout'),
    ({'strategy': 'RollingUpdate', 'max_surge': 0, 'max_unavailable': 0}, 'max_surge'),
    ({'strategy': 'RollingUpdate', 'max_unavailable': '1.5%'}, 'max_unavailable'),
    ({'labels': {'bad key!': 'x'}}, 'labels.bad key!'),
    ({'node_taints': [{'key': 'k', 'effect': 'Sometimes'}]}, 'node_taints[0].effect'),
    ({'node_conditions': ['Disk Pressure']}, 'node_conditions'),
])
def test_bad_options_are_refused_naming_the_option(changes, field):
    with pytest.raises(InvalidInput) as info:
        desired_deployment(params(**changes))
    assert info.value.field == field


def test_creating_needs_a_class_and_absent_deletes():
    with pytest.raises(InvalidInput) as info:
        plan_change(None, desired_deployment(params(replicas=1)), 'present')
    assert info.value.field == 'class_name'
    assert plan_change(existing(), desired_deployment(params()), 'absent').action == 'delete'
    assert plan_change(None, desired_deployment(params()), 'absent').action == 'absent'


def test_readiness():
    md = existing()
    md['status'] = {'observedGeneration': 2, 'replicas': 3, 'updatedReplicas': 3, 'availableReplicas': 3}
    assert readiness(md)['ready']
    md['status']['availableReplicas'] = 2
    md['status']['conditions'] = [{'type': 'Frozen', 'status': 'True', 'reason': 'FleetFreeze', 'message': 'x'}]
    state = readiness(md)
    assert not state['ready'] and state['frozen']['reason'] == 'FleetFreeze'
    md['status'] = {'observedGeneration': 1, 'replicas': 3, 'updatedReplicas': 3, 'availableReplicas': 3}
    assert not readiness(md)['ready']       # the controller has not seen generation 2 yet


def test_describe_machine():
    md = {'metadata': {'name': 'workers', 'uid': 'md'}}
    ms = {'metadata': {'name': 'workers-abc', 'uid': 'ms', 'ownerReferences': [{'uid': 'md', 'controller': True}]}}
    machine = {'metadata': {'name': 'workers-abc-x', 'namespace': 'ns', 'labels': {'node': 'n1'},
                            'ownerReferences': [{'uid': 'ms', 'controller': True}]},
               'spec': {'providerID': 'aws:///r/i-1', 'class': {'name': 'c1'}},
               'status': {'currentStatus': {'phase': 'Running'}, 'conditions': [{'type': 'Ready', 'status': 'True'}],
                          'lastOperation': {'type': 'Create', 'state': 'Successful', 'step': 'CreateVM'}}}
    d = describe_machine(machine, {'ms': ms}, {'md': md})
    assert (d['phase'], d['node'], d['machine_set'], d['machine_deployment'], d['node_ready']) == (
        'Running', 'n1', 'workers-abc', 'workers', 'True')
    assert d['last_operation']['step'] == 'CreateVM' and d['priority'] == 3


# --- the modules' wiring -------------------------------------------------------------------------------

MODULES = ('machine_deployment', 'machine_info')


def module_source(name):
    with open(os.path.join(REPO, 'plugins', 'modules', name + '.py')) as handle:
        return handle.read()


def test_action_group_lists_the_modules():
    with open(os.path.join(REPO, 'meta', 'runtime.yml')) as handle:
        assert sorted(yaml.safe_load(handle)['action_groups']['machines']) == sorted(MODULES)


@pytest.mark.parametrize('name', MODULES)
def test_documented_options_match_the_argspec(name):
    tree = ast.parse(module_source(name))
    doc = [n.value.value for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], 'id', '') == 'DOCUMENTATION'][0]
    documented = set(yaml.safe_load(doc)['options']) | set(yaml.safe_load(ModuleDocFragment.DOCUMENTATION)['options'])
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, 'id', '') == 'argspec')
    assert documented == {kw.arg for kw in call.keywords} | set(KUBE_CONNECTION_SPEC)


def test_the_in_place_strategy_carries_its_own_fields_and_orchestration():
    body = desired_deployment(params(class_name='c1', replicas=3, strategy='InPlaceUpdate', max_surge=0,
                                     max_unavailable=1, orchestration_type='Manual'))
    assert body['spec']['strategy'] == {'type': 'InPlaceUpdate', 'inPlaceUpdate': {
        'maxSurge': 0, 'maxUnavailable': 1, 'orchestrationType': 'Manual'}}
    with pytest.raises(InvalidInput) as info:
        desired_deployment(params(class_name='c1', strategy='InPlaceUpdate', orchestration_type='Later'))
    assert info.value.field == 'orchestration_type'
