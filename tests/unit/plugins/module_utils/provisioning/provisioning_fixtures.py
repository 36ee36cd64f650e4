"""Builders shared by the provisioning unit tests: a cluster, nodes, one authority per session (key generation
is the slow part), a fixed clock and an in-memory node filesystem."""

from __future__ import annotations

import datetime
from typing import Dict, Optional

from ansible_collections.steward.cluster.plugins.module_utils.provisioning.certs import new_authority
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.spec import parse_cluster, parse_node

NOW = datetime.datetime(2026, 3, 1, 12, 0, tzinfo=datetime.timezone.utc)
CONTROL_PLANE = [{'name': 'cp1', 'address': '10.0.0.1'}, {'name': 'cp2', 'address': '10.0.0.2'},
                 {'name': 'cp10', 'address': '10.0.0.10'}]
_AUTHORITY = {}


def cluster(**overrides):
    params = {'control_plane': [dict(m) for m in CONTROL_PLANE]}
    params.update(overrides)
    return parse_cluster(params)


def node(spec, name='cp1', role='control-plane', **overrides):
    address = {'cp1': '10.0.0.1', 'cp2': '10.0.0.2', 'cp10': '10.0.0.10'}.get(name, '10.0.1.1')
    params = {'node_name': name, 'address': address, 'role': role}
    params.update(overrides)
    return parse_node(params, spec)


def authority(key='default'):
    if key not in _AUTHORITY:
        _AUTHORITY[key] = new_authority('ecdsa-p256', NOW, 3650)
    return _AUTHORITY[key]


class MemoryRoot:
    """A node's files in a dict, as plan_node_files reads them."""

    def __init__(self, files: Optional[Dict[str, bytes]] = None):
        self.files = dict(files or {})

    def read(self, path: str) -> Optional[bytes]:
        return self.files.get(path)

    def load(self, node_files) -> 'MemoryRoot':
        self.files.update({p: f.content for p, f in node_files.files.items()})
        return self
