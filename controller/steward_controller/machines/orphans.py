# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Orphan collection (MCM's safety controller, on positive evidence only: safety.orphans): every
`--machine-safety-orphan-vms-period` each MachineClass is listed again on a worker and the VMs its verdict names
are deleted, each with a Warning Event on the class."""

from __future__ import annotations

import logging
from typing import Any, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.machines import objects as o
from ansible_collections.steward.cluster.plugins.module_utils.machines import safety
from ansible_collections.steward.cluster.plugins.module_utils.kube.mcm import API_VERSION, KIND_MACHINE
from ansible_collections.steward.cluster.plugins.module_utils.machines.driver import MachineContext
from ansible_collections.steward.cluster.plugins.module_utils.machines.plan import Event

log = logging.getLogger('steward.machines')


class Orphans:
    # A mixin of MachinesController (controller.py), whose __init__ holds the state these methods share.

    def collect_orphans(self) -> None:
        """Safety: VMs deleted on positive evidence only (safety.orphans); runs on a worker, one class at a time."""
        freeze = self.api.freeze()
        if freeze is None and self.last_pass is not None and self.last_pass.freezes:
            freeze = next(iter(self.last_pass.freezes.values()))
        for cls in self.caches.all('MachineClass'):
            self.submit('orphans/' + o.key(cls), self._orphans_of, cls, freeze)

    def _orphans_of(self, cls: Mapping[str, Any], freeze: Optional[safety.Freeze]) -> None:
        key = o.key(cls)
        inventory = self.list_class(cls)
        machines = self.caches.all(KIND_MACHINE)
        uids = {o.uid(m) for m in machines}
        count = sum(1 for m in machines if o.namespace(m) == o.namespace(cls) and o.class_name(o.spec(m)) == o.name(cls))
        verdict = safety.orphans(inventory, o.uid(cls), uids, count, self.orphan_memory.setdefault(key, safety.OrphanMemory()),
                                 self.settings, self.runtime.clock(), freeze, self.synced)
        if verdict.skipped:
            log.info('orphan collection of class %s skipped: %s', key, verdict.skipped)
        for pid, why in verdict.kept:
            log.debug('orphan candidate %s kept: %s', pid, why, extra={'class': key})
        for vm in verdict.delete:
            self._delete_orphan(cls, vm)

    def _delete_orphan(self, cls: Mapping[str, Any], vm: Any) -> None:
        driver, ctx = self.target.driver_for_class(cls)
        driver.delete_machine(ctx, MachineContext(o.namespace(cls), vm.machine_name, vm.owner_uid, vm.provider_id))
        self.metrics.orphans.labels(driver.provider).inc()
        self.target.event(dict(cls, kind='MachineClass', apiVersion=API_VERSION), Event(
            'OrphanVMDeleted', 'deleted VM %s: tagged for machine %s (uid %s, no longer exists) of this class, older than %ss, '
            'absent on two collection cycles' % (vm.provider_id, vm.machine_name, vm.owner_uid, int(self.settings.orphan_min_age)),
            warning=True))
