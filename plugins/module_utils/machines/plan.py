# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The typed plans the engine returns and the shells apply.

A plan says what to write (status, metadata, spec), which driver call or cluster action comes next, when
to look again, and what to tell people (Events). The controller applies a plan; Ansible's check mode
shows it. Nothing here performs I/O.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Dict, List, Optional

from ansible_collections.steward.cluster.plugins.module_utils.machines.codes import Call, Retry
from ansible_collections.steward.cluster.plugins.module_utils.machines.constants import OpState, OpType, Phase, Step
from ansible_collections.steward.cluster.plugins.module_utils.machines.objects import stamp


@dataclasses.dataclass(frozen=True)
class Event:
    reason: str
    message: str
    warning: bool = False


class ClusterAction(str, enum.Enum):
    """Actions on the cluster (not the cloud) a deleting machine needs, in MCM's order."""
    DRAIN = 'drain'
    DELETE_VOLUME_ATTACHMENTS = 'delete-volume-attachments'
    DELETE_NODE = 'delete-node'
    REMOVE_FINALIZER = 'remove-finalizer'
    DELETE_MACHINE = 'delete-machine'        # delete the Machine object itself (a Node asked for it)


@dataclasses.dataclass
class MachinePlan:
    """What to do with one Machine now. Writes go in this order: metadata, spec, its Node, the call or action, status."""
    key: str
    uid: str
    metadata: Optional[Dict[str, Any]] = None        # merge patch of labels / annotations / finalizers
    spec: Optional[Dict[str, Any]] = None            # merge patch of spec (providerID)
    node: Optional[Dict[str, Any]] = None            # merge patch of the machine's Node (its node template)
    status: Optional[Dict[str, Any]] = None          # merge patch of status
    call: Optional[Call] = None                      # driver call to make (its outcome goes to machine.after_call)
    action: Optional[ClusterAction] = None           # cluster action to take (deletion steps)
    step: Optional[Step] = None                      # the deletion step the action belongs to
    retry: Retry = Retry.LONG                        # when to look at this machine again
    retry_after: Optional[float] = None              # exact delay in seconds, overrides `retry` (timeouts)
    events: List[Event] = dataclasses.field(default_factory=list)
    failed: str = ''                                 # set when this plan fails the machine: the reason (metrics)
    waiting: str = ''                                # why nothing happens (a safety gate), for status/logs

    @property
    def empty(self) -> bool:
        return not (self.metadata or self.spec or self.node or self.status or self.call or self.action)

    def calls_cloud(self, deleting: bool) -> bool:
        """Whether applying this plan may call the machine's driver: a driver call, or a deletion job that may still
        reach the VM's deletion (the applier runs a deletion's steps one after another while they succeed; from the
        Node's deletion on, the VM is gone and the rest is Kubernetes only). `deleting`: the machine has a
        deletionTimestamp."""
        if self.call is not None:
            return True
        return deleting and self.step not in AFTER_THE_VM


# Deletion steps that come after the VM's deletion (MachinePlan.calls_cloud).
AFTER_THE_VM = (Step.INITIATE_NODE_DELETION, Step.INITIATE_FINALIZER_REMOVAL)


def current_status(phase: Phase, now: float, timeout_active: bool = False) -> Dict[str, Any]:
    return {'phase': phase.value, 'timeoutActive': timeout_active, 'lastUpdateTime': stamp(now)}


def last_operation(op_type: OpType, state: OpState, description: str, now: float, error_code: str = '',
                   step: Optional[Step] = None) -> Dict[str, Any]:
    """status.lastOperation; `step` is ours (typed), `errorCode` MCM's code name. Unset keys are nulled so a
    merge patch removes what an earlier operation wrote."""
    return {'type': op_type.value, 'state': state.value, 'description': description, 'lastUpdateTime': stamp(now),
            'errorCode': error_code or None, 'step': step.key if step else None}
