# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The weeder: watch the configured services' Endpoints and EndpointSlices; when one turns ready, start a
weeder for it that deletes dependant pods in CrashLoopBackOff for `watchDuration` (DWD's weeder).

Threads: one list+watch (kube/watch.py) for Endpoints and one for EndpointSlices of `--namespace`, feeding
the engine's Readiness (one trigger per service turning ready, whichever kind says so first); per trigger
a Weeder with one pod list+watch per podSelector, each ending at the weeder's deadline (DWD-W-03/05). A new
trigger for a service with a weeder running replaces it (DWD does), which restarts the window. A supervisor
beats /healthz while the endpoint watches live and restarts one that died.

Every deletion is a log line, an Event on the pod and a metric; the per-pod deletion limit (weeder.py) turns
a deletion it refuses into a Warning Event (once per pod) and a `limited` count instead.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Dict, List, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError, NotFound
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import format_micro
from ansible_collections.steward.cluster.plugins.module_utils.kube.ratelimit import RateLimitedClient, client_go_bucket
from ansible_collections.steward.cluster.plugins.module_utils.kube.watch import INITIAL, ListWatch
from ansible_collections.steward.cluster.plugins.module_utils.watchdog import weeder as w
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.weeder_config import PodSelector, WeederConfig

from steward_controller.core.background import BackgroundLoop, register_background
from steward_controller.core.runtime import Runtime

log = logging.getLogger('steward.weeder')
HEALTH_KEY = 'weeder-loop'
SUPERVISE_SECONDS = 2.0
IDLE_TIMEOUT = 10.0      # a quiet watch is re-opened this often (and a stop is noticed within it)
SOURCES = ((w.ENDPOINTS, 'v1', 'endpoints'), (w.ENDPOINT_SLICE, 'discovery.k8s.io/v1', 'endpointslices'))


def register(registry: Any, runtime: Runtime) -> None:
    options = runtime.settings.options('weeder')
    if options is None or options.config is None:
        log.info('the weeder is off (no --weeder-config)')
        return
    loop = WeederLoop(runtime, options.config, options.qps, options.burst)
    register_background(registry, 'weeder', loop.start, loop.stop)


class WeederMetrics:
    def __init__(self, registry: CollectorRegistry):
        self.triggers = Counter('dwd_weeder_triggers', 'Services that turned ready (not ready -> ready) and started a '
                                'weeder.', ['service'], registry=registry)
        self.deletions = Counter('dwd_weeder_pod_deletions', 'Dependant pods in CrashLoopBackOff, by service and outcome '
                                 '(deleted, limited by maxDeletionsPerPod, failed).', ['service', 'outcome'],
                                 registry=registry)
        self.active = Gauge('dwd_weeder_active_weeders', 'Weeders watching dependants now.', registry=registry)


class Weeder:
    """One service's window: a pod watch per selector until `deadline`."""

    def __init__(self, loop: 'WeederLoop', service: str, selectors: List[PodSelector], deadline: float):
        self.loop = loop
        self.service = service
        self.deadline = deadline
        self.stop = threading.Event()
        self.pods: Dict[str, str] = {}      # pod name -> deletion key, for the pods these watches see
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._watch, args=(selector,), daemon=True,
                                         name='weeder-%s-%d' % (service, i)) for i, selector in enumerate(selectors)]

    def start(self) -> 'Weeder':
        for thread in self.threads:
            thread.start()
        return self

    def alive(self) -> bool:
        return any(t.is_alive() for t in self.threads)

    def _watch(self, selector: PodSelector) -> None:
        ListWatch(self.loop.client, api_path('v1', 'pods', self.loop.namespace), self._pod_event,
                  label_selector=selector.query, stop=self.stop, deadline=self.deadline, idle_timeout=IDLE_TIMEOUT,
                  clock=self.loop.clock, on_error=lambda exc: log.warning('pod watch for %s: %s', self.service, exc)).run()

    def _pod_event(self, event: str, pod: Dict[str, Any]) -> None:
        name = (pod.get('metadata') or {}).get('name') or ''
        key = w.pod_key(pod)
        with self.lock:
            if event == 'DELETED':
                self.pods.pop(name, None)
                return
            self.pods[name] = key
            siblings = sum(1 for k in self.pods.values() if k == key)
        if w.crash_looping(pod) and self.loop.weed(self.service, pod, key, siblings):
            with self.lock:   # gone: its DELETED event may never reach a watch opened after the delete
                self.pods.pop(name, None)


class WeederLoop:
    def __init__(self, runtime: Runtime, config: WeederConfig, qps: float, burst: int,
                 clock: Callable[[], float] = time.time):
        self.runtime = runtime
        self.config = config
        self.namespace = runtime.settings.namespace
        self.clock = clock
        self.client = RateLimitedClient(runtime.client.configuration, client_go_bucket(qps, burst), timeout=runtime.client.timeout)
        self.readiness = w.Readiness(set(config.services))
        self.budget = w.DeletionBudget(config.max_deletions_per_pod, config.deletion_window)
        self.metrics = WeederMetrics(runtime.metrics.registry)
        self.background = BackgroundLoop('weeder', runtime.health, HEALTH_KEY, clock)
        self.stopped = self.background.stopped
        self.weeders: Dict[str, Weeder] = {}
        self.deleted: Dict[str, float] = {}         # uid -> when we deleted it (a pod is deleted once)
        self.limited: Dict[str, float] = {}         # uid -> when its deletion was refused (one Warning per pod)
        self.lock = threading.Lock()
        self.watches: Dict[str, threading.Thread] = {}
        self.listwatches: Dict[str, ListWatch] = {}

    # --- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        for warning in self.config.warnings:
            log.warning('weeder config: unknown field %s ignored (as DWD does)', warning)
        log.info('weeder started', extra={'namespace': self.namespace, 'services': sorted(self.config.services),
                                          'watchDuration': self.config.watch_duration})
        for kind, _api_version, _plural in SOURCES:
            self._start_watch(kind)
        self.background.beat()
        self.background.spawn(self._supervise, 'weeder-supervisor')

    def stop(self) -> None:
        self.stopped.set()
        with self.lock:
            weeders = list(self.weeders.values())
        for weeder in weeders:
            weeder.stop.set()
        self.background.stop(IDLE_TIMEOUT + 5)   # a watch notices the stop within IDLE_TIMEOUT

    def _start_watch(self, kind: str) -> None:
        api_version, plural = next((v, p) for k, v, p in SOURCES if k == kind)
        holder: Dict[str, ListWatch] = {}

        def handler(event: str, obj: Dict[str, Any]) -> None:
            initial = event == INITIAL and not holder['watch'].synced.is_set()
            service = self.readiness.observe(kind, 'ADDED' if event == INITIAL else event, obj, initial=initial)
            if service is not None:
                self.trigger(service, kind, (obj.get('metadata') or {}).get('name') or '')

        watch = ListWatch(self.client, api_path(api_version, plural, self.namespace), handler, stop=self.stopped,
                          idle_timeout=IDLE_TIMEOUT, clock=self.clock,
                          on_error=lambda exc: log.warning('%s watch: %s', kind, exc))
        holder['watch'] = watch
        self.listwatches[kind] = watch
        self.watches[kind] = self.background.spawn(watch.run, 'weeder-%s' % plural)

    def _supervise(self) -> None:
        while not self.stopped.wait(SUPERVISE_SECONDS):
            for kind, thread in list(self.watches.items()):
                if not thread.is_alive():
                    log.error('the %s watch ended unexpectedly; starting it again', kind)
                    self._start_watch(kind)
            with self.lock:
                for service in [s for s, weeder in self.weeders.items() if not weeder.alive()]:
                    del self.weeders[service]
                    log.info('weeder for %s finished (watchDuration over)', service)
                self.metrics.active.set(len(self.weeders))
                horizon = self.clock() - max(self.config.deletion_window, self.config.watch_duration)
                for memory in (self.deleted, self.limited):
                    for uid in [u for u, t in memory.items() if t < horizon]:
                        del memory[uid]
            self.background.beat()

    # --- triggers and deletions ---------------------------------------------------------------
    def trigger(self, service: str, kind: str, name: str) -> None:
        """The service turned ready: (re)start its weeder for watchDuration."""
        deadline = self.clock() + self.config.watch_duration
        weeder = Weeder(self, service, list(self.config.services[service]), deadline)
        with self.lock:
            previous = self.weeders.get(service)
            self.weeders[service] = weeder
            self.metrics.active.set(len(self.weeders))
        if previous is not None:
            previous.stop.set()
        self.metrics.triggers.labels(service).inc()
        log.info('service %s is ready again (%s %s): deleting its dependants in CrashLoopBackOff until %s', service,
                 kind, name, format_micro(deadline)[:19] + 'Z', extra={'service': service, 'replaced': previous is not None})
        weeder.start()

    def weed(self, service: str, pod: Mapping[str, Any], key: str, siblings: int) -> bool:
        """Delete a crash-looping pod if the limit allows; True when it was deleted (now or before)."""
        meta = pod.get('metadata') or {}
        uid, name = meta.get('uid') or meta.get('name'), meta.get('name')
        now = self.clock()
        with self.lock:
            if uid in self.deleted:
                return True
            decision = self.budget.take(key, now, siblings)
            if decision.allowed:
                self.deleted[uid] = now
            first_refusal = not decision.allowed and uid not in self.limited
            if first_refusal:
                self.limited[uid] = now
        if not decision.allowed:
            self.metrics.deletions.labels(service, 'limited').inc()
            if first_refusal:
                self.runtime.report(_pod_ref(pod), 'PodDeletionLimited', 'not deleting pod %s in CrashLoopBackOff: %s was '
                                    'deleted %d times in the last %gs (maxDeletionsPerPod %d x %d pod(s))' % (
                                        name, key, decision.used, self.config.deletion_window,
                                        self.config.max_deletions_per_pod, max(1, siblings)),
                                    warning=True, kind='Pod', outcome='limited')
            return False
        try:
            self.client.delete(api_path('v1', 'pods', self.namespace, name), missing_ok=False)
        except NotFound:
            self.budget.give_back(key, now)
            return True
        except KubeError as exc:
            self.budget.give_back(key, now)
            with self.lock:
                self.deleted.pop(uid, None)
            self.metrics.deletions.labels(service, 'failed').inc()
            log.warning('cannot delete pod %s: %s', name, exc, extra={'service': service})
            return False
        self.metrics.deletions.labels(service, 'deleted').inc()
        self.runtime.report(_pod_ref(pod), 'PodDeleted', 'deleted pod %s in CrashLoopBackOff: service %s is ready again'
                            % (name, service), kind='Pod', outcome='deleted')
        return True


def _pod_ref(pod: Mapping[str, Any]) -> Dict[str, Any]:
    meta = pod.get('metadata') or {}
    return {'apiVersion': 'v1', 'kind': 'Pod',
            'metadata': {'name': meta.get('name'), 'namespace': meta.get('namespace'), 'uid': meta.get('uid')}}
