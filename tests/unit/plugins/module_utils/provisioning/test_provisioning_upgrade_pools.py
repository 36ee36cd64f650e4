# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cloud pools in the Kubernetes upgrade plan: where their step goes, the skew checks over their nodes and class,
resume, the new MachineClass, the pool as read from objects, and the rollout gate (pure parts of pools.py)."""

from __future__ import annotations

import dataclasses

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade import pools, versions
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.entry import parse
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.plan import (
    APISERVER, COMPONENTS, KUBELET, MACHINE_DEPLOYMENT, Installed, NodeInstalled, PoolInstalled, plan_upgrade,
)

V = versions.parse
POOL = 'shoot--demo/workers'


def cluster(api='v1.32.0', kubelet='v1.31.4', pool_kubelets=('v1.31.4', 'v1.31.4'), class_version=None,
            complete=True, workers=1):
    """One control-plane node at `api` (kubelet too), bare-metal workers at `kubelet`, one pool."""
    nodes = [NodeInstalled('cp1', True, kubelet=V(api), apiserver=V(api), controller_manager=V(api),
                           scheduler=V(api))]
    nodes += [NodeInstalled('w%d' % (i + 1), False, kubelet=V(kubelet)) for i in range(workers)]
    pool_nodes = tuple('m%d' % (i + 1) for i in range(len(pool_kubelets)))
    nodes += [NodeInstalled(n, False, kubelet=V(k), pool=POOL) for n, k in zip(pool_nodes, pool_kubelets)]
    pool = PoolInstalled(POOL, 'nodes', V(class_version) if class_version else None, pool_nodes, complete)
    return Installed(tuple(nodes), None, (pool,))


def kinds(plan):
    return [(s.kind, s.nodes, str(s.version), s.pool) for s in plan.steps]


# --- the plan ---------------------------------------------------------------------------------------------
def test_a_pool_rolls_after_the_bare_metal_workers_and_its_nodes_are_never_drained_in_place():
    plan = plan_upgrade(cluster(), V('v1.32.0'))
    assert kinds(plan) == [(KUBELET, ('w1',), 'v1.32.0', None),
                           (MACHINE_DEPLOYMENT, ('m1', 'm2'), 'v1.32.0', POOL)]
    assert plan.steps[1].wave > plan.steps[0].wave
    assert plan.pools == [POOL]
    assert plan.as_dict()['steps'][1]['pool'] == POOL and plan.as_dict()['pools'] == [POOL]
    assert 'pool' not in plan.as_dict()['steps'][0]           # additive: other steps keep their shape


def test_a_pool_waits_for_the_control_plane():
    installed = cluster(api='v1.31.4', kubelet='v1.31.4')
    plan = plan_upgrade(installed, V('v1.32.0'))
    pool_step = next(s for s in plan.steps if s.kind == MACHINE_DEPLOYMENT)
    blockers = {s.kind for s in plan.blockers(pool_step)}
    assert {APISERVER, COMPONENTS, KUBELET} <= blockers


def test_a_rollout_in_flight_is_still_a_step_until_complete_then_done():
    # the class names the target, every Node present is new, but old machines are still being replaced
    rolling = cluster(pool_kubelets=('v1.32.0',), class_version='v1.32.0', complete=False, workers=0)
    assert kinds(plan_upgrade(rolling, V('v1.32.0'))) == [(MACHINE_DEPLOYMENT, ('m1',), 'v1.32.0', POOL)]
    mixed = cluster(pool_kubelets=('v1.32.0', 'v1.31.4'), class_version='v1.32.0', complete=False, workers=0)
    assert [s.kind for s in plan_upgrade(mixed, V('v1.32.0')).steps] == [MACHINE_DEPLOYMENT]
    done = cluster(pool_kubelets=('v1.32.0', 'v1.32.0'), class_version='v1.32.0', complete=True, workers=0)
    assert plan_upgrade(done, V('v1.32.0')).done


def test_a_pool_at_the_target_without_a_version_label_needs_nothing():
    # built at the target by other means: its class names no version, its nodes run the target
    installed = cluster(pool_kubelets=('v1.32.0',), class_version=None, complete=False, workers=0)
    assert plan_upgrade(installed, V('v1.32.0')).done


def test_a_pool_with_no_node_yet_rolls_only_when_its_class_is_switched_and_incomplete():
    empty = cluster(pool_kubelets=(), class_version=None, complete=True, workers=0)
    assert plan_upgrade(empty, V('v1.32.0')).done


def test_a_pool_kubelet_newer_than_an_apiserver_is_refused():
    plan = plan_upgrade(cluster(api='v1.31.4', kubelet='v1.31.4', pool_kubelets=('v1.32.0',)), V('v1.32.0'))
    assert [(r.rule, r.node) for r in plan.refusals] == [('kubelet-newer-than-apiserver', 'm1')]


def test_a_class_naming_a_kubelet_newer_than_an_apiserver_is_refused():
    plan = plan_upgrade(cluster(api='v1.31.4', kubelet='v1.31.4', class_version='v1.32.0'), V('v1.32.0'))
    assert [r.rule for r in plan.refusals] == ['kubelet-newer-than-apiserver']
    assert 'MachineClass shoot--demo/nodes' in plan.refusals[0].message


def test_a_class_newer_than_the_target_is_a_downgrade():
    plan = plan_upgrade(cluster(api='v1.33.1', kubelet='v1.33.1', pool_kubelets=('v1.33.1',),
                                class_version='v1.33.1'), V('v1.32.0'))
    assert 'downgrade' in {r.rule for r in plan.refusals}


def test_a_pool_too_far_behind_rolls_before_a_hop_of_a_chain():
    # kubelets may be three minors behind (1.28+): a pool at 1.29 must move before the apiservers reach 1.33
    nodes = [NodeInstalled('cp1', True, kubelet=V('v1.31.4'), apiserver=V('v1.31.4'), controller_manager=V('v1.31.4'),
                           scheduler=V('v1.31.4')),
             NodeInstalled('m1', False, kubelet=V('v1.29.9'), pool=POOL)]
    installed = Installed(tuple(nodes), None, (PoolInstalled(POOL, 'nodes', None, ('m1',), True),))
    plan = plan_upgrade(installed, V('v1.33.0'), via=[V('v1.32.4')])
    assert not plan.refusals
    first = [s for s in plan.steps if s.kind == MACHINE_DEPLOYMENT]
    assert [(s.wave, str(s.version)) for s in first] == [((1, 0), 'v1.32.4'), ((1, 6), 'v1.33.0')]
    # before the second hop's apiservers, never after
    api_hop2 = next(s for s in plan.steps if s.kind == APISERVER and s.wave[0] == 1)
    assert first[0].wave < api_hop2.wave


# --- the new class --------------------------------------------------------------------------------------------
def aws_class(name='nodes', labels=None):
    return {'apiVersion': 'machine.sapcloud.io/v1alpha1', 'kind': 'MachineClass',
            'metadata': {'name': name, 'namespace': 'shoot--demo', 'uid': 'u1', 'resourceVersion': '7',
                         'labels': dict(labels or {'team': 'a'})},
            'provider': 'AWS', 'providerSpec': {'ami': 'ami-old', 'tags': {'kubernetes.io/cluster/demo': '1'}},
            'secretRef': {'name': 'workers', 'namespace': 'shoot--demo'}, 'nodeTemplate': {'capacity': {'cpu': '2'}}}


def test_the_new_class_copies_the_current_one_names_the_version_and_applies_the_patch():
    body = pools.new_class(aws_class(), V('v1.32.0'), {'providerSpec': {'ami': 'ami-new'}})
    assert body['metadata'] == {'name': 'nodes-v1-32-0', 'namespace': 'shoot--demo',
                                'labels': {'team': 'a', pools.VERSION_LABEL: 'v1.32.0'}}
    assert body['providerSpec'] == {'ami': 'ami-new', 'tags': {'kubernetes.io/cluster/demo': '1',
                                                               pools.VERSION_LABEL: 'v1.32.0'}}
    assert body['secretRef'] == {'name': 'workers', 'namespace': 'shoot--demo'}
    assert body['nodeTemplate'] == {'capacity': {'cpu': '2'}}
    assert 'status' not in body and 'uid' not in body['metadata']


def test_the_suffix_of_an_earlier_upgrade_is_replaced_not_stacked():
    earlier = aws_class('nodes-v1-31-4', labels={pools.VERSION_LABEL: 'v1.31.4'})
    assert pools.class_name_for(earlier, V('v1.32.0')) == 'nodes-v1-32-0'
    assert pools.class_name_for(aws_class('nodes-v1-31-4', labels={}), V('v1.32.0')) == 'nodes-v1-31-4-v1-32-0'
    assert pools.slug(V('v1.32.0-rc.1')) == 'v1-32-0-rc-1'


def test_a_sabakan_class_gets_the_label_only():
    current = {'metadata': {'name': 'bm', 'namespace': 'ns'}, 'provider': 'Sabakan', 'providerSpec': {'role': 'worker'}}
    body = pools.new_class(current, V('v1.32.0'), None)
    assert body['providerSpec'] == {'role': 'worker'}
    assert body['metadata']['labels'] == {pools.VERSION_LABEL: 'v1.32.0'}


def test_a_class_name_that_grows_too_long_is_refused_naming_the_rule():
    with pytest.raises(InvalidInput) as exc:
        pools.class_name_for(aws_class('n' * 250), V('v1.32.0'))
    assert exc.value.rule == 'dns-subdomain'


# --- the pool as found, and the gate ----------------------------------------------------------------------------
def md(cls='nodes', replicas=2, updated=2, available=2, total=2, generation=3, observed=3):
    return {'metadata': {'name': 'workers', 'namespace': 'shoot--demo', 'generation': generation},
            'spec': {'replicas': replicas, 'selector': {'matchLabels': {'pool': 'workers'}},
                     'template': {'spec': {'class': {'kind': 'MachineClass', 'name': cls}}}},
            'status': {'observedGeneration': observed, 'updatedReplicas': updated, 'availableReplicas': available,
                       'replicas': total}}


def machine(name, node, pool='workers'):
    return {'metadata': {'name': name, 'labels': {'pool': pool, 'node': node}}}


def node(name, kubelet, ready=True):
    return {'metadata': {'name': name}, 'status': {'nodeInfo': {'kubeletVersion': kubelet},
                                                   'conditions': [{'type': 'Ready', 'status': str(ready)}]}}


def test_the_pool_as_found_takes_its_selected_machines_nodes_that_report_a_kubelet():
    machines = [machine('a', 'n1'), machine('b', 'n2'), machine('c', 'n3'), machine('x', 'other', pool='else')]
    nodes = {'n1': node('n1', 'v1.31.4'), 'n2': node('n2', 'v1.32.0'), 'n3': {'metadata': {'name': 'n3'}},
             'other': node('other', 'v1.31.4')}
    cls = aws_class('nodes-v1-32-0', labels={pools.VERSION_LABEL: 'v1.32.0'})
    pool, found = pools.pool_installed(POOL, md('nodes-v1-32-0', updated=1), cls, machines, nodes)
    assert pool == PoolInstalled(POOL, 'nodes-v1-32-0', V('v1.32.0'), ('n1', 'n2'), False)
    assert [(n.name, str(n.kubelet), n.pool) for n in found] == [('n1', 'v1.31.4', POOL), ('n2', 'v1.32.0', POOL)]


def test_an_inventory_worker_that_is_a_pool_machine_becomes_the_pool_s():
    inventory = (NodeInstalled('cp1', True, V('v1.32.0')), NodeInstalled('n1', False, V('v1.31.4')),
                 NodeInstalled('w1', False, V('v1.31.4')))
    pool_nodes = [NodeInstalled('n1', False, V('v1.31.4'), pool=POOL),
                  NodeInstalled('n2', False, V('v1.31.4'), pool=POOL)]
    merged = pools.with_pools(inventory, pool_nodes)
    assert [(n.name, n.pool) for n in merged] == [('cp1', None), ('n1', POOL), ('w1', None), ('n2', POOL)]


@pytest.mark.parametrize('deployment, kubelets, ok, seen', [
    (md('nodes-v1-32-0'), {'n1': 'v1.32.0', 'n2': 'v1.32.0'}, True, ''),
    (md('nodes'), {'n1': 'v1.32.0', 'n2': 'v1.32.0'}, False, 'class nodes,'),
    (md('nodes-v1-32-0', generation=4), {'n1': 'v1.32.0', 'n2': 'v1.32.0'}, False, 'generation not observed'),
    (md('nodes-v1-32-0', updated=1, total=3), {'n1': 'v1.32.0', 'n2': 'v1.32.0'}, False, '1 of 2 machines updated'),
    (md('nodes-v1-32-0'), {'n1': 'v1.32.0', 'n2': 'v1.31.4'}, False, 'not at v1.32.0: b (v1.31.4)'),
])
def test_the_gate_wants_the_class_a_complete_rollout_and_every_node_at_the_version(deployment, kubelets, ok, seen):
    machines = [machine('a', 'n1'), machine('b', 'n2')]
    nodes = {n: node(n, v) for n, v in kubelets.items()}
    passed, state = pools.rolled(deployment, 'nodes-v1-32-0', machines, nodes, V('v1.32.0'))
    assert passed is ok
    assert seen in state


def test_a_not_ready_node_holds_the_gate():
    machines = [machine('a', 'n1')]
    passed, state = pools.rolled(md('nodes-v1-32-0', replicas=1, updated=1, available=1, total=1), 'nodes-v1-32-0',
                                 machines, {'n1': node('n1', 'v1.32.0', ready=False)}, V('v1.32.0'))
    assert not passed and 'a (v1.32.0)' in state


# --- the module's options -----------------------------------------------------------------------------------------
BASE = {'version': 'v1.32.0', 'control_plane': ['cp1']}


@pytest.mark.parametrize('params, field, rule', [
    ({'machine_deployments': ['workers']}, 'machine_deployments[0]', 'namespace/name'),
    ({'machine_deployments': ['ns/Bad_Name']}, 'machine_deployments[0]', 'dns-subdomain'),
    ({'machine_deployments': ['ns/a', 'ns/a']}, 'machine_deployments', 'unique'),
    ({'stage': 'machine-deployment', 'machine_deployments': ['ns/a']}, 'machine_deployment', 'required'),
    ({'stage': 'machine-deployment', 'machine_deployments': ['ns/a'], 'machine_deployment': 'ns/b'},
     'machine_deployment', 'member'),
    ({'class_patch': ['x']}, 'class_patch', 'mapping'),
    ({'class_patch': {'metadata': {'name': 'x'}}}, 'class_patch', 'fields'),
    ({'rollout_timeout': -1}, 'rollout_timeout', None),
])
def test_bad_pool_options_name_the_field_and_the_rule(params, field, rule):
    with pytest.raises(InvalidInput) as exc:
        parse(dict(BASE, **params))
    assert exc.value.field == field
    if rule:
        assert exc.value.rule == rule


def test_the_pool_stage_needs_no_node_name():
    p = parse(dict(BASE, stage='machine-deployment', machine_deployments=['ns/a'], machine_deployment='ns/a',
                   class_patch={'providerSpec': {'ami': 'ami-new'}}))
    assert (p['machine_deployment'], p['rollout_timeout'], p['class_patch']) == ('ns/a', 1800.0,
                                                                                 {'providerSpec': {'ami': 'ami-new'}})


def test_dataclasses_stay_additive():
    # positional construction as before (other helpers' code builds these): the new fields have defaults
    assert NodeInstalled('w', False, V('v1.31.4')).pool is None
    assert Installed(()).pools == ()
    assert dataclasses.fields(PoolInstalled)[0].name == 'key'
