# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Names users and tools match on, exactly as machine-controller-manager spells them, plus ours.

MCM's keys (finalizer, labels, annotations, phases, operation types and states, step texts) are kept
verbatim so kubectl output, dashboards and scripts written for MCM keep working. Keys of our own live
under `machine.steward.io/`.
"""

from __future__ import annotations

import enum

# MCM's API names (group, kinds, plurals, the node label) are in kube/mcm.py: the upgrade's cloud pools read them too.

FINALIZER = 'machine.sapcloud.io/operator'

# Machine labels
LABEL_FORCE_DELETION = 'force-deletion'               # "True": no drain
LABEL_TEMPLATE_HASH = 'machine-template-hash'         # MachineSet and Machine: which template revision
LABEL_FREEZE = 'freeze'                               # MachineSet / MachineDeployment frozen by overshoot

# Machine annotations
ANNOTATION_PRIORITY = 'machinepriority.machine.sapcloud.io'            # lower goes first on scale-down (default 3)
ANNOTATION_MARKED_FOR_DELETION = 'machine.sapcloud.io/marked-for-deletion-time'
PRIORITY_MARKED = '1'                                 # the priority a scaler (the cluster-autoscaler) marks its choice with
DEFAULT_PRIORITY = 3

# MachineSet / MachineDeployment annotations (the Deployment controller's keys)
ANNOTATION_REVISION = 'deployment.kubernetes.io/revision'
ANNOTATION_DESIRED_REPLICAS = 'deployment.kubernetes.io/desired-replicas'
ANNOTATION_MAX_REPLICAS = 'deployment.kubernetes.io/max-replicas'
# When a scaler (the cluster-autoscaler) last changed the deployment's replicas; copied to its new set. Machines
# marked with priority 1 at or before it are deleted even when the set's replica count already matches.
ANNOTATION_SCALER_CHANGE_TIME = 'machine.sapcloud.io/last-deployment-replica-change-by-scaler-time'
ANNOTATION_UNFREEZE = 'safety.machine.sapcloud.io/unfreeze'            # an operator lifts an overshoot freeze

# Node annotations and taints
ANNOTATION_TRIGGER_DELETION = 'node.machine.sapcloud.io/trigger-deletion-by-mcm'
ANNOTATION_LAST_APPLIED_NODE_TEMPLATE = 'node.machine.sapcloud.io/last-applied-anno-labels-taints'
TAINT_CRITICAL_COMPONENTS_NOT_READY = 'node.gardener.cloud/critical-components-not-ready'

# dependency-watchdog marks the targets it scaled down; while any carries it, machines are not replaced.
ANNOTATION_WATCHDOG_MELTDOWN = 'dependency-watchdog.gardener.cloud/meltdown-protection-active'

# MCM's in-place update (MachineDeployment strategy.type InPlaceUpdate; MCM's pkg/apis/machine/v1alpha1/constants.go)
STRATEGY_IN_PLACE = 'InPlaceUpdate'
ORCHESTRATION_AUTO = 'Auto'                           # the controller selects nodes, maxUnavailable at a time
ORCHESTRATION_MANUAL = 'Manual'                       # the operator selects nodes (LABEL_SELECTED_FOR_UPDATE)
LABEL_CANDIDATE_FOR_UPDATE = 'node.machine.sapcloud.io/candidate-for-update'    # Node: runs the old template
LABEL_SELECTED_FOR_UPDATE = 'node.machine.sapcloud.io/selected-for-update'      # Node: update it now
LABEL_UPDATE_RESULT = 'node.machine.sapcloud.io/update-result'                  # Node (and Machine): the outcome
UPDATE_SUCCESSFUL = 'successful'
UPDATE_FAILED = 'failed'
ANNOTATION_UPDATE_FAILED_REASON = 'node.machine.sapcloud.io/update-failed-reason'
LABEL_SCALE_UP_DISABLED = 'node.machine.sapcloud.io/scale-up-disabled'           # MachineSet: old set, no creation
NODE_CONDITION_IN_PLACE = 'InPlaceUpdate'             # Node condition; reasons below, in MCM's order
REASON_CANDIDATE = 'CandidateForUpdate'
REASON_SELECTED = 'SelectedForUpdate'
REASON_DRAIN_SUCCESSFUL = 'DrainSuccessful'
REASON_READY_FOR_UPDATE = 'ReadyForUpdate'
REASON_UPDATE_SUCCESSFUL = 'UpdateSuccessful'
REASON_UPDATE_FAILED = 'UpdateFailed'

# Ours
OWNER_TAG = 'machine.steward.io/owner-uid'            # cloud tag: the Machine's UID (positive evidence of ownership)
CLASS_TAG = 'machine.steward.io/class-uid'            # cloud tag: the MachineClass's UID (which API server made it)
SABAKAN_SERIAL_LABEL = 'machine.steward.io/sabakan-serial'
APPLIED_CLASS_ANNOTATION = 'machine.steward.io/applied-class'      # sabakan claim: the class UpdateMachine applied
SABAKAN_ADDRESS_ANNOTATION = 'machine.steward.io/sabakan-address'
SABAKAN_CLAIM_PREFIX = 'sabakan-claim-'

# Node conditions
NODE_READY = 'Ready'
NODE_TERMINATING = 'Terminating'                      # set True on a Node whose machine is being drained (MCM)
TERMINATING_UNHEALTHY = 'Unhealthy'                   # its reason when the machine had Failed
TERMINATING_SCALE_DOWN = 'ScaleDown'                  # its reason otherwise
READONLY_FILESYSTEM = 'ReadonlyFilesystem'
DEFAULT_NODE_CONDITIONS = ('KernelDeadlock', 'ReadonlyFilesystem', 'DiskPressure', 'NetworkUnavailable')


class Phase(str, enum.Enum):
    """status.currentStatus.phase ('' while the VM is being created)."""
    CREATING = ''
    PENDING = 'Pending'
    AVAILABLE = 'Available'
    RUNNING = 'Running'
    UNKNOWN = 'Unknown'
    FAILED = 'Failed'
    CRASH_LOOP_BACK_OFF = 'CrashLoopBackOff'
    TERMINATING = 'Terminating'
    IN_PLACE_UPDATING = 'InPlaceUpdating'                # MCM: drained, its driver updating it where it stands
    IN_PLACE_UPDATE_FAILED = 'InPlaceUpdateFailed'       # MCM: the update failed; left for the operator

    @classmethod
    def of(cls, value: object) -> 'Phase':
        try:
            return cls(value or '')
        except ValueError:
            return cls.CREATING


# Scale-down precedence of phases: lower goes first (MCM's ActiveMachines order).
PHASE_DELETE_RANK = {Phase.TERMINATING: 0, Phase.FAILED: 1, Phase.CRASH_LOOP_BACK_OFF: 2, Phase.UNKNOWN: 3,
                     Phase.PENDING: 4, Phase.AVAILABLE: 5, Phase.RUNNING: 6, Phase.CREATING: 4}


class OpType(str, enum.Enum):
    """status.lastOperation.type."""
    CREATE = 'Create'
    UPDATE = 'Update'
    HEALTH_CHECK = 'HealthCheck'
    DELETE = 'Delete'
    IN_PLACE_UPDATE = 'InPlaceUpdate'


class OpState(str, enum.Enum):
    """status.lastOperation.state."""
    PROCESSING = 'Processing'
    SUCCESSFUL = 'Successful'
    FAILED = 'Failed'


class Step(str, enum.Enum):
    """Where a machine's deletion is (status.lastOperation.step, ours). MCM keeps this only inside the free-text
    description and finds it again with strings.Contains; the value here is typed and the description is for people.
    The values are MCM's description texts, so the two always agree."""
    GET_VM_STATUS = 'Set machine status to termination. Now, getting VM Status'
    INITIATE_DRAIN = 'Initiate node drain'
    DELETE_VOLUME_ATTACHMENTS = 'Delete Volume Attachments'
    INITIATE_VM_DELETION = 'Initiate VM deletion'
    INITIATE_NODE_DELETION = 'Initiate node object deletion'
    INITIATE_FINALIZER_REMOVAL = 'Initiate machine object finalizer removal'
    # creation-side steps (also typed)
    CREATE_VM = 'Creating machine on cloud provider'
    INSTANCE_INITIALIZATION = 'Initialize VM Instance'

    @property
    def key(self) -> str:
        """The short, stable word stored in status (`InitiateDrain`)."""
        return STEP_KEYS[self]

    @classmethod
    def from_key(cls, key: object) -> 'Step | None':
        return STEP_BY_KEY.get(str(key or ''))


STEP_KEYS = {
    Step.GET_VM_STATUS: 'GetVMStatus', Step.INITIATE_DRAIN: 'InitiateDrain',
    Step.DELETE_VOLUME_ATTACHMENTS: 'DelVolumesAttachments', Step.INITIATE_VM_DELETION: 'InitiateVMDeletion',
    Step.INITIATE_NODE_DELETION: 'InitiateNodeDeletion', Step.INITIATE_FINALIZER_REMOVAL: 'InitiateFinalizerRemoval',
    Step.CREATE_VM: 'CreateVM', Step.INSTANCE_INITIALIZATION: 'InstanceInitialization',
}
STEP_BY_KEY = {v: k for k, v in STEP_KEYS.items()}

# Template fields that change machines in place instead of rolling them (MCM): the deployment copies them to its
# new set's template, the set to its active machines (MCM's syncMachinesNodeTemplates / syncMachinesConfig), and
# the machine's node template reaches its Node (node_template.py).
IN_PLACE_FIELDS = ('nodeTemplate', 'drainTimeout', 'healthTimeout', 'creationTimeout', 'maxEvictRetries',
                   'nodeConditions', 'disableHealthTimeout')

# Conditions
COND_AVAILABLE = 'Available'
COND_PROGRESSING = 'Progressing'
COND_FROZEN = 'Frozen'                       # replacement or scale-up stopped by a safety rule (reason names it)

# Reasons of the Frozen condition (MCM's OverShootingReplicaCount, then ours)
FREEZE_OVERSHOOT = 'OverShootingReplicaCount'
FREEZE_FLEET = 'FleetFreeze'
FREEZE_API = 'APIServerUnreachable'
FREEZE_WATCHDOG = 'DependencyWatchdogMeltdownProtection'
FREEZE_MISSING = 'CloudInventorySuspect'
