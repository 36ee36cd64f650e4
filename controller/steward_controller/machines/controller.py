# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The machines loop: caches, a pass scheduler, a worker pool, kopf watches and MCM's safety probes.

One **scheduler** thread does, in a loop:
* full lists of MachineClasses, Machines, MachineSets, MachineDeployments and Nodes at start (until the first
  complete set, nothing acts: "caches synced"); kopf's watches feed the caches, our own writes go in with the
  API server's answer, and the safety thread lists everything again every `--machine-sync-period`;
* one cloud listing per MachineClass (the "wave") every `--machine-cloud-sync-period`;
* a **pass**: `reconcile.plan_pass` over the whole world, whose plans go to `--concurrent-syncs` workers
  (apply.py). An object with an action in flight is skipped by later passes; a machine whose last action
  failed waits out its retry period (MCM's ShortRetry / MediumRetry / resource-exhausted retry); a machine
  job that calls the cloud waits for a slot of its class (admission.py: no more jobs than its EC2 budget
  serves in about a second), in the scheduler rather than in a worker;
* orphan collection every `--machine-safety-orphan-vms-period`.
A watch event, a finished action or a due retry wakes the scheduler; passes are at least MIN_PASS_GAP apart,
and further when passes take long (`pass_gap`), so planning never takes more than PASS_SHARE of the time.

A **safety** thread probes the API server (MCM's safety controller: a list of Machines and of Nodes) every
`--machine-safety-apiserver-statuscheck-period` (every 6 s while failing) and looks for Deployments and
StatefulSets carrying dependency-watchdog's meltdown-protection annotation; neither can delay a pass.
"""

from __future__ import annotations

import concurrent.futures
import logging
import random
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Set, Tuple

import kopf

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import Conflict, KubeError
from ansible_collections.steward.cluster.plugins.module_utils.machines import objects as o
from ansible_collections.steward.cluster.plugins.module_utils.machines import safety
from ansible_collections.steward.cluster.plugins.module_utils.machines.apply import run_deployment, run_machine, run_set
from ansible_collections.steward.cluster.plugins.module_utils.machines.codes import Call, Code, Retry
from ansible_collections.steward.cluster.plugins.module_utils.machines.config import machine_timeouts
from ansible_collections.steward.cluster.plugins.module_utils.machines.constants import (
    ANNOTATION_WATCHDOG_MELTDOWN,
    API_VERSION,
    GROUP,
    KIND_DEPLOYMENT,
    KIND_MACHINE,
    KIND_SET,
    PLURALS,
    VERSION,
    Phase,
)
from ansible_collections.steward.cluster.plugins.module_utils.machines.deletion import DeletionView
from ansible_collections.steward.cluster.plugins.module_utils.machines.drain import DrainMemory
from ansible_collections.steward.cluster.plugins.module_utils.machines.driver import Driver, MachineContext, machine_context
from ansible_collections.steward.cluster.plugins.module_utils.machines.errors import ClassNotReady, DriverError
from ansible_collections.steward.cluster.plugins.module_utils.machines.inventory import Inventory
from ansible_collections.steward.cluster.plugins.module_utils.machines.machine import MachineView
from ansible_collections.steward.cluster.plugins.module_utils.machines.plan import Event, MachinePlan
from ansible_collections.steward.cluster.plugins.module_utils.machines.reconcile import (
    ClassState,
    Memory,
    PassPlan,
    World,
    class_key,
    plan_pass,
)

from steward_controller.core.runtime import Runtime
from steward_controller.machines import MachinesOptions
from steward_controller.machines.admission import CloudSlots, calls_cloud, slots_for
from steward_controller.machines.caches import KINDS, Caches
from steward_controller.machines.metrics import MachineMetrics
from steward_controller.machines.target import KubeTarget
from steward_controller.maintenance.controller import slim

log = logging.getLogger('steward.machines')
HEALTH_KEY = 'machines-loop'
MIN_PASS_GAP = 0.2           # seconds between passes however many events arrive
PASS_SHARE = 0.2             # at most this share of the scheduler's time goes to planning passes
MAX_TICK = 5.0               # the scheduler wakes at least this often (health beat)
FROZEN_PROBE_PERIOD = 6.0    # MCM re-checks a frozen API server every 6 s
STOP_SECONDS = 10.0
POOL_SPARE = 5               # connections beyond the workers: the scheduler, the safety thread, kopf's watches' relists


def pass_gap(pass_seconds: float) -> float:
    """Seconds from the end of one pass to the start of the next. A pass plans every machine, and during a
    scale every finished job wakes the scheduler: with a fixed gap, planning took 36% of the wall time of a
    1,000-machine scale-down (2.9 passes a second of 126 ms each), holding the interpreter against the workers,
    and its share grows with the fleet. Long passes get a proportionally longer gap."""
    return max(MIN_PASS_GAP, pass_seconds * (1.0 - PASS_SHARE) / PASS_SHARE)


BUILT_IN_PROVIDERS = ('AWS', 'Sabakan')
# provider -> factory(controller) -> Driver, for providers beyond the built-in ones: a program that embeds the
# controller registers them (register_driver) before main() runs; the tests' fault-injecting drivers come this way.
DRIVER_FACTORIES: Dict[str, Callable[['MachinesController'], Driver]] = {}


def register_driver(provider: str, factory: Callable[['MachinesController'], Driver]) -> None:
    """Serve MachineClasses with `provider: <provider>` by the driver `factory(controller)` makes (once)."""
    DRIVER_FACTORIES[provider] = factory


def unsupported(cls: Mapping[str, Any]) -> str:
    return 'MachineClass %s: provider %r is not supported (%s)' % (
        o.key(cls), cls.get('provider'), ', '.join(BUILT_IN_PROVIDERS + tuple(sorted(DRIVER_FACTORIES))))


def machine_secret_opt_in(opts: MachinesOptions, settings: Any) -> bool:
    """--machine-secret-opt-in when given, else --secret-opt-in. A MachineClass's Secret reaches only the cloud the
    controller is configured for (the endpoint is not the class author's to choose) and instances the class
    describes; MCM reads any Secret a class names, so a migrated pool works unchanged with `false`."""
    return settings.secret_opt_in if opts.secret_opt_in is None else opts.secret_opt_in


def register(registry: Any, runtime: Runtime) -> None:
    controller = MachinesController(runtime, runtime.settings.options('machines'))

    @kopf.on.startup(registry=registry, id='machines-start')
    def start_machines(**_: Any) -> None:
        controller.start()

    @kopf.on.cleanup(registry=registry, id='machines-stop')
    def stop_machines(**_: Any) -> None:
        controller.stop()

    def watch(kind: str, group: str, version: str, plural: str) -> None:
        @kopf.on.event(group, version, plural, registry=registry, id='machines-' + plural)
        async def on_event(event: Mapping[str, Any], **_: Any) -> None:
            controller.observe(kind, event.get('type'), event.get('object') or {})

    for kind in KINDS:
        watch(kind, GROUP, VERSION, PLURALS[kind])
    watch('Node', '', 'v1', 'nodes')


class MachinesController:
    def __init__(self, runtime: Runtime, opts: MachinesOptions):
        self.runtime = runtime
        self.opts = opts
        self.settings = opts.settings
        # --concurrent-syncs workers (50 by default) share this client: with the runtime's pool (10 connections on
        # two CPUs) a 1,000-machine scale opened and dropped a connection, with a warning, 894 times.
        self.client = runtime.client.with_pool(self.settings.concurrent_syncs + POOL_SPARE)
        self.namespaces = list(runtime.settings.watch_namespaces)
        self.caches = Caches()
        self.metrics = MachineMetrics(runtime.metrics.registry)
        self.memory = Memory()
        self.inventories: Dict[str, Inventory] = {}
        self.class_problems: Dict[str, str] = {}      # class key -> why its machines cannot be created (Secret refused, ...)
        self.listing_seq: Dict[str, int] = {}
        self.orphan_memory: Dict[str, safety.OrphanMemory] = {}
        self.drain_memory: Dict[str, DrainMemory] = {}
        self.api = safety.ApiFreeze(self.settings.machine_safety_apiserver_statuscheck_timeout)
        self.api_thawed = False
        self.watchdog_marked: Dict[str, List[str]] = {}
        self.busy: Set[str] = set()
        # machine uid -> (monotonic time before which it waits, whether it was being deleted then): a retry period
        # of the creation flow does not hold up the machine's deletion
        self.not_before: Dict[str, Tuple[float, bool]] = {}
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.synced = False
        self.active_freezes: Set[Tuple[str, str]] = set()
        self.last_pass: Optional[PassPlan] = None
        self._drivers: Dict[str, Driver] = {}
        self.cloud_slots = CloudSlots()
        self.pool = concurrent.futures.ThreadPoolExecutor(self.settings.concurrent_syncs, thread_name_prefix='machines')
        self.target = KubeTarget(self.client, self.caches, self.metrics, self.settings, self.driver_for,
                                 clock=runtime.clock, on_api_ok=runtime.health.api_ok,
                                 secret_opt_in=machine_secret_opt_in(opts, runtime.settings), vm_gone=self.vm_gone)
        self.thread: Optional[threading.Thread] = None
        self.safety_thread: Optional[threading.Thread] = None
        self.rng = random.Random()

    # --- drivers --------------------------------------------------------------------------------
    def driver_for(self, provider: str) -> Optional[Driver]:
        with self.lock:
            driver = self._drivers.get(provider)
            if driver is None:
                driver = self._make_driver(provider)
                if driver is not None:
                    self._drivers[provider] = driver
            return driver

    def _make_driver(self, provider: str) -> Optional[Driver]:
        if provider in DRIVER_FACTORIES:
            return DRIVER_FACTORIES[provider](self)
        if provider == 'AWS':
            from ansible_collections.steward.cluster.plugins.module_utils.machines.aws import AWSDriver

            def counted(operation: str, outcome: str) -> None:
                self.metrics.requests.labels('AWS', operation).inc()
                if outcome != 'OK':
                    self.metrics.requests_failed.labels('AWS', operation).inc()
            return AWSDriver(rate=self.opts.aws_api_rate, burst=self.opts.aws_api_burst, on_request=counted)
        if provider == 'Sabakan':
            from ansible_collections.steward.cluster.plugins.module_utils.machines.sabakan_driver import SabakanDriver
            return SabakanDriver(self.client, default_url=self.opts.sabakan_url)
        return None

    def vm_gone(self, provider_id: str) -> bool:
        """A class listing shows this VM terminated (positive evidence)."""
        for inventory in list(self.inventories.values()):
            vm = inventory.by_provider_id.get(provider_id)
            if vm is not None and vm.state.gone:
                return True
        return False

    # --- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        log.info('machines loop starts', extra={'namespaces': self.namespaces or 'all', 'workers': self.settings.concurrent_syncs})
        self.runtime.health.beat(HEALTH_KEY)
        self.thread = threading.Thread(target=self._run, name='machines-scheduler', daemon=True)
        self.thread.start()
        self.safety_thread = threading.Thread(target=self._safety, name='machines-safety', daemon=True)
        self.safety_thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.wake.set()
        if self.thread is not None:
            self.thread.join(STOP_SECONDS)
        self.pool.shutdown(wait=False, cancel_futures=True)
        log.info('machines loop stopped')

    def observe(self, kind: str, event_type: Optional[str], obj: Mapping[str, Any]) -> None:
        """A watch event: into the cache, and a pass soon."""
        md = obj.get('metadata') or {}
        if not md.get('name'):
            return
        if self.namespaces and kind != 'Node' and md.get('namespace') not in self.namespaces:
            return
        if event_type == 'DELETED':
            self.caches.remove(kind, md.get('namespace') or '', md['name'])
        else:
            self.caches.put(kind, dict(obj))
        self.wake.set()

    # --- the scheduler --------------------------------------------------------------------------
    def _safety(self) -> None:
        """Its own thread, so a slow or dead API server never delays a pass: the API probe, the watchdog check and
        the periodic full relist (the informers' resync; the first list is the scheduler's)."""
        due = {'probe': 0.0, 'watchdog': 0.0, 'relist': time.monotonic() + self.opts.sync_period}
        while not self.stopping.is_set():
            now = time.monotonic()
            try:
                if now >= due['relist'] and self.synced:
                    due['relist'] = now + (self.opts.sync_period if self.relist() else 1.0)
                if now >= due['probe']:
                    self.probe_api()
                    due['probe'] = now + (min(FROZEN_PROBE_PERIOD, self.settings.machine_safety_apiserver_statuscheck_period)
                                          if self.api.frozen or self.api.failing_since
                                          else self.settings.machine_safety_apiserver_statuscheck_period)
                if now >= due['watchdog']:
                    self.check_watchdog()
                    due['watchdog'] = now + self.settings.watchdog_check_period
            except Exception:   # a bug must show, not end the thread
                log.exception('machines safety probe failed')
            self.stopping.wait(max(0.05, min(due.values()) - time.monotonic()))

    def _run(self) -> None:
        due: Dict[str, float] = {'orphans': time.monotonic() + self.settings.machine_safety_orphan_vms_period, 'pass': 0.0}
        last_pass = 0.0
        pass_seconds = 0.0
        while not self.stopping.is_set():
            try:
                now = time.monotonic()
                self.runtime.health.beat(HEALTH_KEY)
                if not self.synced and not self.relist():
                    self.stopping.wait(1.0)
                    continue
                if self.synced:
                    self.refresh_listings()
                    if now >= due['orphans']:
                        self.collect_orphans()
                        due['orphans'] = now + self.settings.machine_safety_orphan_vms_period
                    started = time.monotonic()
                    wake_at = self.run_pass()
                    last_pass = time.monotonic()
                    pass_seconds = last_pass - started
                    due['pass'] = wake_at
                wait = min(MAX_TICK, *(t - time.monotonic() for t in due.values()))
            except Exception:  # a bug must show, and not end the loop: /healthz goes stale if it repeats
                log.exception('machines scheduler failed')
                wait = 1.0
            self.wake.wait(max(0.0, wait))
            self.wake.clear()
            gap = pass_gap(pass_seconds) - (time.monotonic() - last_pass)
            if gap > 0:
                self.stopping.wait(gap)

    # --- inputs -------------------------------------------------------------------------------------
    def _list(self, group_version: str, plural: str) -> Tuple[List[Dict[str, Any]], str]:
        if not self.namespaces:
            answer = self.client.request('GET', api_path(group_version, plural)) or {}
            return answer.get('items') or [], str((answer.get('metadata') or {}).get('resourceVersion') or '')
        items: List[Dict[str, Any]] = []
        for ns in self.namespaces:
            items.extend((self.client.request('GET', api_path(group_version, plural, ns)) or {}).get('items') or [])
        return items, ''

    def relist(self) -> bool:
        try:
            lists = {kind: self._list(API_VERSION, PLURALS[kind]) for kind in KINDS}
            nodes = self.client.request('GET', api_path('v1', 'nodes')) or {}
        except KubeError as exc:
            log.warning('cannot list machine objects: %s', exc)
            return False
        scope = set(self.namespaces) if self.namespaces else None
        for kind, (items, version) in lists.items():
            for item in items:
                item.setdefault('kind', kind)
            self.caches.objects[kind].replace(items, scope, version)
        self.caches.nodes.replace([slim(n) for n in nodes.get('items') or []],
                                  str((nodes.get('metadata') or {}).get('resourceVersion') or ''))
        if not self.synced:
            log.info('machine caches synced', extra={kind: len(self.caches.objects[kind]) for kind in KINDS})
        self.synced = True
        self.runtime.health.api_ok()
        return True

    def probe_api(self) -> None:
        """MCM's API-server check: a Machine list and a Node list must answer."""
        ok, error = True, ''
        try:
            ns = self.namespaces[0] if self.namespaces else None
            self.client.request('GET', api_path(API_VERSION, 'machines', ns), query=[('limit', '1')])
            self.client.request('GET', api_path('v1', 'nodes'), query=[('limit', '1')])
        except KubeError as exc:
            ok, error = False, str(exc)
        with self.lock:     # a pass sees the freeze and its end together (never "not frozen, not thawed" in between)
            change = self.api.observe(ok, time.monotonic(), error)
            if change is False:
                self.api_thawed = True
        if change is True:
            log.error('API server unreachable for %ss: machines frozen (only deletions proceed)', int(self.api.timeout))
        elif change is False:
            log.info('API server answers again: machines unfrozen; Unknown machines get a fresh health clock')
        self.metrics.api_frozen.set(1 if self.api.frozen else 0)

    def check_watchdog(self) -> None:
        """Deployments and StatefulSets that dependency-watchdog scaled down (annotation present)."""
        marked: Dict[str, List[str]] = {}
        try:
            for plural, kind in (('deployments', 'Deployment'), ('statefulsets', 'StatefulSet')):
                items, _version = self._list('apps/v1', plural)
                for item in items:
                    if ANNOTATION_WATCHDOG_MELTDOWN in o.annotations_of(item):
                        marked.setdefault(o.namespace(item), []).append('%s/%s' % (kind, o.name(item)))
        except KubeError as exc:
            log.warning('cannot check for dependency-watchdog scale-downs (the last answer stays in force): %s', exc)
            return
        self.watchdog_marked = marked

    def refresh_listings(self) -> None:
        """Start one cloud listing per class that has machines when its last one is older than
        --machine-cloud-sync-period; listings run on the workers and wake the scheduler when they land."""
        now = self.runtime.clock()
        used = {(o.namespace(m), o.class_name(o.spec(m))) for m in self.caches.all(KIND_MACHINE)}
        for cls in self.caches.all('MachineClass'):
            key = o.key(cls)
            current = self.inventories.get(key)
            if (o.namespace(cls), o.name(cls)) not in used:
                continue
            if current is not None and now - current.taken_at < self.settings.cloud_sync_period:
                continue
            self.submit('listing/' + key, self.list_class, cls)

    def list_class(self, cls: Mapping[str, Any]) -> Inventory:
        """List the class's VMs now (one driver call) and keep the result as its inventory."""
        key = o.key(cls)
        started = self.runtime.clock()
        vms, error, problem = self._listing(cls)
        with self.lock:
            seq = self.listing_seq.get(key, 0) + 1
            self.listing_seq[key] = seq
        inventory = Inventory(vms, started, seq, error)
        self.inventories[key] = inventory
        if error is not None:
            log.warning('cloud listing of class %s failed: %s', key, error)
        self.class_problem(cls, problem)
        return inventory

    def _listing(self, cls: Mapping[str, Any]) -> Tuple[list, Optional[DriverError], str]:
        """(VMs, the listing's error, the class's own problem): a class that is not ready (its Secret missing or
        refused, ...) is a problem of the class, shown as such on its machines, not a cloud error."""
        try:
            driver, ctx = self.target.driver_for_class(cls)
            return driver.list_vms(ctx), None, ''
        except ClassNotReady as exc:
            return [], DriverError(Code.INVALID_ARGUMENT, str(exc), Call.LIST, o.key(cls)), str(exc)
        except DriverError as exc:
            return [], exc, ''

    def class_problem(self, cls: Mapping[str, Any], problem: str) -> None:
        """Record why the class's machines cannot be created; a Warning Event on the class when that starts or
        changes, a Normal one when it ends. Either way its machines are looked at again at once (not after their
        MediumRetry): their status shows the class as it is now."""
        key = o.key(cls)
        with self.lock:
            before = self.class_problems.get(key, '')
            if problem:
                self.class_problems[key] = problem
            else:
                self.class_problems.pop(key, None)
        if problem == before:
            return
        involved = dict(cls, kind='MachineClass', apiVersion=API_VERSION)
        if problem:
            self.target.event(involved, Event('MachineClassNotReady', problem, warning=True))
        else:
            self.target.event(involved, Event('MachineClassReady', 'MachineClass %s and its Secrets are usable again' % key))
        uids = {o.uid(m) for m in self.caches.all(KIND_MACHINE)
                if o.namespace(m) == o.namespace(cls) and o.class_name(o.spec(m)) == o.name(cls)}
        with self.lock:
            for uid in uids:
                self.not_before.pop(uid, None)
        self.wake.set()

    # --- the pass -------------------------------------------------------------------------------------
    def world(self) -> World:
        classes: Dict[str, ClassState] = {}
        for cls in self.caches.all('MachineClass'):
            driver = self.driver_for(str(cls.get('provider') or ''))
            problem = unsupported(cls) if driver is None else self.class_problems.get(o.key(cls), '')
            classes[o.key(cls)] = ClassState(cls, problem, self.inventories.get(o.key(cls)))
        now = time.monotonic()
        machines = self.caches.all(KIND_MACHINE)
        deleting = {o.uid(m) for m in machines if o.deleting(m)}
        with self.lock:
            waiting = {uid for uid, (until, while_deleting) in self.not_before.items()
                       if until > now and (while_deleting or uid not in deleting)}
            busy = set(self.busy) | waiting
            api_freeze = self.api.freeze()
            thawed, self.api_thawed = self.api_thawed, False
        return World(deployments=self.caches.all(KIND_DEPLOYMENT), sets=self.caches.all(KIND_SET),
                     machines=machines, classes=classes, nodes=self.caches.node_map(),
                     watchdog_marked=dict(self.watchdog_marked), api_freeze=api_freeze, api_thawed=thawed,
                     busy=busy, synced=self.synced)

    def run_pass(self) -> float:
        """Plan and dispatch one pass; returns when (monotonic) the next one is due."""
        started = time.perf_counter()
        world = self.world()
        plan = plan_pass(world, self.memory, self.settings, self.runtime.clock())
        self.metrics.passes.observe(time.perf_counter() - started)
        self.last_pass = plan
        self.report(world, plan)
        next_due = time.monotonic() + self.opts.sync_period
        machines = {o.uid(m): m for m in world.machines}
        for mp in plan.machines:
            m = machines.get(mp.uid)
            if m is None:
                continue
            if mp.failed:
                self.metrics.replacements.labels(mp.failed).inc()
            if mp.empty and not mp.events:
                next_due = min(next_due, time.monotonic() + self.delay(mp))
                continue
            slot = class_key(m) if calls_cloud(m, mp) else None
            if slot is not None and not self.cloud_slots.take(slot, mp.uid, self.slot_limit(world.classes.get(slot))):
                continue     # no slot free: a finishing job wakes the scheduler, and this machine is planned again
            if not self.submit(mp.uid, self._machine_job, m, mp) and slot is not None:
                self.cloud_slots.release(slot, mp.uid)
        sets = {o.key(s): s for s in world.sets}
        for key, patch in plan.set_freezes.items():
            ms = sets[key]
            self.submit(o.uid(ms), self._set_freeze_job, ms, patch)
        for sp in plan.sets:
            ms = sets.get(sp.key)
            if ms is not None and (sp.create or sp.delete or sp.adopt or sp.status or sp.metadata or sp.remove_finalizer or sp.events):
                self.submit(sp.uid, run_set, self.target, ms, sp)
        mds = {o.key(d): d for d in world.deployments}
        for key, patch in plan.deployment_patches.items():
            md = mds[key]
            self.submit(o.uid(md) + '/label', self.target.patch, KIND_DEPLOYMENT, o.namespace(md), o.name(md), patch)
        for dp in plan.deployments:
            md = mds.get(dp.key)
            if md is not None and (dp.create_set or dp.set_patches or dp.delete_sets or dp.adopt_sets or dp.patch
                                   or dp.status or dp.remove_finalizer or dp.events):
                self.submit(dp.uid, run_deployment, self.target, md, dp)
        for key, error in plan.invalid.items():
            log.warning('%s is invalid and waits: %s', key, error, extra={'field': error.field, 'rule': error.rule})
        return next_due

    def slot_limit(self, state: Optional[ClassState]) -> Optional[int]:
        """Cloud jobs a class may have out at once: AWS classes by the EC2 budget, others unlimited."""
        if state is None or state.obj is None or str(state.obj.get('provider') or '') != 'AWS':
            return None
        return slots_for(self.opts.aws_api_rate, self.opts.aws_api_burst)

    def delay(self, plan: MachinePlan) -> float:
        if plan.retry_after is not None:
            return max(MIN_PASS_GAP, plan.retry_after)
        s = self.settings
        return {Retry.CONFLICT: 0.2, Retry.SHORT: s.short_retry, Retry.MEDIUM: s.medium_retry, Retry.LONG: s.long_retry,
                Retry.RESOURCE_EXHAUSTED: s.resource_exhausted_retry,
                Retry.THROTTLED: self.rng.uniform(1.0, 5.0)}[plan.retry]

    def submit(self, key: str, fn: Any, *args: Any) -> bool:
        """Run fn(*args) on a worker unless `key` has a job in flight; False when it was not started."""
        with self.lock:
            if key in self.busy:
                return False
            self.busy.add(key)
            self.metrics.in_flight.set(len(self.busy))

        def job() -> None:
            try:
                fn(*args)
            except Conflict:
                log.debug('conflict on %s; the next pass retries', key)
            except KubeError as exc:
                log.warning('action on %s failed: %s', key, exc)
            except Exception:
                log.exception('action on %s failed', key)
            finally:
                with self.lock:
                    self.busy.discard(key)
                    self.metrics.in_flight.set(len(self.busy))
                self.wake.set()
        try:
            self.pool.submit(job)
        except RuntimeError:   # shutting down
            with self.lock:
                self.busy.discard(key)
            return False
        return True

    def _machine_job(self, machine: Mapping[str, Any], plan: MachinePlan) -> None:
        try:
            self._run_machine(machine, plan)
        finally:
            self.cloud_slots.release(class_key(machine), o.uid(machine))

    def _run_machine(self, machine: Mapping[str, Any], plan: MachinePlan) -> None:
        timeouts = machine_timeouts(o.spec(machine), self.settings)
        node = o.node_of(machine, self.caches.nodes.get)
        lookup = None
        inventory = self.inventories.get(class_key(machine))
        if inventory is not None:
            lookup = inventory.lookup(machine_context(machine))
        if o.deleting(machine):
            view: Any = DeletionView(machine, node, lookup, timeouts)
            memory = self.drain_memory.setdefault(o.uid(machine), DrainMemory())
        else:
            view = MachineView(machine, node, lookup, timeouts)
            memory = None
        result = run_machine(self.target, machine, plan, view, self.settings, self.runtime.clock, memory)
        if result.obj is None:
            self.drain_memory.pop(o.uid(machine), None)
        last = result.last
        if ((last.status or {}).get('lastOperation') or {}).get('state') == 'Failed':
            with self.lock:     # MCM's requeue after a failed action: the machine waits out its retry period
                self.not_before[o.uid(machine)] = (time.monotonic() + self.delay(last), o.deleting(machine))
        else:
            with self.lock:
                self.not_before.pop(o.uid(machine), None)

    def _set_freeze_job(self, ms: Mapping[str, Any], patch: Dict[str, Any]) -> None:
        self.target.patch(KIND_SET, o.namespace(ms), o.name(ms), {'metadata': patch['metadata']})
        self.target.patch(KIND_SET, o.namespace(ms), o.name(ms), {'status': patch['status']}, status=True)

    def report(self, world: World, plan: PassPlan) -> None:
        counts = {phase.value or 'Creating': 0 for phase in Phase}
        for m in world.machines:
            counts[o.phase(m).value or 'Creating'] += 1
        for phase, count in counts.items():
            self.metrics.phase.labels(phase).set(count)
        self.metrics.meltdown_limited.set(sum(1 for mp in plan.machines if mp.waiting.startswith('MeltdownLimit')))
        active = {(f.rule, scope) for scope, f in plan.freezes.items()}
        for rule, scope in active - self.active_freezes:
            self.metrics.freezes.labels(rule).inc()
            self.metrics.frozen.labels(rule, scope).set(1)
            log.warning('freeze started: %s', plan.freezes[scope].text(), extra={'scope': scope, 'rule': rule})
        for rule, scope in self.active_freezes - active:
            self.metrics.frozen.labels(rule, scope).set(0)
            log.info('freeze ended: %s', rule, extra={'scope': scope})
        self.active_freezes = active
        for obj, event in plan.events:
            self.submit('event/%s/%s' % (o.uid(obj), event.reason), self.target.event, obj, event)

    # --- orphans --------------------------------------------------------------------------------------
    def collect_orphans(self) -> None:
        """Safety: VMs deleted on positive evidence only (safety.orphans); runs on a worker, one class at a time."""
        freeze = self.api.freeze()
        if freeze is None and self.last_pass is not None and self.last_pass.freezes:
            freeze = next(iter(self.last_pass.freezes.values()))
        for cls in self.caches.all('MachineClass'):
            self.submit('orphans/' + o.key(cls), self._orphans_of, cls, freeze)

    def _orphans_of(self, cls: Mapping[str, Any], freeze: Optional[safety.Freeze]) -> None:
        key = o.key(cls)
        inventory = self.list_class(cls)
        machines = self.caches.all(KIND_MACHINE)
        uids = {o.uid(m) for m in machines}
        count = sum(1 for m in machines if o.namespace(m) == o.namespace(cls) and o.class_name(o.spec(m)) == o.name(cls))
        verdict = safety.orphans(inventory, o.uid(cls), uids, count, self.orphan_memory.setdefault(key, safety.OrphanMemory()),
                                 self.settings, self.runtime.clock(), freeze, self.synced)
        if verdict.skipped:
            log.info('orphan collection of class %s skipped: %s', key, verdict.skipped)
        for pid, why in verdict.kept:
            log.debug('orphan candidate %s kept: %s', pid, why, extra={'class': key})
        for vm in verdict.delete:
            self._delete_orphan(cls, vm)

    def _delete_orphan(self, cls: Mapping[str, Any], vm: Any) -> None:
        driver, ctx = self.target.driver_for_class(cls)
        driver.delete_machine(ctx, MachineContext(o.namespace(cls), vm.machine_name, vm.owner_uid, vm.provider_id))
        self.metrics.orphans.labels(driver.provider).inc()
        self.target.event(dict(cls, kind='MachineClass', apiVersion=API_VERSION), Event(
            'OrphanVMDeleted', 'deleted VM %s: tagged for machine %s (uid %s, no longer exists) of this class, older than %ss, '
            'absent on two collection cycles' % (vm.provider_id, vm.machine_name, vm.owner_uid, int(self.settings.orphan_min_age)),
            warning=True))
