# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A pass and its jobs: plan the world (reconcile.plan_pass) and hand each plan with work to `--concurrent-syncs`
workers (apply.py). An object with a job in flight is skipped by later passes; a machine whose last action failed
waits out its retry period (codes.retry_delay); a machine job that may call the cloud (MachinePlan.calls_cloud)
first takes a slot of its class (admission.py), in the scheduler rather than in a worker."""

from __future__ import annotations

import logging
import time
from typing import Any, Dict, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import Conflict, KubeError
from ansible_collections.steward.cluster.plugins.module_utils.machines import objects as o
from ansible_collections.steward.cluster.plugins.module_utils.machines.apply import (
    run_deployment,
    run_in_place,
    run_machine,
    run_set,
)
from ansible_collections.steward.cluster.plugins.module_utils.machines.codes import retry_delay
from ansible_collections.steward.cluster.plugins.module_utils.machines.config import machine_timeouts
from ansible_collections.steward.cluster.plugins.module_utils.machines.constants import Phase
from ansible_collections.steward.cluster.plugins.module_utils.kube.mcm import KIND_DEPLOYMENT, KIND_SET
from ansible_collections.steward.cluster.plugins.module_utils.machines.deletion import DeletionView
from ansible_collections.steward.cluster.plugins.module_utils.machines.drain import DrainMemory
from ansible_collections.steward.cluster.plugins.module_utils.machines.driver import machine_context
from ansible_collections.steward.cluster.plugins.module_utils.machines.machine import MachineView
from ansible_collections.steward.cluster.plugins.module_utils.machines.plan import MachinePlan
from ansible_collections.steward.cluster.plugins.module_utils.machines.reconcile import (
    ClassState,
    InPlaceJob,
    PassPlan,
    World,
    class_key,
    plan_pass,
)

from steward_controller.machines.admission import slots_for
from steward_controller.machines.scheduler import MIN_PASS_GAP

log = logging.getLogger('steward.machines')


class Dispatch:
    # A mixin of MachinesController (controller.py), whose __init__ holds the state these methods share.

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
            slot = class_key(m) if mp.calls_cloud(o.deleting(m)) else None
            if slot is not None and not self.cloud_slots.take(slot, mp.uid, self.slot_limit(world.classes.get(slot))):
                continue     # no slot free: a finishing job wakes the scheduler, and this machine is planned again
            if not self.submit(mp.uid, self._machine_job, m, mp) and slot is not None:
                self.cloud_slots.release(slot, mp.uid)
        for job in plan.in_place:
            m = machines.get(job.uid)
            if m is not None:
                self.submit(job.uid, self._in_place_job, m, job)
        sets = {o.key(s): s for s in world.sets}
        for key, patch in plan.set_freezes.items():
            ms = sets[key]
            self.submit(o.uid(ms), self._set_freeze_job, ms, patch)
        for sp in plan.sets:
            ms = sets.get(sp.key)
            if ms is not None and sp.has_work:
                self.submit(sp.uid, run_set, self.target, ms, sp)
        mds = {o.key(d): d for d in world.deployments}
        for key, patch in plan.deployment_patches.items():
            md = mds[key]
            self.submit(o.uid(md) + '/label', self.target.patch, KIND_DEPLOYMENT, o.namespace(md), o.name(md), patch)
        for dp in plan.deployments:
            md = mds.get(dp.key)
            if md is not None and dp.has_work:
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
        return retry_delay(plan.retry, self.settings, self.rng, plan.retry_after, floor=MIN_PASS_GAP)

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

    def _in_place_job(self, machine: Mapping[str, Any], job: InPlaceJob) -> None:
        """Drain the machine's Node and have its driver update it where it stands (apply.run_in_place)."""
        timeouts = machine_timeouts(o.spec(machine), self.settings)
        run_in_place(self.target, machine, job.node, job.class_name, timeouts, self.runtime.clock)

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
