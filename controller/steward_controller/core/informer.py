# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node informer cache the loops share (maintenance, machines): Node objects by name, fed by the periodic
list, by watch events and by the answers to our own patches.

It never goes back in time: an object replaces the cached one only if its resourceVersion is not older (a list
that started before our patch must not undo it in the cache, or the next reconcile would act on the old state
again, e.g. notify twice). `slim` drops what no loop reads (managedFields, status.images) before an object is
cached: at 5,000 Nodes that is most of the memory. With `index_label` the cache also keeps the nodes by that label's
value as they come and go (`labelled`), so a question such as "which nodes are in-maintenance" (maxMaintenance,
asked for every node checked) needs no walk over every node.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Iterable, List, Mapping, Optional, Set

Node = Dict[str, Any]


def slim(node: Mapping[str, Any]) -> Dict[str, Any]:
    """The Node without managedFields and status.images (shallow copies; the rest is shared, never mutated)."""
    out = dict(node)
    meta = out.get('metadata')
    if isinstance(meta, dict) and 'managedFields' in meta:
        out['metadata'] = {k: v for k, v in meta.items() if k != 'managedFields'}
    status = out.get('status')
    if isinstance(status, dict) and 'images' in status:
        out['status'] = {k: v for k, v in status.items() if k != 'images'}
    return out


def resource_version(node: Node) -> str:
    return str((node.get('metadata') or {}).get('resourceVersion') or '')


def older(candidate: str, cached: str) -> bool:
    """True if `candidate` is known to be older. resourceVersions are opaque by contract but are etcd
    revisions (integers) on every real server; anything else is taken as newer (arrival order)."""
    if candidate.isdigit() and cached.isdigit():
        return int(candidate) < int(cached)
    return False


def _label(node: Node, key: str) -> str:
    return ((node.get('metadata') or {}).get('labels') or {}).get(key) or ''


class NodeCache:
    def __init__(self, index_label: str = '') -> None:
        self._lock = threading.Lock()
        self._nodes: Dict[str, Node] = {}
        self._snapshot: Optional[List[Node]] = None
        self._index_label = index_label
        self._by_value: Dict[str, Dict[str, Node]] = {}

    def _index(self, name: str, old: Optional[Node], new: Optional[Node]) -> None:
        """Move `name` in the label index from the old object's value to the new one's (under the lock)."""
        if not self._index_label:
            return
        if old is not None:
            self._by_value.get(_label(old, self._index_label), {}).pop(name, None)
        if new is not None:
            self._by_value.setdefault(_label(new, self._index_label), {})[name] = new

    def put(self, node: Node) -> bool:
        """Store the object unless the cached one is newer; True if stored."""
        name = (node.get('metadata') or {}).get('name')
        if not name:
            return False
        with self._lock:
            cached = self._nodes.get(name)
            if cached is not None and older(resource_version(node), resource_version(cached)):
                return False
            self._nodes[name] = node
            self._index(name, cached, node)
            self._snapshot = None
            return True

    def remove(self, name: str) -> None:
        with self._lock:
            old = self._nodes.pop(name, None)
            if old is not None:
                self._index(name, old, None)
                self._snapshot = None

    def replace(self, nodes: Iterable[Node], list_version: str = '') -> List[str]:
        """A full list: store each object (newer ones win) and forget nodes the list no longer has, except
        those that arrived after the list was taken (resourceVersion above the list's). Returns removed names."""
        listed: Set[str] = set()
        for node in nodes:
            self.put(node)
            listed.add((node.get('metadata') or {}).get('name') or '')
        removed = []
        with self._lock:
            for name in list(self._nodes):
                if name in listed:
                    continue
                if list_version and older(list_version, resource_version(self._nodes[name])):
                    continue   # created after the list was taken
                self._index(name, self._nodes.pop(name), None)
                removed.append(name)
            if removed:
                self._snapshot = None
        return removed

    def get(self, name: str) -> Optional[Node]:
        with self._lock:
            return self._nodes.get(name)

    def names(self) -> List[str]:
        with self._lock:
            return sorted(self._nodes)

    def snapshot(self) -> List[Node]:
        """Every node; the same list object until something changes (the engine copies what it keeps)."""
        with self._lock:
            if self._snapshot is None:
                self._snapshot = list(self._nodes.values())
            return self._snapshot

    def labelled(self, value: str) -> List[Node]:
        """The cached nodes whose `index_label` has `value` (needs `index_label`)."""
        if not self._index_label:
            raise ValueError('NodeCache.labelled needs the cache built with index_label')
        with self._lock:
            return list(self._by_value.get(value, {}).values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._nodes)
