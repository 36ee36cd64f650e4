"""An in-memory world for the machines engine: an object store with the API server's semantics that matter
(uid, generateName, resourceVersion checks, finalizers and deletionTimestamp, status kept apart), a fake cloud
driver with fault injection and call counters, and kubelets that register Ready Nodes for running VMs.

Unit tests and bench/machines.py drive the real engine through it: `sim.step()` builds the World, calls
reconcile.plan_pass and applies the plan with apply.py, exactly as the controller does (one thread).
"""

from __future__ import annotations

import copy
import itertools
import uuid
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.machines import apply as apply_mod
from ansible_collections.steward.cluster.plugins.module_utils.machines import objects as o
from ansible_collections.steward.cluster.plugins.module_utils.machines.codes import Call, Code
from ansible_collections.steward.cluster.plugins.module_utils.machines.config import Settings, machine_timeouts
from ansible_collections.steward.cluster.plugins.module_utils.machines.deletion import DeletionView
from ansible_collections.steward.cluster.plugins.module_utils.machines.drain import DrainPlan
from ansible_collections.steward.cluster.plugins.module_utils.machines.driver import (
    VM, ClassContext, CreateResult, Driver, MachineContext, VMState)
from ansible_collections.steward.cluster.plugins.module_utils.machines.errors import ClassNotReady, DriverError
from ansible_collections.steward.cluster.plugins.module_utils.machines.inventory import Inventory
from ansible_collections.steward.cluster.plugins.module_utils.machines.machine import MachineView
from ansible_collections.steward.cluster.plugins.module_utils.machines.reconcile import ClassState, Memory, World, plan_pass
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import format_micro

API = 'machine.sapcloud.io/v1alpha1'
T0 = 1_700_000_000.0


def stamp(t: float) -> str:
    return format_micro(t)[:19] + 'Z'


class Conflict(Exception):
    pass


def merge(base: Any, patch: Any) -> Any:
    if not isinstance(patch, dict) or not isinstance(base, dict):
        return copy.deepcopy(patch)
    out = dict(base)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge(out.get(k), v)
    return out


class FakeCloud(Driver):
    """A cloud of VMs. `fail(call, code, times)` makes the next calls fail; `calls` counts per call."""

    provider = 'Fake'

    def __init__(self, sim: 'MachinesSim'):
        self.sim = sim
        self.vms: Dict[str, Dict[str, Any]] = {}
        self.tokens: Dict[str, str] = {}
        self.calls: Dict[str, int] = {}
        self.failures: List[Tuple[Call, Code, int]] = []
        self.needs_init = False
        self.seq = itertools.count(1)

    def fail(self, call: Call, code: Code, times: int = 1) -> None:
        self.failures.append((call, code, times))

    def _maybe_fail(self, call: Call) -> None:
        self.calls[call.value] = self.calls.get(call.value, 0) + 1
        for i, (c, code, times) in enumerate(self.failures):
            if c == call and times > 0:
                self.failures[i] = (c, code, times - 1)
                raise DriverError(code, 'injected %s' % code.mcm_name, call)

    def create_machine(self, cls: ClassContext, machine: MachineContext) -> CreateResult:
        self._maybe_fail(Call.CREATE)
        if machine.uid in self.tokens:                       # idempotent, like a ClientToken
            vm = self.vms[self.tokens[machine.uid]]
            return CreateResult(vm['provider_id'], vm['node'])
        n = next(self.seq)
        pid = 'fake:///vm-%05d' % n
        self.vms[pid] = {'provider_id': pid, 'node': 'node-%05d' % n, 'name': machine.name, 'owner': machine.uid,
                         'class': cls.uid, 'state': VMState.RUNNING, 'launched': self.sim.now, 'init': self.needs_init}
        self.tokens[machine.uid] = pid
        return CreateResult(pid, 'node-%05d' % n)

    def initialize_machine(self, cls: ClassContext, machine: MachineContext) -> CreateResult:
        self._maybe_fail(Call.INITIALIZE)
        for vm in self.vms.values():
            if vm['owner'] == machine.uid:
                vm['init'] = False
                return CreateResult(vm['provider_id'], vm['node'])
        raise DriverError(Code.NOT_FOUND, 'no VM', Call.INITIALIZE)

    def delete_machine(self, cls: ClassContext, machine: MachineContext) -> str:
        self._maybe_fail(Call.DELETE)
        for vm in self.vms.values():
            if vm['provider_id'] == machine.provider_id or (vm['owner'] == machine.uid and machine.uid):
                vm['state'] = VMState.TERMINATED
        return 'deleted'

    def list_vms(self, cls: ClassContext) -> List[VM]:
        self._maybe_fail(Call.LIST)
        return [VM(provider_id=v['provider_id'], node_name=v['node'], machine_name=v['name'], owner_uid=v['owner'],
                   class_uid=v['class'], state=v['state'], launched=v['launched'], needs_init=v['init'])
                for v in self.vms.values() if v['class'] == cls.uid]

    def running(self) -> List[Dict[str, Any]]:
        return [v for v in self.vms.values() if v['state'] == VMState.RUNNING]


class MachinesSim(apply_mod.Target):
    def __init__(self, settings: Optional[Settings] = None, auto_nodes: bool = True, node_delay: float = 0.0):
        self.settings = settings or Settings(short_retry=1, medium_retry=5, long_retry=10)
        self.now = T0
        self.store: Dict[Tuple[str, str, str], Dict[str, Any]] = {}
        self.nodes: Dict[str, Dict[str, Any]] = {}
        self.cloud = FakeCloud(self)
        self.memory = Memory()
        self.rv = itertools.count(1)
        self.events: List[Tuple[str, str, str]] = []
        self.auto_nodes = auto_nodes
        self.node_delay = node_delay
        self.unreachable: set = set()
        self.deleted_nodes: List[str] = []
        self.watchdog_marked: Dict[str, List[str]] = {}
        self.api_freeze = None
        self.api_thawed = False          # the next pass is told the API-server freeze ended (then it is reset)
        self.busy: set = set()           # uids whose action is in flight: passes skip them
        self.last_plan = None
        self.listing_seq = 0
        self.max_machines_seen = 0

    # --- object store (Target) ----------------------------------------------------------------
    def create(self, kind: str, obj: Dict[str, Any]) -> Dict[str, Any]:
        obj = copy.deepcopy(obj)
        md = obj.setdefault('metadata', {})
        if not md.get('name'):
            md['name'] = md['generateName'] + uuid.uuid4().hex[:5]
        key = (kind, md.get('namespace', ''), md['name'])
        if key in self.store:
            raise Conflict('%s %s exists' % (kind, md['name']))
        md.update(uid=str(uuid.uuid4()), creationTimestamp=stamp(self.now), resourceVersion=str(next(self.rv)), generation=1)
        obj.setdefault('kind', kind)
        obj.setdefault('apiVersion', API)
        self.store[key] = obj
        return copy.deepcopy(obj)

    def patch(self, kind: str, namespace: str, name: str, patch: Dict[str, Any], status: bool = False,
              resource_version: Optional[str] = None) -> Optional[Dict[str, Any]]:
        key = (kind, namespace, name)
        obj = self.store.get(key)
        if obj is None:
            return None
        if resource_version and obj['metadata']['resourceVersion'] != resource_version:
            raise Conflict('%s %s changed' % (kind, name))
        if status:
            new = dict(obj, status=merge(obj.get('status') or {}, patch.get('status') or {}))
        else:
            body = {k: v for k, v in patch.items() if k != 'status'}
            new = merge(obj, body)
            if new.get('spec') != obj.get('spec'):
                new['metadata']['generation'] = obj['metadata'].get('generation', 1) + 1
        new['metadata']['resourceVersion'] = str(next(self.rv))
        if new['metadata'].get('deletionTimestamp') and not new['metadata'].get('finalizers'):
            del self.store[key]
            return None
        self.store[key] = new
        return copy.deepcopy(new)

    def delete(self, kind: str, namespace: str, name: str) -> Optional[Dict[str, Any]]:
        key = (kind, namespace, name)
        obj = self.store.get(key)
        if obj is None:
            return None
        if obj['metadata'].get('finalizers'):
            if not obj['metadata'].get('deletionTimestamp'):
                obj['metadata']['deletionTimestamp'] = stamp(self.now)
                obj['metadata']['resourceVersion'] = str(next(self.rv))
            return copy.deepcopy(obj)
        del self.store[key]
        return None

    def event(self, obj: Any, event: Any) -> None:
        self.events.append((o.name(obj), event.reason, event.message))

    def driver(self, machine: Any) -> Tuple[Driver, ClassContext]:
        cls = self.store.get(('MachineClass', o.namespace(machine), o.class_name(o.spec(machine))))
        if cls is None:
            raise ClassNotReady('MachineClass missing')
        return self.cloud, self.class_context(cls)

    def class_context(self, cls: Dict[str, Any]) -> ClassContext:
        return ClassContext(o.namespace(cls), o.name(cls), o.uid(cls), cls.get('provider', 'Fake'),
                            cls.get('providerSpec') or {}, {})

    def node(self, name: str) -> Optional[Dict[str, Any]]:
        return copy.deepcopy(self.nodes.get(name))

    def delete_node(self, name: str) -> None:
        if self.nodes.pop(name, None) is not None:
            self.deleted_nodes.append(name)

    def patch_node(self, name: str, patch: Dict[str, Any], status: bool = False) -> None:
        node = self.nodes.get(name)
        if node is None:
            raise LookupError('node %s not found' % name)
        body = copy.deepcopy(patch)
        wanted = (body.get('metadata') or {}).pop('resourceVersion', None)
        if wanted and (node.get('metadata') or {}).get('resourceVersion', wanted) != wanted:
            raise Conflict('node %s changed' % name)
        self.nodes[name] = merge(node, body)

    def drain_round(self, machine, node, force, timeouts, memory, settings, now) -> DrainPlan:
        return DrainPlan(done=True, message='no pods')

    def delete_volume_attachments(self, node_name: str) -> None:
        pass

    # --- builders ------------------------------------------------------------------------------
    def add_class(self, name: str = 'cls', namespace: str = 'ns') -> Dict[str, Any]:
        return self.create('MachineClass', {'metadata': {'name': name, 'namespace': namespace}, 'provider': 'Fake',
                                            'providerSpec': {}, 'secretRef': {'name': 's', 'namespace': namespace}})

    def add_deployment(self, name: str = 'md', replicas: int = 3, cls: str = 'cls', namespace: str = 'ns',
                       strategy: Optional[Dict[str, Any]] = None, **spec: Any) -> Dict[str, Any]:
        body = {'metadata': {'name': name, 'namespace': namespace},
                'spec': dict({'replicas': replicas, 'selector': {'matchLabels': {'name': name}},
                              'template': {'metadata': {'labels': {'name': name}},
                                           'spec': {'class': {'kind': 'MachineClass', 'name': cls}}},
                              'strategy': strategy or {'type': 'RollingUpdate',
                                                       'rollingUpdate': {'maxSurge': 1, 'maxUnavailable': 1}}}, **spec)}
        return self.create('MachineDeployment', body)

    def update(self, kind: str, name: str, patch: Dict[str, Any], namespace: str = 'ns') -> Dict[str, Any]:
        return self.patch(kind, namespace, name, patch)

    # --- queries -------------------------------------------------------------------------------
    def objects(self, kind: str) -> List[Dict[str, Any]]:
        return [copy.deepcopy(v) for (k, _ns, _n), v in sorted(self.store.items()) if k == kind]

    def get(self, kind: str, name: str, namespace: str = 'ns') -> Optional[Dict[str, Any]]:
        return copy.deepcopy(self.store.get((kind, namespace, name)))

    def machines(self) -> List[Dict[str, Any]]:
        return self.objects('Machine')

    def phases(self) -> List[str]:
        return sorted(o.phase(m).value for m in self.machines())

    def sets(self) -> List[Dict[str, Any]]:
        return self.objects('MachineSet')

    # --- the kubelets ----------------------------------------------------------------------------
    def sync_nodes(self) -> None:
        if not self.auto_nodes:
            return
        for vm in self.cloud.vms.values():
            name = vm['node']
            if vm['state'] == VMState.RUNNING and name not in self.nodes and self.now - vm['launched'] >= self.node_delay \
                    and name not in self.deleted_nodes:
                self.nodes[name] = {'metadata': {'name': name}, 'spec': {'providerID': vm['provider_id']},
                                    'status': {'conditions': [self._ready('True')]}}
        for name, node in self.nodes.items():
            conds = [c for c in node['status']['conditions'] if c['type'] != 'Ready']
            want = 'Unknown' if name in self.unreachable else None
            ready = next(c for c in node['status']['conditions'] if c['type'] == 'Ready')
            if want and ready['status'] != want:
                node['status']['conditions'] = conds + [self._ready(want)]
            elif not want and ready['status'] == 'Unknown':
                node['status']['conditions'] = conds + [self._ready('True')]

    def _ready(self, status: str) -> Dict[str, Any]:
        return {'type': 'Ready', 'status': status, 'reason': 'KubeletReady' if status == 'True' else 'NodeStatusUnknown',
                'lastTransitionTime': stamp(self.now)}

    def set_condition(self, node: str, kind: str, status: str) -> None:
        conds = [c for c in self.nodes[node]['status']['conditions'] if c['type'] != kind]
        self.nodes[node]['status']['conditions'] = conds + [
            {'type': kind, 'status': status, 'lastTransitionTime': stamp(self.now)}]

    # --- the loop --------------------------------------------------------------------------------
    def world(self) -> World:
        classes: Dict[str, ClassState] = {}
        self.listing_seq += 1
        for cls in self.objects('MachineClass'):
            ctx = self.class_context(cls)
            try:
                inventory = Inventory(self.cloud.list_vms(ctx), self.now, self.listing_seq)
            except DriverError as exc:
                inventory = Inventory([], self.now, self.listing_seq, exc)
            classes[o.key(cls)] = ClassState(cls, '', inventory)
        thawed, self.api_thawed = self.api_thawed, False
        return World(deployments=self.objects('MachineDeployment'), sets=self.objects('MachineSet'),
                     machines=self.machines(), classes=classes, nodes=copy.deepcopy(self.nodes),
                     watchdog_marked=self.watchdog_marked, api_freeze=self.api_freeze, api_thawed=thawed,
                     busy=set(self.busy))

    def step(self, dt: float = 1.0, count: int = 1) -> None:
        for _step in range(count):
            self.sync_nodes()
            world = self.world()
            plan = plan_pass(world, self.memory, self.settings, self.now)
            self.last_plan = plan
            self.apply(world, plan)
            self.max_machines_seen = max(self.max_machines_seen, len(self.machines()))
            self.now += dt

    def apply(self, world: World, plan: Any) -> None:
        by_uid = {o.uid(m): m for m in world.machines}
        for mp in plan.machines:
            m = by_uid[mp.uid]
            timeouts = machine_timeouts(o.spec(m), self.settings)
            if o.deleting(m):
                view: Any = DeletionView(m, o.node_of(m, world.nodes.get), None, timeouts)
            else:
                view = MachineView(m, o.node_of(m, world.nodes.get), None, timeouts)
            apply_mod.run_machine(self, m, mp, view, self.settings, lambda: self.now)
        sets = {o.key(s): s for s in world.sets}
        for key, patch in plan.set_freezes.items():
            s = sets[key]
            self.patch('MachineSet', o.namespace(s), o.name(s), {'metadata': patch['metadata']})
            self.patch('MachineSet', o.namespace(s), o.name(s), {'status': patch['status']}, status=True)
        for sp in plan.sets:
            current = self.store.get(('MachineSet',) + tuple(sp.key.split('/')))
            if current is not None:
                apply_mod.run_set(self, current, sp)
        mds = {o.key(d): d for d in world.deployments}
        for key, patch in plan.deployment_patches.items():
            d = mds[key]
            self.patch('MachineDeployment', o.namespace(d), o.name(d), patch)
        for dp in plan.deployments:
            current = self.store.get(('MachineDeployment',) + tuple(dp.key.split('/')))
            if current is not None:
                apply_mod.run_deployment(self, current, dp)

    def run_until(self, predicate, limit: int = 200, dt: float = 1.0) -> int:
        for i in range(limit):
            if predicate():
                return i
            self.step(dt)
        raise AssertionError('not reached after %d steps; phases %s' % (limit, self.phases()))
