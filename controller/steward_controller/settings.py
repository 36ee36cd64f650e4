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
from typing import List, Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config_source import ConfigSource, parse_config_source


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
    maintenance_config: Optional[ConfigSource] = None   # node maintenance's maintenance.yaml; None: disabled
    maintenance_workers: int = 8                        # nodes reconciled at the same time
    slack_api_url: str = 'https://slack.com/api'        # slackThread notifications (a test double in tests)


def _env(name: str, default: str) -> str:
    return os.environ.get(name, default)


def parse(argv: Optional[Sequence[str]] = None) -> Settings:
    parser = argparse.ArgumentParser(prog='python -m steward_controller',
                                     description='steward.cluster controller: etcd backups, sabakan integration, repair entries, node maintenance.')
    parser.add_argument('--namespace', default=_env('STEWARD_NAMESPACE', _pod_namespace()),
                        help='namespace of the leader-election and repair-queue Leases (env STEWARD_NAMESPACE)')
    parser.add_argument('--identity', default=_env('STEWARD_IDENTITY', '%s-%s' % (socket.gethostname(), uuid.uuid4().hex[:6])),
                        help='this replica in the leader Lease (env STEWARD_IDENTITY; default hostname + random)')
    parser.add_argument('--watch-namespace', action='append', default=None,
                        help='watch only this namespace (repeatable; env STEWARD_WATCH_NAMESPACES, comma-separated); '
                             'default all namespaces')
    parser.add_argument('--kubeconfig', default=os.environ.get('KUBECONFIG') or None,
                        help='kubeconfig file (default: in-cluster service account, then KUBECONFIG)')
    parser.add_argument('--http-host', default=_env('STEWARD_HTTP_HOST', '0.0.0.0'), help='metrics/health bind address')
    parser.add_argument('--http-port', type=int, default=int(_env('STEWARD_HTTP_PORT', '8080')),
                        help='port of /metrics, /healthz and /readyz (env STEWARD_HTTP_PORT; 0 = pick a free one)')
    parser.add_argument('--no-leader-election', dest='leader_election', action='store_false',
                        default=_env('STEWARD_LEADER_ELECTION', 'true').lower() != 'false',
                        help='act without holding the leader Lease (a single replica only)')
    parser.add_argument('--lease-name', default=_env('STEWARD_LEASE_NAME', 'steward-controller-leader'))
    parser.add_argument('--lease-duration', type=float, default=float(_env('STEWARD_LEASE_DURATION', '15')),
                        help='seconds a standby waits after the last renewal before it takes over')
    parser.add_argument('--renew-deadline', type=float, default=float(_env('STEWARD_RENEW_DEADLINE', '10')),
                        help='the leader stops acting when it could not renew for this long (< lease duration)')
    parser.add_argument('--retry-period', type=float, default=float(_env('STEWARD_RETRY_PERIOD', '2')),
                        help='seconds between renewals / acquisition attempts')
    parser.add_argument('--log-format', choices=('json', 'plain'), default=_env('STEWARD_LOG_FORMAT', 'json'))
    parser.add_argument('--log-level', default=_env('STEWARD_LOG_LEVEL', 'INFO'))
    parser.add_argument('--work-dir', default=_env('STEWARD_WORK_DIR', '/tmp'),
                        help='scratch directory for snapshots being taken or rebuilt')
    parser.add_argument('--maintenance-config', default=_env('STEWARD_MAINTENANCE_CONFIG', ''),
                        help='node maintenance (seed 003): secret/<namespace>/<name>[/<key>] or configmap/<namespace>/<name>[/<key>] '
                             'holding maintenance.yaml (key default maintenance.yaml); empty: node maintenance is off '
                             '(env STEWARD_MAINTENANCE_CONFIG)')
    parser.add_argument('--maintenance-workers', type=int, default=int(_env('STEWARD_MAINTENANCE_WORKERS', '8')),
                        help='nodes reconciled concurrently (env STEWARD_MAINTENANCE_WORKERS)')
    parser.add_argument('--slack-api-url', default=_env('STEWARD_SLACK_API_URL', 'https://slack.com/api'),
                        help='base URL of the Slack Web API for slackThread notifications (env STEWARD_SLACK_API_URL)')
    args = parser.parse_args(argv)
    try:
        maintenance_config = parse_config_source(args.maintenance_config)
    except ValueError as exc:
        parser.error('--maintenance-config: %s' % exc)
    if args.maintenance_workers < 1:
        parser.error('--maintenance-workers must be at least 1')
    watch = args.watch_namespace
    if watch is None:
        watch = [n.strip() for n in _env('STEWARD_WATCH_NAMESPACES', '').split(',') if n.strip()]
    if args.renew_deadline >= args.lease_duration:
        parser.error('--renew-deadline (%s) must be shorter than --lease-duration (%s)' % (
            args.renew_deadline, args.lease_duration))
    return Settings(namespace=args.namespace, identity=args.identity, watch_namespaces=watch,
                    kubeconfig=args.kubeconfig, http_host=args.http_host, http_port=args.http_port,
                    leader_election=args.leader_election, lease_name=args.lease_name,
                    lease_duration=args.lease_duration, renew_deadline=args.renew_deadline,
                    retry_period=args.retry_period, log_format=args.log_format, log_level=args.log_level.upper(),
                    work_dir=args.work_dir, maintenance_config=maintenance_config,
                    maintenance_workers=args.maintenance_workers, slack_api_url=args.slack_api_url)


def _pod_namespace() -> str:
    try:
        with open('/var/run/secrets/kubernetes.io/serviceaccount/namespace') as f:
            return f.read().strip() or 'default'
    except OSError:
        return 'default'
