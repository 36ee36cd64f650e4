# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A class's VMs from one listing (a "wave"), and GetMachineStatus answered from it.

MCM asks the cloud about each machine separately (one DescribeInstances per machine per status check).
One listing per class per pass answers the same question for every machine, with MCM's rules:
the machine's VM is the one tagged with its UID (ours) or, for VMs made by MCM, its name; several live
candidates are OUT_OF_RANGE; none is NOT_FOUND unless the providerID names a listed VM (possibly terminated).
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.machines.codes import Code
from ansible_collections.steward.cluster.plugins.module_utils.machines.driver import VM, MachineContext
from ansible_collections.steward.cluster.plugins.module_utils.machines.errors import DriverError


@dataclasses.dataclass(frozen=True)
class Lookup:
    """GetMachineStatus from a listing: `vm` when exactly one matches, else `code` (NOT_FOUND / OUT_OF_RANGE, or
    the failed listing's code with its `message`)."""
    code: Code
    vm: Optional[VM] = None
    candidates: int = 0
    message: str = ''


class Inventory:
    """Every VM of one class as one listing saw it. `seq` numbers the listings of that class (1, 2, ...);
    `error` is set (and `vms` empty) when the listing failed: nothing may be concluded from it."""

    def __init__(self, vms: Sequence[VM], taken_at: float, seq: int, error: Optional[DriverError] = None):
        self.vms = list(vms)
        self.taken_at = taken_at
        self.seq = seq
        self.error = error
        self.by_owner: Dict[str, List[VM]] = {}
        self.by_name: Dict[str, List[VM]] = {}
        self.by_provider_id: Dict[str, VM] = {}
        for vm in self.vms:
            self.by_provider_id[vm.provider_id] = vm
            if vm.owner_uid:
                self.by_owner.setdefault(vm.owner_uid, []).append(vm)
            if vm.machine_name:
                self.by_name.setdefault(vm.machine_name, []).append(vm)

    @property
    def ok(self) -> bool:
        return self.error is None

    def lookup(self, machine: MachineContext) -> Lookup:
        if self.error is not None:
            return Lookup(self.error.code, message=str(self.error.args[0]) if self.error.args else '')
        live = [vm for vm in self.by_owner.get(machine.uid, []) if not vm.state.gone]
        if not live:
            # VMs made before the owner tag existed (MCM): the Name tag, if no other machine owns them.
            live = [vm for vm in self.by_name.get(machine.name, [])
                    if not vm.state.gone and (not vm.owner_uid or vm.owner_uid == machine.uid)]
        if len(live) > 1:
            return Lookup(Code.OUT_OF_RANGE, None, len(live))
        if live:
            return Lookup(Code.OK, live[0], 1)
        if machine.provider_id and machine.provider_id in self.by_provider_id:
            return Lookup(Code.OK, self.by_provider_id[machine.provider_id], 1)
        gone = self.by_owner.get(machine.uid, [])
        if gone:
            return Lookup(Code.OK, gone[-1], 1)   # terminated: the listing still shows it
        return Lookup(Code.NOT_FOUND)
