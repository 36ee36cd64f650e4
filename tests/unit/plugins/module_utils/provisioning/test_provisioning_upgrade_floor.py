# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What is installed is the floor (upgrade/floor.py): a re-render with the old inventory keeps newer images."""

from __future__ import annotations

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.provisioning import layout
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.node_files import plan_node_files
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.render import from_yaml, to_yaml
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.floor import keep_installed
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.installed import manifest_image

from provisioning_fixtures import NOW, MemoryRoot, authority, cluster, node

BOOT = ('cp1=https://10.0.0.1:2380', 'new')


def render(disk=None, **overrides):
    """The node's files as node_join renders them; from `disk` (its certificates kept, as on a re-run)."""
    spec = cluster(**overrides)
    return plan_node_files(spec, node(spec), authority(), (disk or MemoryRoot()).read, NOW, BOOT)


def upgraded(files, images):
    """The node's files after an upgrade rewrote these manifests' images (as cluster_upgrade does)."""
    disk = MemoryRoot({p: f.content for p, f in files.items()})
    for component, image in images.items():
        doc = from_yaml(disk.files[layout.MANIFEST[component]])
        doc['spec']['containers'][0]['image'] = image
        disk.files[layout.MANIFEST[component]] = to_yaml(doc)
    return disk


def test_a_rerender_with_the_old_version_keeps_the_newer_images_byte_for_byte():
    files = render().files
    disk = upgraded(files, {'kube-apiserver': 'registry.k8s.io/kube-apiserver:v1.32.0',
                            'kube-controller-manager': 'registry.k8s.io/kube-controller-manager:v1.32.0',
                            'kube-scheduler': 'registry.k8s.io/kube-scheduler:v1.32.0',
                            'etcd': 'registry.k8s.io/etcd:3.5.21-0'})
    kept, warnings = keep_installed(render(disk).files, disk.read)
    for component in ('kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'etcd'):
        path = layout.MANIFEST[component]
        assert kept[path].content == disk.files[path], component   # nothing to write: no roll-back, no restart
    assert len(warnings) == 4 and 'allow_downgrade' in warnings[0]


def test_mid_upgrade_each_component_keeps_its_own_release():
    disk = upgraded(render().files, {'kube-apiserver': 'registry.k8s.io/kube-apiserver:v1.32.0'})
    kept, _warnings = keep_installed(render(disk).files, disk.read)
    assert manifest_image(kept[layout.MANIFEST['kube-apiserver']].content).endswith(':v1.32.0')
    assert manifest_image(kept[layout.MANIFEST['kube-scheduler']].content).endswith(':v1.31.4')


def test_allow_downgrade_renders_what_is_asked():
    disk = upgraded(render().files, {'kube-apiserver': 'registry.k8s.io/kube-apiserver:v1.32.0'})
    kept, warnings = keep_installed(render(disk).files, disk.read, allow_downgrade=True)
    assert manifest_image(kept[layout.MANIFEST['kube-apiserver']].content).endswith(':v1.31.4')
    assert 'goes back' in warnings[0]


@pytest.mark.parametrize('on_disk', [None, 'registry.k8s.io/kube-apiserver:v1.31.2',
                                     'registry.k8s.io/kube-apiserver@sha256:abcd'])
def test_an_older_unknown_or_missing_manifest_is_rendered_as_asked(on_disk):
    files = render().files
    disk = upgraded(files, {'kube-apiserver': on_disk} if on_disk else {})
    if on_disk is None:
        del disk.files[layout.MANIFEST['kube-apiserver']]
    kept, warnings = keep_installed(render(disk).files, disk.read)
    assert kept[layout.MANIFEST['kube-apiserver']].content == files[layout.MANIFEST['kube-apiserver']].content
    assert warnings == []


def test_a_newer_inventory_version_is_an_upgrade_not_floored():
    disk = MemoryRoot({p: f.content for p, f in render().files.items()})
    newer = render(disk, kubernetes_version='v1.32.0').files
    kept, warnings = keep_installed(newer, disk.read)
    assert kept == newer and warnings == []
