# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node maintenance (seed 003): every Node through the engine's state machine, again and again.

On only with `--maintenance-config` (STEWARD_MAINTENANCE_CONFIG). A few threads serve any number of
nodes (no daemon per node):

* the **scheduler** thread polls the config object every CONFIG_POLL_SECONDS (hot reload: a new
  resourceVersion is loaded; a broken one is reported and the last good config stays), lists the
  Nodes (a resync of the cache, at most every RESYNC_MIN_SECONDS), queues every node once per
  `intervals.requeue`, exports gauges and beats /healthz;
* kopf's watch of v1 nodes (`on.event`) feeds the cache and queues a changed node at once, so an
  approval annotation is acted on in milliseconds, not a requeue later;
* `--maintenance-workers` **worker** threads take names from a de-duplicating work queue (one node
  is never reconciled by two workers at once) and call the engine's `reconcile` with the cached
  Node and an Environment whose `nodes` is the cache, `fresh_nodes` a direct LIST, `gate` the
  process lock + renewing Lease mutex (maintenance_gate) and `commit` a merge patch of the node's
  labels/annotations (its answer goes into the cache). Before the first good config nothing runs.

Stale reads: the cache is never older than our own writes, but another writer (a user, a second
replica acting during a hand-over) may have moved the node on. So the commit carries the
resourceVersion the decision was made on (unless a trigger wrote the node itself: cordon, drain),
and entering the gate re-reads the node; either finding a newer node drops the decision (a
"stale" deferral, no Event), refreshes the cache and queues the node again at once.

Every transition, notification and (new) error is a log line and an Event on the Node; metrics in
metrics.py. Cached Nodes drop `metadata.managedFields` and `status.images` (most of a Node's size;
nothing in maintenance reads them), which keeps 5,000 nodes in tens of MB.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

import kopf

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import Conflict, KubeError
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import MutexTimeout
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.constants import IN_MAINTENANCE, OPERATIONAL, STATE_LABEL, STATES
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.data import node_data
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.environment import Environment
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.leases import KubeLeaseStore
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.senders import SmtplibSender, UrllibPoster
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.shuffles import ShuffleError, shuffle_records
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.state import ErrorKind, ReconcileError, ReconcileResult, reconcile

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config_source import ConfigSource

from steward_controller.maintenance.config import ConfigWatcher, PollOutcome
from steward_controller.maintenance.gate import GateHold, GateLost, MaintenanceGate
from steward_controller.maintenance.leases import CachedLeaseStore, LeaseCache
from steward_controller.maintenance.queue import WorkQueue
from steward_controller.maintenance.shuffles import kube_lookup, pods_on
from steward_controller.core.background import BackgroundLoop, register_background
from steward_controller.core.informer import NodeCache, resource_version, slim
from steward_controller.core.runtime import Runtime

log = logging.getLogger('steward.maintenance')

NODES = api_path('v1', 'nodes')
KIND = 'Node'
HEALTH_KEY = 'maintenance-loop'
CONFIG_POLL_SECONDS = 2.0      # hot reload: the config object is read this often
RESYNC_MIN_SECONDS = 30.0      # full Node list at most this often (the watch keeps the cache current between)
MAX_TICK_SECONDS = 5.0         # the scheduler wakes at least this often (health beat, config poll)
MIN_TICK_SECONDS = 0.05
STOP_SECONDS = 5.0             # workers finish the node in hand; a drain in flight is abandoned after this


def register(registry: Any, runtime: Runtime) -> None:
    source = runtime.settings.options('maintenance').config
    if source is None:
        log.info('node maintenance is off (no --maintenance-config)')
        return
    controller = MaintenanceController(runtime, source)

    register_background(registry, 'maintenance', controller.start, controller.stop)

    @kopf.on.event('', 'v1', 'nodes', registry=registry, id='maintenance-node')
    async def node_event(event: Mapping[str, Any], **kwargs: Any) -> None:
        controller.observe(event.get('type'), event.get('object') or {})


class StaleNode(Exception):
    """The node moved on since it was read: the decision is dropped and the node reconciled again."""


DEFERRALS = ('stale', 'busy')   # kinds that are retries by design: counted and logged, no Warning Event


def error_kind(error: ReconcileError) -> str:
    """The `kind` label of an engine error: the engine's ErrorKind, except the two retries by design that this
    controller's own gate and commit cause (by exception type): the node changed since it was read ('stale')
    and the gate's mutex is held elsewhere ('busy')."""
    if isinstance(error.cause, StaleNode):
        return 'stale'
    if error.kind is ErrorKind.GATE and isinstance(error.cause, MutexTimeout):
        return 'busy'
    return error.kind.value


def node_ref(node: Mapping[str, Any]) -> Dict[str, Any]:
    meta = node.get('metadata') or {}
    ref = {'name': meta.get('name')}
    if meta.get('uid'):
        ref['uid'] = meta['uid']
    return {'apiVersion': 'v1', 'kind': KIND, 'metadata': ref}


class _Scope:
    """One reconcile: the node's resourceVersion it decides on, whether a trigger wrote the node itself,
    and the gate hold it is inside (None outside)."""

    def __init__(self, name: str, version: str) -> None:
        self.name = name
        self.version = version
        self.wrote = False
        self.hold: Optional[GateHold] = None


class _TrackingClient:
    """The client the cordon/uncordon/drain triggers get: notes that this reconcile wrote through it."""

    def __init__(self, client: KubeClient, scope: _Scope):
        self._client = client
        self._scope = scope

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def merge_patch(self, *args: Any, **kwargs: Any) -> Any:
        self._scope.wrote = True
        return self._client.merge_patch(*args, **kwargs)

    def json_patch(self, *args: Any, **kwargs: Any) -> Any:
        self._scope.wrote = True
        return self._client.json_patch(*args, **kwargs)

    def create(self, *args: Any, **kwargs: Any) -> Any:
        self._scope.wrote = True
        return self._client.create(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        self._scope.wrote = True
        return self._client.delete(*args, **kwargs)

    def request(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if method.upper() != 'GET':
            self._scope.wrote = True
        return self._client.request(method, *args, **kwargs)


class MaintenanceController:
    def __init__(self, runtime: Runtime, source: ConfigSource, workers: Optional[int] = None):
        self.runtime = runtime
        self.client = runtime.client
        self.metrics = runtime.metrics
        self.source = source
        self.workers = workers or runtime.settings.options('maintenance').workers
        self.watcher = ConfigWatcher(source, lambda: self.client.get_or_none(source.path))
        self.cache = NodeCache(index_label=STATE_LABEL)
        self.queue = WorkQueue()
        settings = runtime.settings
        self.gate = MaintenanceGate(self.client, settings.namespace, settings.identity, clock=runtime.clock)
        self.api_leases = KubeLeaseStore(self.client)
        self.lease_cache = LeaseCache(clock=runtime.clock)
        self.smtp = SmtplibSender()
        self.http = UrllibPoster()
        self.background = BackgroundLoop('maintenance', runtime.health, HEALTH_KEY)
        self.stopping = self.background.stopped
        self.requeue_all = threading.Event()
        self.last_errors: Dict[str, Tuple[str, ...]] = {}
        self.errors_lock = threading.Lock()
        self.list_error = ''
        self.config_error = ''
        self.next_poll = self.next_resync = self.next_queue = 0.0   # the scheduler's timetable (monotonic)

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self, scheduler: bool = True) -> None:
        """The workers and (unless a benchmark drives the cycles itself) the scheduler."""
        log.info('node maintenance starts', extra={'source': str(self.source), 'workers': self.workers})
        self.background.beat()
        if scheduler:
            self.background.spawn(self._schedule, 'maintenance-scheduler')
        for i in range(self.workers):
            self.background.spawn(self._work, 'maintenance-worker-%d' % i)

    def stop(self, timeout: float = STOP_SECONDS) -> None:
        self.queue.close()
        busy = self.background.stop(timeout)
        if busy:
            log.warning('node maintenance stopped with work in flight', extra={'threads': busy})
        else:
            log.info('node maintenance stopped')

    def idle(self) -> bool:
        """Nothing queued and no node in a worker's hands."""
        return self.queue.idle()

    # --- inputs: watch events, lists, config --------------------------------------------------
    def observe(self, event_type: Optional[str], obj: Mapping[str, Any]) -> None:
        """A watch event of a Node: into the cache, and queued if it changed."""
        name = (obj.get('metadata') or {}).get('name')
        if not name:
            return
        if event_type == 'DELETED':
            self.cache.remove(name)
            self.forget(name)
            return
        cached = self.cache.get(name)
        changed = cached is None or resource_version(cached) != resource_version(obj)
        if self.cache.put(slim(obj)) and changed and self.watcher.config is not None:
            self.queue.add(name)

    def forget(self, name: str) -> None:
        with self.errors_lock:
            self.last_errors.pop(name, None)

    def resync(self) -> bool:
        """List every Node into the cache; False when the API failed (logged once per distinct error)."""
        try:
            answer = self.client.request('GET', NODES) or {}
        except KubeError as exc:
            self.metrics.maintenance_errors.labels('list').inc()
            if str(exc) != self.list_error:
                log.warning('cannot list nodes: %s', exc)
            self.list_error = str(exc)
            return False
        self.list_error = ''
        self.runtime.health.api_ok()
        items = [slim(n) for n in answer.get('items') or []]
        for name in self.cache.replace(items, str((answer.get('metadata') or {}).get('resourceVersion') or '')):
            self.forget(name)
        return True

    def poll_config(self) -> PollOutcome:
        outcome = self.watcher.poll()
        m = self.metrics
        involved = self.source.involved(outcome.obj)
        if outcome.unreachable:
            m.maintenance_errors.labels('config').inc()
            if outcome.error != self.config_error:   # once per distinct error, not at every poll
                log.warning(outcome.error, extra={'source': str(self.source)})
        elif outcome.failed:
            m.maintenance_config_loads.labels('invalid').inc()
            m.maintenance_config_loaded.set(0)
            active = ('version %s stays active' % self.watcher.version if self.watcher.config is not None
                      else 'no node is reconciled until a version loads')
            self.runtime.report(involved, 'MaintenanceConfigInvalid', 'maintenance config %s (resourceVersion %s) not loaded, %s: %s' % (
                self.source, outcome.version, active, outcome.error), warning=True, kind='MaintenanceConfig')
        elif outcome.changed:
            m.maintenance_config_loads.labels('loaded').inc()
            m.maintenance_config_loaded.set(1)
            m.maintenance_config_timestamp.set(self.runtime.clock())
            config = self.watcher.config
            profiles = sorted(config.profiles) if config is not None else []
            warnings = '; warnings: ' + '; '.join(outcome.warnings) if outcome.warnings else ''
            self.runtime.report(involved, 'MaintenanceConfigLoaded', 'maintenance config %s (resourceVersion %s) active: profiles %s, '
                                'requeue %ss%s' % (self.source, outcome.version, ', '.join(profiles),
                                                   config.requeue if config else '?', warnings), kind='MaintenanceConfig')
            self.requeue_all.set()
        self.config_error = outcome.error if outcome.unreachable else ''
        return outcome

    # --- the scheduler ----------------------------------------------------------------------
    def _schedule(self) -> None:
        # a bug here must not end the loop silently: logged, and /healthz goes stale if it repeats
        self.background.repeat(self.tick, 'node maintenance scheduler failed', crash_wait=1.0)

    def tick(self) -> float:
        """One turn of the scheduler: poll the config, resync, requeue; the seconds until the next turn."""
        now = time.monotonic()
        self.background.beat()
        if now >= self.next_poll:
            self.poll_config()
            self.next_poll = now + CONFIG_POLL_SECONDS
        config = self.watcher.config
        wait = MAX_TICK_SECONDS
        if config is not None:
            if now >= self.next_resync:
                self.next_resync = now + (max(config.requeue, RESYNC_MIN_SECONDS) if self.resync() else 1.0)
            if now >= self.next_queue or self.requeue_all.is_set():
                self.requeue_all.clear()
                self.queue.add_all(self.cache.names())
                self.next_queue = now + config.requeue
            self.export_gauges()
            wait = min(wait, self.next_queue - time.monotonic())
        wait = min(wait, self.next_poll - time.monotonic())
        return max(MIN_TICK_SECONDS, wait)

    def export_gauges(self) -> None:
        counts = dict.fromkeys(STATES, 0)
        nodes = self.cache.snapshot()
        for node in nodes:
            state = ((node.get('metadata') or {}).get('labels') or {}).get(STATE_LABEL)
            if state in counts:
                counts[state] += 1
        oldest = self._oldest_transitions(nodes)
        now = self.runtime.clock()
        self.metrics.seed.maintenance_state_age.clear()
        for (profile, state), since in oldest.items():
            self.metrics.seed.maintenance_state_age.labels(profile, state).set(max(0.0, now - since / 1e9))
        for state, count in counts.items():
            self.metrics.maintenance_nodes.labels(state).set(count)
        self.metrics.maintenance_queue_depth.set(self.queue.depth())

    def _oldest_transitions(self, nodes: List[Any]) -> Dict[Tuple[str, str], int]:
        """(profile, state) -> the earliest transition (ns) into that non-operational state over the nodes, for
        steward_maintenance_state_age_seconds. Reused while the cache hands out the same snapshot (the scheduler
        ticks far more often than nodes change); operational nodes are skipped by their label (the most critical
        state over their profiles) without reading their data annotation."""
        cached = getattr(self, '_oldest_cache', None)
        if cached is not None and cached[0] is nodes:
            return cached[1]
        oldest: Dict[Tuple[str, str], int] = {}
        for node in nodes:
            if ((node.get('metadata') or {}).get('labels') or {}).get(STATE_LABEL) == OPERATIONAL:
                continue
            for profile, pdata in node_data(node).profiles.items():
                if pdata.current != OPERATIONAL and pdata.transition:
                    key = (profile, pdata.current)
                    oldest[key] = min(oldest.get(key, pdata.transition), pdata.transition)
        self._oldest_cache = (nodes, oldest)
        return oldest

    # --- the workers ------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            name = self.queue.get()
            if name is None:
                return
            try:
                self.reconcile_node(name)
            except Exception as exc:  # a bug must show, not kill the worker
                log.exception('reconcile of node %s failed', name)
                self.metrics.maintenance_errors.labels('internal').inc()
                self.report_errors(self.cache.get(name) or {'metadata': {'name': name}},
                                   ('internal error: %s: %s' % (type(exc).__name__, exc),))
            finally:
                self.queue.done(name)

    def environment(self, scope: _Scope) -> Environment:
        return Environment(nodes=self.cache.snapshot, fresh_nodes=self.fresh_nodes,
                           nodes_in_maintenance=lambda: self.cache.labelled(IN_MAINTENANCE),
                           pods_on_node=lambda name: pods_on(self.client, name),
                           leases=CachedLeaseStore(self.api_leases, self.lease_cache, lambda: scope.hold is not None),
                           kube=_TrackingClient(self.client, scope), smtp=self.smtp, http=self.http,
                           slack_api_url=self.runtime.settings.options('maintenance').slack_api_url,
                           gate=lambda: self.enter_gate(scope), commit=lambda name, patch: self.commit(scope, patch))

    def reconcile_node(self, name: str) -> Optional[ReconcileResult]:
        config = self.watcher.config
        node = self.cache.get(name)
        if config is None or node is None:
            return None
        started = time.perf_counter()
        scope = _Scope(name, resource_version(node))
        result = reconcile(node, config, self.runtime.clock(), self.environment(scope))
        self.metrics.maintenance_reconcile_duration.observe(time.perf_counter() - started)
        self.report(node, result)
        if result.committed and result.transitions:
            self.queue.add(name)   # the new state's enter chain and notifications run at once, not a requeue later
        return result

    @contextlib.contextmanager
    def enter_gate(self, scope: _Scope) -> Iterator[GateHold]:
        with self.gate.enter() as hold:
            if not scope.wrote:
                current = self.client.get_or_none(api_path('v1', 'nodes', name=scope.name))
                if current is None or resource_version(current) != scope.version:
                    self.refreshed(scope.name, current)
                    raise StaleNode('node %s changed since it was read (resourceVersion %s, now %s)' % (
                        scope.name, scope.version, resource_version(current) if current else 'deleted'))
            scope.hold = hold
            try:
                yield hold
            finally:
                scope.hold = None

    def refreshed(self, name: str, current: Optional[Dict[str, Any]]) -> None:
        """A newer node than the one decided on: into the cache (or out of it), and reconcile it again."""
        if current is None:
            self.cache.remove(name)
            return
        self.cache.put(slim(current))
        self.queue.add(name)

    def fresh_nodes(self) -> List[Dict[str, Any]]:
        """A direct LIST (inside the gate it must show every write of earlier gates); refreshes the cache too."""
        answer = self.client.request('GET', NODES) or {}
        items = [slim(n) for n in answer.get('items') or []]
        for node in items:
            self.cache.put(node)
        return items

    def commit(self, scope: _Scope, patch: Dict[str, Any]) -> None:
        """Merge patch of labels/annotations, on the resourceVersion decided on (unless a trigger wrote the node)."""
        if scope.hold is not None and scope.hold.lost:
            raise GateLost(scope.hold.lost)
        path = api_path('v1', 'nodes', name=scope.name)
        try:
            answer = self.client.merge_patch(path, patch, resource_version=None if scope.wrote else scope.version)
        except Conflict:
            self.refreshed(scope.name, self.client.get_or_none(path))
            raise StaleNode('node %s changed since it was read (resourceVersion %s); not written' % (scope.name, scope.version)) from None
        self.runtime.health.api_ok()
        if answer:
            self.cache.put(slim(answer))

    # --- reporting --------------------------------------------------------------------------
    def report(self, node: Mapping[str, Any], result: ReconcileResult) -> None:
        involved = node_ref(node)
        m = self.metrics
        if result.committed:
            for t in result.transitions:
                m.maintenance_transitions.labels(t.profile, t.source, t.target).inc()
                self.runtime.report(involved, 'MaintenanceTransition', 'profile %s: %s -> %s%s' % (
                    t.profile, t.source, t.target, ' (decided in the maintenance gate)' if t.gated else ''), kind=KIND)
                if t.target == IN_MAINTENANCE:
                    self.record_shuffles(result.node, t.profile)
        for n in result.notifications:
            m.maintenance_notifications.labels(n.profile, n.instance).inc()
            self.runtime.report(involved, 'MaintenanceNotification', 'profile %s: notification %s sent (state %s)' % (
                n.profile, n.instance, n.state), kind=KIND)
        errors = []
        for error in result.errors:
            kind = error_kind(error)
            m.maintenance_errors.labels(kind).inc()
            if kind in DEFERRALS:
                log.debug(error.message, extra={'object': result.node})
            else:
                errors.append(error.message)
        self.report_errors(node, tuple(errors))

    def report_errors(self, node: Mapping[str, Any], errors: Tuple[str, ...]) -> None:
        """A Warning Event per error not reported for this node last time (a failing notification retried at
        every requeue is one Event, not one per requeue); a log line when they are gone."""
        name = (node.get('metadata') or {}).get('name') or ''
        with self.errors_lock:
            previous = self.last_errors.get(name, ())
            if errors:
                self.last_errors[name] = errors
            else:
                self.last_errors.pop(name, None)
        for error in errors:
            if error not in previous:
                self.runtime.report(node_ref(node), 'MaintenanceError', error, warning=True, kind=KIND)
        if previous and not errors:
            log.info('node %s: maintenance errors resolved', name, extra={'object': name})

    def record_shuffles(self, node_name: str, profile: str) -> None:
        """The seed's shuffle metrics for a node that just entered in-maintenance (see maintenance_shuffles)."""
        try:
            records = shuffle_records(pods_on(self.client, node_name), kube_lookup(self.client))
        except (ShuffleError, KubeError) as exc:
            self.metrics.maintenance_errors.labels('shuffles').inc()
            log.warning('failed to record shuffle metrics for node %s: %s', node_name, exc, extra={'profile': profile})
            return
        for record in records:
            self.metrics.shuffle_count.labels(record.owner, profile).inc()
            self.metrics.shuffles_per_replica.labels(record.owner, profile).inc(record.per_replica)
