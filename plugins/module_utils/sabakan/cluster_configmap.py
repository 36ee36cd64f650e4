# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The generated cluster kept in a ConfigMap key (CKE cluster.yml text), read and written as the
cluster file is: a missing ConfigMap or key means "generate", an empty or malformed one is an
error (regenerating from scratch would replace every node)."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import ClusterConfigMapError, FileError, TemplateError
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.files import dump_yaml, parse_document
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.template import validate_cluster

ANNOTATION_TEMPLATE_HASH = 'cluster.steward.io/template-hash'
ANNOTATION_OPERATION = 'cluster.steward.io/operation'
ANNOTATION_INTEGRATION = 'cluster.steward.io/sabakan-integration'
MANAGED_BY = {'app.kubernetes.io/managed-by': 'steward-controller'}


def cluster_from_configmap(configmap: Optional[Mapping[str, Any]], key: str) -> Optional[Dict[str, Any]]:
    """The current cluster, or None when the ConfigMap or its key does not exist yet."""
    if configmap is None:
        return None
    meta = configmap.get('metadata') or {}
    where = f'ConfigMap {meta.get("namespace")}/{meta.get("name")} key {key}'
    text = (configmap.get('data') or {}).get(key)
    if text is None:
        return None
    if not text.strip():
        raise ClusterConfigMapError(where, 'required', 'is empty; delete the key to generate a new cluster from the '
                                    'template, or restore it')
    try:
        data = parse_document(text, 'cluster', where)
    except FileError as exc:
        raise exc.recast(ClusterConfigMapError) from None
    if not isinstance(data, dict):
        raise ClusterConfigMapError(where, 'type', f'expected a mapping (CKE cluster.yml), got {type(data).__name__}')
    try:
        validate_cluster(data)
    except TemplateError as exc:
        raise exc.at(where).recast(ClusterConfigMapError) from None
    return data


def configmap_write(name: str, namespace: str, key: str, cluster: Mapping[str, Any], *, template_hash: str,
                    operation: str, integration: str) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(the ConfigMap to create, the merge patch for an existing one) holding `cluster` under `key`."""
    annotations = {ANNOTATION_TEMPLATE_HASH: template_hash, ANNOTATION_OPERATION: operation,
                   ANNOTATION_INTEGRATION: integration}
    text = dump_yaml(dict(cluster))
    body = {'apiVersion': 'v1', 'kind': 'ConfigMap',
            'metadata': {'name': name, 'namespace': namespace, 'labels': dict(MANAGED_BY), 'annotations': annotations},
            'data': {key: text}}
    patch = {'metadata': {'annotations': annotations}, 'data': {key: text}}
    return body, patch
