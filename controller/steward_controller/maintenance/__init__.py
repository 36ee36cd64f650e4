# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `maintenance` loop: node maintenance (seed 003) for every Node, on when `--maintenance-config` is set.

Files: controller.py (the loop: scheduler, workers, kopf node watch), config.py (hot-reloaded config),
gate.py (process lock + Lease mutex), leases.py (Lease cache), queue.py (work queue, node cache),
shuffles.py (the pods and owners the engine's shuffle metrics count).
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Optional

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config_source import ConfigSource, parse_config_source

from steward_controller.core import flags
from steward_controller.core.flags import Flag
from steward_controller.core.loops import Loop


@dataclasses.dataclass(frozen=True)
class MaintenanceOptions:
    config: Optional[ConfigSource]   # where maintenance.yaml lives; None: node maintenance is off
    workers: int                     # nodes reconciled at the same time
    slack_api_url: str               # slackThread notifications (a test double in tests)


FLAGS = (
    Flag('maintenance-config', 'text', '',
         'secret/<namespace>/<name>[/<key>] or configmap/<namespace>/<name>[/<key>] holding maintenance.yaml (key '
         'default maintenance.yaml); empty: node maintenance is off'),
    Flag('maintenance-workers', 'int', 8, 'nodes reconciled concurrently'),
    Flag('slack-api-url', 'text', 'https://slack.com/api',
         'base URL of the Slack Web API for slackThread notifications'),
)


def add_arguments(group: Any) -> None:
    flags.add(group, FLAGS)


def options(args: argparse.Namespace) -> MaintenanceOptions:
    value = flags.values(args, FLAGS)
    try:
        config = parse_config_source(value['maintenance_config'])
    except ValueError as exc:
        raise ValueError('--maintenance-config: %s' % exc) from exc
    if value['maintenance_workers'] < 1:
        raise ValueError('--maintenance-workers must be at least 1')
    return MaintenanceOptions(config=config, workers=value['maintenance_workers'], slack_api_url=value['slack_api_url'])


def register(registry: Any, runtime: Any) -> None:
    from steward_controller.maintenance.controller import register as register_handlers
    register_handlers(registry, runtime)


LOOPS = (Loop(name='maintenance', help='node maintenance state machine (seed 003, maintenance.yaml unchanged)',
              register=register, add_arguments=add_arguments, options=options),)
