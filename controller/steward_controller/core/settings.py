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

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput

from steward_controller.core import flags
from steward_controller.core.flags import Flag, choice
from steward_controller.core.loops import ALL, Loop, LoopSelectionError, all_loops, loop_options, select


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


def core_flags() -> Tuple[Flag, ...]:
    """The flags of the shared runtime (the loops declare their own); built when the parser is, because two
    defaults are read from the pod (its namespace) and the host (its name)."""
    return (
        Flag('namespace', 'text', _pod_namespace(), 'namespace of the leader-election and repair-queue Leases'),
        Flag('identity', 'text', '%s-%s' % (socket.gethostname(), uuid.uuid4().hex[:6]),
             'this replica in the leader Lease (default hostname + random)'),
        Flag('kubeconfig', 'text', '', 'kubeconfig file (default: in-cluster service account)', env='KUBECONFIG'),
        Flag('http-host', 'text', '0.0.0.0', 'metrics/health bind address'),
        Flag('http-port', _port, 8080, 'port of /metrics, /healthz and /readyz (0 = pick a free one)'),
        Flag('health-port', _port, 0, 'also serve /healthz and /readyz on this port, as DWD serves health on :9644 '
                                      'beside metrics on :9643 (0 = only on --http-port)'),
        Flag('leader-election', 'bool', True, 'act without holding the leader Lease (a single replica only)',
             off='--no-leader-election'),
        Flag('lease-name', 'text', 'steward-controller-leader', 'name of the leader Lease'),
        Flag('lease-duration', _seconds, 15.0, 'seconds a standby waits after the last renewal before it takes over'),
        Flag('renew-deadline', _seconds, 10.0,
             'the leader stops acting when it could not renew for this long (< lease duration)'),
        Flag('retry-period', _seconds, 2.0, 'seconds between renewals / acquisition attempts'),
        Flag('log-format', choice('json', 'plain'), 'json', 'json or plain'),
        Flag('log-level', 'text', 'INFO', 'DEBUG, INFO, WARNING or ERROR'),
        Flag('secret-opt-in', 'bool', True,
             'use only Secrets labelled cluster.steward.io/usable-by-controller=true when a custom resource names one '
             '(--no-secret-opt-in uses any Secret a resource names)'),
        Flag('work-dir', 'text', '/tmp', 'scratch directory for snapshots being taken or rebuilt'),
    )


def _port(text: str, field: str) -> int:
    try:
        number = int(text.strip())
    except ValueError:
        raise InvalidInput(field, 'integer', 'expected a port number, got %r' % (text,), text) from None
    return validate.integer(number, field, 0, 65535)


def _seconds(text: str, field: str) -> float:
    return validate.number(text.strip(), field, minimum=0, exclusive_minimum=True)


def build_parser(loops: Sequence[Loop], table: Sequence[Flag]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='steward-controller',
        description='steward.cluster controller: the collection\'s engine run continuously, one control loop per area '
                    '(also started as `python -m steward_controller`).',
        epilog='loops: ' + '; '.join('%s: %s' % (loop.name, loop.help) for loop in loops))
    parser.add_argument('--controllers', default=os.environ.get('STEWARD_CONTROLLERS', ALL),
                        help='comma-separated loops to run, or "all" (env STEWARD_CONTROLLERS; default all); known: '
                             + ', '.join(loop.name for loop in loops))
    parser.add_argument('--watch-namespace', action='append', default=None,
                        help='watch only this namespace (repeatable; env STEWARD_WATCH_NAMESPACES, comma-separated); '
                             'default all namespaces')
    flags.add(parser, table)
    for loop in loops:
        if loop.add_arguments is not None:
            loop.add_arguments(parser.add_argument_group('%s loop' % loop.name, loop.help))
    return parser


def environment_variables() -> Tuple[str, ...]:
    """Every environment variable the controller reads a setting from (a Deployment must set no other)."""
    parser = build_parser(all_loops(), core_flags())
    return tuple(sorted(set(flags.variables(parser)) | {'STEWARD_CONTROLLERS', 'STEWARD_WATCH_NAMESPACES'}))


def parse(argv: Optional[Sequence[str]] = None) -> Settings:
    loops = all_loops()
    table = core_flags()
    parser = build_parser(loops, table)
    args = parser.parse_args(argv)
    try:
        controllers = select(args.controllers, loops)
    except LoopSelectionError as exc:
        parser.error(str(exc))
    try:
        value = flags.values(args, table)
        options = loop_options(loops, args)
    except ValueError as exc:
        parser.error(str(exc))
    watch = args.watch_namespace
    if watch is None:
        watch = [n.strip() for n in os.environ.get('STEWARD_WATCH_NAMESPACES', '').split(',') if n.strip()]
    if value['renew_deadline'] >= value['lease_duration']:
        parser.error('--renew-deadline (%s) must be shorter than --lease-duration (%s)' % (
            value['renew_deadline'], value['lease_duration']))
    return Settings(namespace=value['namespace'], identity=value['identity'], watch_namespaces=watch,
                    kubeconfig=value['kubeconfig'] or None, http_host=value['http_host'],
                    http_port=value['http_port'], leader_election=value['leader_election'],
                    lease_name=value['lease_name'], lease_duration=value['lease_duration'],
                    renew_deadline=value['renew_deadline'], retry_period=value['retry_period'],
                    log_format=value['log_format'], log_level=value['log_level'].upper(), work_dir=value['work_dir'],
                    health_port=value['health_port'], controllers=controllers, loop_options=options,
                    secret_opt_in=value['secret_opt_in'])


def _pod_namespace() -> str:
    try:
        with open('/var/run/secrets/kubernetes.io/serviceaccount/namespace') as f:
            return f.read().strip() or 'default'
    except OSError:
        return 'default'
