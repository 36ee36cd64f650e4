# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `prober` loop: DWD's prober (seed 004) on DWD's own config file, on when `--prober-config` is set.

The probed cluster is the one the controller runs against, or the kubeconfig in Secret `kubeConfigSecretName`;
the dependent resources (and the status ConfigMap) live in `--namespace`. Files: loop.py (the probe thread:
timing, gating, decisions, status), report.py (Events, logs, metrics).

`--kube-api-qps` / `--kube-api-burst` (core/kube_api.py) are added here and shared with the weeder loop (one flag
each, as DWD).
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Optional

from steward_controller.core import flags, kube_api
from steward_controller.core.flags import Flag
from steward_controller.core.loops import Loop

DEFAULT_NAME = 'steward-watchdog-prober'


@dataclasses.dataclass(frozen=True)
class ProberOptions:
    config: Any          # watchdog.prober_config.ProberConfig; None: the prober is off
    path: str            # the config file, for messages
    name: str            # owner marker on scaled targets and the status ConfigMap's prefix
    qps: float
    burst: int


FLAGS = (
    Flag('prober-config', 'text', '', "DWD's prober config file (kubeConfigSecretName, probeInterval, "
                                      'dependentResourceInfos, ...); empty: the prober is off'),
    Flag('prober-name', 'text', DEFAULT_NAME,
         'who this prober is on the targets it scales (annotation cluster.steward.io/watchdog-owner) and the prefix '
         'of its status ConfigMap <name>-status'),
)


def add_arguments(group: Any) -> None:
    flags.add(group, FLAGS + kube_api.FLAGS)


def options(args: argparse.Namespace) -> ProberOptions:
    from ansible_collections.steward.cluster.plugins.module_utils.watchdog.config_file import read_config_file
    from ansible_collections.steward.cluster.plugins.module_utils.watchdog.prober_config import parse_prober_config
    qps, burst = kube_api.rate_limits(args)
    value = flags.values(args, FLAGS)
    config: Optional[Any] = None
    if value['prober_config']:
        config = read_config_file(value['prober_config'], '--prober-config', parse_prober_config)
    return ProberOptions(config=config, path=value['prober_config'], name=value['prober_name'], qps=qps, burst=burst)


def register(registry: Any, runtime: Any) -> None:
    from steward_controller.prober.loop import register as register_loop
    register_loop(registry, runtime)


HELP = "dependency watchdog prober: scale controllers down while most node leases are expired, back up after (DWD's config)"
LOOPS = (Loop(name='prober', help=HELP, register=register, add_arguments=add_arguments, options=options,
              watches_resources=False),)
