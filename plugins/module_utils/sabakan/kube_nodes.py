# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes Nodes of a generated cluster: what to patch and what may be deleted.

The cluster's nodes already carry seed 000's labels, annotations and taints (nodes.py renders
them); here they are laid onto the Node objects that exist. Every patch keeps what is not ours:
other labels, annotations and taints stay as they are. Ours are the keys under CKE's reserved
prefixes, which are also removed when the cluster no longer wants them (a sabakan label that
went away, the `cke.cybozu.com/state` taint of a machine that is healthy again).

A Node is deleted only when all of these hold: this integration labelled it (annotation), it is
no longer in the cluster, sabakan reports its machine RETIRED, and the machine's serial is the
one the Node was labelled with. A Node of a healthy machine is never deleted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.machines import RETIRED
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.nodes import STATE_TAINT_KEY

# Keys under these prefixes are CKE's (seed 000): set from the cluster, removed when it drops them.
MANAGED_PREFIXES = ('cke.cybozu.com/', 'sabakan.cke.cybozu.com/')
# CKE itself puts these on control planes; they are left to it.
LEFT_TO_CKE = frozenset({'cke.cybozu.com/master'})
MASTER_ROLE_LABEL = 'node-role.kubernetes.io/master'
SERIAL_ANNOTATION = 'cke.cybozu.com/serial'
# Which SabakanIntegration labelled a Node (<namespace>/<name>): only that one may delete it.
INTEGRATION_ANNOTATION = 'cluster.steward.io/sabakan-integration'

Taint = Dict[str, Any]


@dataclass(frozen=True)
class NodePatch:
    """One merge patch for one Node; `resource_version` makes it fail if the Node changed meanwhile."""

    name: str
    address: str
    patch: Dict[str, Any]
    resource_version: str
    changes: List[str] = field(default_factory=list)

    def describe(self) -> str:
        return f'Node {self.name} ({self.address}): {"; ".join(self.changes)}'


@dataclass(frozen=True)
class NodeDeletion:
    name: str
    address: str
    serial: str
    reason: str

    def describe(self) -> str:
        return f'Node {self.name} ({self.address}, serial {self.serial}): {self.reason}'


# --- matching -------------------------------------------------------------------------------
def node_name(node: Mapping[str, Any]) -> str:
    return str((node.get('metadata') or {}).get('name') or '')


def internal_ips(node: Mapping[str, Any]) -> List[str]:
    return [str(a.get('address')) for a in ((node.get('status') or {}).get('addresses') or [])
            if isinstance(a, Mapping) and a.get('type') == 'InternalIP' and a.get('address')]


def node_addresses(node: Mapping[str, Any]) -> Set[str]:
    """Every name a Node answers to: its name and its InternalIPs."""
    return {node_name(node), *internal_ips(node)} - {''}


class NodeIndex:
    """Nodes by name and by InternalIP; a name match wins over an address match."""

    def __init__(self, kube_nodes: Iterable[Mapping[str, Any]]) -> None:
        self.by_name: Dict[str, Mapping[str, Any]] = {}
        self.by_ip: Dict[str, Mapping[str, Any]] = {}
        for node in kube_nodes:
            self.by_name[node_name(node)] = node
            for ip in internal_ips(node):
                self.by_ip.setdefault(ip, node)

    def match(self, cluster_node: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
        """The Node of a cluster node: named by its address, or by its hostname, or with its address as InternalIP."""
        address = cluster_node.get('address') or ''
        hostname = cluster_node.get('hostname') or ''
        return (self.by_name.get(address) or (self.by_name.get(hostname) if hostname else None)
                or self.by_ip.get(address))


def matched_nodes(cluster: Optional[Mapping[str, Any]],
                  kube_nodes: Sequence[Mapping[str, Any]]) -> List[Tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """(cluster node, Node) pairs for the cluster nodes that have a Node."""
    index = NodeIndex(kube_nodes)
    pairs = []
    for cluster_node in (cluster or {}).get('nodes') or []:
        node = index.match(cluster_node)
        if node is not None:
            pairs.append((cluster_node, node))
    return pairs


def node_taints_by_address(kube_nodes: Sequence[Mapping[str, Any]],
                           cluster: Optional[Mapping[str, Any]] = None) -> Dict[str, List[Taint]]:
    """The generator's `node_taints`: address -> the Node's taints, for every Node (by name and
    InternalIP) and for the cluster's nodes (also by hostname)."""
    taints: Dict[str, List[Taint]] = {}
    for node in kube_nodes:
        for address in node_addresses(node):
            taints.setdefault(address, list((node.get('spec') or {}).get('taints') or []))
    for cluster_node, node in matched_nodes(cluster, kube_nodes):
        taints[cluster_node['address']] = list((node.get('spec') or {}).get('taints') or [])
    return taints


# --- patches --------------------------------------------------------------------------------
def _ours(key: str) -> bool:
    return key.startswith(MANAGED_PREFIXES) and key not in LEFT_TO_CKE


def _map_patch(current: Mapping[str, Any], wanted: Mapping[str, str],
               removable: Any) -> Dict[str, Optional[str]]:
    """Merge-patch entries: wanted keys that differ, and keys of ours that are no longer wanted (None)."""
    patch: Dict[str, Optional[str]] = {k: v for k, v in wanted.items() if current.get(k) != v}
    patch.update({k: None for k in current if k not in wanted and removable(k)})
    return patch


def _same_taint(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return (a.get('key'), a.get('effect')) == (b.get('key'), b.get('effect'))


def merge_taints(current: Sequence[Mapping[str, Any]], wanted: Sequence[Mapping[str, Any]]) -> List[Taint]:
    """The Node's taints with the cluster's taints set (same key and effect: our value wins) and a
    `cke.cybozu.com/state` taint the cluster does not ask for removed; every other taint is kept."""
    result: List[Taint] = []
    for taint in current:
        want = next((w for w in wanted if _same_taint(w, taint)), None)
        if want is not None:
            kept = dict(taint)
            kept['value'] = want.get('value') or ''
            if not want.get('value'):
                kept.pop('value', None)
            result.append(kept)
        elif taint.get('key') != STATE_TAINT_KEY:
            result.append(dict(taint))
    for want in wanted:
        if not any(_same_taint(want, t) for t in result):
            fields = (('key', want.get('key')), ('value', want.get('value')), ('effect', want.get('effect')))
            result.append({k: v for k, v in fields if v})
    return result


def _taint_text(taint: Mapping[str, Any]) -> str:
    value = taint.get('value')
    return f'{taint.get("key")}{"=" + str(value) if value else ""}:{taint.get("effect")}'


def _comparable(taints: Sequence[Mapping[str, Any]]) -> List[Tuple[Any, Any, Any]]:
    return [(t.get('key'), t.get('value') or '', t.get('effect')) for t in taints]


def node_patch(node: Mapping[str, Any], cluster_node: Mapping[str, Any], integration: str) -> Optional[NodePatch]:
    """The merge patch that brings one Node in line with its cluster node, or None when it already is."""
    meta = node.get('metadata') or {}
    control_plane = bool(cluster_node.get('control_plane'))
    labels = _map_patch(meta.get('labels') or {}, cluster_node.get('labels') or {},
                        lambda k: _ours(k) or (k == MASTER_ROLE_LABEL and not control_plane))
    wanted_annotations = dict(cluster_node.get('annotations') or {})
    wanted_annotations[INTEGRATION_ANNOTATION] = integration
    annotations = _map_patch(meta.get('annotations') or {}, wanted_annotations, _ours)
    current_taints = list((node.get('spec') or {}).get('taints') or [])
    taints = merge_taints(current_taints, cluster_node.get('taints') or [])

    patch: Dict[str, Any] = {}
    changes: List[str] = []
    if labels:
        patch.setdefault('metadata', {})['labels'] = labels
        changes.append(_count_text('labels', labels))
    if annotations:
        patch.setdefault('metadata', {})['annotations'] = annotations
        changes.append(_count_text('annotations', annotations))
    if _comparable(taints) != _comparable(current_taints):
        patch['spec'] = {'taints': taints}
        before = {_taint_text(t) for t in current_taints}
        after = {_taint_text(t) for t in taints}
        changes.extend(f'taint {t} added' for t in sorted(after - before))
        changes.extend(f'taint {t} removed' for t in sorted(before - after))
    if not patch:
        return None
    return NodePatch(name=str(meta.get('name')), address=str(cluster_node.get('address')), patch=patch,
                     resource_version=str(meta.get('resourceVersion') or ''), changes=changes)


def _count_text(kind: str, patch: Mapping[str, Optional[str]]) -> str:
    added = sum(1 for v in patch.values() if v is not None)
    removed = len(patch) - added
    return f'{kind} {added} set' + (f', {removed} removed' if removed else '')


def plan_node_patches(cluster: Optional[Mapping[str, Any]], kube_nodes: Sequence[Mapping[str, Any]],
                      integration: str) -> List[NodePatch]:
    """One patch per cluster node whose Node differs; Nodes outside the cluster are not touched."""
    patches = []
    for cluster_node, node in matched_nodes(cluster, kube_nodes):
        patch = node_patch(node, cluster_node, integration)
        if patch is not None:
            patches.append(patch)
    return patches


# --- deletions ------------------------------------------------------------------------------
def _retired_by_address(machines: Iterable[Mapping[str, Any]]) -> Dict[str, Mapping[str, Any]]:
    found: Dict[str, Mapping[str, Any]] = {}
    for machine in machines:
        if ((machine.get('status') or {}).get('state')) != RETIRED:
            continue
        for address in (machine.get('spec') or {}).get('ipv4') or []:
            found.setdefault(str(address), machine)
    return found


def plan_node_deletions(cluster: Optional[Mapping[str, Any]], kube_nodes: Sequence[Mapping[str, Any]],
                        machines: Iterable[Mapping[str, Any]], integration: str) -> List[NodeDeletion]:
    """Nodes that left the cluster and whose machine sabakan reports RETIRED (see the module docstring)."""
    in_cluster = {node_name(node) for _cluster_node, node in matched_nodes(cluster, kube_nodes)}
    retired = _retired_by_address(machines)
    deletions = []
    for node in kube_nodes:
        name = node_name(node)
        annotations = (node.get('metadata') or {}).get('annotations') or {}
        if name in in_cluster or annotations.get(INTEGRATION_ANNOTATION) != integration:
            continue
        address = next((a for a in sorted(node_addresses(node)) if a in retired), None)
        if address is None:
            continue
        serial = str((retired[address].get('spec') or {}).get('serial') or '')
        if not serial or annotations.get(SERIAL_ANNOTATION) != serial:
            continue
        deletions.append(NodeDeletion(name=name, address=address, serial=serial,
                                      reason='its machine is RETIRED in sabakan and it left the cluster'))
    return deletions
