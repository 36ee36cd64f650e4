# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `etcd` loop: a kopf watch on etcds.druid.gardener.cloud feeds one pass thread.

A pass over one Etcd: read it fresh, check its spec (druid/spec.py), decide the gate (create and delete are never
gated; a spec update waits for `gardener.cloud/operation: reconcile` unless --enable-etcd-spec-auto-reconcile),
keep druid's finalizer `druid.gardener.cloud/etcd`, read its objects, compute the status (druid/status.py), plan ONE
action (druid/plan.py), do it (target.py), post its Event and write the status. An Etcd passes when it changes and
at least every --etcd-status-sync-period; after a pass that changed something, again after ACT_GAP.

Why a thread and not a kopf daemon or timer per object: kopf adds its own finalizer to every object with a daemon or
a timer, and a druid user's `Etcd` carries druid's finalizer only.
"""

from __future__ import annotations

import logging
import dataclasses
import threading
import time
import uuid
from typing import Any, Dict, List, Mapping, Optional, Tuple

import kopf

from ansible_collections.steward.cluster.plugins.module_utils.druid import plan as p
from ansible_collections.steward.cluster.plugins.module_utils.druid import recovery as r
from ansible_collections.steward.cluster.plugins.module_utils.druid import scale_down as sd
from ansible_collections.steward.cluster.plugins.module_utils.druid import spec as s
from ansible_collections.steward.cluster.plugins.module_utils.druid.client_tls import (
    ClientTLSError, ReadSecret, member_connection)
from ansible_collections.steward.cluster.plugins.module_utils.druid.errors import DruidError, EtcdSpecError
from ansible_collections.steward.cluster.plugins.module_utils.druid.status import (
    READY, Thresholds, compute_status, condition_true, replaced_members)
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.cluster import cluster_info
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.snapshot import take_member_snapshot
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.druid_store import parse_store
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.conditions import rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError, NotFound

from steward_controller.core import member_api
from steward_controller.core.background import BackgroundLoop, register_background
from steward_controller.core.runtime import Runtime, resource_label
from steward_controller.etcd_druid import DruidOptions
from steward_controller.etcd_druid import target
from steward_controller.core.druid_store import local_root, open_druid_store
from steward_controller.core.member_removal import carry_out

log = logging.getLogger('steward.etcd-druid')
HEALTH_KEY = 'etcd-loop'
ACT_GAP = 1.0          # seconds between two passes of an Etcd whose last pass changed something
CRASH_WAIT = 5.0
MAX_ERRORS = 10        # status.lastErrors keeps the newest this many
SAVE_TIMEOUT = 600.0   # seconds for a recovery's source member's snapshot
ERR_UPDATE_SNAPSHOT = 'ERR_PRE_UPDATE_SNAPSHOT'
ERR_REMOVAL_OVERDUE = 'ERR_MEMBER_REMOVAL_OVERDUE'
Key = Tuple[str, str]


def register(registry: Any, runtime: Runtime) -> None:
    loop = EtcdDruidLoop(runtime, runtime.settings.options('etcd') or DruidOptions())
    register_background(registry, 'etcd', loop.start, loop.stop)

    @kopf.on.event(s.GROUP, s.VERSION, s.PLURAL, registry=registry, id='etcd-druid')
    async def on_event(event: Mapping[str, Any], **_: Any) -> None:
        loop.observe(event.get('type'), event.get('object') or {})


class EtcdDruidLoop:
    def __init__(self, runtime: Runtime, opts: DruidOptions):
        self.runtime = runtime
        self.opts = opts
        self.client = runtime.client
        self.background = BackgroundLoop('etcd', runtime.health, HEALTH_KEY)
        self.lock = threading.RLock()     # kopf's thread (observe) and the pass thread
        self.due: Dict[Key, float] = {}            # Etcd -> monotonic time of its next pass
        self.said: Dict[Tuple[Key, str], str] = {}  # (Etcd, reason) -> the last message posted for an outcome that
        #                                             changed nothing (posted again only when it changes)
        self.thresholds = Thresholds(opts.unknown_threshold, opts.notready_threshold)
        self.plan_options = p.Options(unknown_grace=opts.unknown_threshold, notready_grace=opts.notready_threshold,
                                      max_backup_age=opts.backup_max_age,
                                      max_unready_deletions=opts.max_unready_deletions,
                                      update_snapshot_timeout=opts.update_snapshot_timeout,
                                      removal_timeout=opts.member_removal_timeout)
        self.snapshots: Dict[Key, p.SnapshotRequest] = {}   # Etcd -> its pre-update full snapshot request

    # ---- lifecycle ----
    def start(self) -> None:
        self.background.spawn(lambda: self.background.repeat(self.step, 'etcd loop: a pass failed', CRASH_WAIT,
                                                             wakeable=True), 'etcd-passes')

    def stop(self) -> None:
        self.background.stop(10.0)

    def observe(self, event_type: Optional[str], body: Mapping[str, Any]) -> None:
        meta = body.get('metadata') or {}
        if not meta.get('name'):
            return
        key = (meta.get('namespace') or 'default', meta['name'])
        with self.lock:
            if event_type == 'DELETED':
                self.due.pop(key, None)
                self.snapshots.pop(key, None)
                self.forget_said(key)
                return
            self.due[key] = 0.0
        self.background.wake()

    def step(self) -> float:
        """Every Etcd that is due; the seconds until the next one is."""
        self.background.beat()
        now = time.monotonic()
        with self.lock:
            ready = sorted(k for k, t in self.due.items() if t <= now)
        for key in ready:
            if self.background.stopped.is_set():
                break
            changed = self.run_pass(key)
            with self.lock:
                if key in self.due:
                    self.due[key] = time.monotonic() + (ACT_GAP if changed else self.opts.status_sync_period)
        with self.lock:
            nearest = min(self.due.values(), default=time.monotonic() + self.opts.status_sync_period)
        return max(0.05, min(nearest - time.monotonic(), self.opts.status_sync_period))

    # ---- one pass ----
    def path(self, namespace: str, name: Optional[str] = None, subresource: Optional[str] = None) -> str:
        return api_path(s.API_VERSION, s.PLURAL, namespace, name, subresource)

    def run_pass(self, key: Key) -> bool:
        """One pass over one Etcd; True when it changed something (the next pass comes soon)."""
        obj = self.client.get_or_none(self.path(*key))
        if obj is None:
            with self.lock:
                self.due.pop(key, None)
            return False
        now = self.runtime.clock()
        gate = s.reconcile_gate(obj, self.opts.auto_reconcile)
        try:
            spec = s.parse_etcd(obj)
        except EtcdSpecError as exc:
            if gate.decision == s.DELETE:
                return self.delete(obj, s.parse_etcd({'metadata': obj.get('metadata'), 'spec': {}}))
            self.say_once(key, obj, 'InvalidSpec', exc.explained(), warning=True)
            self.write_status(obj, {'lastOperation': self.operation(obj, 'Error', exc.explained(), now),
                                    'lastErrors': self.errors(obj, 'ERR_INVALID_SPEC', exc.explained(), now)})
            return False
        if gate.decision == s.DELETE:
            return self.delete(obj, spec)
        if s.FINALIZER not in ((obj.get('metadata') or {}).get('finalizers') or []) \
                and gate.decision != s.SKIP_SUSPENDED:
            obj = self.add_finalizer(obj)
        if gate.decision in (s.SKIP_SUSPENDED, s.SKIP_AWAITING):
            self.say_once(key, obj, 'ReconcileSkipped', gate.why)
        observed, existing = target.read(self.client, spec)
        previous = obj.get('status') or {}
        status = compute_status(spec, observed, previous, now, self.thresholds)
        for message in replaced_members(previous.get('members') or [], status.get('members') or []):
            self.runtime.report(obj, 'MemberReplaced', message, kind=s.KIND)
        annotations = (obj.get('metadata') or {}).get('annotations') or {}
        options = dataclasses.replace(self.plan_options, recovery_requested=r.REQUEST in annotations) \
            if r.REQUEST in annotations else self.plan_options
        with self.lock:
            request = self.snapshots.get(key)
        plan = p.plan(spec, status, observed, existing, now, gate.decision == s.RECONCILE, options, request)
        action = self.recovery_action(obj, spec, status, observed, plan.action, gate, now)
        changed = False
        done: List[str] = []
        if action.changes:
            try:
                done = target.execute(self.client, spec, action, plan.desired, observed,
                                      save_source=lambda url: self.save_source(obj, spec, url),
                                      request_snapshot=lambda urls: self.request_snapshot(key, action, urls),
                                      remove_members=lambda urls, mark: self.remove_members(spec, observed, urls, mark,
                                                                                            self.read_secret))
            except target.RemovalRefused as exc:   # said once until it changes, not every pass
                # the Event without the growing wait (said once until the reason changes), lastErrors with it
                said = 'the leading member\'s program did not remove %s from etcd within %ds; the loop did not ' \
                       'remove them: %s' % (', '.join(action.names), int(action.timeout), exc)
                self.say_once(key, obj, action.event, said, warning=True)
                message = '%s; the loop did not remove them: %s' % (action.message, exc)
                status['lastErrors'] = self.errors(obj, ERR_REMOVAL_OVERDUE, message, now)
                self.write_status(obj, status)
                return False
            except (KubeError, DruidError, EtcdError, InvalidInput) as exc:
                message = '%s failed: %s' % (type(action).__name__, exc)
                self.runtime.report(obj, 'ReconcileFailed', message, warning=True, kind=s.KIND, outcome='error')
                status['lastOperation'] = self.operation(obj, 'Error', message, now)
                status['lastErrors'] = self.errors(obj, 'ERR_%s' % type(exc).__name__.upper(), message, now)
                self.write_status(obj, status)
                return False
            if isinstance(action, r.Step):
                self.record_recovery(obj, action)
            log.info('%s: %s', action.event, '; '.join(done) or action.message, extra={'object': resource_label(obj)})
            said = '%s: %s' % (action.message, '; '.join(done)) if isinstance(action, p.RemoveMembers) else action.message
            self.runtime.report(obj, action.event, said, warning=action.warning, kind=s.KIND)
            self.forget_said(key)
            changed = True
        elif not isinstance(action, p.Nothing):
            self.say_once(key, obj, action.event, action.message, warning=action.warning)
        if isinstance(action, (p.RecoverQuorum, p.NeedsRecovery)) or (
                isinstance(action, (r.Step, p.Wait)) and r.STATE in annotations and not isinstance(action, r.Recovered)):
            status['lastErrors'] = self.errors(obj, 'ERR_QUORUM_LOST', action.message, now)
        if isinstance(action, (r.Step, p.Wait)) and (r.STATE in annotations or isinstance(action, r.Step)):
            # a recovery in progress: lastOperation tells each step and wait; the spec is not reconciled meanwhile
            done_ok = isinstance(action, r.Recovered)
            status['lastOperation'] = self.operation(obj, 'Succeeded' if done_ok else 'Processing', action.message, now)
            if done_ok:
                status['lastErrors'] = [e for e in status.get('lastErrors') or [] if e.get('code') != 'ERR_QUORUM_LOST']
            self.write_status(obj, status)
            return changed
        reconciling = gate.decision == s.RECONCILE
        if reconciling and plan.spec_in_sync:
            status['observedGeneration'] = (obj.get('metadata') or {}).get('generation')
            status['lastOperation'] = self.operation(obj, 'Succeeded', 'the spec of generation %s is applied' % (
                (obj.get('metadata') or {}).get('generation')), now)
            status['lastErrors'] = []
        elif reconciling or changed:
            status['lastOperation'] = self.operation(obj, 'Processing', action.message, now)
        if isinstance(action, p.Postponed) and action.gate == p.PRE_UPDATE_SNAPSHOT:
            # no restart without the snapshot: said in lastErrors, and the snapshot is asked for again next pass
            status['lastErrors'] = self.errors(obj, ERR_UPDATE_SNAPSHOT, action.message, now)
            with self.lock:
                if self.snapshots.get(key) is request:
                    self.snapshots.pop(key, None)
        elif isinstance(action, p.RestartMember):   # (kept while asked again: the last try failed)
            status['lastErrors'] = [e for e in status.get('lastErrors') or [] if e.get('code') != ERR_UPDATE_SNAPSHOT]
        if isinstance(action, p.RemoveMembers):
            status['lastErrors'] = self.errors(obj, ERR_REMOVAL_OVERDUE, '%s; %s' % (
                action.message, '; '.join(done) or 'done'), now)
        elif isinstance(action, p.ScaleDown):
            status['lastErrors'] = [e for e in status.get('lastErrors') or [] if e.get('code') != ERR_REMOVAL_OVERDUE]
        self.write_status(obj, status)
        if reconciling and plan.spec_in_sync:
            if gate.remove_annotation:
                self.patch_metadata(obj, {'annotations': {s.OPERATION_ANNOTATION: None}})
            if not changed:
                self.runtime.report(obj, 'ReconcileSucceeded', 'generation %s reconciled' % (
                    (obj.get('metadata') or {}).get('generation')), kind=s.KIND)
        return changed

    # ---- quorum-loss recovery (druid/recovery.py) ----
    def recovery_action(self, obj: Mapping[str, Any], spec: s.EtcdSpec, status: Mapping[str, Any],
                        observed: Any, planned: p.Action, gate: s.Gate, now: float) -> p.Action:
        """A recovery in progress (the Etcd's annotation) takes the pass; a planned RecoverQuorum starts one unless
        spec reconciliation is suspended (an operator is at work: druid's runbook sets that annotation)."""
        annotations = (obj.get('metadata') or {}).get('annotations') or {}
        try:
            state = r.read_state(annotations)
        except r.RecoveryStateError as exc:
            return p.Wait('a quorum-loss recovery is recorded but cannot be read: %s; nothing is done until an '
                          'operator fixes or removes the annotation' % exc)
        if state is not None:
            return r.next_step(spec, status, observed, state, now, self.plan_options)
        if isinstance(planned, p.RecoverQuorum):
            if gate.decision == s.SKIP_SUSPENDED:
                return p.Wait('%s; not started: %s' % (planned.message, gate.why))
            return r.start(spec, planned, now)
        if r.REQUEST in annotations and condition_true(status, READY):
            self.patch_metadata(obj, {'annotations': {r.REQUEST: None}})   # nothing to recover (any more)
        return planned

    # ---- an overdue scale-down (plan.RemoveMembers) ----
    @staticmethod
    def remove_members(spec: s.EtcdSpec, observed: Any, urls: Tuple[str, ...], mark: Any,
                       read_secret: ReadSecret) -> List[str]:
        """One step of the leading member's removal, by the loop: druid/scale_down's decision over etcd's member list
        and only the Leases provably the going pods' own, carried out as the member program carries it out
        (core/member_removal.py); over client TLS with the Etcd's own Secrets (druid/client_tls.py, `read_secret`).
        target.RemovalRefused when the step does nothing."""
        try:
            connection = member_connection(spec, urls, read_secret)
        except ClientTLSError as exc:
            raise target.RemovalRefused('the Etcd\'s client TLS material cannot be read: %s' % exc) from exc
        with connection as conn:
            return EtcdDruidLoop._remove_step(conn, observed, mark)

    @staticmethod
    def _remove_step(conn: EtcdConnection, observed: Any, mark: Any) -> List[str]:
        try:
            info = cluster_info(conn)
        except EtcdError as exc:
            raise target.RemovalRefused('etcd\'s member list cannot be read through %s: %s' % (
                ', '.join(conn.endpoints), exc)) from exc
        members = info['members']
        step = sd.plan_removal(members, str(info.get('leader') or ''),
                               sd.provable_leases(members, observed.member_leases))
        said: List[str] = []
        step, done = carry_out(conn, step, mark, said.append)
        if step.action == sd.NOTHING and not step.mark_removed or done.startswith('failed'):
            unproven = sorted(n for n in observed.member_leases if sd.leaving_size(observed.member_leases[n]) is not None
                              and n not in sd.provable_leases(members, observed.member_leases))
            raise target.RemovalRefused('%s%s' % (
                done or step.reason, '; not provably the going pods\' own (etcd\'s member of that name has another ID '
                'than the one its sidecar wrote into its Lease, or none was written): %s' % ', '.join(unproven)
                if unproven else ''))
        return said

    # ---- the full snapshot before a rolling change (plan.TakeSnapshot) ----
    def request_snapshot(self, key: Key, action: p.Action, urls: List[Tuple[str, str]]) -> None:
        """Ask the member programs for the full snapshot beside the passes (a large database takes minutes): the
        planner sees the request in flight and waits, and the answer wakes this Etcd's next pass."""
        request = p.SnapshotRequest(template=getattr(action, 'template', ''),
                                    requested_at=getattr(action, 'requested_at', 0.0) or self.runtime.clock())
        with self.lock:
            self.snapshots[key] = request
        self.background.spawn(lambda: self.snapshot_answer(key, request, urls), 'etcd-update-snapshot')

    def snapshot_answer(self, key: Key, request: p.SnapshotRequest, urls: List[Tuple[str, str]]) -> None:
        try:
            pod, body = member_api.request_snapshot(urls, self.opts.update_snapshot_timeout)
            revision = body.get('end_revision') if isinstance(body, dict) else None
            done = dataclasses.replace(request, revision=revision if isinstance(revision, int) else None)
            log.info('full snapshot before the update: %s through %s', body.get('name') if isinstance(body, dict)
                     else body, pod, extra={'object': '%s/%s' % key})
        except member_api.SnapshotRequestFailed as exc:
            done = dataclasses.replace(request, error=str(exc))
        with self.lock:
            if self.snapshots.get(key) is not request:
                return   # given up on (its deadline passed) or replaced meanwhile
            self.snapshots[key] = done
            if key in self.due:
                self.due[key] = 0.0
        self.background.wake()

    def save_source(self, obj: Mapping[str, Any], spec: s.EtcdSpec, url: str) -> str:
        """A recovery's source member's data, as it answers alone (no quorum), into the Etcd's store as a verified
        full snapshot: the engine's snapshot path, with the store and Secret the member-side programs use, over
        client TLS with the Etcd's own Secrets (druid/client_tls.py) when it asks for it."""
        store_spec = ((obj.get('spec') or {}).get('backup') or {}).get('store')
        where = parse_store(store_spec, 'spec.backup.store', local_root(self.runtime))
        store = open_druid_store(self.runtime, spec.namespace, where, 'spec.backup.store')
        with member_connection(spec, (url,), self.read_secret) as conn:
            snap, member = take_member_snapshot(conn, store, url, now=self.runtime.clock(), snapshot_timeout=SAVE_TIMEOUT)
        return 'full snapshot %s of member %s (revision %d) saved to the store' % (
            snap.name, member.name or url, member.revision)

    def read_secret(self, namespace: str, name: str) -> Optional[Dict[str, Any]]:
        """A Secret the Etcd names (its client TLS material), None when absent."""
        return self.client.get_or_none(api_path('v1', 'secrets', namespace, name))

    def record_recovery(self, obj: Mapping[str, Any], step: r.Step) -> None:
        """The recovery's state after `step` on the Etcd (removed, with an operator's request, when it ends)."""
        if step.state is not None:
            self.patch_metadata(obj, {'annotations': {r.STATE: step.state.to_json()}})
        else:
            self.patch_metadata(obj, {'annotations': {r.STATE: None, r.REQUEST: None}})

    def delete(self, obj: Mapping[str, Any], spec: s.EtcdSpec) -> bool:
        """ETCD-14: remove every managed component, then druid's finalizer (PVCs stay: they hold the data)."""
        finalizers = list((obj.get('metadata') or {}).get('finalizers') or [])
        if s.FINALIZER not in finalizers:
            return False
        try:
            gone = target.delete_all(self.client, spec)
        except KubeError as exc:
            self.runtime.report(obj, 'DeletionFailed', 'cannot delete the components: %s' % exc, warning=True,
                                kind=s.KIND, outcome='error')
            return False
        self.runtime.report(obj, 'ComponentsDeleted', 'deleted %s; the PersistentVolumeClaims are kept' % (
            ', '.join(gone) or 'nothing (no component was left)'), kind=s.KIND)
        self.patch_metadata(obj, {'finalizers': [f for f in finalizers if f != s.FINALIZER]}, check_version=True)
        return False

    # ---- writes on the Etcd itself ----
    def add_finalizer(self, obj: Mapping[str, Any]) -> Mapping[str, Any]:
        finalizers = list((obj.get('metadata') or {}).get('finalizers') or []) + [s.FINALIZER]
        return self.patch_metadata(obj, {'finalizers': finalizers}, check_version=True) or obj

    def patch_metadata(self, obj: Mapping[str, Any], metadata: Dict[str, Any],
                       check_version: bool = False) -> Optional[Dict[str, Any]]:
        meta = obj.get('metadata') or {}
        try:
            return self.client.merge_patch(self.path(meta.get('namespace'), meta.get('name')), {'metadata': metadata},
                                           resource_version=meta.get('resourceVersion') if check_version else None)
        except NotFound:
            return None
        except KubeError as exc:   # a Conflict: the object moved on; the next pass reads it again
            log.warning('cannot patch metadata: %s', exc, extra={'object': resource_label(obj)})
            return None

    def write_status(self, obj: Mapping[str, Any], status: Dict[str, Any]) -> None:
        meta = obj.get('metadata') or {}
        try:
            self.client.merge_patch(self.path(meta.get('namespace'), meta.get('name'), 'status'), {'status': status})
            self.runtime.health.api_ok()
        except NotFound:
            pass
        except KubeError as exc:
            log.warning('cannot write status: %s', exc, extra={'object': resource_label(obj)})

    # ---- reporting ----
    def say_once(self, key: Key, obj: Mapping[str, Any], reason: str, message: str, warning: bool = False) -> None:
        """An Event for an outcome that changes nothing, once until it changes (not every status-sync period)."""
        with self.lock:
            if self.said.get((key, reason)) == message:
                return
            self.said[(key, reason)] = message
        self.runtime.report(obj, reason, message, warning=warning, kind=s.KIND, outcome='warning' if warning else 'ok')

    def forget_said(self, key: Key) -> None:
        with self.lock:
            for said in [k for k in self.said if k[0] == key]:
                del self.said[said]

    @staticmethod
    def operation(obj: Mapping[str, Any], state: str, description: str, now: float) -> Dict[str, Any]:
        """druid's LastOperation: type Create (never reconciled) or Reconcile, state, description, time, runID."""
        previous = (obj.get('status') or {}).get('lastOperation') or {}
        kind = 'Create' if (obj.get('status') or {}).get('observedGeneration') is None else 'Reconcile'
        run = previous.get('runID') if previous.get('state') == 'Processing' and previous.get('type') == kind \
            else uuid.uuid4().hex
        return {'type': kind, 'state': state, 'description': description[:1024], 'lastUpdateTime': rfc3339(now),
                'runID': run}

    @staticmethod
    def errors(obj: Mapping[str, Any], code: str, description: str, now: float) -> List[Dict[str, Any]]:
        """druid's LastErrors: the newest first, one per code (a repeated error updates its time)."""
        previous = [e for e in (obj.get('status') or {}).get('lastErrors') or [] if e.get('code') != code]
        return ([{'code': code, 'description': description[:1024], 'observedAt': rfc3339(now)}] + previous)[:MAX_ERRORS]
