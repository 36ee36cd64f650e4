# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `repair` loop: one daemon per SabakanIntegration runs its RepairEntries through CKE's repair procedures
(`spec.repair`), and deletes finished entries `spec.autoRepair.deleteFinishedAfter` after they finished.

Each pass reads the live objects, runs the health check of every unfinished entry of this integration, asks
the engine (module_utils/sabakan/repair_run.plan_pass) what each entry does next, and carries it out with
repair_exec.apply (commands, drain, status, Events). Passes come every `spec.interval`; a repair command or a
drain runs inside the pass, bounded by its own deadline, so one pass can last as long as the longest of them.
Entries are matched to this integration by `spec.integration` (`<namespace>/<name>`, set when it queued them).
"""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

import kopf

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError, NotFound
from ansible_collections.steward.cluster.plugins.module_utils.kube.drain import DrainError, drain, uncordon
from ansible_collections.steward.cluster.plugins.module_utils.sabakan import repair_exec, repair_queue, repair_run
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.cluster_configmap import cluster_from_configmap
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import SabakanError, SpecError
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.integration_spec import (
    IntegrationSpec, interval_of, is_enabled, parse_spec,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.kube_nodes import NodeIndex, node_name
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.repair_config import RepairConfig

from steward_controller import GROUP, VERSION
from steward_controller.core.runtime import Runtime
from steward_controller.sabakan.handlers import IntegrationDaemon

log = logging.getLogger('steward.repair')

PLURAL = 'sabakanintegrations'
NODES = api_path('v1', 'nodes')
STOP_GRACE = 8.0


def register(registry: Any, runtime: Runtime) -> None:
    @kopf.daemon(GROUP, VERSION, PLURAL, registry=registry, id='sabakan-repair',
                 cancellation_backoff=STOP_GRACE, cancellation_timeout=1.0)
    def sabakan_repair(name: str, namespace: str, stopped: kopf.DaemonStopped, **_: Any) -> None:
        RepairLoop(runtime, namespace, name).run(stopped)


class KubePorts(repair_exec.Ports):
    """repair_exec's ports over the Kubernetes API: status on the RepairEntry, Events on it, drain the Node."""

    def __init__(self, runtime: Runtime, objects: Dict[str, Dict[str, Any]], stopped: Any) -> None:
        self.runtime = runtime
        self.objects = objects
        self.stopped = stopped

    def save(self, entry: repair_run.Entry, fields: Dict[str, Any]) -> None:
        status = repair_queue.status_fields(fields)
        try:
            self.runtime.client.merge_patch(self.runtime.path(repair_queue.PLURAL, None, entry.name, 'status'),
                                            {'status': status})
        except KubeError as exc:   # the next pass re-reads the entry; a lost write repeats at most one action
            log.warning('cannot update the status of RepairEntry %s: %s', entry.name, exc)
        obj = self.objects.get(entry.name)
        if obj is not None:
            obj.setdefault('status', {}).update(status)

    def event(self, entry: repair_run.Entry, reason: str, message: str, warning: bool = False) -> None:
        obj = self.objects.get(entry.name) or {'apiVersion': repair_queue.API_VERSION, 'kind': repair_queue.KIND,
                                               'metadata': {'name': entry.name}}
        self.runtime.report(obj, reason, 'RepairEntry %s: %s' % (entry.name, message), warning=warning,
                            kind=repair_queue.KIND)

    def drain(self, entry: repair_run.Entry, config: RepairConfig) -> Tuple[bool, bool, str]:
        assert entry.node
        try:
            result = drain(self.runtime.client, entry.node, timeout=float(config.eviction_timeout_seconds),
                           eviction_timeout=float(config.evict_retries * config.evict_interval),
                           protected_namespaces=(), force=False, clock=self.runtime.clock,
                           sleep=self.stopped.wait)
        except DrainError as exc:
            cordoned = bool(exc.result and exc.result.cordoned)
            return False, cordoned, str(exc)
        except KubeError as exc:
            return False, False, 'Kubernetes API: %s' % exc
        return True, result.cordoned, result.message

    def uncordon(self, entry: repair_run.Entry) -> str:
        assert entry.node
        try:
            uncordon(self.runtime.client, entry.node)
        except (DrainError, KubeError) as exc:
            return 'could not uncordon Node %s: %s' % (entry.node, exc)
        return 'Node %s uncordoned' % entry.node

    def sleep(self, seconds: float) -> bool:
        self.stopped.wait(seconds)
        return not self.stopped

    def clock(self) -> float:
        return self.runtime.clock()


def control_plane_addresses(cluster: Optional[Mapping[str, Any]]) -> Set[str]:
    return {str(n.get('address')) for n in (cluster or {}).get('nodes') or []
            if isinstance(n, Mapping) and n.get('control_plane')}


class RepairLoop(IntegrationDaemon):
    """One SabakanIntegration's RepairEntries, pass after pass, until kopf stops the daemon or the object goes."""

    def run(self, stopped: Any) -> None:
        while not stopped:
            body = self.live(stopped)
            if body is None:
                return
            raw = body.get('spec') or {}
            try:
                if is_enabled(raw):
                    self.one_pass(parse_spec(raw, self.name), stopped)
            except SpecError:
                pass   # the sabakan loop reports an invalid spec on the integration; nothing is acted on
            except (KubeError, SabakanError) as exc:
                log.warning('repair pass of %s failed: %s', self.resource, exc)
            except Exception:  # a bug must not end the loop silently
                log.exception('repair pass failed', extra={'object': self.resource})
            stopped.wait(interval_of(raw))

    def entries(self) -> List[Dict[str, Any]]:
        return [obj for obj in self.client.list(self.runtime.path(repair_queue.PLURAL))
                if ((obj.get('spec') or {}).get('integration') or '') == self.resource
                and repair_queue.entry_problem(obj) is None]

    def one_pass(self, spec: IntegrationSpec, stopped: Any) -> Optional[repair_run.PassPlan]:
        """Health checks, plan, act; then the retention. Returns the plan (None: no `spec.repair`)."""
        objects = self.entries()
        now = self.runtime.clock()
        self.delete_expired(objects, spec, now)
        if spec.repair is None:
            return None
        config = spec.repair
        index = NodeIndex(self.client.list(NODES))
        configmap = self.client.get_or_none(api_path('v1', 'configmaps', self.namespace, spec.cluster_config_map.name))
        try:
            cluster = cluster_from_configmap(configmap, spec.cluster_config_map.key)
        except SabakanError:
            cluster = None
        api_servers = control_plane_addresses(cluster)
        by_name = {str((obj.get('metadata') or {}).get('name') or ''): obj for obj in objects}
        entries = []
        for obj in objects:
            address = str((obj.get('spec') or {}).get('address') or '')
            node = index.match({'address': address})
            entries.append(repair_queue.run_entry(obj, node_name(node) if node is not None else None,
                                                  address in api_servers))
        healthy = repair_exec.health_checks(entries, config)
        plan = repair_run.plan_pass(entries, config, healthy, now=self.runtime.clock())
        ports = KubePorts(self.runtime, by_name, stopped)
        for decision in plan.decisions:
            if stopped:
                break
            self.note(decision, ports)
            cordoned = bool((by_name.get(decision.entry.name, {}).get('status') or {}).get('cordoned'))
            repair_exec.apply(decision, config, ports, cordoned=cordoned)
        self.runtime.metrics.repair_entries.set(len(self.client.list(self.runtime.path(repair_queue.PLURAL))))
        return plan

    def note(self, decision: repair_run.Decision, ports: KubePorts) -> None:
        """Say once, on the entry, why it is not acted on (no procedure, waiting for a slot) and record its Node."""
        entry = decision.entry
        obj = ports.objects.get(entry.name) or {}
        status = obj.get('status') or {}
        fields: Dict[str, Any] = {}
        if (status.get('nodeName') or None) != entry.node:
            fields['node'] = entry.node or ''
        unconfigured = decision.action == repair_run.Action.UNCONFIGURED
        if (unconfigured or decision.limited) and status.get('message') != decision.reason:
            fields['message'] = decision.reason
            ports.event(entry, 'RepairWaiting' if not unconfigured else 'RepairNotConfigured', decision.reason,
                        warning=unconfigured)
        if fields:
            ports.save(entry, fields)

    def delete_expired(self, objects: List[Dict[str, Any]], spec: IntegrationSpec, now: float) -> None:
        entries = [repair_queue.run_entry(obj, None, False) for obj in objects]
        for entry in repair_run.finished_to_delete(entries, spec.delete_finished_after, now):
            try:
                self.client.delete(self.runtime.path(repair_queue.PLURAL, None, entry.name))
            except NotFound:
                continue
            except KubeError as exc:
                log.warning('cannot delete RepairEntry %s: %s', entry.name, exc)
                continue
            body = self.client.get_or_none(self.path) or {'apiVersion': '%s/%s' % (GROUP, VERSION),
                                                          'kind': 'SabakanIntegration',
                                                          'metadata': {'name': self.name, 'namespace': self.namespace}}
            message = 'deleted RepairEntry %s (%s, %s): finished more than deleteFinishedAfter=%gs ago' % (
                entry.name, entry.address, entry.status, spec.delete_finished_after)
            self.runtime.report(body, 'RepairEntryDeleted', message, kind='SabakanIntegration')
