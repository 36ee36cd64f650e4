# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`steward-etcd-member`: flags and process. Flag names follow `etcdbrctl server` where it has one
(--data-dir, --storage-provider, --store-container, --store-prefix, --server-port, --endpoints); store
credentials are read the way etcd-backup-restore reads them, from a directory of files named after the keys of
a druid backup Secret (accessKeyID, secretAccessKey, region, endpoint): `--store-credentials-dir`, default
$AWS_APPLICATION_CREDENTIALS."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import Dict, List, Optional

import yaml

from steward_controller.engine_path import ensure_engine

ensure_engine()  # before the first engine import (engine_path.py says where the collection is found)

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.stores import open_store  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.druid_store import (  # noqa: E402
    StoreCredentials, credentials, store_location)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.backup_loop import BackupPolicy  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.cron import parse_cron  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.common.durations import parse_duration  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient  # noqa: E402

from steward_controller.member.initializer import Initializer, MemberOptions  # noqa: E402
from steward_controller.member.server import MemberState, serve  # noqa: E402
from steward_controller.member.leader import Heartbeat  # noqa: E402
from steward_controller.member.leases import LeaseWriter  # noqa: E402
from steward_controller.member import metrics as member_metrics  # noqa: E402


def _list(value: Optional[str]) -> List[str]:
    return [v.strip() for v in (value or '').split(',') if v.strip()]


def read_credentials(directory: Optional[str]) -> StoreCredentials:
    """The files of a mounted druid backup Secret, by key (druid_store.credentials reads them); no directory:
    none (the environment's AWS_* apply)."""
    if not directory or not os.path.isdir(directory):
        return credentials({})
    found = {}
    for key in os.listdir(directory):
        path = os.path.join(directory, key)
        if os.path.isfile(path) and not key.startswith('.'):
            with open(path) as f:
                found[key] = f.read().strip()
    return credentials(found)


def store_url(provider: str, container: str, prefix: str, local_root: str = '') -> Optional[str]:
    """etcdbrctl's --storage-provider/--store-container/--store-prefix as our store URL (druid_store.py); a `local`
    container lives under `local_root` (etcd-backup-restore: its working directory)."""
    if not provider:
        return None
    try:
        return store_location(provider, container, prefix, field='store', local_root=local_root or os.getcwd())
    except EtcdError as exc:
        raise SystemExit('--storage-provider/--store-container/--store-prefix: %s' % exc) from exc


def _flag(value: str) -> bool:
    """etcdbrctl's booleans: `--flag`, `--flag=true`, `--flag=false` (Go's flag package)."""
    text = str(value).strip().lower()
    if text in ('true', '1', 't'):
        return True
    if text in ('false', '0', 'f'):
        return False
    raise argparse.ArgumentTypeError('expected true or false, got %r' % value)


def _boolean(group, name: str, help_text: str = '') -> None:
    group.add_argument(name, type=_flag, nargs='?', const=True, default=False, help=help_text)


# etcdbrctl server flags druid passes that this program accepts and does not need (docs/etcd-druid.md): the
# embedded etcd of a restore runs with the engine's own settings.
IGNORED = ('--embedded-etcd-quota-bytes', '--auto-compaction-mode', '--auto-compaction-retention')


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='steward-etcd-member', description=__doc__.split('\n', maxsplit=1)[0])
    p.add_argument('command', nargs='?', choices=['server'], default='server',
                   help="etcdbrctl's subcommand, as druid's StatefulSet passes it (the only one)")
    p.add_argument('--name', default=os.environ.get('POD_NAME', ''), help='this member (default $POD_NAME)')
    p.add_argument('--data-dir', default='/var/etcd/data/new.etcd')
    p.add_argument('--config-file', default=os.environ.get('ETCD_CONF', '/var/etcd/config/etcd.conf.yaml'),
                   help="the bootstrap config (druid's ConfigMap etcd.conf.yaml; default $ETCD_CONF)")
    p.add_argument('--cluster-size', type=int, default=0, help='spec.replicas (default: the members of initial-cluster)')
    p.add_argument('--endpoints', '--service-endpoints', dest='endpoints', default='',
                   help='client URLs of the cluster (druid: the client Service)')
    p.add_argument('--client-url', default='', help="this member's own client URL (default: advertise-client-urls)")
    p.add_argument('--etcd-connection-timeout', default='5s')
    tls = p.add_argument_group("client TLS to etcd (etcdbrctl's flags; druid passes them with spec.etcd.clientUrlTls)")
    tls.add_argument('--cacert', default='', help="the CA that signed etcd's server certificate")
    tls.add_argument('--cert', default='', help='the client certificate etcd asks for (client-cert-auth)')
    tls.add_argument('--key', default='', help="the client certificate's key")
    tls.add_argument('--insecure-transport', type=_flag, nargs='?', const=True, default=True,
                     help='accepted; the scheme of the client URLs decides (https: TLS)')
    tls.add_argument('--insecure-skip-tls-verify', type=_flag, nargs='?', const=True, default=False,
                     help="must stay false: etcd's certificate is always verified")
    p.add_argument('--server-host', default='0.0.0.0')
    p.add_argument('--server-port', type=int, default=8080)
    p.add_argument('--storage-provider', default='')
    p.add_argument('--store-container', default=os.environ.get('STORAGE_CONTAINER', ''))
    p.add_argument('--store-prefix', default='')
    p.add_argument('--local-store-root', default='', help="where a `local` store's container lives (default: the "
                   "working directory, as etcd-backup-restore)")
    p.add_argument('--store-credentials-dir', default=os.environ.get('AWS_APPLICATION_CREDENTIALS', ''))
    _boolean(p, '--create-as-learner', "druid's create-as-learner marker (scale-up)")
    _boolean(p, '--allow-empty-start', 'allow an existing cluster without data or backup to start empty (never the default)')
    rolling = p.add_argument_group('rolling restarts (ours)')
    rolling.add_argument('--leader-handoff', type=_flag, nargs='?', const=True, default=True,
                         help='on SIGTERM, move leadership to a caught-up follower first when this etcd leads')
    rolling.add_argument('--leader-handoff-timeout', default='10s')
    rolling.add_argument('--readiness-catch-up', type=_flag, nargs='?', const=True, default=True,
                         help='/healthz is ready only once etcd has caught up with the leader (revision, HashKV)')
    rolling.add_argument('--readiness-max-lag', type=int, default=100,
                         help='revisions this member may trail the leader by and count as caught up')
    backup = p.add_argument_group('backups (the leading member only)')
    backup.add_argument('--schedule', default='0 */24 * * *', help='full snapshot cron schedule')
    backup.add_argument('--delta-snapshot-period', default='20s', help='0 disables delta snapshots')
    backup.add_argument('--delta-snapshot-memory-limit', type=int, default=100 * 1024 * 1024)
    backup.add_argument('--garbage-collection-policy', default='LimitBased', choices=('LimitBased', 'Exponential'))
    backup.add_argument('--garbage-collection-period', default='1m')
    backup.add_argument('--max-backups', type=int, default=7)
    backup.add_argument('--defragmentation-schedule', default='0 0 */3 * *', help="'' disables it")
    backup.add_argument('--etcd-defrag-timeout', default='8m')
    backup.add_argument('--etcd-snapshot-timeout', default='15m')
    _boolean(backup, '--compress-snapshots')
    backup.add_argument('--compression-policy', default='gzip', choices=('gzip', 'zlib'),
                        help="etcd-backup-restore's lzw is read, never written")
    backup.add_argument('--work-dir', '--snapstore-temp-directory', dest='work_dir',
                        default='/var/etcd/data/temp', help='scratch space for snapshots')
    leases = p.add_argument_group('Leases (druid status)')
    _boolean(leases, '--enable-member-lease-renewal')
    _boolean(leases, '--enable-snapshot-lease-renewal')
    leases.add_argument('--k8s-heartbeat-duration', default='10s')
    leases.add_argument('--kubeconfig', default=os.environ.get('KUBECONFIG', ''),
                        help='default: $KUBECONFIG, else the in-cluster service account')
    leases.add_argument('--pod-namespace', default=os.environ.get('POD_NAMESPACE', 'default'))
    leases.add_argument('--full-snapshot-lease-name', default='', help='default <etcd>-full-snap')
    leases.add_argument('--delta-snapshot-lease-name', default='', help='default <etcd>-delta-snap')
    ignored = p.add_argument_group('accepted from druid, not needed here')
    for name in IGNORED:
        ignored.add_argument(name, default=None)
    return p


def etcd_name(pod: str) -> str:
    """druid names pods <etcd>-<ordinal>."""
    head, _sep, tail = pod.rpartition('-')
    return head if head and tail.isdigit() else pod


def backup_policy(args: argparse.Namespace) -> BackupPolicy:
    """The loop's policy from etcdbrctl's flags; a bad value names its flag."""
    try:
        return BackupPolicy(full_schedule=parse_cron(args.schedule),
                            delta_period=parse_duration(args.delta_snapshot_period, '--delta-snapshot-period'),
                            delta_memory_limit=args.delta_snapshot_memory_limit,
                            gc_policy=args.garbage_collection_policy,
                            gc_period=parse_duration(args.garbage_collection_period, '--garbage-collection-period'),
                            max_backups=args.max_backups,
                            compression=args.compression_policy if args.compress_snapshots else None,
                            snapshot_timeout=parse_duration(args.etcd_snapshot_timeout, '--etcd-snapshot-timeout'))
    except (EtcdError, InvalidInput) as exc:
        raise SystemExit(str(exc)) from exc


def lease_writer(args: argparse.Namespace, pod: str) -> Optional[LeaseWriter]:
    if not (args.enable_member_lease_renewal or args.enable_snapshot_lease_renewal):
        return None
    client = KubeClient.from_config(args.kubeconfig or None)
    name = etcd_name(pod)
    return LeaseWriter(client, args.pod_namespace, pod if args.enable_member_lease_renewal else '',
                       (args.full_snapshot_lease_name or name + '-full-snap') if args.enable_snapshot_lease_renewal else '',
                       (args.delta_snapshot_lease_name or name + '-delta-snap') if args.enable_snapshot_lease_renewal else '',
                       etcd=name if args.enable_member_lease_renewal else '')


def member_urls(value: object, name: str) -> List[str]:
    """A bootstrap config's URL setting for this member: druid writes a map of member name to URLs
    (`advertise-client-urls: {etcd-main-0: [http://...]}`), etcd itself a comma-separated string."""
    if isinstance(value, dict):
        found = value.get(name) or []
        return [str(u) for u in (found if isinstance(found, list) else _list(str(found)))]
    if isinstance(value, list):
        return [str(u) for u in value]
    return _list(str(value or ''))


def cluster_endpoints(flag: str, bootstrap: Dict[str, object], own: str) -> tuple:
    """Where the other members are asked: every member's client URLs from druid's bootstrap map (its
    `advertise-client-urls` names each member's, reachable without the Service), then `--endpoints` /
    `--service-endpoints` (the client Service), then this member's own URL; without a map, the flag's."""
    urls: List[str] = []
    advertised = bootstrap.get('advertise-client-urls')
    if isinstance(advertised, dict):
        for name in sorted(advertised):
            urls += member_urls(advertised, name)
    urls += _list(flag) + ([own] if own else [])
    return tuple(dict.fromkeys(u for u in urls if u))


def options_from(args: argparse.Namespace, bootstrap: Dict[str, object]) -> MemberOptions:
    initial_cluster = str(bootstrap.get('initial-cluster') or '')
    name = args.name or str(bootstrap.get('name') or '')
    if not name:
        raise SystemExit('--name: no member name (set --name or $POD_NAME)')
    entries = [e.split('=', 1) for e in _list(initial_cluster) if '=' in e]
    peer_urls = tuple(url for n, url in entries if n == name) or tuple(member_urls(bootstrap.get('initial-advertise-peer-urls'), name))
    client_url = args.client_url or (member_urls(bootstrap.get('advertise-client-urls'), name) or [''])[0]
    size = args.cluster_size or len(entries) or 1
    return MemberOptions(name=name, data_dir=args.data_dir, cluster_size=size, initial_cluster=initial_cluster,
                         peer_urls=peer_urls, endpoints=cluster_endpoints(args.endpoints, bootstrap, client_url),
                         token=str(bootstrap.get('initial-cluster-token') or 'etcd-cluster'),
                         learner_wanted=args.create_as_learner, allow_empty=args.allow_empty_start,
                         client_url=client_url)


def main(argv: Optional[List[str]] = None) -> int:
    args = parser().parse_args(argv)
    if args.readiness_max_lag < 0:
        print('--readiness-max-lag: must be 0 or more revisions, got %d' % args.readiness_max_lag, file=sys.stderr)
        return 2
    try:
        with open(args.config_file) as f:
            bootstrap = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError) as exc:
        print('--config-file %s: %s' % (args.config_file, exc), file=sys.stderr)
        return 2
    options = options_from(args, bootstrap)
    url = store_url(args.storage_provider, args.store_container, args.store_prefix, args.local_store_root)
    creds = read_credentials(args.store_credentials_dir)
    try:
        store = open_store(url, endpoint_url=creds.endpoint, access_key=creds.access_key, secret_key=creds.secret_key,
                           session_token=creds.session_token, region=creds.region) if url else None
    except EtcdError as exc:
        print('store %s: %s' % (url, exc), file=sys.stderr)
        return 2
    if args.insecure_skip_tls_verify:
        print('--insecure-skip-tls-verify=true: refused, etcd\'s certificate is always verified (give --cacert)',
              file=sys.stderr)
        return 2
    if bool(args.cert) != bool(args.key):
        print('--cert and --key: give both or neither (got %s)' % ('--cert' if args.cert else '--key'), file=sys.stderr)
        return 2
    conn = EtcdConnection(endpoints=options.endpoints, ca_cert=args.cacert or None, client_cert=args.cert or None,
                          client_key=args.key or None,
                          timeout=parse_duration(args.etcd_connection_timeout, '--etcd-connection-timeout') or 5.0)
    leases = lease_writer(args, options.name)
    state = MemberState(Initializer(options, store, conn, leases.learner_wanted if leases else None,
                                    recovery_marker=leases.recovery_marker if leases else None,
                                    leaving=leases.leaving if leases else None), bootstrap)
    member_metrics.install(state)
    policy = backup_policy(args) if store is not None else None
    defrag = parse_cron(args.defragmentation_schedule) if args.defragmentation_schedule else None
    period = parse_duration(args.k8s_heartbeat_duration, '--k8s-heartbeat-duration')
    # druid's member.etcd.gardener.cloud/tls-enabled: written once etcd's member list shows this member's peer URLs
    # (the heartbeat updates them to the configured ones first: leader.Heartbeat.settle_peer_urls)
    heartbeat = Heartbeat(conn.with_endpoints((options.client_url,)), conn, store=store, policy=policy,
                          work_dir=args.work_dir, leases=leases, defrag_schedule=defrag,
                          defrag_timeout=parse_duration(args.etcd_defrag_timeout, '--etcd-defrag-timeout'),
                          peer_urls=options.peer_urls)
    state.heartbeat = heartbeat
    state.catch_up, state.max_lag = args.readiness_catch_up, args.readiness_max_lag
    state.handoff = args.leader_handoff
    state.handoff_timeout = parse_duration(args.leader_handoff_timeout, '--leader-handoff-timeout')
    state.proxy_timeout = parse_duration(args.etcd_snapshot_timeout, '--etcd-snapshot-timeout')
    server = serve(state, args.server_host, args.server_port)
    print('steward-etcd-member %s serving on %s:%d' % (options.name, args.server_host, server.server_address[1]),
          flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(period):
        if state.initialized:
            heartbeat.beat()
    moved = state.prepare_stop()   # not ready from here on; a no-op hand-off when the preStop hook moved it already
    if moved:
        print('stopping: leadership handed to %s' % moved, flush=True)
    heartbeat.stop()
    server.shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
