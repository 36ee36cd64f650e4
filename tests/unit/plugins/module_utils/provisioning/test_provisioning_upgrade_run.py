# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One node's upgrade step (run.py) against a recording stand-in of the host, the Node record, and the module's
option validation (entry.parse)."""

from __future__ import annotations

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import NotReady, Refused
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade import entry, record
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.plan import (
    APISERVER, COMPONENTS, KUBELET, Installed, NodeInstalled, plan_upgrade,
)
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.run import run_step, status
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.versions import parse

V = parse
OLD, NEW = V('v1.31.4'), V('v1.32.0')


class Host:
    """A node as run.py sees it: the calls are recorded; the kubelet "restarts" into what the binary names."""

    def __init__(self, name='w1', unschedulable=False, binary=OLD, install_ok=True, install_command=True):
        self.node_name = name
        self.calls = []
        self.images = {'kube-apiserver': OLD, 'kube-controller-manager': OLD, 'kube-scheduler': OLD}
        self.node = {'metadata': {'name': name, 'annotations': {}},
                     'spec': {'unschedulable': True} if unschedulable else {},
                     'status': {'nodeInfo': {'kubeletVersion': str(OLD)},
                                'conditions': [{'type': 'Ready', 'status': 'True'}]}}
        self.binary = binary
        self.install_ok = install_ok
        self.install_command = install_command

    def set_image(self, component, version):
        self.calls.append(('set_image', component, str(version)))
        self.images[component] = version

    def reported(self, component):
        return 'registry.k8s.io/%s:%s' % (component, self.images[component]), True

    def apiserver_ready(self):
        return True

    def get_node(self):
        return self.node

    def annotate(self, rec):
        self.calls.append(('annotate', rec.phase))
        self.node['metadata']['annotations'][record.ANNOTATION] = rec.value()

    def unschedulable(self):
        return bool(self.node['spec'].get('unschedulable'))

    def drain(self):
        self.calls.append(('drain',))
        self.node['spec']['unschedulable'] = True
        return {'evicted': ['default/a'], 'skipped': [], 'cordoned': True}

    def uncordon(self):
        self.calls.append(('uncordon',))
        self.node['spec'].pop('unschedulable', None)

    def can_install(self):
        return self.install_command

    def kubelet_binary_version(self):
        return self.binary

    def install_kubelet(self, version):
        self.calls.append(('install', str(version)))
        if self.install_ok:
            self.binary = version

    def restart_kubelet(self):
        self.calls.append(('restart',))
        self.node['status']['nodeInfo']['kubeletVersion'] = str(self.binary)


def state(cp_api=OLD, cp_cm=OLD, kubelets=OLD, cp_kubelets=None):
    nodes = tuple(NodeInstalled('cp%d' % i, True, cp_kubelets or kubelets, cp_api, cp_cm, cp_cm) for i in (1, 2)) + (
        NodeInstalled('w1', False, kubelets),)
    return Installed(nodes)


def kubelet_plan():
    return plan_upgrade(state(cp_api=NEW, cp_cm=NEW, kubelets=OLD, cp_kubelets=NEW), NEW)


def test_apiserver_step_rewrites_and_gates():
    ops = Host('cp1')
    out = run_step(plan_upgrade(state(), NEW), APISERVER, ops, check_mode=False, sleep=lambda s: None)
    assert ops.calls == [('set_image', 'kube-apiserver', 'v1.32.0')] and out['changed']
    assert out['actions'][-1].startswith('gated')


def test_check_mode_changes_nothing():
    ops = Host('cp1')
    out = run_step(plan_upgrade(state(), NEW), APISERVER, ops, check_mode=True)
    assert ops.calls == [] and out['changed'] and 'rewrite the kube-apiserver manifest on cp1 to v1.32.0' in out['actions']
    ops = Host('w1')
    out = run_step(kubelet_plan(), KUBELET, ops, check_mode=True)
    assert ops.calls == [] and out['actions'][0] == 'drain w1'


def test_components_wait_for_every_apiserver():
    plan = plan_upgrade(state(), NEW)
    with pytest.raises(Refused) as err:
        run_step(plan, COMPONENTS, Host('cp1'), check_mode=False)
    assert err.value.rule == 'order'
    with pytest.raises(Refused):
        run_step(plan, KUBELET, Host('w1'), check_mode=False)


def test_every_stage_waits_for_the_etcd_step_naming_its_image():
    nodes = tuple(NodeInstalled('cp%d' % i, True, OLD, OLD, OLD, OLD, etcd=(3, 5, 15),
                                etcd_image='registry.k8s.io/etcd:3.5.15-0') for i in (1, 2))
    plan = plan_upgrade(Installed(nodes + (NodeInstalled('w1', False, OLD),)), NEW)
    for kind, node in ((APISERVER, 'cp1'), (COMPONENTS, 'cp2'), (KUBELET, 'w1')):
        ops = Host(node)
        with pytest.raises(Refused) as err:
            run_step(plan, kind, ops, check_mode=False)
        assert err.value.rule == 'order' and 'registry.k8s.io/etcd:3.5.16-0' in str(err.value) and ops.calls == []


def test_a_maintenance_kubelet_step_runs_only_in_maintenance():
    ops = Host('w1')
    ops.maintenance = True
    with pytest.raises(Refused) as err:
        run_step(kubelet_plan(), KUBELET, ops, check_mode=False, sleep=lambda s: None)
    assert err.value.rule == 'not-in-maintenance' and ops.calls == []
    assert run_step(kubelet_plan(), KUBELET, ops, check_mode=True)['changed'] and ops.calls == []   # check: shown
    ops.node['metadata']['labels'] = {'cloud.sap/maintenance-state': 'in-maintenance'}
    ops.node['spec']['unschedulable'] = True          # the profile's drain trigger cordoned it
    out = run_step(kubelet_plan(), KUBELET, ops, check_mode=False, sleep=lambda s: None)
    assert out['changed'] and ('uncordon',) not in ops.calls and ('drain',) in ops.calls   # its way back uncordons


def test_kubelet_step_order_and_record():
    ops = Host('w1')
    run_step(kubelet_plan(), KUBELET, ops, check_mode=False, sleep=lambda s: None)
    assert ops.calls == [('annotate', 'draining'), ('drain',), ('annotate', 'drained'), ('install', 'v1.32.0'),
                         ('restart',), ('annotate', 'kubelet'), ('uncordon',), ('annotate', 'done')]
    rec = record.read(ops.node)
    assert rec == record.Record('v1.32.0', 'done', False)


def test_a_node_cordoned_before_stays_cordoned():
    ops = Host('w1', unschedulable=True)
    run_step(kubelet_plan(), KUBELET, ops, check_mode=False, sleep=lambda s: None)
    assert ('uncordon',) not in ops.calls and ops.node['spec']['unschedulable']
    assert record.read(ops.node).unschedulable_before


@pytest.mark.parametrize('phase, drains', [('draining', 1), ('drained', 0), ('kubelet', 0)])
def test_resume_never_drains_a_drained_node_again(phase, drains):
    ops = Host('w1')
    ops.node['spec']['unschedulable'] = True    # cordoned by the killed run
    ops.node['metadata']['annotations'][record.ANNOTATION] = record.Record('v1.32.0', phase, False).value()
    if phase == 'kubelet':
        ops.binary = NEW
    run_step(kubelet_plan(), KUBELET, ops, check_mode=False, sleep=lambda s: None)
    assert ops.calls.count(('drain',)) == drains
    assert ('uncordon',) in ops.calls      # it was schedulable before the upgrade (the record says so)
    assert record.read(ops.node).phase == 'done'


def test_a_record_for_another_version_is_not_a_resume():
    ops = Host('w1')
    ops.node['metadata']['annotations'][record.ANNOTATION] = record.Record('v1.31.9', 'done', False).value()
    run_step(kubelet_plan(), KUBELET, ops, check_mode=False, sleep=lambda s: None)
    assert ops.calls.count(('drain',)) == 1


def test_no_install_command_is_refused_before_the_drain():
    ops = Host('w1', install_command=False)
    with pytest.raises(Refused) as err:
        run_step(kubelet_plan(), KUBELET, ops, check_mode=False)
    assert err.value.rule == 'kubelet-install' and ops.calls == []
    ops = Host('w1', install_command=False, binary=NEW)   # installed by hand: fine
    run_step(kubelet_plan(), KUBELET, ops, check_mode=False, sleep=lambda s: None)
    assert ('install', 'v1.32.0') not in ops.calls


def test_an_install_that_installs_something_else_stops_drained():
    ops = Host('w1', install_ok=False)
    with pytest.raises(NotReady):
        run_step(kubelet_plan(), KUBELET, ops, check_mode=False, sleep=lambda s: None)
    assert ('uncordon',) not in ops.calls and record.read(ops.node).phase == 'drained'


def test_gate_timeout_is_a_deadline():
    ops = Host('w1')
    ops.restart_kubelet = lambda: None      # the kubelet never comes back at the new version
    clock = iter(range(0, 1000, 10))
    with pytest.raises(NotReady) as err:
        run_step(kubelet_plan(), KUBELET, ops, check_mode=False, timeout=30, clock=lambda: next(clock),
                 sleep=lambda s: None)
    assert 'Node w1 reporting kubelet v1.32.0' in str(err.value)


def test_nothing_to_do():
    out = run_step(plan_upgrade(state(NEW, NEW, NEW), NEW), KUBELET, Host('w1'), check_mode=False)
    assert not out['changed'] and out['step'] is None


def test_status_shows_records_and_the_next_wave():
    ops = Host('w1')
    ops.node['metadata']['annotations'][record.ANNOTATION] = record.Record('v1.32.0', 'drained', True).value()
    plan = plan_upgrade(state(cp_api=NEW, cp_cm=NEW, kubelets=OLD), NEW)
    shown = status(plan, {'w1': ops.node, 'cp1': {'metadata': {}}})
    assert shown['records'] == {'w1': {'version': 'v1.32.0', 'phase': 'drained', 'unschedulable_before': True}}
    assert [s['nodes'] for s in shown['next']] == [['cp1'], ['cp2']]


@pytest.mark.parametrize('text', ['', 'x', '{"version": "v1", "phase": "eaten"}', '[1]', '{"phase": "done"}'])
def test_unreadable_records_are_none(text):
    assert record.read({'metadata': {'annotations': {record.ANNOTATION: text}}}) is None


# --- options -----------------------------------------------------------------------------------------------------
BASE = {'version': 'v1.32.0', 'control_plane': ['cp1'], 'workers': ['w1'], 'stage': 'kubelet', 'node_name': 'w1'}


@pytest.mark.parametrize('change, field, rule', [
    ({'version': '1.32.0'}, 'version', 'kubernetes-version'),
    ({'via': ['v1.32']}, 'via[0]', 'kubernetes-version'),
    ({'stage': 'etcd'}, 'stage', None),
    ({'control_plane': []}, 'control_plane', 'required'),
    ({'control_plane': ['cp1', 'cp1']}, 'control_plane', 'unique'),
    ({'workers': ['cp1']}, 'workers', 'unique'),
    ({'node_name': None}, 'node_name', 'required'),
    ({'node_name': 'w9'}, 'node_name', 'member'),
    ({'node_name': 'W_1'}, 'node_name', None),
    ({'kubelet_install_command': ['apt-get', 'install', 'kubelet={version']}, 'kubelet_install_command[2]',
     'placeholder'),
    ({'kubelet_install_command': ['{nope}']}, 'kubelet_install_command[0]', 'placeholder'),
    ({'max_unavailable': 0}, 'max_unavailable', None),
    ({'root': 'relative'}, 'root', 'absolute-path'),
    ({'timeout': -1}, 'timeout', None),
    ({'etcd_image': 'registry.k8s.io/etcd:latest'}, 'etcd_image', 'version-tag'),
    ({'etcd_image': 'registry.k8s.io/etcd'}, 'etcd_image', 'version-tag'),
    ({'max_maintenance': 0}, 'max_maintenance', None),
    ({'maintenance_config_source': 'configmap/ns'}, 'maintenance_config_source', None),
    ({'maintenance_config_source': 'pod/ns/name'}, 'maintenance_config_source', 'one-of'),
    ({'maintenance_config_file': 'relative.yaml'}, 'maintenance_config_file', 'absolute-path'),
    ({'renew_before_days': -1}, 'renew_before_days', None),
    ({'cert_days': 0}, 'cert_days', None),
])
def test_bad_options_name_the_option(change, field, rule):
    with pytest.raises(InvalidInput) as err:
        entry.parse(dict(BASE, **change))
    assert err.value.field == field and (rule is None or err.value.rule == rule)


def test_plan_stage_needs_no_node():
    parsed = entry.parse(dict(BASE, stage='plan', node_name=None,
                              kubelet_install_command=['apt-get', 'install', '-y', 'kubelet={semver}-1.1']))
    assert parsed['stage'] == 'plan' and str(parsed['target']) == 'v1.32.0'
