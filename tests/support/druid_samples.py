"""A druid user's `Etcd` manifests (druid.gardener.cloud/v1alpha1, as etcd-druid's docs write them), for the unit tests
of plugins/module_utils/druid and the `etcd` loop's integration test: one copy."""

from __future__ import annotations

import copy
from typing import Any, Dict

SAMPLE: Dict[str, Any] = {
    'apiVersion': 'druid.gardener.cloud/v1alpha1',
    'kind': 'Etcd',
    'metadata': {'name': 'etcd-main', 'namespace': 'shoot', 'uid': '9b1f2c3d-0000-4000-8000-000000000001',
                 'generation': 1},
    'spec': {
        'selector': {'matchLabels': {'app': 'etcd-statefulset', 'role': 'main'}},
        'labels': {'app': 'etcd-statefulset', 'role': 'main', 'gardener.cloud/role': 'controlplane'},
        'annotations': {'app': 'etcd-statefulset'},
        'replicas': 1,
        'storageCapacity': '10Gi',
        'volumeClaimTemplate': 'main-etcd',
        'etcd': {
            'quota': '8Gi', 'clientPort': 2379, 'serverPort': 2380, 'metrics': 'basic',
            'defragmentationSchedule': '0 */24 * * *',
            'image': 'quay.io/coreos/etcd:v3.4.26',
            'resources': {'requests': {'cpu': '100m', 'memory': '200Mi'}},
        },
        'backup': {
            'port': 8080,
            'image': 'ghcr.io/steward-cluster/steward-controller:0.1.0',
            'fullSnapshotSchedule': '0 */24 * * *',
            'deltaSnapshotPeriod': '300s',
            'deltaSnapshotMemoryLimit': '1Gi',
            'garbageCollectionPolicy': 'Exponential',
            'garbageCollectionPeriod': '43200s',
            'store': {'prefix': 'etcd-main', 'provider': 'aws', 'container': 'backups',
                      'secretRef': {'name': 'etcd-backup'}},
        },
        'sharedConfig': {'autoCompactionMode': 'periodic', 'autoCompactionRetention': '30m'},
    },
}


def sample(**spec: Any) -> Dict[str, Any]:
    """A deep copy of SAMPLE with top-level spec keys replaced (None removes a key)."""
    obj = copy.deepcopy(SAMPLE)
    for key, value in spec.items():
        if value is None:
            obj['spec'].pop(key, None)
        else:
            obj['spec'][key] = value
    return obj
