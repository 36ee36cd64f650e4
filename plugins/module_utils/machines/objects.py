# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading machine objects (plain dicts as the API returns them): names, owners, phases, times.

Every reader tolerates missing fields (a fresh object has no status). Times are Unix seconds; the API's
RFC 3339 strings are parsed once here.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.kube.conditions import rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import format_micro, parse_micro
from ansible_collections.steward.cluster.plugins.module_utils.machines.constants import (
    ANNOTATION_PRIORITY,
    DEFAULT_PRIORITY,
    FINALIZER,
    Phase,
)
from ansible_collections.steward.cluster.plugins.module_utils.kube.mcm import (
    API_VERSION,
    LABEL_NODE,
)
from ansible_collections.steward.cluster.plugins.module_utils.kube.selectors import selector_matches

Obj = Mapping[str, Any]

__all__ = ['selector_matches', 'stamp', 'stamp_micro']


def stamp(now: float) -> str:
    """RFC 3339 as the API server writes metav1.Time (seconds)."""
    return rfc3339(now)


def stamp_micro(now: float) -> str:
    return format_micro(now)


def parse_time(text: Any) -> Optional[float]:
    return parse_micro(text) if isinstance(text, str) else None


def meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get('metadata') or {}


def name(obj: Obj) -> str:
    return str(meta(obj).get('name') or '')


def namespace(obj: Obj) -> str:
    return str(meta(obj).get('namespace') or '')


def uid(obj: Obj) -> str:
    return str(meta(obj).get('uid') or '')


def key(obj: Obj) -> str:
    """`namespace/name` (how logs, events and metrics name an object)."""
    return '%s/%s' % (namespace(obj), name(obj)) if namespace(obj) else name(obj)


def labels(obj: Obj) -> Mapping[str, str]:
    return meta(obj).get('labels') or {}


def annotations_of(obj: Obj) -> Mapping[str, str]:
    return meta(obj).get('annotations') or {}


def spec(obj: Obj) -> Mapping[str, Any]:
    return obj.get('spec') or {}


def status(obj: Obj) -> Mapping[str, Any]:
    return obj.get('status') or {}


def created_at(obj: Obj) -> float:
    return parse_time(meta(obj).get('creationTimestamp')) or 0.0


def deletion_time(obj: Obj) -> Optional[float]:
    return parse_time(meta(obj).get('deletionTimestamp'))


def deleting(obj: Obj) -> bool:
    return bool(meta(obj).get('deletionTimestamp'))


def has_finalizer(obj: Obj, finalizer: str = FINALIZER) -> bool:
    return finalizer in (meta(obj).get('finalizers') or [])


def generation(obj: Obj) -> int:
    return int(meta(obj).get('generation') or 0)


def resource_version(obj: Obj) -> str:
    return str(meta(obj).get('resourceVersion') or '')


def controller_ref(obj: Obj) -> Optional[Mapping[str, Any]]:
    for ref in meta(obj).get('ownerReferences') or []:
        if ref.get('controller'):
            return ref
    return None


def owner_uid(obj: Obj) -> str:
    ref = controller_ref(obj)
    return str(ref.get('uid') or '') if ref else ''


def owner_reference(owner: Obj, kind: str) -> Dict[str, Any]:
    """The controller ownerReference pointing at `owner` (MCM sets blockOwnerDeletion and controller)."""
    return {'apiVersion': API_VERSION, 'kind': kind, 'name': name(owner), 'uid': uid(owner),
            'controller': True, 'blockOwnerDeletion': True}


# --- machines ------------------------------------------------------------------------------------

def phase(machine: Obj) -> Phase:
    return Phase.of((status(machine).get('currentStatus') or {}).get('phase'))


def phase_time(machine: Obj) -> Optional[float]:
    """currentStatus.lastUpdateTime: when the machine entered its phase (the health clock)."""
    return parse_time((status(machine).get('currentStatus') or {}).get('lastUpdateTime'))


def last_operation(machine: Obj) -> Mapping[str, Any]:
    return status(machine).get('lastOperation') or {}


def provider_id(machine: Obj) -> str:
    return str(spec(machine).get('providerID') or '')


def node_name(machine: Obj) -> str:
    return str(labels(machine).get(LABEL_NODE) or '')


def owns_node(machine: Obj, node: Obj) -> bool:
    """Whether the Node is this machine's: its providerID is the machine's (or one of them is not set yet). A
    Node of the same name with another providerID is another VM's: EC2 gives a terminated instance's private IP,
    and so its node name, to a new instance, and the old Node lingers until it is deleted."""
    mine, theirs = provider_id(machine), str(spec(node).get('providerID') or '')
    return not mine or not theirs or mine == theirs


def node_of(machine: Obj, node_named: Callable[[str], Optional[Obj]]) -> Optional[Obj]:
    """The machine's Node, looked up by `node_named` (a dict's .get, a cache's, the apply Target's .node): the one
    its `node` label names, if it owns it; health is judged, drains run and deletions delete on this Node only."""
    name = node_name(machine)
    node = node_named(name) if name else None
    return node if node is not None and owns_node(machine, node) else None


def class_name(machine_or_template_spec: Mapping[str, Any]) -> str:
    return str((machine_or_template_spec.get('class') or {}).get('name') or '')


def priority(machine: Obj) -> int:
    """machinepriority.machine.sapcloud.io (default 3; an unreadable value counts as the default, as in MCM)."""
    value = annotations_of(machine).get(ANNOTATION_PRIORITY)
    try:
        return int(value) if value not in (None, '') else DEFAULT_PRIORITY
    except (TypeError, ValueError):
        return DEFAULT_PRIORITY


def int_field(obj: Mapping[str, Any], field: str, default: int = 0) -> int:
    value = obj.get(field)
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return value


def replicas(obj: Obj, default: int = 0) -> int:
    """spec.replicas (MCM: a pointer on MachineDeployment, unset = 0; MachineSet replicas default 0 too)."""
    return int_field(spec(obj), 'replicas', default)


def replacing_patch(have: Any, want: Any) -> Any:
    """The RFC 7386 merge patch that turns `have` into `want` (keys `want` lacks are nulled), so that copying a
    template field by merge patch also removes what the template dropped. {} when they are equal already."""
    if not isinstance(have, Mapping) or not isinstance(want, Mapping):
        return want
    patch: Dict[str, Any] = {}
    for key in have:
        if key not in want:
            patch[key] = None
    for key, value in want.items():
        if key not in have:
            patch[key] = value
        elif have[key] != value:
            inner = replacing_patch(have[key], value)
            patch[key] = inner if inner != {} or not isinstance(value, Mapping) else value
    return patch


def sorted_by_age(objs: Iterable[Obj]) -> List[Obj]:
    """Oldest first, then by name (the Deployment controller's tie-break)."""
    return sorted(objs, key=lambda o: (created_at(o), name(o)))
