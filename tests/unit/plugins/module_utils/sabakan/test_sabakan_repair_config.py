# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""CKE's `repair` configuration: CKE's own examples load with CKE's defaults; bad fields are named with the rule."""

from __future__ import annotations

import copy

import pytest
import yaml

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import RepairConfigError, SpecError
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.integration_spec import parse_spec
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.repair_config import (
    MAX_SECONDS, load_repair_config,
)

# cybozu-go/cke testdata/cluster.yaml's `repair` object, as a user would paste it.
CKE_TESTDATA = yaml.safe_load('''
repair_procedures:
  - machine_types: ["Cray-1", "Cray-2"]
    repair_operations:
      - operation: "unreachable"
        repair_steps:
          - repair_command: ["reset", "remotely"]
            command_timeout_seconds: 10
            command_retries: 1
            command_interval: 5
            need_drain: true
            watch_seconds: 60
          - repair_command: ["apply", "hammer"]
            watch_seconds: 10
        health_check_command: ["knock"]
        command_timeout_seconds: 30
max_concurrent_repairs: 2
protected_namespaces:
  matchLabels:
    app: protected
protected_job_pods:
  matchLabels:
    app: job-protected
evict_retries: 3
evict_interval: 5
eviction_timeout_seconds: 120
''')


def test_ckes_testdata_loads_verbatim():
    config = load_repair_config(CKE_TESTDATA)
    assert config.max_concurrent_repairs == 2
    assert (config.evict_retries, config.evict_interval, config.eviction_timeout_seconds) == (3, 5, 120)
    operation = config.operation_for('Cray-2', 'unreachable')
    assert operation is not None and operation.health_check_command == ('knock',)
    first, second = operation.repair_steps
    assert first.repair_command == ('reset', 'remotely') and first.need_drain and first.watch_seconds == 60
    assert (first.command_timeout_seconds, first.command_retries, first.command_interval) == (10, 1, 5)
    # CKE's defaults where the step says nothing
    assert (second.command_timeout_seconds, second.command_retries, second.command_interval, second.need_drain) == (
        30, 0, 0, False)
    assert operation.success_command is None and operation.success_command_timeout == 30
    assert config.operation_for('Cray-3', 'unreachable') is None
    assert config.operation_for('Cray-1', 'unhealthy') is None


def test_defaults_are_ckes():
    config = load_repair_config({'repair_procedures': []})
    assert (config.max_concurrent_repairs, config.evict_retries, config.evict_interval,
            config.eviction_timeout_seconds) == (1, 0, 0, 600)


def test_zero_timeout_is_the_longest_deadline_not_none():
    data = copy.deepcopy(CKE_TESTDATA)
    data['repair_procedures'][0]['repair_operations'][0]['repair_steps'][0]['command_timeout_seconds'] = 0
    data['repair_procedures'][0]['repair_operations'][0]['repair_steps'][0]['watch_seconds'] = 0
    step = load_repair_config(data).repair_procedures[0].repair_operations[0].repair_steps[0]
    assert step.command_timeout_seconds == MAX_SECONDS and step.watch_seconds == 0


def test_first_matching_procedure_and_operation_win_as_in_cke():
    data = copy.deepcopy(CKE_TESTDATA)
    twin = copy.deepcopy(data['repair_procedures'][0])
    twin['repair_operations'][0]['health_check_command'] = ['other']
    data['repair_procedures'].append(twin)
    assert load_repair_config(data).operation_for('Cray-1', 'unreachable').health_check_command == ('knock',)


def _at(path, value):
    data = copy.deepcopy(CKE_TESTDATA)
    target = data
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


STEP = ['repair_procedures', 0, 'repair_operations', 0, 'repair_steps', 0]
OPERATION = ['repair_procedures', 0, 'repair_operations', 0]


@pytest.mark.parametrize('path, value, field, rule', [
    (['max_concurrent_repairs'], 0, 'repair.max_concurrent_repairs', 'minimum'),       # CKE: must be positive
    (['evict_retries'], -1, 'repair.evict_retries', 'minimum'),                         # CKE: must not be negative
    (['evict_interval'], -1, 'repair.evict_interval', 'minimum'),
    (['eviction_timeout_seconds'], 0, 'repair.eviction_timeout_seconds', 'minimum'),   # CKE: must be positive
    (['repair_procedures'], KeyError, 'repair.repair_procedures', 'required'),
    (['repair_procedures'], {}, 'repair.repair_procedures', 'list'),
    (['protected_namespaces'], {'matchLabels': {'a': 1}}, 'repair.protected_namespaces.matchLabels.a', None),
    (['repair_procedures', 0, 'machine_types'], [], 'repair.repair_procedures[0].machine_types', 'non-empty'),
    (['repair_procedures', 0, 'machine_types'], [3], 'repair.repair_procedures[0].machine_types[0]', 'string'),
    (OPERATION + ['health_check_command'], KeyError,
     'repair.repair_procedures[0].repair_operations[0].health_check_command', 'required'),
    (OPERATION + ['health_check_command'], 'knock',
     'repair.repair_procedures[0].repair_operations[0].health_check_command', 'list'),
    (OPERATION + ['success_command_timeout_seconds'], 30,
     'repair.repair_procedures[0].repair_operations[0].success_command_timeout_seconds', 'unknown-field'),
    (OPERATION + ['operation'], '', 'repair.repair_procedures[0].repair_operations[0].operation', 'non-empty'),
    (STEP + ['need_drain'], 'yes', 'repair.repair_procedures[0].repair_operations[0].repair_steps[0].need_drain',
     'boolean'),
    (STEP + ['repair_command'], [], 'repair.repair_procedures[0].repair_operations[0].repair_steps[0].repair_command',
     'non-empty'),
    (STEP + ['repair_command'], ['', 'x'],
     'repair.repair_procedures[0].repair_operations[0].repair_steps[0].repair_command[0]', 'non-empty'),
    (STEP + ['command_timeout_seconds'], 2.5,
     'repair.repair_procedures[0].repair_operations[0].repair_steps[0].command_timeout_seconds', 'integer'),
    (STEP + ['command_timeout_seconds'], MAX_SECONDS + 1,
     'repair.repair_procedures[0].repair_operations[0].repair_steps[0].command_timeout_seconds', 'maximum'),
    (STEP + ['watch_seconds'], True,
     'repair.repair_procedures[0].repair_operations[0].repair_steps[0].watch_seconds', 'integer'),
    (STEP + ['need_drian'], True, 'repair.repair_procedures[0].repair_operations[0].repair_steps[0].need_drian',
     'unknown-field'),
])
def test_bad_field_is_named_with_its_rule(path, value, field, rule):
    with pytest.raises(RepairConfigError) as caught:
        load_repair_config(_at(path, value))
    assert caught.value.field.startswith(field), caught.value.field
    if rule:
        assert caught.value.rule == rule


def test_integration_spec_carries_the_config_and_names_spec_repair():
    from test_sabakan_controller_spec import MINIMAL
    base = dict(MINIMAL)
    spec = parse_spec(dict(base, repair=CKE_TESTDATA, autoRepair={'deleteFinishedAfter': '1h'}), 'dc1')
    assert spec.repair is not None and spec.repair.max_concurrent_repairs == 2
    assert spec.delete_finished_after == 3600.0
    assert parse_spec(base, 'dc1').repair is None and parse_spec(base, 'dc1').delete_finished_after is None
    with pytest.raises(SpecError) as caught:
        parse_spec(dict(base, repair=_at(['max_concurrent_repairs'], -2)), 'dc1')
    assert caught.value.field == 'spec.repair.max_concurrent_repairs'
    with pytest.raises(SpecError) as caught:
        parse_spec(dict(base, autoRepair={'deleteFinishedAfter': '0s'}), 'dc1')
    assert caught.value.field == 'spec.autoRepair.deleteFinishedAfter'
