# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""EtcdBackup: one backup loop (module_utils/etcd/backup/backup_loop.py) per object, in a kopf daemon.

The daemon only translates: spec + Secrets -> connection, store and policy; loop callbacks ->
status, conditions (etcd-druid's BackupReady reasons; RestoreVerified for the scheduled restore
verification), snapshot Leases (etcd-druid's full-snap and delta-snap: holderIdentity = newest
revision), Events and etcdbr_* metrics. A spec change restarts the loop, which resumes from what the
store holds; deleting the object stops the loop and keeps every snapshot.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

import kopf

from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.backup_loop import (
    KIND_COMPACTION, KIND_DELTA, KIND_FULL, BackupListener, BackupRunner)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.backup_spec import (
    BackupSpec, connection_from_secrets, parse_backup_spec, secret_names)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError, SpecError
from ansible_collections.steward.cluster.plugins.module_utils.kube.secrets import read_secret as kube_read_secret
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.store import Snapshot
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.stores import open_store
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.files import FILE_MODE, write_atomic
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.conditions import FALSE, TRUE, rfc3339, set_condition
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError, NotFound
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import format_micro, parse_micro

from steward_controller import GROUP, VERSION
from steward_controller.core.runtime import Runtime, resource_label
from steward_controller.etcd_backup.metrics import VerificationMetrics

PLURAL = 'etcdbackups'
ON_DEMAND = GROUP + '/full-snapshot'
ON_DEMAND_VERIFY = GROUP + '/verify-restore'
BACKUP_READY = 'BackupReady'
SPEC_VALID = 'SpecValid'
RESTORE_VERIFIED = 'RestoreVerified'
REASONS = {
    (KIND_FULL, True): 'FullBackupSucceeded', (KIND_FULL, False): 'FullBackupFailed',
    (KIND_DELTA, True): 'IncrementalBackupSucceeded', (KIND_DELTA, False): 'IncrementalBackupFailed',
    (KIND_COMPACTION, True): 'FullBackupSucceeded', (KIND_COMPACTION, False): 'CompactionFailed',
}
STATUS_FIELD = {KIND_FULL: 'lastFullSnapshot', KIND_DELTA: 'lastDeltaSnapshot', KIND_COMPACTION: 'lastCompaction'}
LEASE_SUFFIX = {KIND_FULL: 'full-snap', KIND_DELTA: 'delta-snap', KIND_COMPACTION: 'full-snap'}
log = logging.getLogger('steward.etcdbackup')


class StopFlag:
    """kopf's daemon flag with the threading.Event interface the engine uses."""

    def __init__(self, stopped: Any, restart: threading.Event):
        self.stopped = stopped
        self.restart = restart

    def is_set(self) -> bool:
        return bool(self.stopped) or self.restart.is_set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        step = 0.25 if timeout is None else min(max(timeout, 0.0), 0.25)
        remaining = timeout
        while not self.is_set():
            self.stopped.wait(step)
            if remaining is not None:
                remaining -= step
                if remaining <= 0:
                    break
        return self.is_set()


class StatusReporter(BackupListener):
    """Loop events -> status, conditions, Events, metrics."""

    def __init__(self, runtime: Runtime, body: Mapping[str, Any], verification: Optional[VerificationMetrics] = None):
        self.runtime = runtime
        self.body = body
        self.verification = verification
        self.label = resource_label(body)
        self.conditions = list(((body.get('status') or {}).get('conditions')) or [])
        self.pending_token: Optional[str] = None
        self.pending_verify_token: Optional[str] = None
        self.learner_labels: Set[str] = set()
        self.reported_store = False

    def _involved(self) -> Dict[str, Any]:
        meta = self.body.get('metadata') or {}
        return {'apiVersion': '%s/%s' % (GROUP, VERSION), 'kind': 'EtcdBackup',
                'metadata': {'name': meta.get('name'), 'namespace': meta.get('namespace'), 'uid': meta.get('uid')}}

    def ready(self, status: str, reason: str, message: str) -> None:
        self.conditions = set_condition(self.conditions, BACKUP_READY, status, reason, message, self.runtime.clock())
        self.runtime.metrics.backup_ready.labels(self.label).set(1 if status == TRUE else 0)

    def patch(self, status: Dict[str, Any]) -> None:
        status['conditions'] = self.conditions
        status['observedGeneration'] = (self.body.get('metadata') or {}).get('generation')
        self.runtime.patch_status(PLURAL, self.body, status)

    def snapshot_taken(self, kind: str, snapshot: Snapshot, duration: float, reason: str) -> None:
        name = snapshot.name
        m = self.runtime.metrics
        m.snapshot_duration.labels(self.label, kind, 'true').observe(duration)
        m.snapshot_latest_revision.labels(self.label, kind).set(name.end_revision)
        m.snapshot_latest_timestamp.labels(self.label, kind).set(name.created)
        m.snapshot_required.labels(self.label, kind).set(0)
        namespace = (self.body.get('metadata') or {}).get('namespace') or ''
        if kind == KIND_DELTA:
            events = int((snapshot.metadata or {}).get('events') or 0)
            m.delta_events.labels(self.label).inc(events)
            m.seed.compaction_num_delta_events.labels(namespace, self.label).inc(events)
        else:  # a full snapshot or a compaction starts the count of delta events again
            m.seed.compaction_num_delta_events.labels(namespace, self.label).set(0)
        if kind == KIND_COMPACTION:
            m.compactions.labels(self.label, 'true').inc()
            m.seed.compaction_jobs.labels('true', namespace).inc()
            m.seed.compaction_job_duration.labels('true', namespace).observe(duration)
        self.ready(TRUE, REASONS[(kind, True)], '%s snapshot %s at revision %d' % (kind, name, name.end_revision))
        entry = {'name': str(name), 'revision': name.end_revision, 'time': rfc3339(name.created), 'size': snapshot.size}
        status: Dict[str, Any] = {STATUS_FIELD[kind]: entry, 'lastError': None}
        self.patch(status)
        renew_snapshot_lease(self.runtime, self.body, kind, name.end_revision, float(name.created))
        event_reason = {KIND_FULL: 'FullSnapshotTaken', KIND_DELTA: 'DeltaSnapshotTaken',
                        KIND_COMPACTION: 'BackupCompacted'}[kind]
        self.runtime.report(self._involved(), event_reason, '%s (%d bytes, revision %d) in %.2fs: %s' % (
            name, snapshot.size, name.end_revision, duration, reason), kind='EtcdBackup')

    def snapshot_failed(self, kind: str, error: str, duration: float) -> None:
        self.runtime.metrics.snapshot_duration.labels(self.label, kind, 'false').observe(duration)
        self.runtime.metrics.snapshot_required.labels(self.label, kind).set(1)
        if kind == KIND_COMPACTION:
            self.runtime.metrics.compactions.labels(self.label, 'false').inc()
            namespace = (self.body.get('metadata') or {}).get('namespace') or ''
            self.runtime.metrics.seed.compaction_jobs.labels('false', namespace).inc()
            self.runtime.metrics.seed.compaction_job_duration.labels('false', namespace).observe(duration)
        else:
            self.ready(FALSE, REASONS[(kind, False)], error[:1000])
        self.patch({'lastError': '%s: %s' % (REASONS[(kind, False)], error[:1000])})
        self.runtime.report(self._involved(), REASONS[(kind, False)], error, warning=True, kind='EtcdBackup')

    def requests_served(self, tokens: Tuple[str, ...]) -> None:
        """The on-demand request (annotation token) was served by a stored full snapshot: say so, drop the annotation."""
        if self.pending_token in tokens:
            self.patch({'lastOnDemandSnapshot': self.pending_token})
            self._clear_annotation()
            self.pending_token = None

    def garbage_collected(self, result: Dict[str, Any]) -> None:
        m = self.runtime.metrics
        for entry in result['deleted']:
            m.snapshot_gc.labels(self.label, entry.get('kind') or 'object', 'true').inc()
        for entry in result['failed']:
            m.snapshot_gc.labels(self.label, entry.get('kind') or 'object', 'false').inc()
        if not result['deleted'] and not result['failed']:
            return
        done = {'time': rfc3339(self.runtime.clock()), 'deleted': len(result['deleted']), 'kept': len(result['kept'])}
        self.patch({'lastGarbageCollection': done})
        names = ', '.join(e['name'] for e in result['deleted'][:10])
        self.runtime.report(self._involved(), 'GarbageCollected', '%s policy deleted %d snapshot(s): %s%s' % (
            result['policy'], len(result['deleted']), names, '...' if len(result['deleted']) > 10 else ''),
            warning=bool(result['failed']), kind='EtcdBackup')

    def restore_verified(self, result: Dict[str, Any]) -> None:
        """Condition RestoreVerified (snapshot name and time taken), status, metrics; an Event, Warning on failure.
        Called from the verification thread: the status patch is one merge of its own fields."""
        took = float(result.get('duration') or 0.0)
        finished = float(result.get('finished') or self.runtime.clock())
        ok = bool(result['ok'])
        if self.verification is not None:
            self.verification.observe(self.label, ok, result.get('restored_revision'), took, finished)
        reason = 'RestoreVerified' if ok else 'RestoreVerificationFailed'
        self.conditions = set_condition(self.conditions, RESTORE_VERIFIED, TRUE if ok else FALSE, reason,
                                        result['msg'][:1000], finished)
        would = result.get('would_restore') or {}
        status: Dict[str, Any] = {}
        token, self.pending_verify_token = self.pending_verify_token, None
        if token:
            status['lastOnDemandVerification'] = token
            self._clear_annotation(ON_DEMAND_VERIFY)
        self.patch(dict(status, lastRestoreVerification={
            'time': rfc3339(finished), 'succeeded': ok, 'snapshot': result.get('snapshot'),
            'deltas': len(result.get('deltas') or []), 'revision': result.get('restored_revision'),
            'durationSeconds': round(took, 3), 'wouldRestore': would.get('snapshot'),
            'hashKVMatched': (result.get('hash_kv') or {}).get('match')}))
        self.runtime.report(self._involved(), reason, result['msg'], warning=not ok, kind='EtcdBackup')

    def state(self, chain_tip: int, base: Optional[Snapshot]) -> None:
        """At the loop's start, the newest full snapshot the store holds sets etcdbr_snapshot_latest_* (kind Full):
        a controller restarted while snapshots fail still exports how old the newest backup is, so EtcdBackupStale
        can fire (the first snapshot of this run would otherwise be the first sample)."""
        if self.reported_store or base is None or base.name is None:
            return
        self.reported_store = True
        m = self.runtime.metrics
        m.snapshot_latest_revision.labels(self.label, KIND_FULL).set(base.name.end_revision)
        m.snapshot_latest_timestamp.labels(self.label, KIND_FULL).set(base.name.created)

    def members(self, members: List[Dict[str, Any]]) -> None:
        """etcd-backup-restore's membership gauges from the loop's member list: etcdbr_cluster_size{etcd} and
        etcdbr_is_learner{etcd, member} (1 for a learner) for every member; members gone are dropped."""
        seed = self.runtime.metrics.seed
        seed.cluster_size.labels(self.label).set(len(members))
        names = set()
        for member in members:
            name = member.get('name') or member.get('id') or ''
            names.add(name)
            seed.is_learner.labels(self.label, name).set(1 if member.get('is_learner') else 0)
        for gone in self.learner_labels - names:
            try:
                seed.is_learner.remove(self.label, gone)
            except KeyError:
                pass
        self.learner_labels = names

    def forget_members(self) -> None:
        """The EtcdBackup's loop ends: its membership series go (a deleted object leaves no stale member count)."""
        self.members([])
        try:
            self.runtime.metrics.seed.cluster_size.remove(self.label)
        except KeyError:
            pass

    def buffered(self, events: int, size: int) -> None:
        self.runtime.metrics.delta_buffered_bytes.labels(self.label).set(size)

    def invalid(self, message: str) -> None:
        now = self.runtime.clock()
        self.conditions = set_condition(self.conditions, SPEC_VALID, FALSE, 'InvalidSpec', message, now)
        self.ready(FALSE, 'InvalidSpec', message)
        self.patch({'lastError': message})
        self.runtime.report(self._involved(), 'InvalidSpec', message, warning=True, kind='EtcdBackup')

    def valid(self) -> None:
        self.conditions = set_condition(self.conditions, SPEC_VALID, TRUE, 'Valid', 'the spec is valid',
                                        self.runtime.clock())

    def _clear_annotation(self, annotation: str = ON_DEMAND) -> None:
        meta = self.body.get('metadata') or {}
        try:
            self.runtime.client.merge_patch(self.runtime.path(PLURAL, meta.get('namespace'), meta.get('name')),
                                            {'metadata': {'annotations': {annotation: None}}})
        except KubeError as exc:
            log.warning('cannot remove the %s annotation: %s', annotation, exc, extra={'object': self.label})


def snapshot_lease_name(body: Mapping[str, Any], kind: str) -> str:
    meta = body.get('metadata') or {}
    return 'etcdbackup-%s-%s-%s' % (meta.get('namespace'), meta.get('name'), LEASE_SUFFIX[kind])


def renew_snapshot_lease(runtime: Runtime, body: Mapping[str, Any], kind: str, revision: int, when: float) -> None:
    """etcd-druid's snapshot Leases: holderIdentity is the newest snapshot's revision, renewTime its time.
    They live in the controller's namespace (where it may write Leases), named after the EtcdBackup."""
    meta = body.get('metadata') or {}
    name = snapshot_lease_name(body, kind)
    spec = {'holderIdentity': str(revision), 'renewTime': format_micro(when)}
    path = api_path('coordination.k8s.io/v1', 'leases', runtime.settings.namespace, name)
    try:
        try:
            runtime.client.merge_patch(path, {'spec': spec})
        except NotFound:
            runtime.client.create(api_path('coordination.k8s.io/v1', 'leases', runtime.settings.namespace), {
                'apiVersion': 'coordination.k8s.io/v1', 'kind': 'Lease',
                'metadata': {'name': name, 'namespace': runtime.settings.namespace, 'labels': {
                    GROUP + '/etcdbackup-namespace': meta.get('namespace'), GROUP + '/etcdbackup': meta.get('name'),
                    GROUP + '/snapshot-kind': LEASE_SUFFIX[kind]}},
                'spec': spec})
    except KubeError as exc:
        log.warning('cannot renew snapshot lease %s: %s', name, exc, extra={'object': resource_label(body)})


def forget_snapshot_leases(runtime: Runtime, body: Mapping[str, Any]) -> None:
    """Once the EtcdBackup itself is gone (not when the controller only stops)."""
    meta = body.get('metadata') or {}
    try:
        if runtime.client.get_or_none(runtime.path(PLURAL, meta.get('namespace'), meta.get('name'))) is not None:
            return
        for kind in (KIND_FULL, KIND_DELTA):
            runtime.client.delete(api_path('coordination.k8s.io/v1', 'leases', runtime.settings.namespace,
                                           snapshot_lease_name(body, kind)))
    except KubeError as exc:
        log.warning('cannot remove snapshot leases: %s', exc, extra={'object': resource_label(body)})


def read_secret(runtime: Runtime, namespace: str, name: str, field: str = '') -> Dict[str, str]:
    """The Secret's data, when it exists and (with --secret-opt-in, the default) carries the opt-in label: the
    right to create an EtcdBackup must not be the right to send any Secret of the namespace to any endpoint."""
    try:
        return kube_read_secret(runtime.client, namespace, name, field, opt_in=runtime.settings.secret_opt_in)
    except InvalidInput as exc:
        raise exc.recast(SpecError) from None


def _write_private(directory: str, name: str, content: Optional[str]) -> Optional[str]:
    """The PEM text as a new 0600 file (the one left by the loop's previous run is replaced)."""
    if content is None:
        return None
    path = os.path.join(directory, name)
    write_atomic(path, content, FILE_MODE)
    return path


def connect(runtime: Runtime, spec: BackupSpec, namespace: str, work_dir: str) -> tuple:
    """(EtcdConnection, store) from the spec and its Secrets: the handler reads the Secrets, the engine says what
    each key means (backup_spec.connection_from_secrets)."""
    secrets: Dict[str, Dict[str, str]] = {}
    for field, name in secret_names(spec).items():
        if name not in secrets:
            secrets[name] = read_secret(runtime, namespace, name, field)
    found = connection_from_secrets(spec, secrets)
    conn = EtcdConnection(endpoints=tuple(spec.endpoints), ca_cert=_write_private(work_dir, 'ca.crt', found.ca_cert),
                          client_cert=_write_private(work_dir, 'tls.crt', found.client_cert),
                          client_key=_write_private(work_dir, 'tls.key', found.client_key),
                          user=found.user, password=found.password, timeout=spec.connection_timeout)
    store = open_store(spec.store_url, endpoint_url=spec.s3_endpoint, access_key=found.access_key,
                       secret_key=found.secret_key, session_token=found.session_token, region=found.region,
                       encryption=found.encryption)
    return conn, store


def register(registry: kopf.OperatorRegistry, runtime: Runtime) -> None:
    verification = VerificationMetrics(runtime.metrics.registry, runtime.clock)

    @kopf.daemon(GROUP, VERSION, PLURAL, registry=registry, cancellation_timeout=60)
    def backup(stopped: Any, body: Any, **_: Any) -> None:
        run_backup(runtime, stopped, body, verification)


def run_backup(runtime: Runtime, stopped: Any, body: Any, verification: Optional[VerificationMetrics] = None) -> None:
    """Run the loop for one EtcdBackup until kopf stops the daemon; restart it on spec changes."""
    meta = body.get('metadata') or {}
    namespace, name = meta.get('namespace'), meta.get('name')
    work_dir = os.path.join(runtime.settings.work_dir, 'etcdbackup-%s-%s' % (namespace, name))
    os.makedirs(work_dir, mode=0o700, exist_ok=True)
    reporter: Optional[StatusReporter] = None
    try:
        while not stopped:
            generation = body.get('metadata', {}).get('generation')
            restart = threading.Event()
            if reporter is not None:
                reporter.forget_members()
            reporter = StatusReporter(runtime, body, verification)
            runner = _prepare(runtime, body, reporter, work_dir)
            if runner is None:
                _wait_for_change(stopped, body, generation)
                continue
            flag = StopFlag(stopped, restart)
            watcher = threading.Thread(target=_watch_object, name='etcdbackup-%s' % name, daemon=True,
                                       args=(runtime, body, generation, runner, reporter, flag, restart))
            watcher.start()
            runner.run(flag)
            restart.set()
            watcher.join(5)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
        forget_snapshot_leases(runtime, body)
        if reporter is not None:
            reporter.forget_members()
        if verification is not None:
            verification.forget(resource_label(body))


def _prepare(runtime: Runtime, body: Any, reporter: StatusReporter, work_dir: str) -> Optional[BackupRunner]:
    meta = body.get('metadata') or {}
    try:
        spec = parse_backup_spec(body.get('spec'))
        if spec.suspend:
            reporter.ready(FALSE, 'Suspended', 'spec.suspend is true: no snapshots are taken')
            reporter.patch({})
            return None
        conn, store = connect(runtime, spec, meta.get('namespace'), work_dir)
    except (InvalidInput, EtcdError) as exc:   # SpecError included: the message names field, value and rule
        reporter.invalid(exc.explained() if isinstance(exc, InvalidInput) else str(exc))
        return None
    reporter.valid()
    reporter.patch({})
    source = {'etcdbackup': resource_label(body)}
    last = ((body.get('status') or {}).get('lastRestoreVerification') or {}).get('time')
    return BackupRunner(conn, store, spec.policy, work_dir=work_dir, listener=reporter, source=source,
                        clock=runtime.clock, last_verified=parse_micro(last))


def _wait_for_change(stopped: Any, body: Any, generation: Any) -> None:
    while not stopped and body.get('metadata', {}).get('generation') == generation:
        stopped.wait(1.0)


def _watch_object(runtime: Runtime, body: Any, generation: Any, runner: BackupRunner, reporter: StatusReporter,
                  flag: StopFlag, restart: threading.Event) -> None:
    """Beside the loop: restart it when the spec changes, pass on on-demand full snapshot requests."""
    served = ((body.get('status') or {}).get('lastOnDemandSnapshot'))
    verified = ((body.get('status') or {}).get('lastOnDemandVerification'))
    while not flag.is_set():
        meta = body.get('metadata') or {}
        if meta.get('generation') != generation:
            log.info('spec changed: restarting the backup loop', extra={'object': resource_label(body)})
            restart.set()
            return
        token = (meta.get('annotations') or {}).get(ON_DEMAND)
        if token and token != served and token != reporter.pending_token:
            reporter.pending_token = token
            runner.request_full('on demand (%s=%s)' % (ON_DEMAND, token), token)
        verify = (meta.get('annotations') or {}).get(ON_DEMAND_VERIFY)
        if verify and verify != verified and verify != reporter.pending_verify_token:
            reporter.pending_verify_token = verify
            runner.request_verification()
        flag.stopped.wait(1.0)
