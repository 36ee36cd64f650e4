# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The anchor loop: a thread started with the operator that syncs the node's files from their sources every
`--anchor-interval` seconds, and a cleanup when the operator stops (the DaemonSet pod's termination).

Without an API server (a full reboot) it leaves the files as they are: they are what the kubelet runs from.
Each cycle: read the sources, write the non-etcd files, then the etcd member's manifest (adding the member as a
learner first when the manifest is new), then try to promote a learner that caught up. Every write, drift fix and
refusal is a log line and a metric; bad sources are refused with the object and annotation named.
"""

from __future__ import annotations

import datetime
import logging
import os
import threading
import time
from typing import Any, List, Optional, Set, Tuple

import kopf
from prometheus_client import Counter, Gauge

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.etcd.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster import cluster_info
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.members import ensure_member_present
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import anchor, etcd_membership, files, layout, pki
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import ProvisioningError, Refused
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.manifests import etcd_bootstrap_flags

from steward_controller.anchor import AnchorOptions
from steward_controller.core.runtime import Runtime

log = logging.getLogger('steward.anchor')
PROMOTE_TIMEOUT = 5.0   # one promotion attempt per cycle; a learner still catching up is tried again next cycle
CLEANUP_SECONDS = 100.0  # the stop's budget: the loop's last cycle, the member removal, the files


class AnchorMetrics:
    def __init__(self, registry: Any):
        self.files = Gauge('steward_anchor_files', 'Files this anchor keeps on its node.', registry=registry)
        self.writes = Counter('steward_anchor_writes_total', 'Files written or removed, by why.', ['reason'],
                              registry=registry)
        self.errors = Counter('steward_anchor_sync_errors_total', 'Cycles that could not finish, by what failed.',
                              ['stage'], registry=registry)
        self.last_sync = Gauge('steward_anchor_last_sync_timestamp_seconds', 'Unix time of the last complete sync.',
                               registry=registry)


class AnchorLoop:
    def __init__(self, runtime: Runtime, options: AnchorOptions, metrics: AnchorMetrics):
        self.runtime = runtime
        self.options = options
        self.metrics = metrics
        self.root = files.Root(options.root)
        self.stop = threading.Event()
        self.thread: Optional[threading.Thread] = None
        self.refused: Set[Tuple[Any, Any, str]] = set()   # (uid, resourceVersion, message) already reported

    @property
    def peer_url(self) -> str:
        host = '[%s]' % self.options.node_ip if ':' in self.options.node_ip else self.options.node_ip
        return 'https://%s:%d' % (host, self.options.etcd_peer_port)

    # --- sources ----------------------------------------------------------------------------------
    def sources(self) -> Optional[List[anchor.Source]]:
        """The sources for this node, or None when they cannot be used: the API cannot be asked, or a source is
        wrong - then the files stay as they are (leaving the wrong source out would remove the files it wrote) and
        the source gets a Warning Event naming the annotation or key, the value and the rule."""
        out: List[anchor.Source] = []
        try:
            for kind, plural in (('ConfigMap', 'configmaps'), ('Secret', 'secrets')):
                for obj in self.runtime.client.list(api_path('v1', plural, self.options.namespace),
                                                    label_selector=self.options.selector):
                    obj.setdefault('kind', kind)
                    try:
                        source = anchor.parse_source(obj, self.options.node_name)
                    except InvalidInput as exc:
                        self.refuse_source(obj, exc)
                        return None
                    if source is not None:
                        out.append(source)
        except KubeError as exc:
            log.warning('cannot read the anchor sources, keeping the files as they are: %s', exc)
            self.metrics.errors.labels('sources').inc()
            return None
        self.runtime.health.api_ok()
        return out

    def refuse_source(self, obj: Any, exc: InvalidInput) -> None:
        """Log, count and say on the object why no file was synced - one Event per version of the object."""
        message = 'anchor on node %s: %s; no file was changed' % (self.options.node_name, exc.explained())
        self.metrics.errors.labels('source').inc()
        meta = obj.get('metadata') or {}
        seen = (meta.get('uid'), meta.get('resourceVersion'), message)
        if seen in self.refused:
            return
        self.refused.add(seen)
        self.runtime.report(obj, 'InvalidAnchorSource', message, warning=True, kind='anchor')

    def etcd(self) -> EtcdConnection:
        pki = layout.ETCD_PKI_DIR
        return EtcdConnection(endpoints=self.options.etcd_endpoints, ca_cert=self.root.host(pki + '/ca.crt'),
                              client_cert=self.root.host(pki + '/healthcheck-client.crt'),
                              client_key=self.root.host(pki + '/healthcheck-client.key'))

    # --- one cycle --------------------------------------------------------------------------------
    def apply(self, changes: List[files.Change], reason: str) -> None:
        files.apply(self.root, changes)
        for change in changes:
            if change.path == anchor.ANCHOR_RECORD:
                continue
            why = 'drift' if change.action == files.UPDATE and reason == 'sync' else change.action
            self.metrics.writes.labels(why).inc()
            log.info('%s %s (%s)', change.action, change.path, why, extra={'node': self.options.node_name})

    def etcd_flags(self, sources: List[anchor.Source]) -> Optional[Tuple[str, str]]:
        """The member's --initial-cluster flags: kept from the manifest on disk, or decided by adding the member."""
        if not any(s.etcd for s in sources):
            return None
        kept = etcd_bootstrap_flags(self.root.read(layout.MANIFEST['etcd']))
        if kept is not None:
            return kept
        if not self.options.etcd_endpoints:
            raise ProvisioningError('an etcd member source is anchored but --anchor-etcd-endpoints is empty')
        started = time.monotonic()
        try:
            result = ensure_member_present(self.etcd(), name=self.options.node_name, peer_urls=[self.peer_url],
                                           learner=True, promote=False)
        except EtcdError:
            self.seed.add_learner_duration.labels('false').observe(time.monotonic() - started)
            raise
        self.seed.add_learner_duration.labels('true').observe(time.monotonic() - started)
        log.info('etcd: %s', result['msg'], extra={'node': self.options.node_name})
        return result['initial_cluster'], 'existing'

    def promote(self) -> None:
        try:
            info = cluster_info(self.etcd())
            member = etcd_membership.member_of(info, self.peer_url)
            self.membership_metrics(info, member)
            if member is not None and member['is_learner'] and member['name']:
                self.seed.is_learner_count.labels(self.etcd_label, self.options.node_name).inc()
                started = time.monotonic()
                try:
                    result = ensure_member_present(self.etcd(), name=self.options.node_name, peer_urls=[self.peer_url],
                                                   learner=True, promote=True, promote_timeout=PROMOTE_TIMEOUT,
                                                   retry_timeout=PROMOTE_TIMEOUT)
                except EtcdError:
                    self.seed.member_promote_duration.labels('false').observe(time.monotonic() - started)
                    raise
                self.seed.member_promote_duration.labels('true').observe(time.monotonic() - started)
                log.info('etcd: %s', result['msg'], extra={'node': self.options.node_name})
        except EtcdError as exc:
            log.info('etcd learner not promoted yet: %s', exc, extra={'node': self.options.node_name})

    @property
    def seed(self) -> Any:
        return self.runtime.metrics.seed

    @property
    def etcd_label(self) -> str:
        return ','.join(self.options.etcd_endpoints)

    def membership_metrics(self, info: Any, member: Any) -> None:
        """etcdbr_cluster_size and etcdbr_is_learner from the member list just read."""
        self.seed.cluster_size.labels(self.etcd_label).set(len(info.get('members') or []))
        if member is not None:
            self.seed.is_learner.labels(self.etcd_label, self.options.node_name).set(1 if member['is_learner'] else 0)

    def certificate_metrics(self) -> None:
        """steward_certificate_expiry_timestamp_seconds for every certificate (*.crt) this anchor keeps."""
        now = datetime.datetime.now(datetime.timezone.utc)
        for path in anchor.read_record(self.root):
            if not path.endswith('.crt'):
                continue
            data = self.root.read(path)
            try:
                not_after = pki.describe(data, now, path)['not_after'] if data else None
            except (InvalidInput, ProvisioningError) as exc:
                log.warning('cannot read certificate %s: %s', path, exc, extra={'node': self.options.node_name})
                continue
            if not_after:
                when = datetime.datetime.strptime(not_after, '%Y-%m-%dT%H:%M:%SZ').replace(tzinfo=datetime.timezone.utc)
                self.seed.certificate_not_after.labels(self.options.node_name, path).set(when.timestamp())

    def cycle(self) -> None:
        sources = self.sources()
        if sources is None:
            return
        try:
            self.apply(anchor.plan_sync(self.root, anchor.desired_files(
                sources, self.options.node_name, self.options.node_ip), keep_etcd_manifest=True), 'sync')
            flags = self.etcd_flags(sources)
            desired = anchor.desired_files(sources, self.options.node_name, self.options.node_ip, flags)
            self.apply(anchor.plan_sync(self.root, desired), 'sync')
            if flags is not None:
                self.promote()
        except (InvalidInput, ProvisioningError, EtcdError, OSError) as exc:
            log.error('anchor sync failed: %s', exc, extra={'node': self.options.node_name})
            self.metrics.errors.labels('sync').inc()
            return
        self.metrics.files.set(len(anchor.read_record(self.root)))
        self.certificate_metrics()
        self.metrics.last_sync.set(self.runtime.clock())
        self.runtime.health.beat('anchor')

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.cycle()
            except Exception:  # a bug must not end the anchor: the next cycle tries again
                log.exception('anchor cycle crashed')
                self.metrics.errors.labels('crash').inc()
            self.stop.wait(self.options.interval)

    # --- stop ------------------------------------------------------------------------------------
    def cleanup(self) -> None:
        """Remove the etcd member (refused when it would break quorum: then everything stays), then every file."""
        recorded = anchor.read_record(self.root)
        if layout.MANIFEST['etcd'] in recorded and self.options.etcd_endpoints:
            try:
                plan = etcd_membership.plan_removal(self.etcd(), self.peer_url, None, self.options.node_name)
                if plan['member'] is not None:
                    started = time.monotonic()
                    etcd_membership.remove(self.etcd(), plan['member'], check_mode=False)
                    self.seed.member_remove_duration.labels('true').observe(time.monotonic() - started)
                    log.info('etcd: removed member %s', plan['member']['id'], extra={'node': self.options.node_name})
            except Refused as exc:
                log.error('anchor stop: %s; the etcd member and every anchored file stay', exc,
                          extra={'node': self.options.node_name, 'rule': exc.rule})
                return
            except EtcdError as exc:
                log.error('anchor stop: cannot remove the etcd member (%s); the files stay', exc,
                          extra={'node': self.options.node_name})
                return
        self.apply(anchor.plan_cleanup(self.root), 'cleanup')
        self.metrics.files.set(0)


def register(registry: Any, runtime: Runtime) -> None:
    options: AnchorOptions = runtime.settings.options('anchor')
    if not options.node_name:
        log.info('anchor: off (no --anchor-node-name: it runs as a DaemonSet, where the downward API sets it)')
        return
    if not options.node_ip:
        raise SystemExit('--controllers anchor needs --anchor-node-ip with --anchor-node-name (the DaemonSet sets '
                         'STEWARD_NODE_IP from status.hostIP)')
    if not os.path.isdir(options.root):
        raise SystemExit('--anchor-root %s is not a directory (mount the host root there)' % options.root)
    loop = AnchorLoop(runtime, options, AnchorMetrics(runtime.metrics.registry))

    @kopf.on.startup(registry=registry)
    def start_anchor(settings: kopf.OperatorSettings, **_: Any) -> None:
        # kopf kills its own process this long after a stop signal: leave room for the cleanup (an etcd member
        # removal waits out etcd's 5-second rule and its retries); the DaemonSet grants 120 s.
        settings.process.ultimate_exiting_timeout = max(settings.process.ultimate_exiting_timeout or 0, CLEANUP_SECONDS)
        loop.thread = threading.Thread(target=loop.run, name='anchor', daemon=True)
        loop.thread.start()

    @kopf.on.cleanup(registry=registry)
    def stop_anchor(**_: Any) -> None:
        loop.stop.set()
        if loop.thread is not None:
            loop.thread.join(timeout=60)
        if options.cleanup:
            loop.cleanup()
