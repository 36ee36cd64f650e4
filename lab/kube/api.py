"""The lab's Kubernetes API server: the emulator (kube_emulator.FidelityEmulator, kmock plus the API server
behaviour the collection relies on) served over real HTTP on loopback from a background thread (KubeServer, for
tests and `make demo`) or as its own process (`python -m lab.kube.api serve ...`, for `make lab`).
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import signal
import sys
import threading
from typing import Any, Dict, List, Optional

import kmock

from lab.kube.emulator import FidelityEmulator
from lab.kube.workloads import DEFAULT_STATUS_DELAY
from lab.paths import REPO


class KubeServer:
    """The emulator on a background thread's event loop: usable from sync tests and subprocesses.

    status_delay: seconds before a workload's status follows its spec (None: no status mover);
    host / port: where to listen (port 0: a free one; `.url` tells which);
    pod_runtime: the lab's pod runtime (lab/pods/runtime.py) writes the status of the StatefulSets it runs, so the
    status mover leaves those alone;
    history_limit / request_log_limit: bound kmock's per-object history and the finished requests kept in its
    request log (see FidelityEmulator._forget_served_requests: kmock 0.8 scans its whole request log for every
    request); nothing in the tests reads either."""

    def __init__(self, status_delay: Optional[float] = DEFAULT_STATUS_DELAY, host: str = '127.0.0.1', port: int = 0,
                 history_limit: Optional[int] = 16, request_log_limit: Optional[int] = 0,
                 pod_runtime: bool = False) -> None:
        self.status_delay = status_delay
        self.pod_runtime = pod_runtime
        self.host, self.port = host, port
        self.history_limit, self.request_log_limit = history_limit, request_log_limit
        self.url = ''
        self.emulator: Optional[FidelityEmulator] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._stop: Optional[asyncio.Event] = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name='kube-emulator', daemon=True)
        self._error: Optional[BaseException] = None

    def start(self) -> 'KubeServer':
        self._thread.start()
        if not self._ready.wait(30) or self._error:
            raise RuntimeError('kube emulator did not start: %r' % self._error)
        return self

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._serve())
        except BaseException as exc:  # surfaced by start()
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with FidelityEmulator() as emu, kmock.Server(emu, host=self.host, port=self.port or None) as srv:
            emu.resources.load_bundled()
            emu.status_delay = self.status_delay
            emu.pod_runtime = self.pod_runtime
            emu.history_limit, emu.request_log_limit = self.history_limit, self.request_log_limit
            self.emulator = emu
            self.url = str(srv.url).rstrip('/')
            self._ready.set()
            try:
                await self._stop.wait()
            finally:
                emu.stop_status_mover()

    def set_status_delay(self, seconds: Optional[float]) -> None:
        """Change the status mover's delay (None: off) for writes from now on."""
        self.status_delay = seconds
        if self.emulator is not None:
            self.call(setattr, self.emulator, 'status_delay', seconds)

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=15)

    def call(self, fn, *args):
        """Run fn(*args) on the emulator's loop (kmock state is not thread-safe)."""
        result: Dict[str, Any] = {}
        done = threading.Event()

        def runner() -> None:
            try:
                result['value'] = fn(*args)
            except BaseException as exc:  # re-raised in the caller's thread
                result['error'] = exc
            done.set()

        self._loop.call_soon_threadsafe(runner)
        done.wait(30)
        if 'error' in result:
            raise result['error']
        return result.get('value')

    def install_crds(self, directory: str) -> List[str]:
        """Create every CustomResourceDefinition in directory/*.yaml through the API (as the deploy role does)."""
        import requests
        names = []
        for path in sorted(glob.glob(os.path.join(directory, '*.yaml'))):
            for doc in load_yaml_documents(path):
                if doc.get('kind') != 'CustomResourceDefinition':
                    continue
                answer = requests.post(self.url + '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', json=doc,
                                       timeout=30)
                if answer.status_code not in (201, 409):
                    raise RuntimeError('%s: the CRD %s was refused: HTTP %s %s' % (
                        path, doc.get('metadata', {}).get('name'), answer.status_code, answer.text[:500]))
                names.append(doc['metadata']['name'])
        return names

    def write_kubeconfig(self, path: str) -> str:
        config = {
            'apiVersion': 'v1', 'kind': 'Config', 'current-context': 'emulator',
            'clusters': [{'name': 'emulator', 'cluster': {'server': self.url}}],
            'users': [{'name': 'tester', 'user': {'token': 'test-token'}}],
            'contexts': [{'name': 'emulator', 'context': {'cluster': 'emulator', 'user': 'tester', 'namespace': 'default'}}],
        }
        tmp = '%s.%d.tmp' % (path, os.getpid())
        with open(tmp, 'w') as f:
            json.dump(config, f)
        os.replace(tmp, path)
        return path


def load_yaml_documents(path: str) -> List[Dict[str, Any]]:
    import yaml
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def repo_path(*parts: str) -> str:
    return os.path.join(REPO, *parts)


def serve(args: argparse.Namespace) -> int:
    """The emulator as its own process (`make lab`): CRDs installed, kubeconfig and URL files written once it
    answers, until SIGTERM. Object history and the request log are bounded (a lab runs for days)."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    signal.signal(signal.SIGINT, lambda signum, frame: stop.set())
    server = KubeServer(status_delay=args.status_delay if args.status_delay > 0 else None, host=args.host,
                        port=args.port, history_limit=16, request_log_limit=0, pod_runtime=args.pod_runtime).start()
    try:
        crds = server.install_crds(args.crds_dir) if args.crds_dir else []
        if args.kubeconfig:
            server.write_kubeconfig(args.kubeconfig)
        if args.url_file:
            tmp = '%s.%d.tmp' % (args.url_file, os.getpid())
            with open(tmp, 'w') as f:
                f.write(server.url + '\n')
            os.replace(tmp, args.url_file)
        print('kube API emulator listening on %s (%d CRDs)' % (server.url, len(crds)), flush=True)
        stop.wait()
    finally:
        server.stop()
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', 1)[0])
    sub = parser.add_subparsers(dest='command', required=True)
    run = sub.add_parser('serve', help='serve the API emulator until SIGTERM')
    run.add_argument('--host', default='127.0.0.1')
    run.add_argument('--port', type=int, default=0, help='0: a free port')
    run.add_argument('--crds-dir', help='install every CustomResourceDefinition of DIR/*.yaml')
    run.add_argument('--kubeconfig', help='write a kubeconfig for the emulator here')
    run.add_argument('--url-file', help='write the URL here once serving')
    run.add_argument('--status-delay', type=float, default=DEFAULT_STATUS_DELAY,
                     help='seconds before a workload status follows its spec (0: never)')
    run.add_argument('--pod-runtime', action='store_true',
                     help="the lab's pod runtime writes the status of the StatefulSets whose pods it runs")
    return serve(parser.parse_args(argv))


if __name__ == '__main__':
    sys.exit(main())
