# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""CKE constraints (LEGACY keys and defaults) and CKE's Constraints.Check."""

from __future__ import annotations

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.constraints import (
    DEFAULT_CONSTRAINTS,
    Constraints,
    check_cluster,
    load_constraints,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import ConstraintsError, GeneratorError

CKE_DEFAULTS = {
    'control-plane-count': 1,
    'minimum-workers': 1,
    'maximum-workers': 0,
    'maximum-unreachable-nodes-for-reboot': 0,
    'maximum-repair-queue-entries': 0,
    'wait-seconds-to-repair-rebooting': 0,
}


# --- defaults -------------------------------------------------------------------------------------
@pytest.mark.parametrize('data', [None, {}], ids=['none', 'empty'])
def test_defaults_are_ckes(data):
    assert load_constraints(data).as_dict() == CKE_DEFAULTS
    assert DEFAULT_CONSTRAINTS == CKE_DEFAULTS


def test_missing_keys_take_defaults():
    cstr = load_constraints({'control-plane-count': 3, 'maximum-repair-queue-entries': 5})
    assert cstr.as_dict() == dict(CKE_DEFAULTS, **{'control-plane-count': 3, 'maximum-repair-queue-entries': 5})
    assert (cstr.control_plane_count, cstr.minimum_workers, cstr.maximum_workers) == (3, 1, 0)


def test_every_key_is_read():
    data = {'control-plane-count': 5, 'minimum-workers': 10, 'maximum-workers': 20,
            'maximum-unreachable-nodes-for-reboot': 2, 'maximum-repair-queue-entries': 4,
            'wait-seconds-to-repair-rebooting': 600}
    assert load_constraints(data).as_dict() == data


def test_a_constraints_object_passes_through():
    cstr = Constraints(control_plane_count=3)
    assert load_constraints(cstr) is cstr


# --- accepted spellings of integers: YAML/JSON numbers only, as CKE's Go struct reads them ------------
@pytest.mark.parametrize('value, expected', [(3, 3), (3.0, 3), (0, 0)])
def test_integers_or_whole_floats(value, expected):
    assert load_constraints({'minimum-workers': value}).minimum_workers == expected


# --- errors say which key and why, and nothing is returned -------------------------------------------
@pytest.mark.parametrize('data, message', [
    ({'minimum-worker': 3}, 'unknown constraint.*minimum-worker'),
    ({'control_plane_count': 3}, 'unknown constraint.*control_plane_count'),
    ({'minimum-workers': -1}, 'minimum-workers: must be at least 0, got -1'),
    ({'wait-seconds-to-repair-rebooting': -5}, 'wait-seconds-to-repair-rebooting: must be at least 0'),
    ({'minimum-workers': 'three'}, 'minimum-workers: expected a whole number'),
    ({'control-plane-count': '3'}, "control-plane-count: expected a whole number, got '3'"),
    ({'minimum-workers': ' 7 '}, 'minimum-workers: expected a whole number'),
    ({'minimum-workers': 2.5}, 'minimum-workers: expected a whole number'),
    ({'minimum-workers': True}, 'minimum-workers: expected a whole number'),
    ({'minimum-workers': None}, 'minimum-workers: expected a whole number'),
    ({'minimum-workers': [1]}, 'minimum-workers: expected a whole number'),
    ({'control-plane-count': 0}, '^control-plane-count: must be at least 1'),
    ({'minimum-workers': 5, 'maximum-workers': 4}, r'^maximum-workers: \(4\) is below minimum-workers \(5\)'),
    ('control-plane-count: 3', 'constraints must be a mapping'),
    ([('control-plane-count', 3)], 'constraints must be a mapping'),
])
def test_bad_constraints(data, message):
    with pytest.raises(ConstraintsError, match=message):
        load_constraints(data)


def test_constraints_error_is_a_generator_error():
    assert issubclass(ConstraintsError, GeneratorError)


@pytest.mark.parametrize('minimum, maximum', [(5, 0), (5, 5), (0, 0), (0, 3), (2, 10)])
def test_maximum_zero_is_unlimited_and_equal_is_fine(minimum, maximum):
    cstr = load_constraints({'minimum-workers': minimum, 'maximum-workers': maximum})
    assert (cstr.minimum_workers, cstr.maximum_workers) == (minimum, maximum)


# --- CKE's Constraints.Check ----------------------------------------------------------------------
NODES = [{'address': '10.0.0.1', 'control_plane': True}, {'address': '10.0.0.2', 'control_plane': True},
         {'address': '10.0.0.3', 'control_plane': False}, {'address': '10.0.0.4'}]


@pytest.mark.parametrize('name, constraints, nodes, problem', [
    ('valid', {'control-plane-count': 2, 'maximum-workers': 2, 'minimum-workers': 1}, NODES, None),
    ('maximum 0 means unlimited', {'control-plane-count': 2, 'maximum-workers': 0, 'minimum-workers': 1}, NODES, None),
    ('control planes not equal', {'control-plane-count': 1, 'maximum-workers': 2, 'minimum-workers': 1}, NODES,
     'number of control planes is not equal to the constraint'),
    ('too many control planes is also not equal', {'control-plane-count': 3}, NODES,
     'number of control planes is not equal to the constraint'),
    ('too many workers', {'control-plane-count': 2, 'maximum-workers': 1, 'minimum-workers': 1}, NODES,
     'number of worker nodes exceeds the maximum'),
    ('too few workers', {'control-plane-count': 2, 'maximum-workers': 6, 'minimum-workers': 2}, NODES[:2],
     'number of worker nodes is less than the minimum'),
    ('no nodes', None, [], 'number of control planes is not equal to the constraint'),
])
def test_check_cluster(name, constraints, nodes, problem):
    assert check_cluster(constraints, {'name': 'c', 'nodes': nodes}) == problem
