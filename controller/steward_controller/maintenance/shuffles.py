# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shuffle metrics' I/O: the pods on a node and their owners, read from the API; the rules (which owners
count, 1/replicas, the owner label's spelling) are the engine's (module_utils/maintenance/shuffles.py)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.shuffles import OWNER_KINDS, Lookup


def kube_lookup(client: KubeClient) -> Lookup:
    """Owners read from the API, each at most once per call of the returned function's user."""
    seen: Dict[tuple, Optional[Dict[str, Any]]] = {}

    def lookup(kind: str, namespace: str, name: str) -> Optional[Dict[str, Any]]:
        key = (kind, namespace, name)
        if key not in seen:
            api_version, plural = OWNER_KINDS[kind]
            seen[key] = client.get_or_none(api_path(api_version, plural, namespace, name))
        return seen[key]
    return lookup


def pods_on(client: KubeClient, node_name: str) -> List[Dict[str, Any]]:
    """The pods bound to a node (the server's field selector, checked again here)."""
    pods = client.list(api_path('v1', 'pods'), field_selector='spec.nodeName=%s' % node_name)
    return [p for p in pods if (p.get('spec') or {}).get('nodeName') == node_name]
