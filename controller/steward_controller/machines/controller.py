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
import random
import threading
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

import kopf

from ansible_collections.steward.cluster.plugins.module_utils.machines import safety
from ansible_collections.steward.cluster.plugins.module_utils.kube.mcm import GROUP, PLURALS, VERSION
from ansible_collections.steward.cluster.plugins.module_utils.machines.drain import DrainMemory
from ansible_collections.steward.cluster.plugins.module_utils.machines.driver import Driver
from ansible_collections.steward.cluster.plugins.module_utils.machines.inventory import Inventory
from ansible_collections.steward.cluster.plugins.module_utils.machines.reconcile import Memory, PassPlan

from steward_controller.core.background import BackgroundLoop, register_background
from steward_controller.core.runtime import Runtime
from steward_controller.machines import MachinesOptions
from steward_controller.machines.admission import CloudSlots
from steward_controller.machines.caches import KINDS, Caches
from steward_controller.machines.dispatch import Dispatch
from steward_controller.machines.drivers import Drivers
from steward_controller.machines.inputs import Inputs
from steward_controller.machines.metrics import MachineMetrics
from steward_controller.machines.orphans import Orphans
from steward_controller.machines.scheduler import HEALTH_KEY, Scheduler
from steward_controller.machines.target import KubeTarget

POOL_SPARE = 5               # connections beyond the workers: the scheduler, the safety thread, kopf's watches' relists


def machine_secret_opt_in(opts: MachinesOptions, settings: Any) -> bool:
    """--machine-secret-opt-in when given, else --secret-opt-in. A MachineClass's Secret reaches only the cloud the
    controller is configured for (the endpoint is not the class author's to choose) and instances the class
    describes; MCM reads any Secret a class names, so a migrated pool works unchanged with `false`."""
    return settings.secret_opt_in if opts.secret_opt_in is None else opts.secret_opt_in


def register(registry: Any, runtime: Runtime) -> None:
    controller = MachinesController(runtime, runtime.settings.options('machines'))

    register_background(registry, 'machines', controller.start, controller.stop)

    def watch(kind: str, group: str, version: str, plural: str) -> None:
        @kopf.on.event(group, version, plural, registry=registry, id='machines-' + plural)
        async def on_event(event: Mapping[str, Any], **_: Any) -> None:
            controller.observe(kind, event.get('type'), event.get('object') or {})

    for kind in KINDS:
        watch(kind, GROUP, VERSION, PLURALS[kind])
    watch('Node', '', 'v1', 'nodes')


class MachinesController(Scheduler, Inputs, Dispatch, Orphans, Drivers):
    """The machines loop. Its parts, one file each: scheduler.py (the threads), inputs.py (lists, probes, cloud
    listings, the world), dispatch.py (passes and jobs), orphans.py, drivers.py; the state they share is here."""

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
        self.background = BackgroundLoop('machines', runtime.health, HEALTH_KEY)
        self.wake = self.background.woken           # a pass soon: a watch event, a finished action
        self.stopping = self.background.stopped
        self.synced = False
        self.active_freezes: Set[Tuple[str, str]] = set()
        self.last_pass: Optional[PassPlan] = None
        self._drivers: Dict[str, Driver] = {}
        self.cloud_slots = CloudSlots()
        self.pool = concurrent.futures.ThreadPoolExecutor(self.settings.concurrent_syncs, thread_name_prefix='machines')
        self.target = KubeTarget(self.client, self.caches, self.metrics, self.settings, self.driver_for,
                                 clock=runtime.clock, on_api_ok=runtime.health.api_ok,
                                 secret_opt_in=machine_secret_opt_in(opts, runtime.settings), vm_gone=self.vm_gone)
        self.rng = random.Random()
