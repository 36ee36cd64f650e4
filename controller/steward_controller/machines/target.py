# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the machines loop's plans land: the Kubernetes API (through the caches), the drivers, and the
cluster side of a deletion (cordon, evictions, VolumeAttachments, the Node).

Every object written goes back into its cache with the API server's answer, so the next pass sees our own
writes even before the watch event arrives (no second create for a machine the pass already made).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError, NotFound
from ansible_collections.steward.cluster.plugins.module_utils.kube.events import NORMAL, WARNING, post_event
from ansible_collections.steward.cluster.plugins.module_utils.kube.secrets import require_opt_in, secret_data
from ansible_collections.steward.cluster.plugins.module_utils.machines import objects as o
from ansible_collections.steward.cluster.plugins.module_utils.machines.apply import Target
from ansible_collections.steward.cluster.plugins.module_utils.machines.codes import Call, Code, is_failure
from ansible_collections.steward.cluster.plugins.module_utils.machines.config import MachineTimeouts, Settings
from ansible_collections.steward.cluster.plugins.module_utils.kube.mcm import API_VERSION, PLURALS
from ansible_collections.steward.cluster.plugins.module_utils.machines.drain import (
    DrainInputs,
    DrainMemory,
    DrainPlan,
    has_volumes,
    plan_round,
    record_eviction,
)
from ansible_collections.steward.cluster.plugins.module_utils.machines.driver import (
    ClassContext,
    CreateResult,
    Driver,
    machine_context,
)
from ansible_collections.steward.cluster.plugins.module_utils.machines.errors import ClassNotReady, DriverError
from ansible_collections.steward.cluster.plugins.module_utils.machines.plan import Event
from ansible_collections.steward.cluster.plugins.module_utils.kube import drain as kube_drain
from ansible_collections.steward.cluster.plugins.module_utils.kube.drain import eviction_body, pod_ref

from steward_controller.machines.caches import Caches
from steward_controller.machines.metrics import MachineMetrics

log = logging.getLogger('steward.machines')
SECRET_TTL = 60.0
# Tests only: SIGKILL this process right after a successful CreateMachine, before the status write.
CRASH_AFTER_CREATE = 'STEWARD_MACHINES_CRASH_AFTER_CREATE'


class KubeTarget(Target):
    def __init__(self, client: KubeClient, caches: Caches, metrics: MachineMetrics, settings: Settings,
                 drivers: Callable[[str], Optional[Driver]], clock: Callable[[], float] = time.time,
                 on_api_ok: Callable[[], None] = lambda: None, secret_opt_in: bool = True,
                 vm_gone: Callable[[str], bool] = lambda provider_id: False):
        self.client = client
        self._vm_gone = vm_gone               # the latest cloud listings: is this VM terminated?
        self.secret_opt_in = secret_opt_in    # --secret-opt-in: only Secrets labelled usable-by-controller
        self.caches = caches
        self.metrics = metrics
        self.settings = settings
        self.drivers = drivers
        self.clock = clock
        self.on_api_ok = on_api_ok
        self._secrets: Dict[Tuple[str, str], Tuple[float, Optional[Dict[str, str]]]] = {}
        self._lock = threading.Lock()

    # --- objects ----------------------------------------------------------------------------------
    @staticmethod
    def path(kind: str, namespace: str, name: Optional[str] = None, status: bool = False) -> str:
        return api_path(API_VERSION, PLURALS[kind], namespace, name, 'status' if status and name else None)

    def create(self, kind: str, obj: Dict[str, Any]) -> Dict[str, Any]:
        answer = self.client.create(self.path(kind, o.namespace(obj)), obj)
        self.caches.put(kind, answer)
        self.on_api_ok()
        return answer

    def patch(self, kind: str, namespace: str, name: str, patch: Dict[str, Any], status: bool = False,
              resource_version: Optional[str] = None) -> Optional[Dict[str, Any]]:
        try:
            answer = self.client.merge_patch(self.path(kind, namespace, name, status), patch, resource_version=resource_version)
        except NotFound:
            self.caches.remove(kind, namespace, name)
            return None
        self.on_api_ok()
        if answer:
            self.caches.put(kind, answer)
        return answer

    def delete(self, kind: str, namespace: str, name: str) -> Optional[Dict[str, Any]]:
        """DELETE; an object our finalizer holds comes back with its deletionTimestamp and stays cached (so the
        next pass sees it deleting, not missing, and does not replace it twice)."""
        answer = self.client.delete(self.path(kind, namespace, name))
        self.on_api_ok()
        md = (answer or {}).get('metadata') or {}
        if md.get('name') == name and md.get('deletionTimestamp') and md.get('finalizers'):
            self.caches.put(kind, answer)
            return answer
        self.caches.remove(kind, namespace, name)
        return None

    def event(self, obj: Mapping[str, Any], event: Event) -> None:
        level = logging.WARNING if event.warning else logging.INFO
        log.log(level, event.message, extra={'object': o.key(obj), 'kind': obj.get('kind'), 'reason': event.reason})
        involved = {'apiVersion': obj.get('apiVersion') or API_VERSION, 'kind': obj.get('kind'), 'metadata': obj.get('metadata') or {}}
        post_event(self.client, involved, WARNING if event.warning else NORMAL, event.reason, event.message, self.clock(),
                   default_namespace=o.namespace(obj) or 'default')

    # --- drivers ------------------------------------------------------------------------------------
    def secret(self, namespace: str, name: str, field: str = 'secretRef') -> Optional[Dict[str, str]]:
        """A Secret's data, decoded, None when it does not exist. With --secret-opt-in (the default) only a Secret
        its owner labelled cluster.steward.io/usable-by-controller=true is used (kube/secrets.require_opt_in,
        InvalidInput rule `secret-opt-in` naming `field`): the right to create a MachineClass must not be the
        right to send any Secret of the namespace to a cloud endpoint. A usable Secret is cached for SECRET_TTL
        (credentials rotate rarely); a missing or refused one is read again on the next use."""
        key = (namespace, name)
        now = time.monotonic()
        with self._lock:
            cached = self._secrets.get(key)
        if cached is not None and now - cached[0] < SECRET_TTL:
            return cached[1]
        body = self.client.get_or_none(api_path('v1', 'secrets', namespace, name))
        if body is None:
            return None
        require_opt_in(body, field, required=self.secret_opt_in)
        data = secret_data(body, field, strict=False)
        with self._lock:
            self._secrets[key] = (now, data)
        return data

    def class_context(self, cls: Mapping[str, Any]) -> ClassContext:
        """The class and its Secret(s); raises ClassNotReady naming what is missing or refused."""
        ns = o.namespace(cls)
        data: Dict[str, str] = {}
        for field in ('secretRef', 'credentialsSecretRef'):
            ref = cls.get(field) or {}
            if not ref.get('name'):
                if field == 'secretRef':
                    raise ClassNotReady('MachineClass %s has no secretRef' % o.key(cls), o.key(cls), field, 'required')
                continue
            try:
                secret = self.secret(ref.get('namespace') or ns, ref['name'], field)
            except KubeError as exc:
                raise ClassNotReady('MachineClass %s: cannot read Secret %s: %s' % (o.key(cls), ref['name'], exc), o.key(cls)) from None
            except InvalidInput as exc:
                raise ClassNotReady('MachineClass %s: %s (rule %s; the controller runs with --secret-opt-in)' % (
                    o.key(cls), exc, exc.rule), o.key(cls), exc.field, exc.rule) from None
            if secret is None:
                raise ClassNotReady('MachineClass %s: Secret %s/%s not found' % (o.key(cls), ref.get('namespace') or ns, ref['name']),
                                    o.key(cls), field, 'exists')
            data.update(secret)
        return ClassContext(namespace=ns, name=o.name(cls), uid=o.uid(cls), provider=str(cls.get('provider') or ''),
                            provider_spec=cls.get('providerSpec') or {}, secret=data, node_template=cls.get('nodeTemplate') or {},
                            labels=dict(o.labels(cls)))

    def driver(self, machine: Mapping[str, Any]) -> Tuple[Driver, ClassContext]:
        cls = self.caches.get('MachineClass', o.namespace(machine), o.class_name(o.spec(machine)))
        if cls is None:
            raise ClassNotReady('MachineClass %s/%s not found' % (o.namespace(machine), o.class_name(o.spec(machine))))
        return self.driver_for_class(cls)

    def driver_for_class(self, cls: Mapping[str, Any]) -> Tuple[Driver, ClassContext]:
        driver = self.drivers(str(cls.get('provider') or ''))
        if driver is None:
            raise ClassNotReady('MachineClass %s: provider %r is not supported' % (o.key(cls), cls.get('provider')),
                                o.key(cls), 'provider', 'supported')
        return driver, self.class_context(cls)

    def created(self, machine: Mapping[str, Any], result: CreateResult) -> None:
        if os.environ.get(CRASH_AFTER_CREATE) == '1':
            log.warning('test crash point: SIGKILL after CreateMachine (%s) and before the status write', result.provider_id)
            os.kill(os.getpid(), signal.SIGKILL)

    def driver_call(self, call: Call, code: Code, provider: str) -> None:
        self.metrics.driver_calls.labels(provider, call.value, code.mcm_name).inc()
        if is_failure(call, code):
            self.metrics.driver_failed.labels(provider, call.value, code.mcm_name).inc()

    # --- the cluster side of a deletion ------------------------------------------------------------
    def node(self, name: str) -> Optional[Mapping[str, Any]]:
        return self.caches.nodes.get(name)

    def vm_gone(self, provider_id: str) -> bool:
        return self._vm_gone(provider_id)

    def delete_node(self, name: str) -> None:
        self.client.delete(api_path('v1', 'nodes', name=name))
        self.caches.nodes.remove(name)

    def patch_node(self, name: str, patch: Dict[str, Any], status: bool = False) -> None:
        answer = self.client.merge_patch(api_path('v1', 'nodes', name=name, subresource='status' if status else None), patch)
        if answer:
            self.caches.put('Node', answer)

    def delete_volume_attachments(self, node_name: str) -> None:
        path = api_path('storage.k8s.io/v1', 'volumeattachments')
        for va in self.client.list(path):
            if (va.get('spec') or {}).get('nodeName') == node_name:
                self.client.delete(api_path('storage.k8s.io/v1', 'volumeattachments', name=o.name(va)))

    def volume_ids(self, pods: List[Mapping[str, Any]], driver: Driver) -> Dict[str, List[str]]:
        """Each volume pod's PV volume IDs (PVC -> PV -> driver.get_volume_ids); a pod whose PVs cannot be read
        gets none (its serial wait then ends when the pod is gone)."""
        out: Dict[str, List[str]] = {}
        for pod in pods:
            if not has_volumes(pod):
                continue
            specs = []
            for volume in (pod.get('spec') or {}).get('volumes') or []:
                claim = (volume.get('persistentVolumeClaim') or {}).get('claimName')
                if not claim:
                    continue
                pvc = self.client.get_or_none(api_path('v1', 'persistentvolumeclaims', o.namespace(pod), claim))
                pv_name = ((pvc or {}).get('spec') or {}).get('volumeName')
                pv = self.client.get_or_none(api_path('v1', 'persistentvolumes', name=pv_name)) if pv_name else None
                if pv is not None:
                    specs.append(pv.get('spec') or {})
            try:
                out[pod_ref(pod)] = driver.get_volume_ids(specs) if specs else []
            except Exception:    # GetVolumeIDs unimplemented or failing: wait for the pod alone
                out[pod_ref(pod)] = []
        return out

    def drain_node(self, name: str, timeout: float) -> Dict[str, Any]:
        """An in-place update's drain: the collection's one drain (kube/drain.py: cordon once, evictions through
        the Eviction API, PodDisruptionBudgets respected, DaemonSet and mirror pods left) within the machine's
        drainTimeout; a DrainError propagates (the next pass runs the update again)."""
        done = kube_drain.drain(self.client, name, timeout=timeout, eviction_timeout=timeout, protected_namespaces=(),
                                force=False)
        return {'evicted': list(done.evicted), 'skipped': list(done.skipped), 'cordoned': done.cordoned}

    def update_machine(self, machine: Mapping[str, Any], class_name: str) -> None:
        cls = self.caches.get('MachineClass', o.namespace(machine), class_name)
        if cls is None:
            raise ClassNotReady('MachineClass %s/%s not found' % (o.namespace(machine), class_name))
        driver, context = self.driver_for_class(cls)
        code = Code.OK
        try:
            driver.update_machine(context, machine_context(machine))
        except DriverError as exc:
            code = exc.code
            raise
        finally:
            self.driver_call(Call.UPDATE, code, context.provider)

    def drain_round(self, machine: Mapping[str, Any], node: Mapping[str, Any], force: str, timeouts: MachineTimeouts,
                    memory: DrainMemory, settings: Settings, now: float) -> DrainPlan:
        name = o.name(node)
        if not (node.get('spec') or {}).get('unschedulable'):
            try:
                self.client.merge_patch(api_path('v1', 'nodes', name=name), {'spec': {'unschedulable': True}})
            except KubeError as exc:   # a failed cordon is retried; a forced drain goes on
                if not force:
                    return DrainPlan(message='cordon of node %s failed: %s' % (name, exc))
        pods = self.client.list(api_path('v1', 'pods'), field_selector='spec.nodeName=%s' % name)
        pdbs = self.client.list(api_path('policy/v1', 'poddisruptionbudgets')) if pods and not force else []
        try:
            driver, _cls = self.driver(machine)
            volume_ids = self.volume_ids(pods, driver) if not force else {}
        except ClassNotReady:
            volume_ids = {}
        attached = [v.get('name') or '' for v in ((node.get('status') or {}).get('volumesAttached') or [])]
        plan = plan_round(DrainInputs(name, pods, pdbs, bool(force), now, settings.machine_pv_detach_timeout,
                                      timeouts.max_evict_retries, volume_ids, attached), memory)
        for pod in plan.evict:
            md = pod.get('metadata') or {}
            path = api_path('v1', 'pods', md.get('namespace') or 'default', md.get('name'), 'eviction')
            ids = volume_ids.get(pod_ref(pod), ())
            try:
                self.client.create(path, eviction_body(pod))
                record_eviction(memory, pod, True, now, volume_ids=ids)
            except NotFound:
                record_eviction(memory, pod, True, now, volume_ids=ids)
            except KubeError as exc:
                record_eviction(memory, pod, False, now, str(exc))
        for pod in plan.delete + [p for p in plan.evict if pod_ref(p) in plan.exhausted]:
            md = pod.get('metadata') or {}
            try:
                self.client.request('DELETE', api_path('v1', 'pods', md.get('namespace') or 'default', md.get('name')),
                                    body={'apiVersion': 'v1', 'kind': 'DeleteOptions', 'gracePeriodSeconds': 0})
            except NotFound:
                pass
        return plan
