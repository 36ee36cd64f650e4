# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes Events (core/v1) on the object an action concerned, so `kubectl describe` tells the story."""

from __future__ import annotations

import uuid
from typing import Any, Dict, Mapping

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.conditions import rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import format_micro

NORMAL = 'Normal'
WARNING = 'Warning'
COMPONENT = 'steward-controller'
MESSAGE_LIMIT = 1024


def event_body(involved: Mapping[str, Any], type_: str, reason: str, message: str, now: float,
               component: str = COMPONENT, default_namespace: str = 'default') -> Dict[str, Any]:
    """The Event object for `involved` (a full object or {apiVersion, kind, metadata})."""
    meta = involved.get('metadata') or {}
    namespace = meta.get('namespace') or default_namespace
    name = '%s.%s' % (meta.get('name', 'object'), uuid.uuid4().hex[:16])
    stamp = rfc3339(now)
    return {
        'apiVersion': 'v1', 'kind': 'Event',
        'metadata': {'name': name, 'namespace': namespace},
        'involvedObject': {'apiVersion': involved.get('apiVersion'), 'kind': involved.get('kind'),
                           'name': meta.get('name'), 'namespace': meta.get('namespace'), 'uid': meta.get('uid')},
        'type': type_, 'reason': reason, 'message': message[:MESSAGE_LIMIT],
        'source': {'component': component}, 'reportingComponent': component,
        'firstTimestamp': stamp, 'lastTimestamp': stamp, 'eventTime': format_micro(now), 'count': 1,
        'action': reason,
    }


def post_event(client: KubeClient, involved: Mapping[str, Any], type_: str, reason: str, message: str, now: float,
               default_namespace: str = 'default') -> bool:
    """Post an Event; never fails the action it reports (False when the API refused it)."""
    body = event_body(involved, type_, reason, message, now, default_namespace=default_namespace)
    try:
        client.create(api_path('v1', 'events', body['metadata']['namespace']), body)
    except KubeError:
        return False
    return True
