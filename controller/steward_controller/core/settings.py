# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Command-line flags, each with an environment variable of the same meaning (for the Deployment)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import socket
import uuid
from typing import Any, Dict, List, Optional, Sequence, Tuple

from steward_controller.core.loops import ALL, env_default, Loop, LoopSelectionError, all_loops, loop_options, select


@dataclasses.dataclass(frozen=True)
class Settings:
    namespace: str                 # where the controller's own Leases live
    identity: str                  # this replica's name in the leader Lease
    watch_namespaces: List[str]    # empty: all namespaces
    kubeconfig: Optional[str]
    http_host: str
    http_port: int
    leader_election: bool
    lease_name: str
    lease_duration: float
    renew_deadline: float
    retry_period: float
    log_format: str
    log_level: str
    work_dir: str                  # scratch space for snapshots in flight (an emptyDir in a pod)
    health_port: int = 0                                # /healthz and /readyz also here (0: only on http_port)
    controllers: Tuple[str, ...] = ()                   # the loops this process runs (--controllers)
    loop_options: Dict[str, Any] = dataclasses.field(default_factory=dict)  # each loop's own validated flags
    secret_opt_in: bool = True     # use only Secrets labelled cluster.steward.io/usable-by-controller=true

    def enabled(self, loop: str) -> bool:
        return loop in self.controllers

    def options(self, loop: str) -> Any:
        """The options object of one loop (see core/loops.py), whether or not it is selected."""
        return self.loop_options.get(loop)


def build_parser(loops: Sequence[Loop]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='steward-controller',
        description='steward.cluster controller: the collection\'s engine run continuously, one control loop per area '
                    '(also started as `python -m steward_controller`).',
        epilog='loops: ' + '; '.join('%s: %s' % (loop.name, loop.help) for loop in loops))
    parser.add_argument('--controllers', default=env_default('STEWARD_CONTROLLERS', ALL),
                        help='comma-separated loops to run, or "all" (env STEWARD_CONTROLLERS; default all); known: '
                             + ', '.join(loop.name for loop in loops))
    parser.add_argument('--namespace', default=env_default('STEWARD_NAMESPACE', _pod_namespace()),
                        help='namespace of the leader-election and repair-queue Leases (env STEWARD_NAMESPACE)')
    parser.add_argument('--identity', default=env_default('STEWARD_IDENTITY', '%s-%s' % (socket.gethostname(), uuid.uuid4().hex[:6])),
                        help='this replica in the leader Lease (env STEWARD_IDENTITY; default hostname + random)')
    parser.add_argument('--watch-namespace', action='append', default=None,
                        help='watch only this namespace (repeatable; env STEWARD_WATCH_NAMESPACES, comma-separated); '
                             'default all namespaces')
    parser.add_argument('--kubeconfig', default=os.environ.get('KUBECONFIG') or None,
                        help='kubeconfig file (default: in-cluster service account, then KUBECONFIG)')
    parser.add_argument('--http-host', default=env_default('STEWARD_HTTP_HOST', '0.0.0.0'), help='metrics/health bind address')
    parser.add_argument('--http-port', type=int, default=int(env_default('STEWARD_HTTP_PORT', '8080')),
                        help='port of /metrics, /healthz and /readyz (env STEWARD_HTTP_PORT; 0 = pick a free one)')
    parser.add_argument('--health-port', type=int, default=int(env_default('STEWARD_HEALTH_PORT', '0')),
                        help='also serve /healthz and /readyz on this port, as DWD serves health on :9644 beside '
                             'metrics on :9643 (env STEWARD_HEALTH_PORT; 0 = only on --http-port)')
    parser.add_argument('--no-leader-election', dest='leader_election', action='store_false',
                        default=env_default('STEWARD_LEADER_ELECTION', 'true').lower() != 'false',
                        help='act without holding the leader Lease (a single replica only)')
    parser.add_argument('--lease-name', default=env_default('STEWARD_LEASE_NAME', 'steward-controller-leader'))
    parser.add_argument('--lease-duration', type=float, default=float(env_default('STEWARD_LEASE_DURATION', '15')),
                        help='seconds a standby waits after the last renewal before it takes over')
    parser.add_argument('--renew-deadline', type=float, default=float(env_default('STEWARD_RENEW_DEADLINE', '10')),
                        help='the leader stops acting when it could not renew for this long (< lease duration)')
    parser.add_argument('--retry-period', type=float, default=float(env_default('STEWARD_RETRY_PERIOD', '2')),
                        help='seconds between renewals / acquisition attempts')
    parser.add_argument('--log-format', choices=('json', 'plain'), default=env_default('STEWARD_LOG_FORMAT', 'json'))
    parser.add_argument('--log-level', default=env_default('STEWARD_LOG_LEVEL', 'INFO'))
    parser.add_argument('--secret-opt-in', dest='secret_opt_in', action=argparse.BooleanOptionalAction,
                        default=env_default('STEWARD_SECRET_OPT_IN', 'true').lower() not in ('0', 'false', 'no', 'off'),
                        help='use only Secrets labelled cluster.steward.io/usable-by-controller=true when a custom '
                             'resource names one (default on; --no-secret-opt-in uses any Secret a resource names)')
    parser.add_argument('--work-dir', default=env_default('STEWARD_WORK_DIR', '/tmp'),
                        help='scratch directory for snapshots being taken or rebuilt')
    for loop in loops:
        if loop.add_arguments is not None:
            loop.add_arguments(parser.add_argument_group('%s loop' % loop.name, loop.help))
    return parser


def parse(argv: Optional[Sequence[str]] = None) -> Settings:
    loops = all_loops()
    parser = build_parser(loops)
    args = parser.parse_args(argv)
    try:
        controllers = select(args.controllers, loops)
    except LoopSelectionError as exc:
        parser.error(str(exc))
    try:
        options = loop_options(loops, args)
    except ValueError as exc:
        parser.error(str(exc))
    watch = args.watch_namespace
    if watch is None:
        watch = [n.strip() for n in env_default('STEWARD_WATCH_NAMESPACES', '').split(',') if n.strip()]
    if args.renew_deadline >= args.lease_duration:
        parser.error('--renew-deadline (%s) must be shorter than --lease-duration (%s)' % (
            args.renew_deadline, args.lease_duration))
    return Settings(namespace=args.namespace, identity=args.identity, watch_namespaces=watch,
                    kubeconfig=args.kubeconfig, http_host=args.http_host, http_port=args.http_port,
                    leader_election=args.leader_election, lease_name=args.lease_name,
                    lease_duration=args.lease_duration, renew_deadline=args.renew_deadline,
                    retry_period=args.retry_period, log_format=args.log_format, log_level=args.log_level.upper(),
                    work_dir=args.work_dir, health_port=args.health_port, controllers=controllers, loop_options=options,
                    secret_opt_in=args.secret_opt_in)


def _pod_namespace() -> str:
    try:
        with open('/var/run/secrets/kubernetes.io/serviceaccount/namespace') as f:
            return f.read().strip() or 'default'
    except OSError:
        return 'default'
