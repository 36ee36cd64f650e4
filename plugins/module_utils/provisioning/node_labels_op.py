# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Applying an owned-label plan to a Node (labels.py decides): one merge patch with the resourceVersion
precondition, retried on a conflict by re-reading and re-planning, so a concurrent writer's labels are never
overwritten by a stale view. Used by the node_labels module and the provisioning API."""

from __future__ import annotations

from typing import Any, Dict, Mapping

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import Conflict, NotFound
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import ProvisioningError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.labels import OWNED_ANNOTATION, plan_labels
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.spec import labels_of

ATTEMPTS = 5


class NodeNotFound(ProvisioningError):
    """The Node does not exist (yet): a kubelet registers it when it first starts."""


def ensure_labels(client: KubeClient, name: str, labels: Mapping[str, Any], check_mode: bool,
                  field: str = 'labels') -> Dict[str, Any]:
    desired = dict(labels_of(labels, field))
    path = api_path('v1', 'nodes', name=name)
    for attempt in range(ATTEMPTS):
        try:
            node = client.get(path)
        except NotFound:
            raise NodeNotFound('Node %s does not exist' % name, name) from None
        plan = plan_labels(node, desired)
        result = {'changed': plan.changed, 'set': plan.set, 'removed': plan.remove, 'owned': plan.owned,
                  'foreign_kept': plan.foreign_kept, 'labels': plan.after,
                  'diff': {'before': {'labels': plan.before, 'owned': plan.owned_before},
                           'after': {'labels': plan.after, 'owned': plan.owned}},
                  'msg': '; '.join(plan.lines()) or ('labels of %s already as desired' % name)}
        if not plan.changed or check_mode:
            return result
        try:
            client.merge_patch(path, plan.patch(), resource_version=(node.get('metadata') or {}).get('resourceVersion'))
            return result
        except Conflict:
            if attempt == ATTEMPTS - 1:
                raise ProvisioningError('Node %s kept changing under us (%d conflicts); try again' % (name, ATTEMPTS),
                                        name) from None
    raise AssertionError('unreachable')


__all__ = ['ensure_labels', 'NodeNotFound', 'OWNED_ANNOTATION']
