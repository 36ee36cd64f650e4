# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `machines` loop: machine-controller-manager's Machine, MachineSet, MachineDeployment and safety
controllers over `plugins/module_utils/machines`, with the AWS and sabakan drivers.

MCM's flags keep MCM's names and defaults (`--machine-creation-timeout=20m`, `--safety-up=2`, ...); the
safety knobs beyond MCM and the retry periods (so tests run in seconds) are flags of their own. Durations
are Go durations (`90s`, `1m30s`). Every flag has an environment variable (STEWARD_ + the flag in upper
snake case, e.g. STEWARD_MACHINE_HEALTH_TIMEOUT).

Files: controller.py (caches, the pass scheduler, kopf watches, safety probes), target.py (applying plans:
API writes, drivers, drain I/O), metrics.py (the loop's collectors).
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.machines.config import Settings, check_settings, parse_node_conditions

from steward_controller.core import flags
from steward_controller.core.flags import Flag
from steward_controller.core.loops import Loop

DEFAULTS = Settings()

# flag -> (Settings field or None for loop options, kind (core/flags.py, or conditions), default, help)
FLAGS = (
    ('machine-creation-timeout', 'machine_creation_timeout', 'duration', DEFAULTS.machine_creation_timeout,
     'a machine that has not joined in this time is Failed and replaced'),
    ('machine-health-timeout', 'machine_health_timeout', 'duration', DEFAULTS.machine_health_timeout,
     'an Unknown machine is Failed after this time (subject to the safety gates)'),
    ('machine-drain-timeout', 'machine_drain_timeout', 'duration', DEFAULTS.machine_drain_timeout,
     'a drain blocked this long (from the deletion) is forced'),
    ('machine-max-evict-retries', 'machine_max_evict_retries', 'int', DEFAULTS.machine_max_evict_retries,
     'eviction attempts per pod (one per 20s) before it is deleted'),
    ('machine-pv-detach-timeout', 'machine_pv_detach_timeout', 'duration', DEFAULTS.machine_pv_detach_timeout,
     'how long a drain waits for an evicted pod\'s volumes to detach'),
    ('machine-pv-reattach-timeout', 'machine_pv_reattach_timeout', 'duration', DEFAULTS.machine_pv_reattach_timeout,
     'how long to wait for a volume to attach elsewhere (MCM; informational)'),
    ('node-conditions', 'node_conditions', 'conditions', ','.join(DEFAULTS.node_conditions),
     'Node conditions that make a machine unhealthy when True'),
    ('resource-exhausted-retry', 'resource_exhausted_retry', 'duration', DEFAULTS.resource_exhausted_retry,
     'retry period after the cloud reports exhausted capacity or quota'),
    ('safety-up', 'safety_up', 'int', DEFAULTS.safety_up, 'machines above replicas + maxSurge that freeze a set'),
    ('safety-down', 'safety_down', 'int', DEFAULTS.safety_down, 'machines under the freeze limit that thaw it'),
    ('machine-safety-overshooting-period', 'machine_safety_overshooting_period', 'duration',
     DEFAULTS.machine_safety_overshooting_period, 'how often the overshoot freeze is checked'),
    ('machine-safety-orphan-vms-period', 'machine_safety_orphan_vms_period', 'duration',
     DEFAULTS.machine_safety_orphan_vms_period, 'how often orphan VMs are collected'),
    ('machine-safety-apiserver-statuscheck-period', 'machine_safety_apiserver_statuscheck_period', 'duration',
     DEFAULTS.machine_safety_apiserver_statuscheck_period, 'how often the API server is probed'),
    ('machine-safety-apiserver-statuscheck-timeout', 'machine_safety_apiserver_statuscheck_timeout', 'duration',
     DEFAULTS.machine_safety_apiserver_statuscheck_timeout, 'failed probes for this long freeze the machines'),
    ('concurrent-syncs', 'concurrent_syncs', 'int', DEFAULTS.concurrent_syncs, 'objects acted on at the same time'),
    ('machine-short-retry', 'short_retry', 'duration', DEFAULTS.short_retry, "MCM's ShortRetry"),
    ('machine-medium-retry', 'medium_retry', 'duration', DEFAULTS.medium_retry, "MCM's MediumRetry"),
    ('machine-long-retry', 'long_retry', 'duration', DEFAULTS.long_retry, "MCM's LongRetry"),
    ('machine-node-not-ready-force', 'node_not_ready_force_after', 'duration', DEFAULTS.node_not_ready_force_after,
     'a Node NotReady (or ReadonlyFilesystem) this long gets a forced drain (MCM: 5m, fixed)'),
    ('machine-max-replacements', 'max_replacements', 'int', DEFAULTS.max_replacements,
     'meltdown limit: machines of one deployment replaced at the same time (MCM: 1, fixed)'),
    ('machine-fleet-freeze-fraction', 'fleet_freeze_fraction', 'float', DEFAULTS.fleet_freeze_fraction,
     'freeze replacement when more than this fraction of all machines is unreachable'),
    ('machine-fleet-freeze-min-machines', 'fleet_freeze_min_machines', 'int', DEFAULTS.fleet_freeze_min_machines,
     '... and at least this many'),
    ('machine-orphan-min-age', 'orphan_min_age', 'duration', DEFAULTS.orphan_min_age, 'orphan VMs younger than this are kept'),
    ('machine-missing-confirmations', 'missing_confirmations', 'int', DEFAULTS.missing_confirmations,
     'cloud listings a VM must be absent from before its machine is replaced'),
    ('machine-cloud-sync-period', 'cloud_sync_period', 'duration', DEFAULTS.cloud_sync_period,
     'how often each class\'s VMs are listed (one call per class)'),
    ('machine-watchdog-check-period', 'watchdog_check_period', 'duration', DEFAULTS.watchdog_check_period,
     'how often the dependency-watchdog meltdown annotation is looked for'),
    ('machine-sync-period', None, 'duration', 30.0, 'a full pass over every machine object at least this often'),
    ('aws-api-rate', None, 'float', 10.0, 'EC2 requests per second per account and region (token bucket)'),
    ('aws-api-burst', None, 'int', 20, 'EC2 request burst per account and region'),
    ('sabakan-url', None, 'text', '', 'default sabakan URL for Sabakan MachineClasses without providerSpec.sabakanURL'),
    ('machine-secret-opt-in', None, 'switch', 'inherit',
     'use only MachineClass Secrets labelled cluster.steward.io/usable-by-controller=true: true, false, or inherit '
     '(follow --secret-opt-in)'),
)


@dataclasses.dataclass(frozen=True)
class MachinesOptions:
    settings: Settings
    sync_period: float
    aws_api_rate: float
    aws_api_burst: int
    sabakan_url: str
    secret_opt_in: Optional[bool] = None     # None: --secret-opt-in decides


def _dest(flag: str) -> str:
    return flag.replace('-', '_')


TABLE = tuple(Flag(flag, parse_node_conditions if kind == 'conditions' else kind, default, text,
                   dest='machines_' + _dest(flag)) for flag, _field, kind, default, text in FLAGS)


def add_arguments(group: Any) -> None:
    flags.add(group, TABLE)


def options(args: argparse.Namespace) -> MachinesOptions:
    """The flags as a checked Settings; a bad value raises ValueError naming the flag."""
    fields = {}
    loop = {}
    try:
        values = flags.values(args, TABLE)
        for flag, field, _kind, _default, _text in FLAGS:
            value = values['machines_' + _dest(flag)]
            if field:
                fields[field] = value
            else:
                loop[_dest(flag)] = value
        settings = Settings(**fields)
        try:
            check_settings(settings)
        except InvalidInput as exc:
            flag = next(f for f, field, _k, _d, _t in FLAGS if field == exc.field)
            raise InvalidInput('--' + flag, exc.rule, exc.detail, exc.value) from None
        if loop['machine_sync_period'] <= 0:
            raise InvalidInput('--machine-sync-period', 'positive', 'must be longer than 0s', loop['machine_sync_period'])
        if loop['aws_api_rate'] <= 0 or loop['aws_api_burst'] < 1:
            raise InvalidInput('--aws-api-rate', 'positive', 'the rate must be > 0 and the burst >= 1', loop['aws_api_rate'])
    except InvalidInput as exc:
        raise ValueError(str(exc)) from None
    return MachinesOptions(settings=settings, sync_period=loop['machine_sync_period'], aws_api_rate=loop['aws_api_rate'],
                           aws_api_burst=loop['aws_api_burst'], sabakan_url=loop['sabakan_url'],
                           secret_opt_in=loop['machine_secret_opt_in'])


def register(registry: Any, runtime: Any) -> None:
    from steward_controller.machines.controller import register as register_handlers
    register_handlers(registry, runtime)


LOOPS = (Loop(name='machines', help='Machine, MachineSet, MachineDeployment (machine-controller-manager API) with the '
                                    'AWS and sabakan drivers, safety freezes and orphan collection',
              register=register, add_arguments=add_arguments, options=options),)
