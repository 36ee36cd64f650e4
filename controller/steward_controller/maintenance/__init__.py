# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `maintenance` loop: node maintenance (seed 003) for every Node, on when `--maintenance-config` is set.

Files: controller.py (the loop: scheduler, workers, kopf node watch), config.py (hot-reloaded config),
gate.py (process lock + Lease mutex), leases.py (Lease cache), queue.py (work queue, node cache),
shuffles.py (the seed's shuffle metrics).
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Optional

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config_source import ConfigSource, parse_config_source

from steward_controller.core.loops import Loop, env_default


@dataclasses.dataclass(frozen=True)
class MaintenanceOptions:
    config: Optional[ConfigSource]   # where maintenance.yaml lives; None: node maintenance is off
    workers: int                     # nodes reconciled at the same time
    slack_api_url: str               # slackThread notifications (a test double in tests)


def add_arguments(group: Any) -> None:
    group.add_argument('--maintenance-config', default=env_default('STEWARD_MAINTENANCE_CONFIG', ''),
                       help='secret/<namespace>/<name>[/<key>] or configmap/<namespace>/<name>[/<key>] holding '
                            'maintenance.yaml (key default maintenance.yaml); empty: node maintenance is off '
                            '(env STEWARD_MAINTENANCE_CONFIG)')
    group.add_argument('--maintenance-workers', type=int, default=int(env_default('STEWARD_MAINTENANCE_WORKERS', '8')),
                       help='nodes reconciled concurrently (env STEWARD_MAINTENANCE_WORKERS)')
    group.add_argument('--slack-api-url', default=env_default('STEWARD_SLACK_API_URL', 'https://slack.com/api'),
                       help='base URL of the Slack Web API for slackThread notifications (env STEWARD_SLACK_API_URL)')


def options(args: argparse.Namespace) -> MaintenanceOptions:
    try:
        config = parse_config_source(args.maintenance_config)
    except ValueError as exc:
        raise ValueError('--maintenance-config: %s' % exc) from exc
    if args.maintenance_workers < 1:
        raise ValueError('--maintenance-workers must be at least 1')
    return MaintenanceOptions(config=config, workers=args.maintenance_workers, slack_api_url=args.slack_api_url)


def register(registry: Any, runtime: Any) -> None:
    from steward_controller.maintenance.controller import register as register_handlers
    register_handlers(registry, runtime)


LOOPS = (Loop(name='maintenance', help='node maintenance state machine (seed 003, maintenance.yaml unchanged)',
              register=register, add_arguments=add_arguments, options=options),)
