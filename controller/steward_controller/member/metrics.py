# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The member program's /metrics: etcd-backup-restore's membership families, as its sidecar serves them beside
each etcd, so dashboards built for Gardener read them per member.

  etcdbr_cluster_size                       members in the cluster (voters and learners), read at scrape time
  etcdbr_is_learner                         1 while this member is a learner, 0 once a voter (its etcd's status,
                                            read at scrape time)
  etcdbr_is_learner_count_total{succeeded}  learner adds (this member joining, or rejoining, as a learner)
  etcdbr_add_learner_duration_seconds{succeeded}, etcdbr_member_promote_duration_seconds{succeeded},
  etcdbr_member_remove_duration_seconds{succeeded}, etcdbr_defragmentation_duration_seconds{succeeded,endpoint}
                                            each call the program makes through the engine, retries included

The timed families come from the engine (etcd/cluster/timing.py): the initializer's learner add and the removal of
a stale entry, the server's promotion and the leader's scheduled defragmentation all go through it, so nothing
here wraps them. Names, types and labels are etcd-backup-restore's (core/seed_metrics.MembershipFamilies, one
home for both processes), without the controller's `etcd` label: one member program serves one member.

Wiring (two lines outside this file): main.py calls `install(state)` once the MemberState exists, and server.py
answers `GET /metrics` with `exposition()` of what install returned (state.metrics).
"""

from __future__ import annotations

import time
from typing import Callable, Iterator, Optional, Tuple

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster import timing
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection, Gateway
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError

from steward_controller.core.seed_metrics import MembershipFamilies

SCRAPE_BUDGET = 3.0   # the reads of one scrape, in all: well under Prometheus's default 10 s scrape timeout


class MembershipCollector(Collector):
    """`etcdbr_is_learner` from this member's own etcd (its status says isLearner: a learner refuses most other
    calls, the member list too) and `etcdbr_cluster_size` from the first member that lists the members (serializable:
    it answers without a leader, so a member cut off from quorum still says what it knows), at scrape time. While
    nothing answers (before initialization, or down) a family has no sample rather than a stale one; the reads stop
    at SCRAPE_BUDGET seconds in all."""

    def __init__(self, own: EtcdConnection, cluster: EtcdConnection, clock: Callable[[], float] = time.monotonic):
        self.own, self.cluster, self.clock = own, cluster, clock

    def collect(self) -> Iterator[GaugeMetricFamily]:
        deadline = self.clock() + SCRAPE_BUDGET
        size = GaugeMetricFamily('etcdbr_cluster_size', 'Current etcd cluster size (voters and learners).')
        learner = GaugeMetricFamily('etcdbr_is_learner', 'Whether or not this member is a learner. 1 if it is, '
                                    '0 otherwise.')
        own = self.own.endpoints[0]
        is_learner = None
        try:
            with Gateway(self.own) as gateway:
                is_learner = bool(gateway.status(own, timeout=SCRAPE_BUDGET).get('isLearner'))
            learner.add_metric([], 1 if is_learner else 0)
        except EtcdError:
            pass
        # a voter lists the members itself; a learner (or a member that does not answer) asks the others
        others = [e for e in self.cluster.endpoints if self.cluster.url(e) != self.own.url(own)]
        endpoints = ([own] if is_learner is False else []) + others
        with Gateway(self.cluster) as gateway:
            for endpoint in endpoints:
                left = deadline - self.clock()
                if left <= 0:
                    break
                try:
                    members = gateway.call(endpoint, '/v3/cluster/member/list', {}, left).get('members') or []
                    size.add_metric([], len(members))
                    break
                except EtcdError:
                    continue
        yield size
        yield learner


class MemberMetrics:
    """The member program's registry: the timed families (listening to the engine from construction until
    `close()`) and the scrape-time membership gauges. `own`: this member's client URL; `cluster`: every member's."""

    def __init__(self, own: EtcdConnection, cluster: EtcdConnection):
        self.registry = CollectorRegistry()
        self.membership = MembershipFamilies(self.registry)
        self.registry.register(MembershipCollector(own, cluster))
        self._stop: Optional[Callable[[], None]] = timing.listen(self.membership.observe)

    def exposition(self) -> Tuple[bytes, str]:
        """(body, content type) of a /metrics answer."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def close(self) -> None:
        if self._stop is not None:
            self._stop()
            self._stop = None


def install(state) -> MemberMetrics:
    """The metrics of the member program whose MemberState is `state` (server.py), kept as `state.metrics`: its own
    etcd is asked by its client URL (the cluster's endpoints when it has none)."""
    initializer = state.initializer
    own = initializer.conn.with_endpoints([initializer.options.client_url or initializer.conn.endpoints[0]])
    state.metrics = MemberMetrics(own, initializer.conn)
    return state.metrics
