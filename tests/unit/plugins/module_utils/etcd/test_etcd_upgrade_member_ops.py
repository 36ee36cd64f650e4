# -*- coding: utf-8 -*-
"""The binary swap of an upgrade: in place, idempotent, the previous kept, a symlink replaced and never followed."""

import os

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.member_ops import BinarySwap, binary_version


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
