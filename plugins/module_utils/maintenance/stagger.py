# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stagger check: at most `parallel` nodes pass per `duration`, through Leases `<leaseName>-<i>`.

Upstream's format: lease i in `leaseNamespace` is free once `renewTime + leaseDurationSeconds` lies in
the past (strictly); the node that passes takes it in OnTransition (holderIdentity = node name,
acquireTime = renewTime = now, leaseDurationSeconds = duration, leaseTransitions + 1).

Differences that close upstream's races: the check only reads (a missing lease is free; upstream
creates it in the past), and taking re-reads the lease, refuses if someone took it meanwhile and writes
with the resourceVersion it read, so of two nodes that saw the same free lease exactly one gets it.
"""

from __future__ import annotations

import dataclasses

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.environment import PluginParams
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import PluginError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.fields import Fields
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import lease_spec, seconds_left
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.leases import LeaseConflict, LeaseStore
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.plugin_base import (
    CheckPlugin, CheckResult, failed, passed)


def _store(params: PluginParams) -> LeaseStore:
    if params.env.leases is None:
        raise PluginError('stagger needs a lease store (Environment.leases)')
    return params.env.leases


@dataclasses.dataclass(frozen=True)
class Stagger(CheckPlugin):
    duration: float
    lease_name: str
    lease_namespace: str
    parallel: int
    type_name = 'stagger'
    cluster_scoped = True

    @classmethod
    def from_config(cls, fields: Fields) -> 'Stagger':
        return cls(fields.duration('duration', required=True), fields.string('leaseName', required=True),
                   fields.string('leaseNamespace', required=True), fields.integer('parallel', default=1, minimum=1))

    def lease_names(self) -> list:
        return ['%s-%d' % (self.lease_name, index) for index in range(self.parallel)]

    def check(self, params: PluginParams) -> CheckResult:
        store = _store(params)
        available_in = []
        for name in self.lease_names():
            left = seconds_left(store.get(self.lease_namespace, name), params.now)
            if left < 0:
                return passed(lease=name)
            available_in.append(round(left, 3))
        return failed(availableInSec=available_in)

    def on_transition(self, params: PluginParams, result: CheckResult) -> None:
        name = result.info.get('lease')
        if not result.passed or not name:
            return
        store = _store(params)
        lease = store.get(self.lease_namespace, name)
        try:
            if lease is None:
                store.create(self.lease_namespace, name, lease_spec(params.node_name, params.now, self.duration, 0))
                return
            if seconds_left(lease, params.now) >= 0:
                holder = (lease.get('spec') or {}).get('holderIdentity')
                raise PluginError('stagger lease %s/%s was taken by %s meanwhile' % (self.lease_namespace, name, holder))
            transitions = int((lease.get('spec') or {}).get('leaseTransitions') or 0) + 1
            store.update(self.lease_namespace, name, lease_spec(params.node_name, params.now, self.duration, transitions),
                         (lease.get('metadata') or {}).get('resourceVersion') or '')
        except LeaseConflict as exc:
            raise PluginError('stagger lease %s/%s: %s' % (self.lease_namespace, name, exc)) from None
