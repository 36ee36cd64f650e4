# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Leases for the stagger check and the slackThread notifier, behind a compare-and-swap store.

Both plugins use coordination.k8s.io/v1 Leases the way upstream does (holderIdentity, renewTime,
leaseDurationSeconds as MicroTime strings), but every write carries the resourceVersion that was read,
so two reconcilers that both saw a free lease cannot both take it: the slower one gets `LeaseConflict`.

* `KubeLeaseStore` talks to the API server through `KubeClient` (create, merge patch with
  resourceVersion; the same semantics as `kube/lease.py`'s LeaseLock);
* `MemoryLeaseStore` keeps them in a dict under a lock (tests, benchmarks, dry runs).
"""

from __future__ import annotations

import copy
import threading
from typing import Any, Dict, Mapping, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import AlreadyExists, Conflict, NotFound
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import MaintenanceError

LEASE_API = 'coordination.k8s.io/v1'


class LeaseConflict(MaintenanceError):
    """Someone else created or changed the lease since it was read."""


class LeaseStore:
    """The interface: leases as plain dicts (`metadata.resourceVersion`, `spec`)."""

    def get(self, namespace: str, name: str) -> Optional[Dict[str, Any]]:
        raise NotImplementedError

    def create(self, namespace: str, name: str, spec: Mapping[str, Any]) -> Dict[str, Any]:
        """Raises LeaseConflict if it exists."""
        raise NotImplementedError

    def update(self, namespace: str, name: str, spec: Mapping[str, Any], resource_version: str) -> Dict[str, Any]:
        """Replace the given spec fields if the lease is still at `resource_version`; else LeaseConflict."""
        raise NotImplementedError


class KubeLeaseStore(LeaseStore):
    def __init__(self, client: KubeClient):
        self.client = client

    def get(self, namespace: str, name: str) -> Optional[Dict[str, Any]]:
        return self.client.get_or_none(api_path(LEASE_API, 'leases', namespace, name))

    def create(self, namespace: str, name: str, spec: Mapping[str, Any]) -> Dict[str, Any]:
        body = {'apiVersion': LEASE_API, 'kind': 'Lease', 'metadata': {'name': name, 'namespace': namespace}, 'spec': dict(spec)}
        try:
            return self.client.create(api_path(LEASE_API, 'leases', namespace), body)
        except AlreadyExists:
            raise LeaseConflict('lease %s/%s was created by someone else' % (namespace, name)) from None

    def update(self, namespace: str, name: str, spec: Mapping[str, Any], resource_version: str) -> Dict[str, Any]:
        try:
            return self.client.merge_patch(api_path(LEASE_API, 'leases', namespace, name), {'spec': dict(spec)},
                                           resource_version=resource_version)
        except (Conflict, NotFound):
            raise LeaseConflict('lease %s/%s changed since it was read' % (namespace, name)) from None


class MemoryLeaseStore(LeaseStore):
    def __init__(self) -> None:
        self.leases: Dict[Tuple[str, str], Dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.version = 0

    def get(self, namespace: str, name: str) -> Optional[Dict[str, Any]]:
        with self.lock:
            lease = self.leases.get((namespace, name))
            return copy.deepcopy(lease) if lease else None

    def create(self, namespace: str, name: str, spec: Mapping[str, Any]) -> Dict[str, Any]:
        with self.lock:
            if (namespace, name) in self.leases:
                raise LeaseConflict('lease %s/%s was created by someone else' % (namespace, name))
            self.version += 1
            lease = {'metadata': {'name': name, 'namespace': namespace, 'resourceVersion': str(self.version)},
                     'spec': dict(spec)}
            self.leases[(namespace, name)] = lease
            return copy.deepcopy(lease)

    def update(self, namespace: str, name: str, spec: Mapping[str, Any], resource_version: str) -> Dict[str, Any]:
        with self.lock:
            lease = self.leases.get((namespace, name))
            if lease is None or lease['metadata']['resourceVersion'] != resource_version:
                raise LeaseConflict('lease %s/%s changed since it was read' % (namespace, name))
            self.version += 1
            lease['spec'].update(spec)
            lease['metadata']['resourceVersion'] = str(self.version)
            return copy.deepcopy(lease)
