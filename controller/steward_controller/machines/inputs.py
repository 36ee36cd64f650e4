# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the machines loop reads: full lists of the machine objects and Nodes (the informers' start and resync),
MCM's API-server probe, dependency-watchdog's scale-downs, one cloud listing per MachineClass (and what it says
about the class), and the World a pass plans over."""

from __future__ import annotations

import logging
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError
from ansible_collections.steward.cluster.plugins.module_utils.machines import objects as o
from ansible_collections.steward.cluster.plugins.module_utils.machines.codes import Call, Code
from ansible_collections.steward.cluster.plugins.module_utils.machines.constants import ANNOTATION_WATCHDOG_MELTDOWN
from ansible_collections.steward.cluster.plugins.module_utils.kube.mcm import (
    API_VERSION,
    KIND_DEPLOYMENT,
    KIND_MACHINE,
    KIND_SET,
    PLURALS,
)
from ansible_collections.steward.cluster.plugins.module_utils.machines.errors import ClassNotReady, DriverError
from ansible_collections.steward.cluster.plugins.module_utils.machines.inventory import Inventory
from ansible_collections.steward.cluster.plugins.module_utils.machines.plan import Event
from ansible_collections.steward.cluster.plugins.module_utils.machines.reconcile import ClassState, World

from steward_controller.machines.caches import KINDS
from steward_controller.machines.drivers import unsupported
from steward_controller.core.informer import slim

log = logging.getLogger('steward.machines')


class Inputs:
    # A mixin of MachinesController (controller.py), whose __init__ holds the state these methods share.

    def vm_gone(self, provider_id: str) -> bool:
        """A class listing shows this VM terminated (positive evidence)."""
        for inventory in list(self.inventories.values()):
            vm = inventory.by_provider_id.get(provider_id)
            if vm is not None and vm.state.gone:
                return True
        return False

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
