# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Timeouts and safety settings: MCM's flags with MCM's defaults, our safety knobs, and the per-machine
overrides (`spec.machineConfiguration`, inlined in the Machine spec as MCM does).

`Settings` is what the controller's flags become (all durations in seconds). `machine_timeouts` merges a
Machine's own fields over them; a bad field raises InvalidInput naming it (`spec.healthTimeout`), and the
machine waits with a condition saying so rather than acting on a guess.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.durations import positive_duration
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.machines.constants import DEFAULT_NODE_CONDITIONS

MINUTE = 60.0
HOUR = 3600.0


@dataclasses.dataclass(frozen=True)
class Settings:
    """Every knob of the machines engine. Field names are MCM's flag names in snake case where MCM has one."""
    machine_creation_timeout: float = 20 * MINUTE
    machine_health_timeout: float = 10 * MINUTE
    machine_drain_timeout: float = 2 * HOUR
    machine_max_evict_retries: int = 360
    machine_pv_detach_timeout: float = 2 * MINUTE
    machine_pv_reattach_timeout: float = 90.0
    node_conditions: Tuple[str, ...] = DEFAULT_NODE_CONDITIONS
    resource_exhausted_retry: float = 10 * MINUTE
    safety_up: int = 2
    safety_down: int = 1
    machine_safety_overshooting_period: float = 1 * MINUTE
    machine_safety_orphan_vms_period: float = 30 * MINUTE
    machine_safety_apiserver_statuscheck_period: float = 1 * MINUTE
    machine_safety_apiserver_statuscheck_timeout: float = 30.0
    concurrent_syncs: int = 50
    # MCM's retry periods (machineutils.ShortRetry/MediumRetry/LongRetry); flags so tests run in seconds.
    short_retry: float = 5.0
    medium_retry: float = 3 * MINUTE
    long_retry: float = 10 * MINUTE
    # MCM hard-codes 5 minutes of NotReady (or ReadonlyFilesystem) before a drain is forced.
    node_not_ready_force_after: float = 5 * MINUTE
    burst_replicas: int = 100                   # machines created or deleted per MachineSet per pass
    # Ours: safety beyond MCM (docs/machines.md "Safety limits").
    max_replacements: int = 1                   # Unknown -> Failed in flight per MachineDeployment (MCM: 1, fixed)
    fleet_freeze_fraction: float = 0.5          # freeze when more than this fraction of all machines is unreachable
    fleet_freeze_min_machines: int = 2          # ... and at least this many (one machine is a machine failure)
    orphan_min_age: float = 20 * MINUTE         # a VM younger than this is never collected
    missing_confirmations: int = 2              # list cycles a VM must be absent before its machine is replaced
    cloud_sync_period: float = 30.0             # how old a cloud listing may be before a pass lists again
    watchdog_check_period: float = 10.0         # how often the dependency-watchdog annotation is looked for


def check_settings(s: Settings) -> Settings:
    """Refuse settings that make no sense (the controller's flag parser reports the field as the flag)."""
    for name in ('machine_creation_timeout', 'machine_health_timeout', 'machine_drain_timeout', 'short_retry',
                 'medium_retry', 'long_retry', 'machine_safety_overshooting_period', 'machine_safety_orphan_vms_period',
                 'machine_safety_apiserver_statuscheck_period', 'machine_safety_apiserver_statuscheck_timeout',
                 'cloud_sync_period', 'watchdog_check_period'):
        validate.number(getattr(s, name), name, minimum=0, exclusive_minimum=True)
    for name in ('machine_pv_detach_timeout', 'machine_pv_reattach_timeout', 'resource_exhausted_retry',
                 'node_not_ready_force_after', 'orphan_min_age'):
        validate.number(getattr(s, name), name, minimum=0)
    validate.integer(s.machine_max_evict_retries, 'machine_max_evict_retries', minimum=0)
    validate.integer(s.safety_up, 'safety_up', minimum=0)
    validate.integer(s.safety_down, 'safety_down', minimum=0)
    if s.safety_down > s.safety_up:
        raise InvalidInput('safety_down', 'maximum', 'must not exceed safety_up (%d), got %d' % (s.safety_up, s.safety_down),
                           s.safety_down)
    validate.integer(s.concurrent_syncs, 'concurrent_syncs', minimum=1)
    validate.integer(s.burst_replicas, 'burst_replicas', minimum=1)
    validate.integer(s.max_replacements, 'max_replacements', minimum=1)
    validate.number(s.fleet_freeze_fraction, 'fleet_freeze_fraction', minimum=0, maximum=1)
    validate.integer(s.fleet_freeze_min_machines, 'fleet_freeze_min_machines', minimum=1)
    validate.integer(s.missing_confirmations, 'missing_confirmations', minimum=1)
    parse_node_conditions(','.join(s.node_conditions), 'node_conditions')
    return s


def parse_node_conditions(value: Any, field: str) -> Tuple[str, ...]:
    """`KernelDeadlock,ReadonlyFilesystem` -> a tuple of condition types (MCM's comma-separated string)."""
    if value is None:
        raise InvalidInput(field, 'node-conditions', 'expected comma-separated condition types, got None', value)
    text = validate.text(value, field, allow_empty=True)
    words = tuple(w.strip() for w in text.split(',') if w.strip())
    for word in words:
        if not word.replace('-', '').replace('_', '').isalnum():
            raise InvalidInput(field, 'node-conditions', 'condition type %r is not a word' % word, value)
    return words


@dataclasses.dataclass(frozen=True)
class MachineTimeouts:
    """A machine's effective settings: its own fields over the controller's defaults."""
    creation: float
    health: float
    drain: float
    max_evict_retries: int
    node_conditions: Tuple[str, ...]
    disable_health_timeout: bool


def _duration_field(spec: Mapping[str, Any], key: str, default: float) -> float:
    value = spec.get(key)
    if value in (None, ''):
        return default
    return positive_duration(value, 'spec.' + key)


def machine_timeouts(spec: Optional[Mapping[str, Any]], settings: Settings) -> MachineTimeouts:
    """Raises InvalidInput naming the machine's field (`spec.drainTimeout`) when one is malformed.

    MCM (MCM-22): only drainTimeout set -> maxEvictRetries follows from it (one retry per 20 s eviction interval);
    only maxEvictRetries set -> the default drain timeout with that many retries; both -> both; neither -> defaults.
    """
    spec = spec or {}
    drain = _duration_field(spec, 'drainTimeout', settings.machine_drain_timeout)
    retries_value = spec.get('maxEvictRetries')
    if retries_value is None:
        retries = int(drain // EVICTION_RETRY_INTERVAL) if spec.get('drainTimeout') else settings.machine_max_evict_retries
    else:
        retries = validate.integer(retries_value, 'spec.maxEvictRetries', minimum=0)
    conditions = settings.node_conditions
    if spec.get('nodeConditions') not in (None, ''):
        conditions = parse_node_conditions(spec.get('nodeConditions'), 'spec.nodeConditions')
    disable = spec.get('disableHealthTimeout')
    if disable is not None and not isinstance(disable, bool):
        raise InvalidInput('spec.disableHealthTimeout', 'boolean', 'expected true or false, got %r' % (disable,), disable)
    return MachineTimeouts(
        creation=_duration_field(spec, 'creationTimeout', settings.machine_creation_timeout),
        health=_duration_field(spec, 'healthTimeout', settings.machine_health_timeout),
        drain=drain, max_evict_retries=retries, node_conditions=conditions, disable_health_timeout=bool(disable))


# MCM's drain.PodEvictionRetryInterval: one eviction attempt per pod every 20 s.
EVICTION_RETRY_INTERVAL = 20.0
