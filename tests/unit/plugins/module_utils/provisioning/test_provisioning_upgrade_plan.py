# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes upgrade plan: versions, the skew policy, the order of waves, chains and every refusal."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade import versions
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.plan import (
    APISERVER, COMPONENTS, ETCD, ETCD_FOR_MINOR, KUBE_PROXY, KUBELET, Installed, NodeInstalled, UpgradeRefused,
    plan_upgrade, skew_violations,
)

V = versions.parse


def cluster(api='v1.31.4', cm=None, kubelet=None, workers=2, cps=3, proxy=None, etcd=(3, 5, 16), **per_node):
    """Three control-plane nodes and workers, all at `api` unless told (per_node: {name: {field: version}})."""
    nodes = []
    for i in range(cps):
        name = 'cp%d' % (i + 1)
        fields = dict(kubelet=V(kubelet or api), apiserver=V(api), controller_manager=V(cm or api),
                      scheduler=V(cm or api), etcd=etcd)
        fields.update({k: V(v) if isinstance(v, str) else v for k, v in per_node.get(name, {}).items()})
        nodes.append(NodeInstalled(name, True, **fields))
    for i in range(workers):
        name = 'w%d' % (i + 1)
        fields = dict(kubelet=V(kubelet or api))
        fields.update({k: V(v) for k, v in per_node.get(name, {}).items()})
        nodes.append(NodeInstalled(name, False, **fields))
    return Installed(tuple(nodes), V(proxy) if proxy else None)


def kinds(plan):
    return [(s.kind, s.nodes, str(s.version)) for s in plan.steps]


def rules(plan):
    return sorted({r.rule for r in plan.refusals})


# --- versions -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize('text, expected', [
    ('v1.31.4', (1, 31, 4)), ('1.31.4', (1, 31, 4)), ('v1.32.0-rc.1', (1, 32, 0)), ('v1.30.2+k3s1', (1, 30, 2)),
])
def test_parse(text, expected):
    v = V(text)
    assert (v.major, v.minor, v.patch) == expected


@pytest.mark.parametrize('text', ['', 'v1.31', 'latest', '1.x.0', None, 'v1.31.4.5'])
def test_parse_rejects(text):
    assert V(text) is None


def test_prerelease_sorts_before_release_and_patch_order():
    assert V('v1.32.0-rc.1') < V('v1.32.0') < V('v1.32.1') < V('v1.33.0')
    assert str(V('v1.32.0-rc.1')) == 'v1.32.0-rc.1' and V('v1.32.4').semver == '1.32.4'


@pytest.mark.parametrize('value', ['1.32.4', 'v1.32', 132, 'latest'])
def test_parse_option_names_the_option(value):
    with pytest.raises(InvalidInput) as err:
        versions.parse_option(value, 'version')
    assert err.value.field == 'version' and err.value.rule == 'kubernetes-version'


@pytest.mark.parametrize('image, expected', [
    ('registry.k8s.io/kube-apiserver:v1.31.4', 'v1.31.4'), ('localhost:5000/kube-apiserver:v1.30.1', 'v1.30.1'),
    ('kube-apiserver:v1.29.0', 'v1.29.0'), ('registry.k8s.io/kube-apiserver', None),
    ('registry.k8s.io/kube-apiserver@sha256:abcd', None), ('registry.k8s.io/kube-apiserver:latest', None), ('', None),
    ('registry.k8s.io/kube-apiserver:v1.31.4@sha256:abcd', 'v1.31.4'),
])
def test_image_version(image, expected):
    got = versions.image_version(image)
    assert (str(got) if got else None) == expected


@pytest.mark.parametrize('image, expected', [
    ('registry.k8s.io/kube-apiserver:v1.31.4', 'registry.k8s.io/kube-apiserver:v1.32.0'),
    ('localhost:5000/k/kube-scheduler:v1.31.4@sha256:ab', 'localhost:5000/k/kube-scheduler:v1.32.0'),
    ('kube-scheduler', 'kube-scheduler:v1.32.0'),
])
def test_with_tag(image, expected):
    assert versions.with_tag(image, V('v1.32.0')) == expected


@pytest.mark.parametrize('output, expected', [('Kubernetes v1.31.4\n', 'v1.31.4'), ('v1.30.2+k3s1', 'v1.30.2'),
                                              ('', None), ('kubelet: command not found', None)])
def test_kubelet_version(output, expected):
    got = versions.kubelet_version(output)
    assert (str(got) if got else None) == expected


@pytest.mark.parametrize('minor, skew', [(27, 2), (28, 3), (33, 3)])
def test_kubelet_skew_changed_in_1_28(minor, skew):
    assert versions.kubelet_skew(minor) == skew


# --- plans --------------------------------------------------------------------------------------------------
def test_minor_upgrade_order_apiservers_then_components_then_kubelets_cp_first_workers_in_batches():
    plan = plan_upgrade(cluster(workers=3), V('v1.32.0'), max_unavailable=2)
    assert not plan.refusals
    assert kinds(plan) == [
        (APISERVER, ('cp1',), 'v1.32.0'), (APISERVER, ('cp2',), 'v1.32.0'), (APISERVER, ('cp3',), 'v1.32.0'),
        (COMPONENTS, ('cp1',), 'v1.32.0'), (COMPONENTS, ('cp2',), 'v1.32.0'), (COMPONENTS, ('cp3',), 'v1.32.0'),
        (KUBELET, ('cp1',), 'v1.32.0'), (KUBELET, ('cp2',), 'v1.32.0'), (KUBELET, ('cp3',), 'v1.32.0'),
        (KUBELET, ('w1', 'w2'), 'v1.32.0'), (KUBELET, ('w3',), 'v1.32.0')]
    assert all(s.drain for s in plan.steps if s.kind == KUBELET)
    assert not any(s.drain for s in plan.steps if s.kind != KUBELET)
    assert plan.hops == (V('v1.32.0'),) and plan.current == V('v1.31.4')


def test_patch_upgrade_is_one_hop():
    plan = plan_upgrade(cluster(), V('v1.31.7'))
    assert plan.hops == (V('v1.31.7'),) and len(plan.steps) == 3 + 3 + 5


def test_up_to_date_is_done():
    plan = plan_upgrade(cluster(api='v1.32.0'), V('v1.32.0'))
    assert plan.done and plan.steps == ()


def test_kube_proxy_moves_after_the_control_plane_before_kubelets():
    plan = plan_upgrade(cluster(proxy='v1.31.4'), V('v1.32.0'))
    order = [s.kind for s in plan.steps]
    assert order.index(KUBE_PROXY) > max(i for i, k in enumerate(order) if k == COMPONENTS)
    assert order.index(KUBE_PROXY) < order.index(KUBELET)


def test_resume_mid_apiservers_plans_only_what_is_left():
    state = cluster(cp1={'apiserver': 'v1.32.0'})
    plan = plan_upgrade(state, V('v1.32.0'))
    assert kinds(plan)[:3] == [(APISERVER, ('cp2',), 'v1.32.0'), (APISERVER, ('cp3',), 'v1.32.0'),
                               (COMPONENTS, ('cp1',), 'v1.32.0')]


def test_resume_mid_kubelets():
    done = {'apiserver': 'v1.32.0', 'controller_manager': 'v1.32.0', 'scheduler': 'v1.32.0'}
    state = cluster(cp1=dict(done, kubelet='v1.32.0'), cp2=done, cp3=done, w1={'kubelet': 'v1.32.0'})
    plan = plan_upgrade(state, V('v1.32.0'))
    assert kinds(plan) == [(KUBELET, ('cp2',), 'v1.32.0'), (KUBELET, ('cp3',), 'v1.32.0'),
                           (KUBELET, ('w2',), 'v1.32.0')]


def test_blockers_are_earlier_waves():
    plan = plan_upgrade(cluster(), V('v1.32.0'))
    kubelet = next(s for s in plan.steps if s.kind == KUBELET)
    assert {s.kind for s in plan.blockers(kubelet)} == {APISERVER, COMPONENTS}
    assert plan.blockers(plan.steps[0]) == [] and plan.blockers(plan.steps[1]) == []


def test_chain_through_intermediate_minors():
    plan = plan_upgrade(cluster(etcd=None), V('v1.33.1'), via=[V('v1.32.4')])
    assert plan.hops == (V('v1.32.4'), V('v1.33.1'))
    apis = [(s.nodes, str(s.version)) for s in plan.steps if s.kind == APISERVER]
    assert apis == [(('cp1',), 'v1.32.4'), (('cp2',), 'v1.32.4'), (('cp3',), 'v1.32.4'),
                    (('cp1',), 'v1.33.1'), (('cp2',), 'v1.33.1'), (('cp3',), 'v1.33.1')]
    # kubelets 2 minors behind stay in policy (3 allowed): they move once, straight to the target
    assert {str(s.version) for s in plan.steps if s.kind == KUBELET} == {'v1.33.1'}


def test_chain_moves_kubelets_that_would_fall_too_far_behind_first():
    state = cluster(api='v1.31.4', kubelet='v1.28.9', etcd=None)
    plan = plan_upgrade(state, V('v1.32.3'))
    first = [s for s in plan.steps if s.wave == (0, 0)]
    assert first and all(s.kind == KUBELET and str(s.version) == 'v1.31.4' for s in first)
    assert len(first) == 5 and plan.steps.index(first[-1]) < [s.kind for s in plan.steps].index(APISERVER)


@pytest.mark.parametrize('target, via, rule', [
    ('v1.33.0', [], 'skips-minor'),
    ('v1.34.0', ['v1.32.1'], 'skips-minor'),
    ('v1.33.0', ['v1.33.0'], 'via-out-of-range'),
    ('v1.33.0', ['v1.32.1', 'v1.32.2'], 'via-same-minor'),
    ('v1.31.2', [], 'downgrade'),
    ('v2.0.0', [], 'major-version'),
])
def test_refused_paths(target, via, rule):
    plan = plan_upgrade(cluster(etcd=None), V(target), via=[V(v) for v in via])
    assert rule in rules(plan) and plan.steps == ()
    with pytest.raises(UpgradeRefused) as err:
        plan.check()
    assert err.value.rule in rules(plan) and err.value.refusals


def test_skips_minor_names_the_missing_minor():
    plan = plan_upgrade(cluster(etcd=None), V('v1.34.0'))
    assert 'v1.32, v1.33' in plan.refusals[0].message


def test_unknown_versions_are_refused_by_node():
    state = cluster(cp2={'apiserver': None}, w1={'kubelet': None})
    plan = plan_upgrade(state, V('v1.32.0'))
    assert rules(plan) == ['unknown-version'] and {r.node for r in plan.refusals} == {'cp2', 'w1'}


def test_no_control_plane():
    assert rules(plan_upgrade(cluster(cps=0), V('v1.32.0'))) == ['no-control-plane']


def _with_etcd_image(state, image):
    """Every control-plane node's etcd image as its manifest would name it (installed.py reads both)."""
    return Installed(tuple(dataclasses.replace(n, etcd_image=image) if n.control_plane else n for n in state.nodes),
                     state.kube_proxy)


def test_etcd_too_old_for_the_target_is_upgraded_first_to_kubeadms_version():
    state = _with_etcd_image(cluster(etcd=(3, 5, 15)), 'registry.k8s.io/etcd:3.5.15-0')
    plan = plan_upgrade(state, V('v1.32.0'))
    assert plan.refusals == () and plan.steps[0].kind == ETCD and plan.etcd is plan.steps[0]
    assert plan.etcd.nodes == ('cp1', 'cp2', 'cp3') and plan.etcd.image == 'registry.k8s.io/etcd:3.5.16-0'
    # every other step waits for it: etcd first
    assert all(plan.blockers(s) == [plan.etcd] for s in plan.steps[1:] if s.wave == (0, 1))
    assert [s.kind for s in plan.steps[1:4]] == [APISERVER] * 3
    assert plan.as_dict()['etcd'] == {'kind': 'etcd', 'nodes': ['cp1', 'cp2', 'cp3'], 'version': 'v1.32.0',
                                      'drain': False, 'hop': -1, 'image': 'registry.k8s.io/etcd:3.5.16-0'}
    assert not plan_upgrade(state, V('v1.32.0'), etcd_check=False).etcd            # not asked: no etcd step
    assert plan_upgrade(cluster(etcd=None), V('v1.32.0')).etcd is None             # no etcd of ours: nothing


def test_etcd_step_only_names_members_behind_and_the_chains_newest_minor():
    state = _with_etcd_image(cluster(etcd=(3, 5, 16), cp2={'etcd': (3, 5, 15)}), 'quay.io/coreos/etcd:v3.5.16')
    assert plan_upgrade(state, V('v1.32.0')).etcd.nodes == ('cp2',)
    chained = plan_upgrade(state, V('v1.33.1'), via=[V('v1.32.4')])
    assert chained.etcd.nodes == ('cp1', 'cp2', 'cp3') and chained.etcd.image == 'quay.io/coreos/etcd:3.5.21-0'
    assert plan_upgrade(state, V('v1.31.9')).etcd is None                          # 1.31 wants 3.5.15


def test_etcd_image_named_replaces_the_table():
    state = _with_etcd_image(cluster(etcd=(3, 4, 23)), 'registry.k8s.io/etcd:3.4.23-0')
    plan = plan_upgrade(state, V('v1.32.0'), etcd_image='example.org/etcd:3.5.1-0')
    assert plan.etcd.image == 'example.org/etcd:3.5.1-0' and plan.etcd.nodes == ('cp1', 'cp2', 'cp3')
    at = _with_etcd_image(cluster(etcd=(3, 5, 1)), 'example.org/etcd:3.5.1-0')
    assert plan_upgrade(at, V('v1.32.0'), etcd_image='example.org/etcd:3.5.1-0').etcd is None   # reached: done


def test_etcd_without_a_repository_to_name_is_refused():
    plan = plan_upgrade(cluster(etcd=(3, 5, 15)), V('v1.32.0'))          # a version but no image (cannot happen
    assert rules(plan) == ['unknown-version'] and 'cluster_upgrade_etcd_image' in plan.refusals[0].message   # read)


def test_etcd_for_minor_matches_kubeadm_first_releases():
    """kubeadm's SupportedEtcdVersion at each minor's vX.Y.0 (cmd/kubeadm/app/constants/constants.go): floors."""
    assert ETCD_FOR_MINOR == {(1, 31): (3, 5, 15), (1, 32): (3, 5, 16), (1, 33): (3, 5, 21), (1, 34): (3, 6, 4)}


def test_kubelet_newer_than_target_is_a_downgrade():
    plan = plan_upgrade(cluster(w1={'kubelet': 'v1.33.0'}), V('v1.32.0'))
    assert 'downgrade' in rules(plan)


def test_apiserver_beyond_first_hop():
    plan = plan_upgrade(cluster(api='v1.31.4', cp1={'apiserver': 'v1.32.5'}, etcd=None), V('v1.33.0'),
                        via=[V('v1.32.1')])
    assert 'apiserver-beyond-hop' in rules(plan)


# --- the skew policy ------------------------------------------------------------------------------------------
@pytest.mark.parametrize('per_node, proxy, expected', [
    ({}, None, []),
    ({'cp1': {'apiserver': 'v1.33.0'}}, None, ['apiserver-skew', 'component-too-old']),
    ({'cp1': {'controller_manager': 'v1.32.0'}}, None, ['component-newer-than-apiserver']),
    ({'cp1': {'apiserver': 'v1.32.0', 'controller_manager': 'v1.30.0'}}, None, ['component-too-old']),
    ({'w1': {'kubelet': 'v1.32.0'}}, None, ['kubelet-newer-than-apiserver']),
    ({'w1': {'kubelet': 'v1.27.9'}}, None, ['kubelet-too-old']),
    ({'w1': {'kubelet': 'v1.28.0'}}, None, []),
    ({'cp1': {'apiserver': 'v1.32.0'}, 'w1': {'kubelet': 'v1.32.0'}}, None, ['kubelet-newer-than-apiserver']),
    ({}, 'v1.32.0', ['kube-proxy-newer-than-apiserver']),
    ({}, 'v1.27.0', ['kube-proxy-too-old']),
    ({'w1': {'kubelet': 'v1.31.9'}}, None, []),   # a newer patch of the same minor is within the policy
])
def test_skew_violations(per_node, proxy, expected):
    assert sorted({r.rule for r in skew_violations(cluster(proxy=proxy, **per_node))}) == expected


def test_skew_before_1_28_allows_two_minors():
    assert [r.rule for r in skew_violations(cluster(api='v1.27.3', kubelet='v1.24.0'))] == ['kubelet-too-old'] * 5
    assert skew_violations(cluster(api='v1.27.3', kubelet='v1.25.0')) == []


def test_a_cluster_out_of_policy_is_refused():
    assert 'kubelet-too-old' in rules(plan_upgrade(cluster(w1={'kubelet': 'v1.26.0'}), V('v1.32.0')))


def _apply(state: Installed, step) -> Installed:
    nodes = []
    for n in state.nodes:
        if n.name in step.nodes:
            if step.kind == APISERVER:
                n = n.__class__(**dict(n.__dict__, apiserver=step.version))
            elif step.kind == COMPONENTS:
                n = n.__class__(**dict(n.__dict__, controller_manager=step.version, scheduler=step.version))
            elif step.kind == KUBELET:
                n = n.__class__(**dict(n.__dict__, kubelet=step.version))
        nodes.append(n)
    return Installed(tuple(nodes), step.version if step.kind == KUBE_PROXY else state.kube_proxy)


@pytest.mark.parametrize('start, kubelet, target, via', [
    ('v1.31.4', None, 'v1.32.0', []),
    ('v1.31.4', 'v1.29.3', 'v1.32.0', []),
    ('v1.30.1', 'v1.28.2', 'v1.33.2', ['v1.31.9', 'v1.32.4']),
    ('v1.28.0', 'v1.25.0', 'v1.31.0', ['v1.29.1', 'v1.30.1']),
    ('v1.31.4', None, 'v1.31.8', []),
])
def test_every_intermediate_state_of_every_plan_is_in_policy(start, kubelet, target, via):
    """Apply the steps one by one (batches node by node), re-planning after each as a resumed run would: the skew
    policy holds after every single change, and the end is the target everywhere."""
    state = cluster(api=start, kubelet=kubelet, proxy=kubelet or start, etcd=None)
    for _guard in itertools.count():
        assert _guard < 100
        plan = plan_upgrade(state, V(target), via=[V(v) for v in via], max_unavailable=2)
        assert not plan.refusals, plan.refusals
        if not plan.steps:
            break
        step = plan.steps[0]
        for name in step.nodes or ('',):
            state = _apply(state, step.__class__(step.wave, step.kind, (name,) if name else (), step.version))
            assert skew_violations(state) == [], (step, state)
    assert all(n.kubelet == V(target) for n in state.nodes)
    assert all(n.apiserver == V(target) == n.scheduler for n in state.control_plane)
    assert state.kube_proxy == V(target)
