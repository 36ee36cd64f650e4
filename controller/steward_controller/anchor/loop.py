# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The anchor loop: a thread started with the operator that syncs the node's files from their sources every
`--anchor-interval` seconds, and a cleanup when the operator stops (the DaemonSet pod's termination).

Without an API server (a full reboot) it leaves the files as they are: they are what the kubelet runs from.
Each cycle: read the sources, then the engine's sequence (provisioning/anchor.run_cycle): write the non-etcd files,
then the etcd member's manifest (adding the member as a learner first when the manifest is new), then try to promote
a learner that caught up. Every write, drift fix and
refusal is a log line and a metric; bad sources are refused with the object and annotation named.
"""

from __future__ import annotations

import datetime
import logging
import os
from typing import Any, List, Optional, Set, Tuple

from prometheus_client import Counter, Gauge

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.times import parse_rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import anchor, files, pki
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import ProvisioningError

from steward_controller.anchor import AnchorOptions
from steward_controller.core.background import BackgroundLoop, register_background
from steward_controller.core.runtime import Runtime

log = logging.getLogger('steward.anchor')
CLEANUP_SECONDS = 100.0  # the stop's budget: the loop's last cycle, the member removal, the files
STOP_SECONDS = 60.0      # the loop's last cycle


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
        self.node = anchor.AnchorNode(name=options.node_name, ip=options.node_ip, etcd_peer_port=options.etcd_peer_port,
                                      etcd_endpoints=options.etcd_endpoints)
        self.background = BackgroundLoop('anchor', runtime.health, 'anchor')
        self.refused: Set[Tuple[Any, Any, str]] = set()   # (uid, resourceVersion, message) already reported
        self.certificates: Set[str] = set()   # paths whose expiry this anchor exports

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

    # --- one cycle --------------------------------------------------------------------------------
    def report(self, report: anchor.AnchorReport, reason: str) -> None:
        """Log and count what a sequence did, in order: each file change (drift when a sync rewrote a file), each etcd
        call."""
        for step in report.steps:
            if isinstance(step, str):
                log.info('etcd: %s', step, extra={'node': self.options.node_name})
                continue
            if step.path == anchor.ANCHOR_RECORD:
                continue
            why = 'drift' if step.action == files.UPDATE and reason == 'sync' else step.action
            self.metrics.writes.labels(why).inc()
            log.info('%s %s (%s)', step.action, step.path, why, extra={'node': self.options.node_name})
        if report.waiting:
            log.info('etcd learner not promoted yet: %s', report.waiting, extra={'node': self.options.node_name})

    @property
    def seed(self) -> Any:
        return self.runtime.metrics.seed

    def certificate_metrics(self) -> None:
        """steward_certificate_expiry_timestamp_seconds for every certificate (*.crt) this anchor keeps; the series of
        a certificate it no longer keeps goes (else a removed file's expiry would keep its alert firing)."""
        now = datetime.datetime.now(datetime.timezone.utc)
        kept = set()
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
                when = parse_rfc3339(not_after, path)
                self.seed.certificate_not_after.labels(self.options.node_name, path).set(when.timestamp())
                kept.add(path)
        for gone in self.certificates - kept:
            try:
                self.seed.certificate_not_after.remove(self.options.node_name, gone)
            except KeyError:
                pass
        self.certificates = kept

    def cycle(self) -> None:
        sources = self.sources()
        if sources is None:
            return
        report = anchor.run_cycle(self.root, sources, self.node)
        self.report(report, 'sync')
        if report.error is not None:
            log.error('anchor sync failed: %s', report.error, extra={'node': self.options.node_name})
            self.metrics.errors.labels('sync').inc()
            return
        self.metrics.files.set(len(anchor.read_record(self.root)))
        self.certificate_metrics()
        self.metrics.last_sync.set(self.runtime.clock())
        self.background.beat()

    def start(self) -> None:
        self.background.spawn(self.run, 'anchor')

    def run(self) -> None:
        # a bug must not end the anchor: the next cycle tries again (the health beat is a complete sync's)
        self.background.repeat(self.step, 'anchor cycle crashed', self.options.interval,
                               on_crash=self.metrics.errors.labels('crash').inc)

    def step(self) -> float:
        self.cycle()
        return self.options.interval

    # --- stop ------------------------------------------------------------------------------------
    def finish(self) -> None:
        """The operator stops: end the loop (its cycle in hand finishes), then clean up unless told not to."""
        self.background.stop(STOP_SECONDS)
        if self.options.cleanup:
            self.cleanup()

    def cleanup(self) -> None:
        """Remove the etcd member (refused when it would break quorum: then everything stays), then every file."""
        report = anchor.cleanup(self.root, self.node)
        self.report(report, 'cleanup')
        if report.refused is not None:
            log.error('anchor stop: %s; the etcd member and every anchored file stay', report.refused,
                      extra={'node': self.options.node_name, 'rule': report.refused.rule})
            return
        if report.error is not None:
            log.error('anchor stop: cannot remove the etcd member (%s); the files stay', report.error,
                      extra={'node': self.options.node_name})
            return
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
    # kopf kills its own process this long after a stop signal: leave room for the cleanup (an etcd member
    # removal waits out etcd's 5-second rule and its retries); the DaemonSet grants 120 s.
    register_background(registry, 'anchor', loop.start, loop.finish, exiting_timeout=CLEANUP_SECONDS)
