# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""machine-controller-manager's objects as the Kubernetes API serves them: group, version, kinds, plurals, the
Machine's `node` label, the kubelet-version label a MachineClass names, and MCM's DeploymentComplete reading of a
MachineDeployment's status.

Their home is here, below the areas, because two areas of one floor use them and may not import each other: the
machines area (machines/constants.py re-exports the names, machines/waiting.py the reading) and the Kubernetes
upgrade's cloud pools (provisioning/upgrade/pools.py)."""

from __future__ import annotations

from typing import Any, Dict, Mapping

GROUP = 'machine.sapcloud.io'
VERSION = 'v1alpha1'
API_VERSION = GROUP + '/' + VERSION

KIND_CLASS = 'MachineClass'
KIND_MACHINE = 'Machine'
KIND_SET = 'MachineSet'
KIND_DEPLOYMENT = 'MachineDeployment'
PLURALS = {KIND_CLASS: 'machineclasses', KIND_MACHINE: 'machines', KIND_SET: 'machinesets',
           KIND_DEPLOYMENT: 'machinedeployments'}

LABEL_NODE = 'node'                                   # Machine label: the Node backing the machine
# The kubelet a MachineClass names (a label on the class; for AWS also a cloud tag), written by the Kubernetes
# upgrade (provisioning/upgrade/pools.py); on a sabakan claim, the kubelet its last in-place update applied.
KUBELET_VERSION_LABEL = 'machine.steward.io/kubelet-version'


def _count(obj: Mapping[str, Any], field: str) -> int:
    value = obj.get(field)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def readiness(md: Mapping[str, Any]) -> Dict[str, Any]:
    """A MachineDeployment's rollout as MCM's DeploymentComplete reads it: the controller has seen this generation,
    every machine is updated and available, no old one is left (`ready`); with the counts, `paused`, the Frozen
    condition and whether the progress deadline passed."""
    spec, status = md.get('spec') or {}, md.get('status') or {}
    desired = _count(spec, 'replicas')
    seen = _count(status, 'observedGeneration') >= _count(md.get('metadata') or {}, 'generation')
    ready = (seen and _count(status, 'updatedReplicas') == desired and _count(status, 'replicas') == desired
             and _count(status, 'availableReplicas') == desired)
    frozen = next((c for c in status.get('conditions') or [] if c.get('type') == 'Frozen' and c.get('status') == 'True'), None)
    deadline = next((c for c in status.get('conditions') or [] if c.get('reason') == 'ProgressDeadlineExceeded'), None)
    return {'ready': ready, 'desired': desired, 'replicas': _count(status, 'replicas'),
            'updated': _count(status, 'updatedReplicas'), 'available': _count(status, 'availableReplicas'),
            'observed': seen, 'paused': bool(spec.get('paused')), 'frozen': dict(frozen) if frozen else None,
            'progress_deadline_exceeded': deadline is not None}
