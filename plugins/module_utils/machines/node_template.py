# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A machine's `spec.nodeTemplate` labels, annotations and taints, kept on its Node (MCM's syncNodeTemplates).

The Node gets every label, annotation and taint the template names (taints matched by key and effect), with the
template's values; everything else on the Node is left alone (kubelet's labels, other controllers' taints). To
remove what the template no longer names, and only that, the Node remembers what was last applied in MCM's
annotation `node.machine.sapcloud.io/last-applied-anno-labels-taints` (the template as JSON): a key in it that the
template dropped is deleted from the Node. A Node taken over from MCM keeps working, since the annotation is MCM's.

The template reaches the machine from its MachineSet (machineset.py copies it to every active machine, as MCM's
syncMachinesNodeTemplates), and the set's from its MachineDeployment, all without a rollout.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.machines import objects as o
from ansible_collections.steward.cluster.plugins.module_utils.machines.constants import (
    ANNOTATION_LAST_APPLIED_NODE_TEMPLATE,
)

Obj = Mapping[str, Any]


def template_of(machine: Obj) -> Dict[str, Any]:
    """The machine's node template reduced to what is synced: metadata.labels, metadata.annotations, spec.taints."""
    template = o.spec(machine).get('nodeTemplate') or {}
    meta = template.get('metadata') or {}
    out: Dict[str, Any] = {}
    labels = {str(k): str(v) for k, v in (meta.get('labels') or {}).items()}
    annotations = {str(k): str(v) for k, v in (meta.get('annotations') or {}).items()}
    if labels or annotations:
        out['metadata'] = {}
        if labels:
            out['metadata']['labels'] = labels
        if annotations:
            out['metadata']['annotations'] = annotations
    taints = [dict(t) for t in ((template.get('spec') or {}).get('taints') or []) if isinstance(t, Mapping)]
    if taints:
        out['spec'] = {'taints': taints}
    return out


def last_applied(node: Obj) -> Dict[str, Any]:
    """What was applied last (the annotation's JSON; MCM's NodeTemplateSpec reads the same). An unreadable value
    counts as nothing applied: nothing is removed on its word, and the next write replaces it."""
    text = o.annotations_of(node).get(ANNOTATION_LAST_APPLIED_NODE_TEMPLATE)
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _maps(template: Mapping[str, Any]) -> Tuple[Mapping[str, Any], Mapping[str, Any], List[Mapping[str, Any]]]:
    meta = template.get('metadata') or {}
    return (meta.get('labels') or {}, meta.get('annotations') or {},
            [t for t in ((template.get('spec') or {}).get('taints') or []) if isinstance(t, Mapping)])


def _taint_key(taint: Mapping[str, Any]) -> Tuple[str, str]:
    return str(taint.get('key') or ''), str(taint.get('effect') or '')


def _sync_map(have: Mapping[str, Any], want: Mapping[str, str], before: Mapping[str, Any]) -> Dict[str, Optional[str]]:
    """The merge patch that makes `have` carry `want` and drops what `before` applied and `want` no longer names."""
    patch: Dict[str, Optional[str]] = {}
    for key in before:
        if key not in want and key in have:
            patch[key] = None
    for key, value in want.items():
        if have.get(key) != value:
            patch[key] = value
    return patch


def _sync_taints(have: List[Mapping[str, Any]], want: List[Mapping[str, Any]],
                 before: List[Mapping[str, Any]]) -> Optional[List[Dict[str, Any]]]:
    """The Node's new taint list (None: unchanged). Taints are matched by (key, effect) as MCM does; the Node's own
    order is kept and new taints go at the end."""
    wanted = {_taint_key(t): dict(t) for t in want}
    dropped = {_taint_key(t) for t in before} - set(wanted)
    out: List[Dict[str, Any]] = []
    seen = set()
    changed = False
    for taint in have:
        key = _taint_key(taint)
        if key in dropped:
            changed = True
            continue
        if key in wanted:
            seen.add(key)
            if dict(taint) != wanted[key]:
                changed = True
            out.append(wanted[key])
        else:
            out.append(dict(taint))
    for key, taint in wanted.items():
        if key not in seen:
            out.append(taint)
            changed = True
    return out if changed else None


def node_patch(machine: Obj, node: Obj) -> Optional[Dict[str, Any]]:
    """The merge patch that puts the machine's node template on its Node, None when the Node has it already. The
    patch also records the template in the last-applied annotation (so a later removal is known), and carries the
    Node's resourceVersion: it replaces the whole taint list, so it applies only to the Node it was computed from
    (the API server answers Conflict otherwise, and the next pass computes it again)."""
    if not o.spec(machine).get('nodeTemplate') and ANNOTATION_LAST_APPLIED_NODE_TEMPLATE not in o.annotations_of(node):
        return None      # nothing to put there and nothing recorded to take off: the common case, every pass
    want = template_of(machine)
    before = last_applied(node)
    want_labels, want_annotations, want_taints = _maps(want)
    before_labels, before_annotations, before_taints = _maps(before)
    labels = _sync_map(o.labels(node), want_labels, before_labels)
    annotations = _sync_map(o.annotations_of(node), want_annotations, before_annotations)
    taints = _sync_taints(list(o.spec(node).get('taints') or []), want_taints, before_taints)
    record = json.dumps(want, sort_keys=True, separators=(',', ':')) if want else None
    if before != want or (record is None) != (ANNOTATION_LAST_APPLIED_NODE_TEMPLATE not in o.annotations_of(node)):
        annotations[ANNOTATION_LAST_APPLIED_NODE_TEMPLATE] = record
    if not (labels or annotations or taints is not None):
        return None
    patch: Dict[str, Any] = {}
    meta: Dict[str, Any] = {'resourceVersion': o.resource_version(node)} if o.resource_version(node) else {}
    if labels:
        meta['labels'] = labels
    if annotations:
        meta['annotations'] = annotations
    if meta:
        patch['metadata'] = meta
    if taints is not None:
        patch['spec'] = {'taints': taints}
    return patch
