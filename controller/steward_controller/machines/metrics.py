# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The machines loop's metrics, on the runtime's registry.

MCM documents no metric names, but its code exports some: the cloud API counters keep MCM's names
(`mcm_cloud_api_requests_total`, `mcm_cloud_api_requests_failed_total`,
`mcm_cloud_api_driver_requests_failed_total`) so dashboards built for MCM read them; the rest are ours.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class MachineMetrics:
    def __init__(self, registry: CollectorRegistry):
        r = registry
        self.phase = Gauge('steward_machines', 'Machines by phase (creating = no phase yet).', ['phase'], registry=r)
        self.requests = Counter('mcm_cloud_api_requests_total', 'Cloud API requests, by provider and service (operation).',
                                ['provider', 'service'], registry=r)
        self.requests_failed = Counter('mcm_cloud_api_requests_failed_total', 'Failed cloud API requests.',
                                       ['provider', 'service'], registry=r)
        self.driver_calls = Counter('steward_machines_driver_calls_total', 'Driver calls, by operation and MCM code.',
                                    ['provider', 'operation', 'code'], registry=r)
        self.driver_failed = Counter('mcm_cloud_api_driver_requests_failed_total', 'Failed driver calls, by error code.',
                                     ['provider', 'operation', 'error_code'], registry=r)
        self.replacements = Counter('steward_machines_replacements_total', 'Machines failed for replacement, by reason '
                                    '(health-timeout, creation-timeout, vm-gone, stale-node).', ['reason'], registry=r)
        self.frozen = Gauge('steward_machines_frozen', '1 while a freeze rule is active, by rule and scope.',
                            ['rule', 'scope'], registry=r)
        self.freezes = Counter('steward_machines_freezes_total', 'Freezes that started, by rule.', ['rule'], registry=r)
        self.orphans = Counter('steward_machines_orphans_deleted_total', 'Orphan VMs deleted, by provider.',
                               ['provider'], registry=r)
        self.passes = Histogram('steward_machines_pass_seconds', 'Time to plan one pass over every machine object.',
                                registry=r, buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
        self.in_flight = Gauge('steward_machines_actions_in_flight', 'Objects with an action in flight.', registry=r)
        self.meltdown_limited = Gauge('steward_machines_meltdown_limited', 'Machines the meltdown limit kept from being '
                                      'replaced in the last pass (MachineReplacementsAtLimit).', registry=r)
        self.api_frozen = Gauge('steward_machines_apiserver_frozen', '1 while the API-server freeze is active.', registry=r)
