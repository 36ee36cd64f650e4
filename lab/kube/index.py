"""The API emulator's objects by resource, so that a list costs what the listed resource holds (kube_emulator.py).

kmock 0.8 answers every list and watch by checking each stored object of every resource against the request
(`KubernetesEmulator.__get_objs`), and finds which resources it serves by walking all stored objects again
(`_get_resources`). The lab stores thousands of objects of other kinds (Events above all, one or more per machine
action, and Leases, Nodes), so an empty `pods?fieldSelector=spec.nodeName=...` list, which every machine deletion
sends twice (pods to drain, VolumeAttachments), took 20 ms at 7,000 objects, and grew with every Event. A real API
server lists one resource's keys. `IndexedObjects` is kmock's object array plus the keys of each resource in
the array's own order (first appearance; a hard delete and re-create moves a key to the end, as in the array's
dict), kept by the array's own writes; `objects_for` picks the same objects in the same order as kmock's scan.
tests/integration/test_lab_kube_api.py compares whole answers with the index and with kmock's scan.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from kmock._internal import k8s_views  # private module: kmock is pinned (0.8)


class IndexedObjects(k8s_views.ObjectsArray):
    """kmock's ObjectsArray that also keeps, per resource, its object keys (an insertion-ordered dict)."""

    by_resource: Dict[Any, Dict[Any, None]]

    def __init__(self) -> None:
        super().__init__()
        object.__setattr__(self, 'by_resource', {})     # the array is a frozen attrs class

    @staticmethod
    def _stored(key: Any) -> Optional[tuple]:
        """The array's own key for an object key (it parses the resource part), None for a version key."""
        if not k8s_views._is_object_key(key):  # pylint: disable=protected-access
            return None
        return (k8s_views._parse_resource(key[0]), key[1], key[2])  # pylint: disable=protected-access

    def __setitem__(self, key: Any, value: Any, /) -> None:
        super().__setitem__(key, value)
        stored = self._stored(key)
        if stored is not None:
            self.by_resource.setdefault(stored[0], {})[stored] = None

    def __delitem__(self, key: Any, /) -> None:
        super().__delitem__(key)
        stored = self._stored(key)
        if stored is not None:
            self.by_resource.get(stored[0], {}).pop(stored, None)

    def clear(self) -> None:
        super().clear()
        self.by_resource.clear()

    def resources(self) -> List[Any]:
        """The resources with stored keys (deleted objects' keys stay, as in the array)."""
        return [resource for resource, keys in self.by_resource.items() if keys]


def objects_for(objects: IndexedObjects, resource: Any, namespace: Optional[str], name: Optional[str],
                strict: bool) -> List[Any]:
    """kmock's `__get_objs` over one resource's keys: namespace equal (strict) or any when not asked, name equal
    when asked."""
    out = []
    stored = objects._objects  # pylint: disable=protected-access
    for key in list(objects.by_resource.get(resource, ())):
        _res, ns, obj_name = key
        namespace_ok = ns == namespace if strict else (namespace is None or ns == namespace)
        if namespace_ok and (name is None or obj_name == name):
            out.append(stored[key])
    return out
