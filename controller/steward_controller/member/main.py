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

from steward_controller.member.initializer import Initializer, MemberOptions  # noqa: E402
from steward_controller.member.server import MemberState, serve  # noqa: E402

LOCAL_PROVIDERS = ('local', 'Local')
S3_PROVIDERS = ('aws', 'S3', 's3')


def _list(value: Optional[str]) -> List[str]:
    return [v.strip() for v in (value or '').split(',') if v.strip()]


def read_credentials(directory: Optional[str]) -> Dict[str, str]:
    """The files of a mounted backup Secret, by key; absent directory: none (the environment's AWS_* apply)."""
    if not directory or not os.path.isdir(directory):
        return {}
    found = {}
    for key in ('accessKeyID', 'secretAccessKey', 'region', 'endpoint', 's3ForcePathStyle', 'sessionToken'):
        path = os.path.join(directory, key)
        if os.path.isfile(path):
            with open(path) as f:
                found[key] = f.read().strip()
    return found


def store_url(provider: str, container: str, prefix: str) -> Optional[str]:
    """etcdbrctl's provider/container/prefix as one of our store URLs (snapshots under <prefix>/v2, as theirs)."""
    if not provider:
        return None
    if provider in S3_PROVIDERS:
        return 's3://%s/%s' % (container, prefix.strip('/'))
    if provider in LOCAL_PROVIDERS:
        return os.path.join(container or '/var/etcd/default.bkp', prefix.strip('/'))
    raise SystemExit('--storage-provider: %r is not supported (aws/S3 or local)' % provider)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='steward-etcd-member', description=__doc__.split('\n')[0])
    p.add_argument('--name', default=os.environ.get('POD_NAME', ''), help='this member (default $POD_NAME)')
    p.add_argument('--data-dir', default='/var/etcd/data/new.etcd')
    p.add_argument('--config-file', default='/var/etcd/config/etcd.conf.yaml',
                   help="the bootstrap config (druid's ConfigMap etcd.conf.yaml)")
    p.add_argument('--cluster-size', type=int, default=0, help='spec.replicas (default: the members of initial-cluster)')
    p.add_argument('--endpoints', default='', help='client URLs of the cluster (druid: the client Service)')
    p.add_argument('--client-url', default='', help="this member's own client URL (default: advertise-client-urls)")
    p.add_argument('--server-host', default='0.0.0.0')
    p.add_argument('--server-port', type=int, default=8080)
    p.add_argument('--storage-provider', default='')
    p.add_argument('--store-container', default='')
    p.add_argument('--store-prefix', default='')
    p.add_argument('--store-credentials-dir', default=os.environ.get('AWS_APPLICATION_CREDENTIALS', ''))
    p.add_argument('--create-as-learner', action='store_true', help="druid's create-as-learner marker (scale-up)")
    p.add_argument('--allow-empty-start', action='store_true',
                   help='allow an existing cluster without data or backup to start empty (never the default)')
    return p


def options_from(args: argparse.Namespace, bootstrap: Dict[str, object]) -> MemberOptions:
    initial_cluster = str(bootstrap.get('initial-cluster') or '')
    name = args.name or str(bootstrap.get('name') or '')
    if not name:
        raise SystemExit('--name: no member name (set --name or $POD_NAME)')
    entries = [e.split('=', 1) for e in _list(initial_cluster) if '=' in e]
    peer_urls = tuple(url for n, url in entries if n == name) or tuple(_list(str(bootstrap.get('initial-advertise-peer-urls') or '')))
    client_url = args.client_url or (_list(str(bootstrap.get('advertise-client-urls') or '')) or [''])[0]
    size = args.cluster_size or len(entries) or 1
    return MemberOptions(name=name, data_dir=args.data_dir, cluster_size=size, initial_cluster=initial_cluster,
                         peer_urls=peer_urls, endpoints=tuple(_list(args.endpoints) or [client_url]),
                         token=str(bootstrap.get('initial-cluster-token') or 'etcd-cluster'),
                         learner_wanted=args.create_as_learner, allow_empty=args.allow_empty_start,
                         client_url=client_url)


def main(argv: Optional[List[str]] = None) -> int:
    args = parser().parse_args(argv)
    try:
        with open(args.config_file) as f:
            bootstrap = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError) as exc:
        print('--config-file %s: %s' % (args.config_file, exc), file=sys.stderr)
        return 2
    options = options_from(args, bootstrap)
    url = store_url(args.storage_provider, args.store_container, args.store_prefix)
    creds = read_credentials(args.store_credentials_dir)
    try:
        store = open_store(url, endpoint_url=creds.get('endpoint'), access_key=creds.get('accessKeyID'),
                           secret_key=creds.get('secretAccessKey'), session_token=creds.get('sessionToken'),
                           region=creds.get('region')) if url else None
    except EtcdError as exc:
        print('store %s: %s' % (url, exc), file=sys.stderr)
        return 2
    conn = EtcdConnection(endpoints=options.endpoints)
    state = MemberState(Initializer(options, store, conn), bootstrap)
    server = serve(state, args.server_host, args.server_port)
    print('steward-etcd-member %s serving on %s:%d' % (options.name, args.server_host, server.server_address[1]),
          flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    server.shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
