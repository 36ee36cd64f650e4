# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The machines loop's informers: MachineClasses, Machines, MachineSets, MachineDeployments (by namespace
and name) and Nodes (core/informer.py's NodeCache, which the maintenance loop uses too), fed by full lists, watch
events and our own writes.

An object replaces the cached one only if its resourceVersion is not older (core/informer.py's rule):
a list that started before our patch must not undo it, or the next pass would act on the old state again.
And a deletion is never undone: a copy of the same object without its deletionTimestamp is stale, so a
machine is never deleted (and replaced) twice.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from steward_controller.core.informer import NodeCache, older, resource_version, slim

KINDS = ('MachineClass', 'Machine', 'MachineSet', 'MachineDeployment')
Key = Tuple[str, str]


def _deleting(obj: Mapping[str, Any]) -> bool:
    return bool((obj.get('metadata') or {}).get('deletionTimestamp'))


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get('metadata') or {}).get('uid') or '')


class ObjectCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: Dict[Key, Dict[str, Any]] = {}
        self._snapshot: Optional[List[Dict[str, Any]]] = None

    @staticmethod
    def key(obj: Mapping[str, Any]) -> Key:
        md = obj.get('metadata') or {}
        return (str(md.get('namespace') or ''), str(md.get('name') or ''))

    def put(self, obj: Dict[str, Any]) -> bool:
        key = self.key(obj)
        if not key[1]:
            return False
        with self._lock:
            cached = self._objects.get(key)
            if cached is not None and older(resource_version(obj), resource_version(cached)):
                return False
            if cached is not None and _deleting(cached) and not _deleting(obj) and _uid(cached) == _uid(obj):
                return False     # a deletion is never undone: a copy without it is stale (whatever its version says)
            self._objects[key] = obj
            self._snapshot = None
            return True

    def remove(self, namespace: str, name: str) -> None:
        with self._lock:
            if self._objects.pop((namespace, name), None) is not None:
                self._snapshot = None

    def replace(self, objs: Iterable[Dict[str, Any]], namespaces: Optional[Set[str]] = None, list_version: str = '') -> None:
        """A full list (of all namespaces, or of `namespaces`): newer objects win, objects the list no longer has
        are dropped unless they arrived after it was taken."""
        listed: Set[Key] = set()
        for obj in objs:
            self.put(obj)
            listed.add(self.key(obj))
        with self._lock:
            for key in list(self._objects):
                if key in listed or (namespaces is not None and key[0] not in namespaces):
                    continue
                if list_version and older(list_version, resource_version(self._objects[key])):
                    continue
                del self._objects[key]
                self._snapshot = None

    def get(self, namespace: str, name: str) -> Optional[Dict[str, Any]]:
        with self._lock:
            return self._objects.get((namespace, name))

    def snapshot(self) -> List[Dict[str, Any]]:
        with self._lock:
            if self._snapshot is None:
                self._snapshot = list(self._objects.values())
            return self._snapshot

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)


class Caches:
    def __init__(self) -> None:
        self.objects = {kind: ObjectCache() for kind in KINDS}
        self.nodes = NodeCache()

    def put(self, kind: str, obj: Dict[str, Any]) -> None:
        if kind == 'Node':
            self.nodes.put(slim(obj))
        else:
            self.objects[kind].put(obj)

    def remove(self, kind: str, namespace: str, name: str) -> None:
        if kind == 'Node':
            self.nodes.remove(name)
        else:
            self.objects[kind].remove(namespace, name)

    def get(self, kind: str, namespace: str, name: str) -> Optional[Dict[str, Any]]:
        return self.objects[kind].get(namespace, name)

    def all(self, kind: str) -> List[Dict[str, Any]]:
        return self.objects[kind].snapshot()

    def node_map(self) -> Dict[str, Any]:
        return {(n.get('metadata') or {}).get('name'): n for n in self.nodes.snapshot()}
