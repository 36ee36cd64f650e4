# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""CKE's `repair` configuration (cybozu-go/cke docs/cluster.md "Repair"), checked like an API, with CKE's defaults.

This is the one validation home for the procedures: `SabakanIntegration.spec.repair` (the controller) and the
`repair` option of `steward.cluster.sabakan_repair` both call `load_repair_config`, so a user can paste the
`repair:` object of an existing cluster.yml unchanged. Field names, types, defaults and CKE's own rules
(`max_concurrent_repairs must be positive`, ...) are CKE's; on top of them, because a typo in a repair
procedure silently changes what a destructive command does, an unknown field, an empty command, a wrong type
or a timeout beyond a week is refused, naming the field (`repair.repair_procedures[0].repair_operations[1].
repair_steps[0].need_drain: expected true or false, got 'yes' (rule: boolean)`).

Timeouts of 0 mean "no limit" in CKE; here every timeout is a deadline, so 0 becomes the longest one the
collection allows (`common.validate.MAX_TIMEOUT_SECONDS`, a week). As in CKE, the first procedure whose
`machine_types` lists an entry's machine type and, in it, the first operation of the entry's name apply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, input_errors_as, shown
from ansible_collections.steward.cluster.plugins.module_utils.kube.selectors import validate_label_selector
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import RepairConfigError

# CKE's defaults (cluster.go: DefaultMaxConcurrentRepairs, DefaultRepair*TimeoutSeconds; docs/cluster.md).
DEFAULT_MAX_CONCURRENT_REPAIRS = 1
DEFAULT_EVICT_RETRIES = 0
DEFAULT_EVICT_INTERVAL = 0
DEFAULT_EVICTION_TIMEOUT_SECONDS = 600
DEFAULT_COMMAND_TIMEOUT_SECONDS = 30          # repair_command and health_check_command
DEFAULT_SUCCESS_COMMAND_TIMEOUT = 30
DEFAULT_COMMAND_RETRIES = 0
DEFAULT_COMMAND_INTERVAL = 0
DEFAULT_WATCH_SECONDS = 0
MAX_SECONDS = int(validate.MAX_TIMEOUT_SECONDS)
MAX_ARGV = 256                                # arguments per command
MAX_ARG_LENGTH = 4096

_REPAIR_FIELDS = ('repair_procedures', 'max_concurrent_repairs', 'protected_namespaces', 'evict_retries',
                  'evict_interval', 'eviction_timeout_seconds', 'protected_job_pods')
_PROCEDURE_FIELDS = ('machine_types', 'repair_operations')
_OPERATION_FIELDS = ('operation', 'repair_steps', 'health_check_command', 'command_timeout_seconds',
                     'success_command', 'success_command_timeout')
_STEP_FIELDS = ('repair_command', 'command_timeout_seconds', 'command_retries', 'command_interval', 'need_drain',
                'watch_seconds')
# Names users write that CKE silently ignores (CKE's own mtest config has the first one).
_MISSPELT = {'success_command_timeout_seconds': 'success_command_timeout'}


@dataclass(frozen=True)
class RepairStep:
    repair_command: Tuple[str, ...]
    command_timeout_seconds: int      # 0 in the input: MAX_SECONDS
    command_retries: int
    command_interval: int
    need_drain: bool
    watch_seconds: int


@dataclass(frozen=True)
class RepairOperation:
    operation: str
    repair_steps: Tuple[RepairStep, ...]
    health_check_command: Tuple[str, ...]
    command_timeout_seconds: int      # of the health check
    success_command: Optional[Tuple[str, ...]]
    success_command_timeout: int


@dataclass(frozen=True)
class RepairProcedure:
    machine_types: Tuple[str, ...]
    repair_operations: Tuple[RepairOperation, ...]


@dataclass(frozen=True)
class RepairConfig:
    repair_procedures: Tuple[RepairProcedure, ...]
    max_concurrent_repairs: int
    evict_retries: int
    evict_interval: int
    eviction_timeout_seconds: int
    protected_namespaces: Optional[Mapping[str, Any]] = None   # accepted and checked; see docs/sabakan.md
    protected_job_pods: Optional[Mapping[str, Any]] = None

    def operation_for(self, machine_type: str, operation: str) -> Optional[RepairOperation]:
        """CKE's GetMatchingRepairOperation: the first procedure listing the type, its first operation of that
        name; None when there is none (the entry then cannot be repaired: it fails)."""
        for procedure in self.repair_procedures:
            if machine_type in procedure.machine_types:
                for candidate in procedure.repair_operations:
                    if candidate.operation == operation:
                        return candidate
                return None
        return None


def _object(value: Any, where: str, fields: Sequence[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidInput(where, 'object', 'expected an object, got %s' % shown(value), value)
    for key in value:
        if key not in fields:
            hint = (' (did you mean %s? CKE ignores %s silently)' % (_MISSPELT[key], key) if key in _MISSPELT
                    else '; known fields: %s' % ', '.join(fields))
            raise InvalidInput('%s.%s' % (where, key), 'unknown-field', 'unknown field%s' % hint, key)
    return value


def _list(value: Any, where: str, allow_empty: bool = False) -> List[Any]:
    if not isinstance(value, list):
        raise InvalidInput(where, 'list', 'expected a list, got %s' % shown(value), value)
    if not value and not allow_empty:
        raise InvalidInput(where, 'non-empty', 'must not be empty', value)
    return value


def _seconds(section: Mapping[str, Any], key: str, where: str, default: int, positive: bool = False,
             zero_is_max: bool = True) -> int:
    """A CKE *int of seconds: whole, not negative (positive where CKE says so), at most a week. For a timeout,
    0 (CKE: no limit) is a week; for an interval or a watch, 0 is 0."""
    value = section.get(key)
    if value is None:
        return default
    seconds = validate.integer(value, '%s.%s' % (where, key), minimum=1 if positive else 0, maximum=MAX_SECONDS)
    return seconds or (MAX_SECONDS if zero_is_max else 0)


def _count(section: Mapping[str, Any], key: str, where: str, default: int, minimum: int) -> int:
    value = section.get(key)
    if value is None:
        return default
    return validate.integer(value, '%s.%s' % (where, key), minimum=minimum, maximum=10000)


def command(value: Any, where: str) -> Tuple[str, ...]:
    """An argv list (CKE's `[]string`): at least the program, each argument a string without NUL. Never a
    shell line: `["sh", "-c", "..."]` is how a user asks for a shell."""
    items = _list(value, where)
    if len(items) > MAX_ARGV:
        raise InvalidInput(where, 'max-items', 'must have at most %d arguments, got %d' % (MAX_ARGV, len(items)))
    argv = []
    for index, item in enumerate(items):
        field = '%s[%d]' % (where, index)
        if not isinstance(item, str):
            raise InvalidInput(field, 'string', 'expected a string, got %s' % shown(item), item)
        if '\x00' in item or len(item) > MAX_ARG_LENGTH:
            raise InvalidInput(field, 'argument', 'must be at most %d characters without NUL' % MAX_ARG_LENGTH)
        argv.append(item)
    if not argv[0].strip():
        raise InvalidInput('%s[0]' % where, 'non-empty', 'the program must not be empty', argv[0])
    return tuple(argv)


def _step(data: Any, where: str) -> RepairStep:
    section = _object(data, where, _STEP_FIELDS)
    if 'repair_command' not in section:
        raise InvalidInput(where + '.repair_command', 'required', 'required, the command that repairs the machine')
    need_drain = section.get('need_drain')
    return RepairStep(
        repair_command=command(section['repair_command'], where + '.repair_command'),
        command_timeout_seconds=_seconds(section, 'command_timeout_seconds', where, DEFAULT_COMMAND_TIMEOUT_SECONDS),
        command_retries=_count(section, 'command_retries', where, DEFAULT_COMMAND_RETRIES, 0),
        command_interval=_seconds(section, 'command_interval', where, DEFAULT_COMMAND_INTERVAL, zero_is_max=False),
        need_drain=False if need_drain is None else validate.boolean(need_drain, where + '.need_drain'),
        watch_seconds=_seconds(section, 'watch_seconds', where, DEFAULT_WATCH_SECONDS, zero_is_max=False),
    )


def _operation(data: Any, where: str) -> RepairOperation:
    section = _object(data, where, _OPERATION_FIELDS)
    name = section.get('operation')
    validate.text(name, where + '.operation', max_length=253)
    for key in ('repair_steps', 'health_check_command'):
        if key not in section:
            raise InvalidInput('%s.%s' % (where, key), 'required', 'required (CKE: RepairOperation.%s)' % key)
    steps = _list(section['repair_steps'], where + '.repair_steps')
    success = section.get('success_command')
    return RepairOperation(
        operation=name,
        repair_steps=tuple(_step(s, '%s.repair_steps[%d]' % (where, i)) for i, s in enumerate(steps)),
        health_check_command=command(section['health_check_command'], where + '.health_check_command'),
        command_timeout_seconds=_seconds(section, 'command_timeout_seconds', where, DEFAULT_COMMAND_TIMEOUT_SECONDS),
        success_command=None if success is None else command(success, where + '.success_command'),
        success_command_timeout=_seconds(section, 'success_command_timeout', where, DEFAULT_SUCCESS_COMMAND_TIMEOUT),
    )


def _procedure(data: Any, where: str) -> RepairProcedure:
    section = _object(data, where, _PROCEDURE_FIELDS)
    for key in _PROCEDURE_FIELDS:
        if key not in section:
            raise InvalidInput('%s.%s' % (where, key), 'required', 'required (CKE: RepairProcedure.%s)' % key)
    types = _list(section['machine_types'], where + '.machine_types')
    for i, value in enumerate(types):
        validate.text(value, '%s.machine_types[%d]' % (where, i), max_length=253)
    operations = _list(section['repair_operations'], where + '.repair_operations')
    return RepairProcedure(
        machine_types=tuple(types),
        repair_operations=tuple(_operation(o, '%s.repair_operations[%d]' % (where, i))
                                for i, o in enumerate(operations)))


@input_errors_as(RepairConfigError)
def load_repair_config(data: Any, where: str = 'repair') -> RepairConfig:
    """CKE's `repair` object checked, with CKE's defaults; RepairConfigError names the field under `where`.
    Nothing is acted on before this returns, in check mode too."""
    section = _object(data, where, _REPAIR_FIELDS)
    if 'repair_procedures' not in section:
        raise InvalidInput(where + '.repair_procedures', 'required',
                           'required, the list of repair procedures (CKE: Repair.repair_procedures)')
    procedures = _list(section['repair_procedures'], where + '.repair_procedures', allow_empty=True)
    selectors = {}
    for key in ('protected_namespaces', 'protected_job_pods'):
        if section.get(key) is not None:
            selectors[key] = validate_label_selector(section[key], '%s.%s' % (where, key))
    return RepairConfig(
        repair_procedures=tuple(_procedure(p, '%s.repair_procedures[%d]' % (where, i))
                                for i, p in enumerate(procedures)),
        # CKE: "max_concurrent_repairs must be positive", "evict_retries must not be negative", ...
        max_concurrent_repairs=_count(section, 'max_concurrent_repairs', where, DEFAULT_MAX_CONCURRENT_REPAIRS, 1),
        evict_retries=_count(section, 'evict_retries', where, DEFAULT_EVICT_RETRIES, 0),
        evict_interval=_seconds(section, 'evict_interval', where, DEFAULT_EVICT_INTERVAL, zero_is_max=False),
        eviction_timeout_seconds=_seconds(section, 'eviction_timeout_seconds', where,
                                          DEFAULT_EVICTION_TIMEOUT_SECONDS, positive=True),
        protected_namespaces=selectors.get('protected_namespaces'),
        protected_job_pods=selectors.get('protected_job_pods'),
    )
