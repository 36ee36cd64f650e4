# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Restore-verification metrics of the etcd-backup loop, on the runtime's registry.

`etcdbr_restore_verification_age_seconds` is computed when scraped (now minus the last successful
verification), so an alert on it fires even when the loop itself has stopped reporting.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Dict, Iterator

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from steward_controller.core.metrics import RESOURCE


class _AgeCollector(Collector):
    def __init__(self, clock: Callable[[], float]):
        self.clock = clock
        self.last_success: Dict[str, float] = {}
        self.lock = threading.Lock()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily('etcdbr_restore_verification_age_seconds',
                                   'Seconds since the newest backup was last proven restorable.', labels=[RESOURCE])
        now = self.clock()
        with self.lock:
            for resource, when in sorted(self.last_success.items()):
                family.add_metric([resource], max(0.0, now - when))
        yield family


class VerificationMetrics:
    """Registered once per runtime (the loop's register())."""

    def __init__(self, registry, clock: Callable[[], float] = time.time):
        self.last_revision = Gauge('etcdbr_restore_verification_last_revision',
                                   'Revision the last successful restore verification restored to.', [RESOURCE],
                                   registry=registry)
        self.last_success = Gauge('etcdbr_restore_verification_last_success_timestamp_seconds',
                                  'Unix time of the last successful restore verification.', [RESOURCE],
                                  registry=registry)
        self.duration = Gauge('etcdbr_restore_verification_duration_seconds',
                              'Seconds the last restore verification took.', [RESOURCE], registry=registry)
        self.failures = Counter('etcdbr_restore_verification_failures_total',
                                'Restore verifications that found the newest backup not (wholly) restorable.',
                                [RESOURCE], registry=registry)
        self.verified = Gauge('steward_etcdbackup_restore_verified', '1 when the last restore verification succeeded '
                              '(the RestoreVerified condition), 0 when it failed.', [RESOURCE], registry=registry)
        self.age = _AgeCollector(clock)
        registry.register(self.age)
        # etcd-backup-restore's name for a restore's time: a verification is a real restore into scratch
        self.restoration = Histogram('etcdbr_restoration_duration_seconds', 'Time to restore a backup into a data '
                                     'directory (each restore verification).', ['succeeded'], registry=registry,
                                     buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600))

    def observe(self, resource: str, ok: bool, revision, duration: float, finished: float) -> None:
        self.duration.labels(resource).set(duration)
        self.verified.labels(resource).set(1 if ok else 0)
        self.restoration.labels('true' if ok else 'false').observe(duration)
        if not ok:
            self.failures.labels(resource).inc()
            return
        self.last_revision.labels(resource).set(revision or 0)
        self.last_success.labels(resource).set(finished)
        with self.age.lock:
            self.age.last_success[resource] = finished

    def forget(self, resource: str) -> None:
        with self.age.lock:
            self.age.last_success.pop(resource, None)
        try:
            self.verified.remove(resource)
        except KeyError:
            pass
