# -*- coding: utf-8 -*-
"""The swaps of an upgrade: the binary (in place, idempotent, the previous kept, a symlink replaced and never followed)
and a static pod's image tag (one line of the manifest, the previous manifest kept outside the manifests dir)."""

import os

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.member_ops import (
    BinarySwap,
    ManifestError,
    ManifestImageSwap,
    StaticPodMemberOps,
    binary_version,
    manifest_image,
)


def script(path, version):
    path.write_text('#!/bin/sh\necho "etcd Version: %s"\necho "Git SHA: x"\n' % version)
    path.chmod(0o755)
    return str(path)


def test_swap_keeps_the_previous_once_and_restore_puts_it_back(tmp_path):
    installed = script(tmp_path / 'etcd', '3.4.23')
    target = script(tmp_path / 'etcd-new', '3.5.21')
    swap = BinarySwap(installed, target)
    swap.swap()
    assert binary_version(installed) == '3.5.21' and binary_version(installed + '.pre-upgrade') == '3.4.23'
    swap.swap()   # a second swap (a resumed run) copies nothing and keeps the true previous one
    assert binary_version(installed + '.pre-upgrade') == '3.4.23' and swap.in_place()
    swap.restore()
    assert binary_version(installed) == '3.4.23'


def test_a_symlinked_binary_is_replaced_not_followed(tmp_path):
    shared = script(tmp_path / 'shared-etcd', '3.4.23')
    link = tmp_path / 'member' / 'etcd'
    link.parent.mkdir()
    os.symlink(shared, str(link))
    BinarySwap(str(link), script(tmp_path / 'etcd-new', '3.5.21')).swap()
    assert not os.path.islink(str(link)) and binary_version(str(link)) == '3.5.21'
    assert binary_version(shared) == '3.4.23'   # the other members' binary is untouched


def not_etcd(p):
    (p / 'not-etcd').write_text('#!/bin/sh\necho hello\n')
    (p / 'not-etcd').chmod(0o755)
    return str(p / 'not-etcd')


@pytest.mark.parametrize('make,rule', [(lambda p: 'etcd', 'absolute-path'),
                                       (lambda p: str(p / 'missing'), 'executable'),
                                       (not_etcd, 'etcd-binary')])
def test_binary_version_names_the_option_and_the_rule(tmp_path, make, rule):
    with pytest.raises(InvalidInput) as err:
        binary_version(make(tmp_path))
    assert err.value.field == 'target_binary' and err.value.rule == rule


# --- static pods: the manifest's image tag ------------------------------------------------------------
def _provisioned_manifest():
    """The etcd manifest exactly as the provisioning area renders it (kubeadm's shape)."""
    from ansible_collections.steward.cluster.plugins.module_utils.provisioning import manifests
    from ansible_collections.steward.cluster.plugins.module_utils.provisioning.spec import parse_cluster, parse_node
    spec = parse_cluster({'control_plane': [{'name': 'cp1', 'address': '10.0.0.1'}],
                          'etcd_image': 'registry.k8s.io/etcd:3.4.23-0'})
    node = parse_node({'node_name': 'cp1', 'address': '10.0.0.1', 'role': 'control-plane'}, spec)
    return manifests.etcd(spec, node, 'cp1=https://10.0.0.1:2380', 'new', [b'x'])


def test_the_image_swap_changes_one_line_keeps_the_previous_outside_the_manifests_dir_and_restores(tmp_path):
    manifests_dir = tmp_path / 'etc' / 'kubernetes' / 'manifests'
    manifests_dir.mkdir(parents=True)
    path = manifests_dir / 'etcd.yaml'
    before = _provisioned_manifest()
    path.write_bytes(before)
    path.chmod(0o600)
    previous = tmp_path / 'etc' / 'kubernetes' / 'tmp' / 'etcd.yaml.pre-upgrade'
    swap = ManifestImageSwap(str(path), 'registry.k8s.io/etcd:3.5.1-0', str(previous))
    assert swap.image() == 'registry.k8s.io/etcd:3.4.23-0' and not swap.in_place()
    swap.swap()
    after = path.read_bytes()
    changed = [(a, b) for a, b in zip(before.split(b'\n'), after.split(b'\n')) if a != b]
    assert len(before.split(b'\n')) == len(after.split(b'\n'))
    assert [(a.strip(), b.strip()) for a, b in changed] == [(b'image: registry.k8s.io/etcd:3.4.23-0',
                                                             b'image: registry.k8s.io/etcd:3.5.1-0')]
    assert previous.read_bytes() == before and os.listdir(str(manifests_dir)) == ['etcd.yaml']
    assert path.stat().st_mode & 0o777 == 0o600
    swap.swap()   # resumed: nothing written, the true previous kept
    assert previous.read_bytes() == before and swap.in_place()
    StaticPodMemberOps(swap).restore_previous()
    assert path.read_bytes() == before


def test_a_flow_style_manifest_is_rewritten_from_its_parsed_form(tmp_path):
    path = tmp_path / 'etcd.yaml'
    path.write_text('{"spec": {"containers": [{"name": "etcd", "image": "etcd:3.4.23", "command": ["etcd"]}]}}')
    swap = ManifestImageSwap(str(path), 'etcd:3.5.1', str(tmp_path / 'prev' / 'etcd.yaml'))
    swap.swap()
    assert manifest_image(path.read_bytes(), str(path)) == 'etcd:3.5.1'


@pytest.mark.parametrize('text', ['kind: Pod\nspec: {}\n', 'spec:\n  containers:\n  - name: etcd\n', ': : :\n  - ['])
def test_a_manifest_without_an_etcd_image_is_refused_and_not_written(tmp_path, text):
    path = tmp_path / 'etcd.yaml'
    path.write_text(text)
    with pytest.raises(ManifestError):
        ManifestImageSwap(str(path), 'etcd:3.5.1', str(tmp_path / 'prev.yaml')).swap()
    assert path.read_text() == text and not (tmp_path / 'prev.yaml').exists()


def test_a_manifest_that_is_not_yaml_names_the_file_and_the_line(tmp_path):
    path = str(tmp_path / 'etcd.yaml')
    with pytest.raises(ManifestError, match=r'etcd\.yaml: is not valid YAML at line 3'):
        manifest_image(b'spec:\n  containers: [\n', path)
