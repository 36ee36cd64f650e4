# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `prober` loop: DWD's prober (seed 004) on DWD's own config file, on when `--prober-config` is set.

The probed cluster is the one the controller runs against, or the kubeconfig in Secret `kubeConfigSecretName`;
the dependent resources (and the status ConfigMap) live in `--namespace`. Files: loop.py (the probe thread:
timing, gating, decisions, status), report.py (Events, logs, metrics).

`--kube-api-qps` / `--kube-api-burst` are defined here and shared with the weeder loop (one flag each, as DWD).
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Optional

from steward_controller.core.loops import Loop, env_default

DEFAULT_NAME = 'steward-watchdog-prober'


@dataclasses.dataclass(frozen=True)
class ProberOptions:
    config: Any          # watchdog.prober_config.ProberConfig; None: the prober is off
    path: str            # the config file, for messages
    name: str            # owner marker on scaled targets and the status ConfigMap's prefix
    qps: float
    burst: int


def add_arguments(group: Any) -> None:
    group.add_argument('--prober-config', default=env_default('STEWARD_PROBER_CONFIG', ''),
                       help="DWD's prober config file (kubeConfigSecretName, probeInterval, dependentResourceInfos, ...); "
                            'empty: the prober is off (env STEWARD_PROBER_CONFIG)')
    group.add_argument('--prober-name', default=env_default('STEWARD_PROBER_NAME', DEFAULT_NAME),
                       help='who this prober is on the targets it scales (annotation cluster.steward.io/watchdog-owner) '
                            'and the prefix of its status ConfigMap <name>-status (env STEWARD_PROBER_NAME)')
    group.add_argument('--kube-api-qps', type=float, default=float(env_default('STEWARD_KUBE_API_QPS', '5')),
                       help='prober and weeder: requests per second to the API server, 0 = 5 (env STEWARD_KUBE_API_QPS)')
    group.add_argument('--kube-api-burst', type=int, default=int(env_default('STEWARD_KUBE_API_BURST', '10')),
                       help='prober and weeder: burst above --kube-api-qps, 0 = 10 (env STEWARD_KUBE_API_BURST)')


def rate_limits(args: argparse.Namespace) -> tuple:
    """DWD's reading of --kube-api-qps / --kube-api-burst: >= 0, and 0 means client-go's default (5, 10)."""
    from ansible_collections.steward.cluster.plugins.module_utils.kube.ratelimit import effective
    if args.kube_api_qps < 0:
        raise ValueError('--kube-api-qps must be >= 0 (0 means 5), got %s' % args.kube_api_qps)
    if args.kube_api_burst < 0:
        raise ValueError('--kube-api-burst must be >= 0 (0 means 10), got %s' % args.kube_api_burst)
    return effective(args.kube_api_qps, args.kube_api_burst)


def options(args: argparse.Namespace) -> ProberOptions:
    qps, burst = rate_limits(args)
    name = args.prober_name
    config: Optional[Any] = None
    if args.prober_config:
        config = load_config_file(args.prober_config, '--prober-config', 'prober')
    return ProberOptions(config=config, path=args.prober_config, name=name, qps=qps, burst=burst)


def load_config_file(path: str, flag: str, kind: str) -> Any:
    """Read and check a DWD config file at start: a bad file stops the program with the field named."""
    from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
    from ansible_collections.steward.cluster.plugins.module_utils.common.validate import existing_file
    from ansible_collections.steward.cluster.plugins.module_utils.watchdog.prober_config import parse_prober_config
    from ansible_collections.steward.cluster.plugins.module_utils.watchdog.weeder_config import parse_weeder_config
    parse = parse_prober_config if kind == 'prober' else parse_weeder_config
    try:
        with open(existing_file(path, flag)) as f:
            return parse(f.read(), '')
    except InvalidInput as exc:
        if exc.field == flag:
            raise ValueError(str(exc)) from None
        raise ValueError('%s %s: %s' % (flag, path, exc)) from None


def register(registry: Any, runtime: Any) -> None:
    from steward_controller.prober.loop import register as register_loop
    register_loop(registry, runtime)


HELP = "dependency watchdog prober: scale controllers down while most node leases are expired, back up after (DWD's config)"
LOOPS = (Loop(name='prober', help=HELP, register=register, add_arguments=add_arguments, options=options,
              watches_resources=False),)
