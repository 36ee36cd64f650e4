# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The driver interface: MCM's calls (CreateMachine, InitializeMachine, DeleteMachine, GetMachineStatus,
ListMachines, GetVolumeIDs) plus one of ours, `list_vms`, that lists every VM of a class in one filtered,
paginated call per pass (a "wave") instead of one GetMachineStatus per machine.

Every failure is a DriverError carrying one of MCM's codes (codes.Code); callers dispatch on it with
codes.next_step. A driver never raises anything else for a cloud failure (programming errors aside).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.machines.codes import Call, Code
from ansible_collections.steward.cluster.plugins.module_utils.machines.errors import DriverError


class VMState(str, enum.Enum):
    """A VM's life as the cloud reports it (EC2's instance state names; sabakan states map onto these)."""
    PENDING = 'pending'
    RUNNING = 'running'
    STOPPING = 'stopping'
    STOPPED = 'stopped'
    SHUTTING_DOWN = 'shutting-down'
    TERMINATED = 'terminated'

    @property
    def gone(self) -> bool:
        """Positive evidence that the machine will never serve again."""
        return self in (VMState.SHUTTING_DOWN, VMState.TERMINATED)

    @property
    def halted(self) -> bool:
        """Not running: stopped, stopping, or gone (a drain of such a node can never complete)."""
        return self in (VMState.STOPPING, VMState.STOPPED, VMState.SHUTTING_DOWN, VMState.TERMINATED)


@dataclasses.dataclass(frozen=True)
class ClassContext:
    """What a driver gets about a MachineClass: the class itself and its Secret's data (decoded to text)."""
    namespace: str
    name: str
    uid: str
    provider: str
    provider_spec: Mapping[str, Any]
    secret: Mapping[str, str]
    node_template: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)     # the class's labels

    @property
    def key(self) -> str:
        return '%s/%s' % (self.namespace, self.name)

    def __repr__(self) -> str:  # never the secret
        return 'ClassContext(%s, provider=%s)' % (self.key, self.provider)


@dataclasses.dataclass(frozen=True)
class MachineContext:
    """What a driver gets about a Machine."""
    namespace: str
    name: str
    uid: str
    provider_id: str = ''
    node_name: str = ''
    annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)
    node_template_annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class VM:
    """One VM as a listing shows it."""
    provider_id: str
    node_name: str = ''
    machine_name: str = ''            # the Name tag (MCM's link from VM to Machine)
    owner_uid: str = ''               # our owner tag: the Machine's UID
    class_uid: str = ''               # our class tag: the MachineClass's UID
    state: VMState = VMState.RUNNING
    launched: Optional[float] = None  # Unix time
    needs_init: bool = False          # InitializeMachine has work to do
    last_known_state: str = ''


@dataclasses.dataclass(frozen=True)
class CreateResult:
    provider_id: str
    node_name: str
    last_known_state: str = ''


class Driver:
    """Base class: optional calls answer UNIMPLEMENTED, as MCM's drivers do."""

    provider = ''

    def create_machine(self, cls: ClassContext, machine: MachineContext) -> CreateResult:
        raise DriverError(Code.UNIMPLEMENTED, 'CreateMachine is not implemented', Call.CREATE)

    def initialize_machine(self, cls: ClassContext, machine: MachineContext) -> CreateResult:
        raise DriverError(Code.UNIMPLEMENTED, 'InitializeMachine is not implemented', Call.INITIALIZE)

    def delete_machine(self, cls: ClassContext, machine: MachineContext) -> str:
        """Returns the last known state; a VM already gone is success (OK), as MCM's contract says."""
        raise DriverError(Code.UNIMPLEMENTED, 'DeleteMachine is not implemented', Call.DELETE)

    def get_machine_status(self, cls: ClassContext, machine: MachineContext) -> VM:
        """The machine's VM; NOT_FOUND when there is none, OUT_OF_RANGE when there are several."""
        raise DriverError(Code.UNIMPLEMENTED, 'GetMachineStatus is not implemented', Call.STATUS)

    def list_machines(self, cls: ClassContext) -> Dict[str, str]:
        """MCM's ListMachines: providerID -> machine name, for the class's VMs."""
        return {vm.provider_id: vm.machine_name for vm in self.list_vms(cls) if not vm.state.gone}

    def list_vms(self, cls: ClassContext) -> List[VM]:
        raise DriverError(Code.UNIMPLEMENTED, 'listing VMs is not implemented', Call.LIST)

    def get_volume_ids(self, pv_specs: Sequence[Mapping[str, Any]]) -> List[str]:
        raise DriverError(Code.UNIMPLEMENTED, 'GetVolumeIDs is not implemented', Call.VOLUMES)

    def update_machine(self, cls: ClassContext, machine: MachineContext) -> None:
        """MCM's hot-update proposal (UpdateMachine): bring the machine's VM to `cls` where it stands, for
        MachineDeployments with `strategy.type: InPlaceUpdate`. A driver that cannot answers UNIMPLEMENTED, and
        the machine's in-place update fails with that message."""
        raise DriverError(Code.UNIMPLEMENTED, 'UpdateMachine is not implemented by this provider: it cannot update a '
                          'machine where it stands (use strategy RollingUpdate)', Call.UPDATE)


def machine_context(machine: Mapping[str, Any]) -> MachineContext:
    md = machine.get('metadata') or {}
    spec = machine.get('spec') or {}
    template = ((spec.get('nodeTemplate') or {}).get('metadata') or {})
    return MachineContext(namespace=md.get('namespace') or '', name=md.get('name') or '', uid=md.get('uid') or '',
                          provider_id=spec.get('providerID') or '',
                          node_name=(md.get('labels') or {}).get('node') or '',
                          annotations=dict(md.get('annotations') or {}),
                          node_template_annotations=dict(template.get('annotations') or {}))
