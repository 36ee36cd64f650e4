# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Certificates renewed on the way of an upgrade's control-plane steps (upgrade/renewal.py), over a node's files as
the provisioning engine writes them (real keys and certificates, an in-memory root)."""

from __future__ import annotations

import datetime

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.provisioning import kubeconfig, layout, pki
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.certs import node_leaves
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import PkiError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.node_files import plan_node_files
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade import renewal
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.plan import (
    APISERVER, COMPONENTS, Installed, NodeInstalled, plan_upgrade,
)
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.run import run_step
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.versions import parse

from provisioning_fixtures import NOW, MemoryRoot, authority, cluster, node

DAY = datetime.timedelta(days=1)
LATER = NOW + 350 * DAY        # the node's leaves (365 days) have 15 days left; a window of 14 finds none


@pytest.fixture
def files():
    spec = cluster()
    cp1 = node(spec)
    planned = plan_node_files(spec, cp1, authority(), MemoryRoot().read, NOW, ('cp1=https://10.0.0.1:2380', 'new'))
    return spec, cp1, MemoryRoot().load(planned)


def test_nothing_is_due_outside_the_window(files):
    _spec, _cp1, root = files
    assert renewal.due(root.read, APISERVER, NOW, 30) == []
    assert renewal.due(root.read, APISERVER, LATER, 14) == []


def test_the_apiserver_steps_certificates_within_the_window(files):
    _spec, _cp1, root = files
    due = renewal.due(root.read, APISERVER, LATER, 30)
    assert [d.name for d in due] == ['apiserver', 'apiserver-etcd-client', 'apiserver-kubelet-client',
                                     'front-proxy-client']
    assert due[0].days_left == 15 and due[0].message.startswith('renew apiserver cert: expires in 15 days (')
    assert [d.name for d in renewal.due(root.read, COMPONENTS, LATER, 30)] == ['controller-manager.conf',
                                                                               'scheduler.conf']


def test_renewed_certificates_keep_key_subject_sans_and_pass_the_joins_check(files):
    spec, cp1, root = files
    before = dict(root.files)
    due = renewal.due(root.read, APISERVER, LATER, 30) + renewal.due(root.read, COMPONENTS, LATER, 30)
    written = renewal.renewed(root.read, due, LATER, 365)
    assert sorted(written) == sorted(d.path for d in due)
    assert root.files == before                       # pure: the caller writes
    root.files.update(written)
    for leaf in node_leaves(spec, cp1):
        if leaf.name not in {d.name for d in due}:
            continue
        if leaf.storage == 'kubeconfig':
            pair = kubeconfig.embedded_client(root.read(leaf.path))
            old = kubeconfig.embedded_client(before[leaf.path])
        else:
            pair = pki.KeyPair(root.read(leaf.path), root.read(leaf.key_path))
            old = pki.KeyPair(before[leaf.path], before[leaf.key_path])
        assert pair.key_pem == old.key_pem                                    # the same key
        seen = pki.describe(pair.cert_pem, LATER)
        assert seen['days_left'] == 365
        # the provisioning engine's own check keeps it: a later join writes nothing
        decision = pki.check(pair, leaf.subject, authority().ca(leaf.ca), LATER, 30, leaf.path)
        assert decision.action == 'keep', (leaf.name, decision)
    assert renewal.due(root.read, APISERVER, LATER, 30) == []
    # the kubeconfig keeps its server and CA
    assert (kubeconfig.embedded_client(root.read(layout.KUBECONFIG['scheduler'])).cert_pem
            != kubeconfig.embedded_client(before[layout.KUBECONFIG['scheduler']]).cert_pem)
    assert b'server:' in root.read(layout.KUBECONFIG['scheduler'])


def test_the_inputs_digest_follows_the_renewed_files(files):
    _spec, _cp1, root = files
    first = renewal.inputs_digest(root.read, 'kube-apiserver')
    manifest = root.read(layout.MANIFEST['kube-apiserver'])
    assert first.encode() in manifest                 # what node_files rendered: one list of inputs
    root.files.update(renewal.renewed(root.read, renewal.due(root.read, APISERVER, LATER, 30), LATER, 365))
    assert renewal.inputs_digest(root.read, 'kube-apiserver') != first
    assert renewal.inputs_digest(root.read, 'kube-scheduler').encode() in root.read(layout.MANIFEST['kube-scheduler'])
    assert renewal.inputs_digest(root.read, 'etcd') is None


def test_no_ca_key_on_the_node_is_refused_before_anything_is_written(files):
    _spec, _cp1, root = files
    due = renewal.due(root.read, APISERVER, LATER, 30)
    del root.files[layout.pki('ca.key')], root.files[layout.pki('ca.crt')]
    with pytest.raises(PkiError):
        renewal.renewed(root.read, due, LATER, 365)
    root.files.clear()
    with pytest.raises(PkiError, match='needs the cluster CA'):
        renewal.renewed(root.read, due, LATER, 365)


def test_a_certificate_of_another_ca_is_not_renewed_in_place(files):
    _spec, _cp1, root = files
    other = authority('other')
    stranger = pki.issue(pki.Subject('kube-apiserver', usages=(pki.SERVER,)), other.ca('ca'), 'ecdsa-p256', NOW, 365)
    root.files[layout.pki('apiserver.crt')], root.files[layout.pki('apiserver.key')] = stranger.cert_pem, stranger.key_pem
    with pytest.raises(PkiError, match='not signed by the CA on this node'):
        renewal.renewed(root.read, renewal.due(root.read, APISERVER, LATER, 30), LATER, 365)


class Renewing:
    """run.py's ops for one control-plane node, with renewal: calls recorded in order."""

    def __init__(self, due):
        self.node_name = 'cp1'
        self.due = due
        self.calls = []
        self.images = {}

    def certificates_due(self, kind, now):
        self.calls.append(('due', kind))
        return self.due

    def renew_certificates(self, due, now):
        self.calls.append(('renew', [d.name for d in due]))

    def set_image(self, component, version):
        self.calls.append(('set_image', component))
        self.images[component] = version

    def reported(self, component):
        return 'registry.k8s.io/%s:%s' % (component, self.images.get(component, 'v1.31.4')), True

    def apiserver_ready(self):
        return True


def _plan():
    old, new = parse('v1.31.4'), parse('v1.32.0')
    return plan_upgrade(Installed((NodeInstalled('cp1', True, old, old, old, old),)), new)


def test_the_step_renews_before_the_manifest_changes_and_check_mode_only_shows(files):
    _spec, _cp1, root = files
    due = renewal.due(root.read, APISERVER, LATER, 30)
    ops = Renewing(due)
    shown = run_step(_plan(), APISERVER, ops, check_mode=True, now=LATER)
    assert ops.calls == [('due', APISERVER)]
    assert [c['name'] for c in shown['certificates']] == [d.name for d in due]
    assert shown['actions'][0] == 'renew apiserver cert: expires in 15 days (%s) on cp1' % due[0].not_after
    ops = Renewing(due)
    run_step(_plan(), APISERVER, ops, check_mode=False, now=LATER, sleep=lambda s: None)
    assert ops.calls[:3] == [('due', APISERVER), ('renew', [d.name for d in due]), ('set_image', 'kube-apiserver')]
