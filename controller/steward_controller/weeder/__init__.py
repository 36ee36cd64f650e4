# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `weeder` loop: DWD's weeder (seed 004) on DWD's own config file, on when `--weeder-config` is set.

Watches the Endpoints and EndpointSlices of the configured services in `--namespace`; when one turns ready,
deletes the dependant pods stuck in CrashLoopBackOff for `watchDuration`. Files: loop.py (watches, weeders,
deletions, Events, metrics). Shares `--kube-api-qps` / `--kube-api-burst` (core/kube_api.py) with the prober loop.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Optional

from steward_controller.core import flags, kube_api
from steward_controller.core.flags import Flag
from steward_controller.core.loops import Loop


@dataclasses.dataclass(frozen=True)
class WeederOptions:
    config: Any          # watchdog.weeder_config.WeederConfig; None: the weeder is off
    path: str
    qps: float
    burst: int


FLAGS = (
    Flag('weeder-config', 'text', '', "DWD's weeder config file (watchDuration, servicesAndDependantSelectors); "
                                      'empty: the weeder is off'),
)


def add_arguments(group: Any) -> None:
    flags.add(group, FLAGS)


def options(args: argparse.Namespace) -> WeederOptions:
    from ansible_collections.steward.cluster.plugins.module_utils.watchdog.config_file import read_config_file
    from ansible_collections.steward.cluster.plugins.module_utils.watchdog.weeder_config import parse_weeder_config
    qps, burst = kube_api.rate_limits(args)
    path = flags.values(args, FLAGS)['weeder_config']
    config: Optional[Any] = None
    if path:
        config = read_config_file(path, '--weeder-config', parse_weeder_config)
    return WeederOptions(config=config, path=path, qps=qps, burst=burst)


def register(registry: Any, runtime: Any) -> None:
    from steward_controller.weeder.loop import register as register_loop
    register_loop(registry, runtime)


HELP = "dependency watchdog weeder: delete dependants in CrashLoopBackOff once their service is ready again (DWD's config)"
LOOPS = (Loop(name='weeder', help=HELP, register=register, add_arguments=add_arguments, options=options,
              watches_resources=False),)
