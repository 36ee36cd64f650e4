# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`steward-controller` (or `python -m steward_controller`): health and metrics first, then leader election, then kopf.

Standby replicas serve /healthz and /metrics (steward_controller_leader 0) and act on nothing.
The leader runs the handlers; if it loses the lease it stops acting and exits non-zero, so its
pod restarts as a standby. SIGTERM releases the lease for a fast hand-over.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import asyncio
import threading
from typing import Optional, Sequence

from steward_controller.engine_path import ensure_engine

ensure_engine()  # before the first engine import: the collection may not be on sys.path (engine_path.py says where)

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster import timing  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import LeaseLock  # noqa: E402

from steward_controller import __version__  # noqa: E402
from steward_controller.core import logs, metrics, settings as settings_mod  # noqa: E402
from steward_controller.core.leader import LeaderElector  # noqa: E402
from steward_controller.core.runtime import Runtime  # noqa: E402

log = logging.getLogger('steward.main')
HARD_EXIT_GRACE = 5.0
HEARTBEAT_SECONDS = 5.0


def main(argv: Optional[Sequence[str]] = None) -> int:
    settings = settings_mod.parse(argv)
    logs.setup(settings.log_format, settings.log_level)
    # every client of this process says who calls, and for which loops (an audit log can tell them apart)
    KubeClient.user_agent = 'steward-controller/%s (%s)' % (__version__, ','.join(settings.controllers))
    try:
        client = KubeClient.from_config(settings.kubeconfig)
    except KubeError as exc:
        log.error(str(exc))
        return 2
    runtime = Runtime(settings=settings, client=client, metrics=metrics.Metrics(), health=metrics.Health())
    # the engine's membership changes and defragmentations (anchor, operator tasks) fill etcd-backup-restore's families
    timing.listen(runtime.metrics.seed.membership.observe)
    try:
        server = metrics.serve(settings.http_host, settings.http_port, runtime.metrics, runtime.health)
    except OSError as exc:
        log.error(_cannot_listen(settings.http_host, settings.http_port, '--http-port', 'STEWARD_HTTP_PORT', exc))
        return 2
    log.info('serving /metrics, /healthz and /readyz', extra={'port': server.server_port, 'identity': settings.identity})
    if settings.health_port and settings.health_port != settings.http_port:
        try:
            health_server = metrics.serve(settings.http_host, settings.health_port, runtime.metrics, runtime.health)
        except OSError as exc:
            log.error(_cannot_listen(settings.http_host, settings.health_port, '--health-port', 'STEWARD_HEALTH_PORT', exc))
            server.shutdown()
            return 2
        log.info('serving /healthz and /readyz', extra={'port': health_server.server_port})

    stop_flag = Stopper()
    terminating = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        terminating.set()
        stop_flag.request()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)  # until kopf installs its own; both stop gracefully

    elector: Optional[LeaderElector] = None
    if settings.leader_election:
        lock = LeaseLock(client, settings.namespace, settings.lease_name, settings.identity,
                         duration=settings.lease_duration)
        elector = LeaderElector(lock, settings.renew_deadline, settings.retry_period,
                                on_change=lambda leading: _on_leadership(leading, runtime, stop_flag),
                                on_contact=runtime.health.api_ok,
                                on_tick=lambda: runtime.health.beat('leader-election'))
        elector.start()
        log.info('waiting for the leader lease', extra={'lease': settings.lease_name, 'namespace': settings.namespace})
        while not elector.leading.wait(0.5):
            if terminating.is_set():
                elector.stop(release=False)
                return 0
    else:
        runtime.metrics.leader.set(1)

    runtime.health.api_ok()
    code = run_operator(runtime, stop_flag)
    if elector is not None:
        lost = elector.lost.is_set()
        elector.stop(release=not lost)
        if lost:
            return 1
    return code


def _cannot_listen(host: str, port: int, flag: str, variable: str, exc: OSError) -> str:
    """Why the program stops before it does anything: which address, which flag sets it, and what the OS said."""
    busy = ' (another process, perhaps a second controller, listens there)' if exc.errno == errno.EADDRINUSE else ''
    return 'cannot listen on %s:%d%s: %s; choose another port with %s (env %s)' % (
        host, port, busy, exc.strerror or exc, flag, variable)


class Stopper:
    """Stops kopf from any thread. An asyncio.Event on kopf's own loop: kopf waits for a
    threading.Event or a concurrent Future in an executor thread, which then blocks the exit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._event: Optional[asyncio.Event] = None
        self._requested = False

    def bind(self) -> asyncio.Event:
        with self._lock:
            self._loop = asyncio.get_running_loop()
            self._event = asyncio.Event()
            if self._requested:
                self._event.set()
            return self._event

    def request(self) -> None:
        with self._lock:
            self._requested = True
            if self._loop is not None and self._event is not None:
                self._loop.call_soon_threadsafe(self._event.set)


def _on_leadership(leading: bool, runtime: Runtime, stop_flag: Stopper) -> None:
    runtime.metrics.leader.set(1 if leading else 0)
    if not leading:
        stop_flag.request()
        # kopf stops daemons cooperatively; if one does not stop in time, leave anyway rather than
        # risk acting after another replica took over.
        timer = threading.Timer(HARD_EXIT_GRACE, lambda: os._exit(1))
        timer.daemon = True
        timer.start()


def run_operator(runtime: Runtime, stop_flag: Stopper) -> int:
    import kopf
    from steward_controller.core.operator import build_registry

    registry = build_registry(runtime)
    settings = runtime.settings
    kopf.configure(verbose=settings.log_level == 'DEBUG',
                   log_format=kopf.LogFormat.JSON if settings.log_format == 'json' else kopf.LogFormat.PLAIN)
    logs.setup(settings.log_format, settings.log_level)  # kopf.configure replaced the root handler

    async def heartbeat() -> None:
        # /healthz fails when kopf's event loop stops turning (a blocked loop acts on nothing).
        while True:
            runtime.health.beat('operator-loop')
            await asyncio.sleep(HEARTBEAT_SECONDS)

    async def operate() -> None:
        beating = asyncio.create_task(heartbeat())
        try:
            await kopf.operator(registry=registry, standalone=True, clusterwide=not settings.watch_namespaces,
                                namespaces=list(settings.watch_namespaces), stop_flag=stop_flag.bind())
        finally:
            beating.cancel()

    asyncio.run(operate())
    return 0
