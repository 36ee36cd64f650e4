# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's stand-in for gardener's etcd-wrapper image (`start-etcd`): what the pod runtime runs for a druid
StatefulSet's etcd container, so the member-side program is driven exactly as in a real pod.

It speaks to the backup-restore sidecar as etcd-wrapper does: GET /initialization/status; when `New`,
/initialization/start?mode=full; poll while `Progress`; on `Failed` start over (etcd-wrapper retries without
limit); on `Successful` GET /config, write it, and exec the etcd binary with `--config-file`. It serves
etcd-wrapper's readiness endpoint, GET /readyz on `--etcd-wrapper-port` (9095): 200 once etcd answers a
linearizable read, which druid's multi-node readiness probe calls.

Lab-only differences: the etcd binary is chosen by the pod runtime (`--etcd-binary`, from the image's version
tag); `<etcd>-local` (druid's hostAlias for 127.0.0.1) resolves to `--pod-ip`. TLS between wrapper and sidecar
is not emulated (the flag is accepted and must be false). With `client-transport-security` in the served config
(druid's `spec.etcd.clientUrlTls`), the readiness read goes over https to the advertised client URL, verifying
etcd's certificate with the config's `trusted-ca-file` and presenting `--etcd-client-cert-path` /
`--etcd-client-key-path`. This file imports nothing of the engine.

    python -m lab.etcd_wrapper start-etcd --backup-restore-host-port=etcd-main-local:8080 \
        --etcd-server-name=etcd-main-local --backup-restore-tls-enabled=false --etcd-binary /usr/bin/etcd \
        --pod-ip 127.0.100.5 --work-dir /tmp/pod
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import List, Optional

POLL = 0.5


def _resolve(host_port: str, pod_ip: str) -> str:
    host, _sep, port = host_port.rpartition(':')
    if not host or host.endswith('-local') or host == 'localhost':
        host = pod_ip
    return 'http://%s:%s' % (host, port)


def _get(url: str, timeout: float = 10) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return answer.read().decode()


def initialize(base: str, stop: threading.Event, log=print) -> str:
    """etcd-wrapper's loop; returns the config YAML once the sidecar says Successful."""
    while not stop.is_set():
        try:
            status = _get(base + '/initialization/status').strip()
            if status == 'New':
                _get(base + '/initialization/start?mode=full')
            elif status == 'Successful':
                return _get(base + '/config')
            elif status == 'Failed':
                log('initialization failed; starting over (etcd-wrapper retries without limit)')
        except (OSError, urllib.error.URLError) as exc:
            log('backup-restore sidecar at %s not reachable yet: %s' % (base, exc))
        stop.wait(POLL)
    raise SystemExit(1)


def client_url(config_yaml: str) -> Optional[str]:
    """The first advertise-client-url of the config (a tiny reader: the config is flat `key: value` YAML)."""
    for line in config_yaml.splitlines():
        key, _sep, value = line.partition(':')
        if key.strip() == 'advertise-client-urls':
            value = value.strip().strip('\'"')
            return value.split(',')[0].strip() or None
    return None


def tls_context(config_yaml: str, cert: str, key: str) -> Optional[ssl.SSLContext]:
    """The client side of the config's `client-transport-security` (None without it): etcd's CA, and the client
    certificate etcd's client-cert-auth asks for."""
    import yaml  # PyYAML, as the runtime itself uses it
    security = (yaml.safe_load(config_yaml) or {}).get('client-transport-security') or {}
    if not security.get('trusted-ca-file'):
        return None
    context = ssl.create_default_context(cafile=security['trusted-ca-file'])
    if cert and key:
        context.load_cert_chain(cert, key)
    return context


def ready(url: Optional[str], context: Optional[ssl.SSLContext] = None) -> bool:
    """A linearizable read through etcd's JSON gateway: the member has a leader and is in quorum."""
    if not url:
        return False
    request = urllib.request.Request(url.rstrip('/') + '/v3/kv/range', data=json.dumps({'key': 'Zm9v'}).encode(),
                                     headers={'Content-Type': 'application/json'})
    try:
        with urllib.request.urlopen(request, timeout=2, context=context) as answer:
            return answer.status == 200
    except (OSError, urllib.error.URLError):
        return False


def serve_readyz(host: str, port: int, url_of, context_of=lambda: None) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args) -> None:
            return

        def do_GET(self) -> None:  # noqa: N802
            ok = self.path.split('?')[0] == '/readyz' and ready(url_of(), context_of())
            body = b'ok' if ok else b'not ready'
            self.send_response(200 if ok else 503)
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='etcd-wrapper (lab)')
    p.add_argument('command', choices=['start-etcd'])
    p.add_argument('--backup-restore-host-port', default=':8080')
    p.add_argument('--backup-restore-tls-enabled', default='false')
    p.add_argument('--backup-restore-ca-cert-bundle-path', default='')
    p.add_argument('--etcd-server-name', default='')
    p.add_argument('--etcd-client-cert-path', default='')
    p.add_argument('--etcd-client-key-path', default='')
    p.add_argument('--etcd-wrapper-port', type=int, default=9095)
    p.add_argument('--etcd-client-port', type=int, default=2379)
    p.add_argument('--etcd-binary', required=True, help='lab: the etcd of the image tag')
    p.add_argument('--pod-ip', default='127.0.0.1', help="lab: the pod's address (druid's <etcd>-local)")
    p.add_argument('--work-dir', default='.', help='lab: where the served config is written')
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = parser().parse_args(argv)
    if args.backup_restore_tls_enabled.lower() == 'true':
        print('--backup-restore-tls-enabled=true: TLS to the sidecar is not emulated in the lab', file=sys.stderr)
        return 2
    stop = threading.Event()
    child: List[subprocess.Popen] = []

    def terminate(*_):
        stop.set()
        for proc in child:
            proc.terminate()
    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, terminate)
    config: List[str] = []
    context: List[Optional[ssl.SSLContext]] = []
    readyz = serve_readyz(args.pod_ip, args.etcd_wrapper_port, lambda: client_url(config[0]) if config else None,
                          lambda: context[0] if context else None)
    try:
        base = _resolve(args.backup_restore_host_port, args.pod_ip)
        config.append(initialize(base, stop, log=lambda m: print(m, file=sys.stderr, flush=True)))
        context.append(tls_context(config[0], args.etcd_client_cert_path, args.etcd_client_key_path))
        os.makedirs(args.work_dir, exist_ok=True)
        path = os.path.join(args.work_dir, 'etcd.conf.yaml')
        with open(path, 'w') as f:
            f.write(config[0])
        env = {k: v for k, v in os.environ.items() if not k.startswith('ETCD_')}
        child.append(subprocess.Popen([args.etcd_binary, '--config-file', path], env=env))
        while child[0].poll() is None and not stop.is_set():
            time.sleep(POLL)
        if child[0].poll() is None:
            child[0].terminate()
            child[0].wait(30)
        return child[0].returncode or 0
    finally:
        readyz.shutdown()


if __name__ == '__main__':
    sys.exit(main())
