# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `weeder` loop: DWD's weeder (seed 004) on DWD's own config file, on when `--weeder-config` is set.

Watches the Endpoints and EndpointSlices of the configured services in `--namespace`; when one turns ready,
deletes the dependant pods stuck in CrashLoopBackOff for `watchDuration`. Files: loop.py (watches, weeders,
deletions, Events, metrics). Shares `--kube-api-qps` / `--kube-api-burst` with the prober loop.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Optional

from steward_controller.core.loops import Loop, env_default


@dataclasses.dataclass(frozen=True)
class WeederOptions:
    config: Any          # watchdog.weeder_config.WeederConfig; None: the weeder is off
    path: str
    qps: float
    burst: int


def add_arguments(group: Any) -> None:
    group.add_argument('--weeder-config', default=env_default('STEWARD_WEEDER_CONFIG', ''),
                       help="DWD's weeder config file (watchDuration, servicesAndDependantSelectors); empty: the weeder "
                            'is off (env STEWARD_WEEDER_CONFIG)')


def options(args: argparse.Namespace) -> WeederOptions:
    from steward_controller.prober import load_config_file, rate_limits
    qps, burst = rate_limits(args)
    config: Optional[Any] = None
    if args.weeder_config:
        config = load_config_file(args.weeder_config, '--weeder-config', 'weeder')
    return WeederOptions(config=config, path=args.weeder_config, qps=qps, burst=burst)


def register(registry: Any, runtime: Any) -> None:
    from steward_controller.weeder.loop import register as register_loop
    register_loop(registry, runtime)


HELP = "dependency watchdog weeder: delete dependants in CrashLoopBackOff once their service is ready again (DWD's config)"
LOOPS = (Loop(name='weeder', help=HELP, register=register, add_arguments=add_arguments, options=options,
              watches_resources=False),)
