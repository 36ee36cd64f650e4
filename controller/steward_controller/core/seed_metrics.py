# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Metric families named as etcd-backup-restore and etcd-druid name them (seed 004, inventory §3.11), so
dashboards built for Gardener read them, plus the controller's loop heartbeats and the certificate expiry of
the files the provisioning anchor keeps.

A family is exported (HELP/TYPE lines) from the start; it has samples once the code that knows the value has
run: the backup loop (`etcdbr_cluster_size`, `etcdbr_is_learner` from the member list it reads every 30 s;
compaction), the anchor (certificates);
`etcdbr_restoration_duration_seconds` lives with the restore verification (etcd_backup/metrics.py).
The membership and defragmentation families (MembershipFamilies) are filled by the engine's timed calls
(etcd/cluster/timing.py): the controller listens from its start (main.py), so the anchor's learner add, promotion
and removal and the operator tasks' defragmentation count; the member program (member/metrics.py) declares the
same families on its own registry. `etcddruid_compaction_jobs_current` counts the compactions running now.

prometheus_client appends `_total` to a Counter's name: the Counters here are declared without it.
"""

from __future__ import annotations

from typing import Callable, Dict, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster import timing

SECONDS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)


class MembershipFamilies:
    """etcd-backup-restore's membership and defragmentation families (its pkg/metrics): names, types and labels as
    it declares them - `succeeded` ("true"/"false") on each, `endpoint` on the defragmentation histogram - and, as
    it does, every `succeeded` series of the membership families present from the start at zero. `observe` is a
    timing.py listener: one EtcdCall, one observation."""

    def __init__(self, registry: CollectorRegistry):
        r = registry
        self.is_learner_count = Counter('etcdbr_is_learner_count', 'Total number of times a member was added as a '
                                        'learner.', ['succeeded'], registry=r)
        self.add_learner_duration = Histogram('etcdbr_add_learner_duration_seconds', 'Total latency to add an etcd member '
                                              'as a learner to the cluster (retries included).', ['succeeded'],
                                              registry=r, buckets=SECONDS)
        self.member_remove_duration = Histogram('etcdbr_member_remove_duration_seconds', 'Total latency to remove an '
                                                'etcd member from the cluster (retries included).', ['succeeded'],
                                                registry=r, buckets=SECONDS)
        self.member_promote_duration = Histogram('etcdbr_member_promote_duration_seconds', 'Total latency to promote a '
                                                 'learner to a voting member (until etcd allowed it).', ['succeeded'],
                                                 registry=r, buckets=SECONDS)
        self.defragmentation_duration = Histogram('etcdbr_defragmentation_duration_seconds', 'Total latency of the '
                                                  'defragmentation of each etcd cluster member.', ['succeeded', 'endpoint'],
                                                  registry=r, buckets=SECONDS)
        for succeeded in ('true', 'false'):
            for family in (self.is_learner_count, self.add_learner_duration, self.member_remove_duration,
                           self.member_promote_duration):
                family.labels(succeeded)

    def observe(self, call: timing.EtcdCall) -> None:
        succeeded = 'true' if call.succeeded else 'false'
        if call.operation == timing.ADD_LEARNER:
            self.is_learner_count.labels(succeeded).inc()
            self.add_learner_duration.labels(succeeded).observe(call.seconds)
        elif call.operation == timing.PROMOTE:
            self.member_promote_duration.labels(succeeded).observe(call.seconds)
        elif call.operation == timing.REMOVE:
            self.member_remove_duration.labels(succeeded).observe(call.seconds)
        elif call.operation == timing.DEFRAGMENT:
            self.defragmentation_duration.labels(succeeded, call.target).observe(call.seconds)


class SeedMetrics:
    """etcd-backup-restore's membership/learner/defragmentation/restoration families and etcd-druid's compaction
    families, with the seed's names and labels."""

    def __init__(self, registry: CollectorRegistry):
        r = registry
        # etcd-backup-restore (its pkg/miscellaneous and member packages); `etcd` names our member's cluster.
        self.cluster_size = Gauge('etcdbr_cluster_size', 'Members (voters and learners) of the etcd cluster, as the '
                                  'member list says.', ['etcd'], registry=r)
        self.is_learner = Gauge('etcdbr_is_learner', '1 while this node\'s etcd member is a learner.', ['etcd', 'member'],
                                registry=r)
        self.membership = MembershipFamilies(r)
        # etcd-druid's compaction (our compaction runs in the backup loop, not as a Job: one "job" = one compaction)
        self.compaction_jobs = Counter('etcddruid_compaction_jobs', 'Backup compactions finished, by outcome.',
                                       ['succeeded', 'etcd_namespace'], registry=r)
        self.compaction_jobs_current = Gauge('etcddruid_compaction_jobs_current', 'Compactions running now.',
                                             ['etcd_namespace'], registry=r)
        self.compaction_job_duration = Histogram('etcddruid_compaction_job_duration_seconds', 'Time of one backup '
                                                 'compaction.', ['succeeded', 'etcd_namespace'], registry=r, buckets=SECONDS)
        self.compaction_num_delta_events = Gauge('etcddruid_compaction_num_delta_events', 'Delta events written since the '
                                                 'last full snapshot or compaction.', ['etcd_namespace', 'etcd'], registry=r)
        self.maintenance_state_age = Gauge('steward_maintenance_state_age_seconds', 'Longest time a node has been in a '
                                           'non-operational state of a profile (NodeMaintenanceStuck).',
                                           ['profile', 'state'], registry=r)
        self.certificate_not_after = Gauge('steward_certificate_expiry_timestamp_seconds', 'Unix time a certificate the '
                                           'provisioning anchor keeps on this node stops being valid (notAfter).',
                                           ['node', 'path'], registry=r)


class HeartbeatCollector(Collector):
    """`steward_controller_heartbeat_age_seconds{loop}`: seconds since each loop (and leader election, the operator
    loop) last said it is alive, computed at scrape time, so it grows while a loop is stuck - the same beats that
    /healthz judges."""

    def __init__(self, ages: Callable[[], Dict[str, float]]):
        self.ages = ages

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily('steward_controller_heartbeat_age_seconds',
                                   'Seconds since the loop last beat (its /healthz heartbeat).', labels=['loop'])
        for loop, age in sorted(self.ages().items()):
            family.add_metric([loop], age)
        yield family
