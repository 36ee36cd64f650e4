# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every module is in exactly one action group of meta/runtime.yml (named after its area), and its
documentation declares that membership (attributes.action_group), so `module_defaults: group/...` and
ansible-doc agree."""

from __future__ import annotations

import ast
import os

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))
MODULES_DIR = os.path.join(REPO, 'plugins', 'modules')
MODULES = sorted(f[:-3] for f in os.listdir(MODULES_DIR) if f.endswith('.py') and not f.startswith('_'))


def groups():
    with open(os.path.join(REPO, 'meta', 'runtime.yml')) as handle:
        return yaml.safe_load(handle).get('action_groups') or {}


def documentation(name):
    with open(os.path.join(MODULES_DIR, name + '.py')) as handle:
        tree = ast.parse(handle.read())
    text = next(n.value.value for n in tree.body
                if isinstance(n, ast.Assign) and getattr(n.targets[0], 'id', '') == 'DOCUMENTATION')
    return yaml.safe_load(text)


@pytest.mark.parametrize('name', MODULES)
def test_module_is_in_one_group_and_says_so(name):
    member_of = [group for group, names in groups().items() if name in names]
    assert len(member_of) == 1, (name, member_of)
    doc = documentation(name)
    assert 'ansible.builtin.action_common_attributes.actiongroups' in doc['extends_documentation_fragment']
    assert doc['attributes']['action_group'] == {'support': 'full', 'membership': ['steward.cluster.' + member_of[0]]}
