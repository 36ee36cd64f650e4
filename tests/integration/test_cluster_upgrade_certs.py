# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Certificates renewed on the way of a Kubernetes upgrade, on private lab hosts (tests/support/upgrade_lab.py:
kubeadm's files from the provisioning engine, the lab's static-pod supervisor, the API emulator).

cp1's apiserver certificate and the client certificate in its scheduler.conf are made to end in 5 days (signed
again by cp1's own CA); the other certificates have a year. Check mode shows "renew apiserver cert: expires in 4
days" and "renew scheduler.conf cert" for cp1 and changes no file; the run renews exactly those two (same key,
signed by the node's CA, a year again), before the manifests that read them change, and the manifests' inputs
digest follows the files; a second run renews nothing.
"""

from __future__ import annotations

import datetime
import re

import pytest

from support.ansible import run_playbook
from support.upgrade_lab import UpgradeLab, versions

from ansible_collections.steward.cluster.plugins.module_utils.provisioning import files, kubeconfig, layout, pki
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.certs import read_authority
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.manifests import INPUTS_ANNOTATION
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.render import from_yaml
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade import renewal

pytestmark = [pytest.mark.slow]

HOSTS = (('cp1', 'control_plane'), ('w1', 'workers'))
FROM, TO = 'v1.31.4', 'v1.32.0'
APISERVER = layout.pki('apiserver.crt')
SCHEDULER = layout.KUBECONFIG['scheduler']


@pytest.fixture
def lab(tmp_path):
    hosts = UpgradeLab(str(tmp_path / 'lab'), HOSTS, FROM, pods_per_node=1)
    try:
        hosts.start(60)
        yield hosts
    finally:
        hosts.stop()


def _ending_in_five_days(root):
    """Sign cp1's apiserver certificate and scheduler.conf's client certificate again, ending in 5 days."""
    ca = read_authority(root.read).ca('ca')
    back = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=360)
    pair = pki.KeyPair(root.read(APISERVER), root.read(layout.pki('apiserver.key')))
    root.write(APISERVER, pki.renew_leaf(pair, ca, back, 365).cert_pem, 0o644)
    client = kubeconfig.embedded_client(root.read(SCHEDULER))
    root.write(SCHEDULER, kubeconfig.with_client(root.read(SCHEDULER), pki.renew_leaf(client, ca, back, 365)), 0o600)


def _days_left(pem):
    return pki.describe(pem, datetime.datetime.now(datetime.timezone.utc))['days_left']


def _inputs(root, component):
    doc = from_yaml(root.read(layout.MANIFEST[component]))
    return doc['metadata']['annotations'][INPUTS_ANNOTATION]


def test_certificates_ending_soon_are_renewed_in_the_step_that_restarts_their_pods(lab):
    root = files.Root(lab.root('cp1'))
    _ending_in_five_days(root)
    untouched = {p: root.read(p) for p in (layout.pki('apiserver-etcd-client.crt'), layout.pki('front-proxy-client.crt'),
                                           layout.KUBECONFIG['controller-manager'], layout.KUBECONFIG['admin'])}
    key = root.read(layout.pki('apiserver.key'))
    extra = {'cluster_upgrade_version': TO}

    before = lab.disk()
    checked = run_playbook('steward.cluster.cluster_upgrade', inventory=lab.inventory, check=True, extra_vars=extra,
                           timeout=300)
    assert checked.rc == 0, (checked.stdout[-5000:], checked.stderr[-2000:])
    assert re.search(r'renew apiserver cert: expires in [45] days', checked.stdout), checked.stdout[-5000:]
    assert re.search(r'renew scheduler.conf cert: expires in [45] days', checked.stdout)
    assert 'renew apiserver-etcd-client' not in checked.stdout
    assert lab.disk() == before

    run = run_playbook('steward.cluster.cluster_upgrade', inventory=lab.inventory, extra_vars=extra, timeout=600)
    assert run.rc == 0, (run.stdout[-6000:], run.stderr[-2000:])
    assert versions(lab.server.url) == {'cp1': TO, 'w1': TO}
    assert _days_left(root.read(APISERVER)) >= 364 and root.read(layout.pki('apiserver.key')) == key
    assert pki.verify_chain(root.read(APISERVER), root.read(layout.pki('ca.crt')))
    assert _days_left(kubeconfig.embedded_client(root.read(SCHEDULER)).cert_pem) >= 364
    assert {p: root.read(p) for p in untouched} == untouched          # not due: kept byte for byte
    for component in ('kube-apiserver', 'kube-scheduler', 'kube-controller-manager'):
        assert _inputs(root, component) == renewal.inputs_digest(root.read, component)
        assert from_yaml(root.read(layout.MANIFEST[component]))['spec']['containers'][0]['image'].endswith(':' + TO)

    renewed = root.read(APISERVER)
    again = run_playbook('steward.cluster.cluster_upgrade', inventory=lab.inventory, extra_vars=extra, timeout=300)
    assert again.rc == 0 and all(s.get('changed', 0) == 0 for s in again.stats.values()), again.stats
    assert root.read(APISERVER) == renewed and 'renew apiserver cert' not in again.stdout
