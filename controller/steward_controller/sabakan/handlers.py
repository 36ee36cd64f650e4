# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""SabakanIntegration: one daemon per object keeps its CKE cluster.yml (a ConfigMap) generated from
sabakan, labels/annotates/taints the Nodes, and opens RepairEntries for failed machines.

Each cycle reads the live object, so a spec change takes effect at the next cycle. The decisions
are the engine's (module_utils/sabakan: integration_spec, controller_cycle, kube_nodes,
repair_queue); this module reads the inputs, applies the outcome and reports every action as an
Event, a status field and a metric. A failed cycle writes nothing but its status.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

import kopf

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.conditions import rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import AlreadyExists, KubeError
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import LeaseMutex, MutexTimeout
from ansible_collections.steward.cluster.plugins.module_utils.sabakan import repair_queue
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.client import SabakanClient
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.cluster_configmap import cluster_from_configmap, configmap_write
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.controller_cycle import (
    DISABLED, FAILED, INVALID, CycleOutcome, failed, integration_status, plan_cycle,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import ClusterConfigMapError, SabakanError, SpecError
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.integration_spec import (
    IntegrationSpec, interval_of, is_enabled, parse_spec, parse_template_text, template_hash,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.machines import RETIRED

from steward_controller import GROUP, VERSION
from steward_controller.core.runtime import Runtime, resource_label

log = logging.getLogger('steward.sabakan')

PLURAL = 'sabakanintegrations'
KIND = 'SabakanIntegration'
NODES = api_path('v1', 'nodes')
REPAIR_LEASE = 'steward-repair-queue'
REPAIR_LOOP = 'repair'     # --controllers: auto-repair runs only in a process that selected it
REPAIR_MUTEX_TTL = 30.0    # a crashed holder blocks the queue at most this long
REPAIR_MUTEX_WAIT = 30.0
RETRY_SECONDS = 5.0        # when the object itself cannot be read
STOP_GRACE = 8.0           # a cycle in flight finishes (its requests are bounded by spec.timeout)


def register(registry: Any, runtime: Runtime) -> None:
    # A sync daemon cannot be cancelled: kopf sets `stopped` and waits (backoff) for the loop to notice.
    @kopf.daemon(GROUP, VERSION, PLURAL, registry=registry, id='sabakan-integration',
                 cancellation_backoff=STOP_GRACE, cancellation_timeout=1.0)
    def sabakan_integration(name: str, namespace: str, stopped: kopf.DaemonStopped, **_: Any) -> None:
        IntegrationLoop(runtime, namespace, name).run(stopped)


def _now(runtime: Runtime) -> Tuple[float, datetime]:
    stamp = runtime.clock()
    return stamp, datetime.fromtimestamp(stamp, tz=timezone.utc)


# --- auto-repair (seed 001) -------------------------------------------------------------------
@dataclass
class RepairRun:
    created: List[str] = field(default_factory=list)
    blocked: Optional[str] = None
    entries: Optional[int] = None     # RepairEntry objects in the cluster after this run
    error: Optional[str] = None

    def status(self, now: float) -> Dict[str, Any]:
        status: Dict[str, Any] = {'lastRun': rfc3339(now), 'created': list(self.created), 'blocked': self.blocked,
                                  'reason': self.error}
        if self.entries is not None:
            status['entries'] = self.entries
        return status


def run_auto_repair(runtime: Runtime, body: Mapping[str, Any], spec: IntegrationSpec,
                    cluster: Optional[Mapping[str, Any]], *, identity: Optional[str] = None) -> RepairRun:
    """Queue RepairEntries for sabakan's failed machines, never more than maximum-repair-queue-entries
    in the whole cluster: list, decide and create happen under one cluster-wide Lease mutex, so two
    loops (two integrations, or a leader and a stale replica) cannot both fill the same room.
    The reboot queue is empty here: nothing in this controller reboots machines."""
    resource = resource_label(body)
    previous = ((body.get('status') or {}).get('repair') or {})
    client = runtime.client
    try:  # outside the mutex: the critical section holds only Kubernetes calls
        machines = SabakanClient(spec.url, timeout=spec.timeout).search_machines(
            spec.repair_variables['having'], spec.repair_variables['notHaving'])
    except SabakanError as exc:
        return _repair_failed(runtime, body, previous, f'cannot query sabakan for failed machines: {exc}')
    collection = runtime.path(repair_queue.PLURAL)
    identity = identity or '%s/%s' % (runtime.settings.identity, resource)  # one holder per loop
    created: List[Dict[str, Any]] = []
    try:
        with LeaseMutex(client, runtime.settings.namespace, REPAIR_LEASE, identity,
                        ttl=REPAIR_MUTEX_TTL, wait=REPAIR_MUTEX_WAIT, clock=runtime.clock):
            objects = client.list(collection)
            plan = repair_queue.plan_repair_entries(machines, objects, cluster, spec.constraints,
                                                    now=_now(runtime)[1], integration=resource)
            for obj in plan.objects:
                try:
                    made = client.create(collection, obj)
                except AlreadyExists:  # created by another loop for the same machine
                    continue
                created.append(made)
                _set_queued(runtime, made)
    except (MutexTimeout, KubeError) as exc:
        return _repair_failed(runtime, body, previous, f'cannot update the repair queue: {exc}',
                              created=[_name(o) for o in created])
    report_invalid_entries(runtime, objects)
    entries = plan.existing + len(created)
    runtime.metrics.repair_entries.set(entries)
    for made in created:
        entry_spec = made.get('spec') or {}
        message = 'queued repair of %s (serial %s, %s) for %s' % (
            entry_spec.get('address'), entry_spec.get('serial') or '?', entry_spec.get('operation'), resource)
        runtime.report(body, 'RepairEntryCreated', 'RepairEntry %s: %s' % (_name(made), message), kind=KIND)
        runtime.report(made, 'RepairEntryCreated', message, kind=repair_queue.KIND)
    if plan.blocked:
        runtime.metrics.repair_blocked.labels(resource).inc()
        if previous.get('blocked') != plan.blocked:
            runtime.report(body, 'RepairBlocked', plan.blocked, warning=True, kind=KIND)
    return RepairRun(created=[_name(o) for o in created], blocked=plan.blocked, entries=entries)


def report_invalid_entries(runtime: Runtime, objects: List[Mapping[str, Any]]) -> None:
    """A RepairEntry that is not what the CRD describes (made by hand, say) still counts toward the queue limit;
    say once what is wrong with it - status.message and a Warning Event naming the field, value and rule."""
    for obj in objects:
        problem = repair_queue.entry_problem(obj)
        if problem is None or (obj.get('status') or {}).get('message') == problem.explained():
            continue
        try:
            runtime.client.merge_patch(runtime.path(repair_queue.PLURAL, None, _name(obj), 'status'),
                                       {'status': {'message': problem.explained()}})
        except KubeError as exc:
            log.warning('cannot set the status of RepairEntry %s: %s', _name(obj), exc)
        runtime.report(obj, 'InvalidSpec', 'RepairEntry %s: %s; it counts toward the queue limit and is not acted on'
                       % (_name(obj), problem.explained()), warning=True, kind=repair_queue.KIND)


def _set_queued(runtime: Runtime, obj: Mapping[str, Any]) -> None:
    """The API server ignores status on create when the status subresource is on: set it after."""
    try:
        runtime.client.merge_patch(runtime.path(repair_queue.PLURAL, None, _name(obj), 'status'),
                                   {'status': {'status': repair_queue.STATUS_QUEUED}})
    except KubeError as exc:
        log.warning('cannot set the status of RepairEntry %s: %s', _name(obj), exc)


def _repair_failed(runtime: Runtime, body: Mapping[str, Any], previous: Mapping[str, Any], message: str,
                   created: Optional[List[str]] = None) -> RepairRun:
    if previous.get('reason') != message:
        runtime.report(body, 'RepairFailed', message, warning=True, kind=KIND)
    return RepairRun(created=list(created or []), error=message)


def count_repair_entries(runtime: Runtime) -> Optional[int]:
    try:
        count = len(runtime.client.list(runtime.path(repair_queue.PLURAL)))
    except KubeError:
        return None
    runtime.metrics.repair_entries.set(count)
    return count


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get('metadata') or {}).get('name') or '')


# --- the integration loop ----------------------------------------------------------------------
class IntegrationDaemon:
    """What both daemons of one SabakanIntegration (this cycle, and the repair loop's passes) share: the object
    they belong to, and reading it live at the start of each round."""

    def __init__(self, runtime: Runtime, namespace: str, name: str) -> None:
        self.runtime = runtime
        self.client = runtime.client
        self.namespace = namespace
        self.name = name
        self.resource = '%s/%s' % (namespace, name)
        self.path = runtime.path(PLURAL, namespace, name)

    def live(self, stopped: Any) -> Optional[Dict[str, Any]]:
        """The object as it is now; None when it is gone or being deleted, or kopf stops the daemon. An API
        error is retried every RETRY_SECONDS."""
        while not stopped:
            try:
                body = self.client.get_or_none(self.path)
            except KubeError as exc:
                log.warning('cannot read %s: %s', self.resource, exc)
                stopped.wait(RETRY_SECONDS)
                continue
            if body is None or (body.get('metadata') or {}).get('deletionTimestamp'):
                return None
            return body
        return None


class IntegrationLoop(IntegrationDaemon):
    """One SabakanIntegration, cycle after cycle, until kopf stops the daemon or the object is gone."""

    def __init__(self, runtime: Runtime, namespace: str, name: str) -> None:
        super().__init__(runtime, namespace, name)
        self.exported_roles: Set[str] = set()

    def run(self, stopped: Any) -> None:
        while not stopped:
            body = self.live(stopped)
            if body is None:
                break
            try:
                interval = self.cycle(body)
            except Exception as exc:  # a bug must show in status and metrics, not end the loop silently
                log.exception('sabakan integration cycle failed', extra={'object': self.resource})
                self.finish(body, failed('InternalError', 'internal error: %s: %s' % (type(exc).__name__, exc)))
                interval = interval_of(body.get('spec'))
            stopped.wait(interval)
        if self.gone():  # the object is gone or being deleted: its samples go too
            self.forget_metrics()

    def gone(self) -> bool:
        try:
            body = self.client.get_or_none(self.path)
        except KubeError:
            return False
        return body is None or bool((body.get('metadata') or {}).get('deletionTimestamp'))

    # -- one cycle
    def cycle(self, body: Mapping[str, Any]) -> float:
        raw_spec = body.get('spec') or {}
        if not is_enabled(raw_spec):
            self.finish(body, failed('Disabled', 'spec.enabled is false', DISABLED))
            return interval_of(raw_spec)
        try:
            spec = parse_spec(raw_spec, self.name)
            template = self.load_template(spec)
        except SpecError as exc:
            self.finish(body, failed('InvalidSpec', exc.explained(), INVALID))
            return interval_of(raw_spec)
        except KubeError as exc:
            self.finish(body, failed('KubernetesAPIError', str(exc)))
            return spec.interval
        digest = template_hash(template)
        outcome, cluster = self.integrate(body, spec, template, digest)
        repair: Optional[RepairRun] = None
        if spec.auto_repair and self.runtime.settings.enabled(REPAIR_LOOP):
            repair = run_auto_repair(self.runtime, body, spec, cluster)
        else:
            count_repair_entries(self.runtime)
        self.finish(body, outcome, digest, repair)
        return spec.interval

    def load_template(self, spec: IntegrationSpec) -> Dict[str, Any]:
        if spec.template is not None:
            return spec.template
        ref = spec.template_ref
        assert ref is not None
        configmap = self.client.get_or_none(api_path('v1', 'configmaps', self.namespace, ref.name))
        where = 'spec.templateConfigMapRef (ConfigMap %s/%s key %s)' % (self.namespace, ref.name, ref.key)
        if configmap is None:
            raise SpecError(where, 'exists', 'the ConfigMap does not exist')
        return parse_template_text((configmap.get('data') or {}).get(ref.key), where)

    def integrate(self, body: Mapping[str, Any], spec: IntegrationSpec, template: Mapping[str, Any],
                  digest: str) -> Tuple[CycleOutcome, Optional[Dict[str, Any]]]:
        """(outcome, the cluster as it stands after the cycle: the last good one on failure)."""
        ref = spec.cluster_config_map
        configmap_path = api_path('v1', 'configmaps', self.namespace, ref.name)
        current: Optional[Dict[str, Any]] = None
        try:
            configmap = self.client.get_or_none(configmap_path)
            current = cluster_from_configmap(configmap, ref.key)
            kube_nodes = self.client.list(NODES)
            sabakan = SabakanClient(spec.url, timeout=spec.timeout)
            machines = sabakan.search_machines(spec.variables['having'], spec.variables['notHaving'])
            retired = sabakan.search_machines({'states': [RETIRED]}, None) if spec.delete_removed_nodes else None
        except ClusterConfigMapError as exc:   # a SabakanError too: first
            return failed('ClusterConfigMapInvalid', str(exc)), None
        except SabakanError as exc:
            return failed(type(exc).__name__, str(exc)), current
        except KubeError as exc:
            return failed('KubernetesAPIError', str(exc)), current
        now, moment = _now(self.runtime)
        outcome = plan_cycle(spec, template, machines, current, kube_nodes, integration=self.resource, now=moment,
                             retired_machines=retired)
        if not outcome.successful:
            return outcome, current
        if outcome.cluster is not None:
            create, patch = configmap_write(ref.name, self.namespace, ref.key, outcome.cluster, template_hash=digest,
                                            operation=outcome.plan.operation if outcome.plan else '',
                                            integration=self.resource)
            try:
                if configmap is None:
                    self.client.create(api_path('v1', 'configmaps', self.namespace), create)
                else:
                    self.client.merge_patch(configmap_path, patch,
                                            resource_version=(configmap.get('metadata') or {}).get('resourceVersion'))
            except KubeError as exc:
                return failed('ClusterConfigMapWriteFailed', 'cannot write ConfigMap %s/%s: %s' % (
                    self.namespace, ref.name, exc)), current
            plan = outcome.plan
            self.runtime.report(body, 'Cluster' + outcome.result, 'wrote ConfigMap %s/%s key %s (%s): %s' % (
                self.namespace, ref.name, ref.key, plan.operation if plan else '',
                ', '.join(plan.changes) if plan else ''), kind=KIND)
            current = outcome.cluster
        problems = self.apply_nodes(body, outcome)
        if problems:
            outcome.reason = '; '.join(problems)
        return outcome, current

    def apply_nodes(self, body: Mapping[str, Any], outcome: CycleOutcome) -> List[str]:
        """Patch and delete Nodes; a Node that changed meanwhile is retried next cycle (resourceVersion)."""
        problems: List[str] = []
        for patch in outcome.node_patches:
            try:
                self.client.merge_patch(api_path('v1', 'nodes', None, patch.name), patch.patch,
                                        resource_version=patch.resource_version or None)
            except KubeError as exc:
                problems.append('Node %s not updated (retried next cycle): %s' % (patch.name, exc))
                self.runtime.report(body, 'NodeUpdateFailed', problems[-1], warning=True, kind=KIND)
                continue
            self.runtime.report(body, 'NodeUpdated', patch.describe(), kind=KIND)
        for deletion in outcome.node_deletions:
            try:
                self.client.delete(api_path('v1', 'nodes', None, deletion.name))
            except KubeError as exc:
                problems.append('Node %s not deleted (retried next cycle): %s' % (deletion.name, exc))
                self.runtime.report(body, 'NodeDeleteFailed', problems[-1], warning=True, kind=KIND)
                continue
            self.runtime.report(body, 'NodeDeleted', 'deleted ' + deletion.describe(), kind=KIND)
        return problems

    # -- status, events, metrics
    def finish(self, body: Mapping[str, Any], outcome: CycleOutcome, digest: str = '',
               repair: Optional[RepairRun] = None) -> None:
        previous = body.get('status') or {}
        now = self.runtime.clock()
        status = integration_status(previous, outcome, now=now,
                                    generation=(body.get('metadata') or {}).get('generation'), template_hash=digest)
        if repair is not None:
            status['repair'] = repair.status(now)
        self.runtime.patch_status(PLURAL, body, status)
        self.export_metrics(outcome, now)
        changed = (previous.get('lastResult'), previous.get('reason')) != (outcome.result, outcome.reason)
        if outcome.result in (FAILED, INVALID) and changed:
            reason = 'InvalidSpec' if outcome.result == INVALID else 'SyncFailed'
            self.runtime.report(body, reason, '%s: %s' % (outcome.error, outcome.reason), warning=True, kind=KIND)
        elif outcome.result == DISABLED and changed:
            self.runtime.report(body, 'Disabled', 'spec.enabled is false: nothing is queried or written', kind=KIND)

    def export_metrics(self, outcome: CycleOutcome, now: float) -> None:
        """As CKE: successful 1 with the numbers, or 0 on any failure (the numbers stay as they were)."""
        metrics = self.runtime.metrics
        if outcome.result == DISABLED:
            self.forget_metrics()
            return
        metrics.sabakan_timestamp.labels(self.resource).set(now)
        if not outcome.successful or outcome.summary is None:
            metrics.sabakan_successful.labels(self.resource).set(0)
            return
        metrics.sabakan_successful.labels(self.resource).set(1)
        summary = outcome.summary
        for role in self.exported_roles - set(summary.workers):
            _remove(metrics.sabakan_workers, self.resource, role)
        for role, count in summary.workers.items():
            metrics.sabakan_workers.labels(self.resource, role).set(count)
        self.exported_roles = set(summary.workers)
        metrics.sabakan_unused.labels(self.resource).set(summary.unused_machines)

    def forget_metrics(self) -> None:
        metrics = self.runtime.metrics
        for gauge in (metrics.sabakan_successful, metrics.sabakan_timestamp, metrics.sabakan_unused):
            _remove(gauge, self.resource)
        for role in self.exported_roles:
            _remove(metrics.sabakan_workers, self.resource, role)
        self.exported_roles = set()


def _remove(metric: Any, *labels: str) -> None:
    try:
        metric.remove(*labels)
    except KeyError:
        pass
