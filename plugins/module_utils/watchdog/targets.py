# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The dependent resources on the API server: find them by apiVersion + kind (API discovery, so
StatefulSets and custom resources with a scale subresource work like Deployments), read them, and write
their annotations and replicas.

Replicas are read and written through the `scale` subresource, as DWD does; every write is a merge patch
that carries the resourceVersion the decision was made on, so a concurrent change by someone else makes
the write fail with Conflict (the executor then reads again and decides again) instead of being overwritten.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Mapping, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError, NotFound
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.plan import Observation
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.prober_config import TargetRef


class Targets:
    """The targets of one namespace on one API server (thread-safe: one level's targets act in parallel)."""

    def __init__(self, client: KubeClient, namespace: str):
        self.client = client
        self.namespace = namespace
        self._plurals: Dict[Tuple[str, str], Optional[str]] = {}
        self._lock = threading.Lock()

    def plural(self, ref: TargetRef) -> Optional[str]:
        """The resource name serving `ref.kind` in `ref.api_version` (None when the API server has no such kind)."""
        key = (ref.api_version, ref.kind)
        with self._lock:
            if key in self._plurals:
                return self._plurals[key]
        base = '/api/%s' % ref.api_version if '/' not in ref.api_version else '/apis/%s' % ref.api_version
        try:
            resources = (self.client.get(base) or {}).get('resources') or []
        except NotFound:
            resources = []
        plural = next((r.get('name') for r in resources
                       if r.get('kind') == ref.kind and '/' not in (r.get('name') or '')), None)
        if plural is not None:   # an unknown kind is looked up again next time (its CRD may come)
            with self._lock:
                self._plurals[key] = plural
        return plural

    def path(self, ref: TargetRef, subresource: Optional[str] = None) -> Optional[str]:
        plural = self.plural(ref)
        if plural is None:
            return None
        return api_path(ref.api_version, plural, self.namespace, ref.name, subresource)

    def read(self, ref: TargetRef) -> Tuple[Observation, Dict[str, Any]]:
        """The observation and the object as read (({}, exists=False) when it or its kind does not exist)."""
        try:
            path = self.path(ref)
            if path is None:
                return Observation(exists=False), {}
            obj = self.client.get_or_none(path)
            if obj is None:
                return Observation(exists=False), {}
            try:
                scale = self.client.get(path + '/scale')
            except NotFound:
                return Observation(exists=True, error='%s has no scale subresource' % ref), obj
        except KubeError as exc:
            return Observation(exists=True, error=str(exc)), {}
        return observation_of(obj, scale), obj

    def observe(self, ref: TargetRef) -> Observation:
        return self.read(ref)[0]

    def annotate(self, ref: TargetRef, annotations: Mapping[str, Optional[str]], resource_version: str) -> Dict[str, Any]:
        """Merge-patch annotations (None removes one) on the resourceVersion read; raises Conflict if it moved on."""
        return self.client.merge_patch(self._path(ref), {'metadata': {'annotations': dict(annotations)}},
                                       resource_version=resource_version or None)

    def scale(self, ref: TargetRef, replicas: int, resource_version: str) -> Dict[str, Any]:
        """Set spec.replicas through the scale subresource, on the resourceVersion read."""
        return self.client.merge_patch(self._path(ref) + '/scale', {'spec': {'replicas': int(replicas)}},
                                       resource_version=resource_version or None)

    def get(self, ref: TargetRef) -> Optional[Dict[str, Any]]:
        return self.client.get_or_none(self._path(ref))

    def _path(self, ref: TargetRef) -> str:
        path = self.path(ref)
        if path is None:
            raise NotFound('%s: the API server serves no kind %s in %s' % (ref, ref.kind, ref.api_version), 404, 'NotFound')
        return path


def observation_of(obj: Mapping[str, Any], scale: Mapping[str, Any]) -> Observation:
    """An Observation from the object and its Scale (spec.replicas from the Scale; absent means 0, as in the API)."""
    meta = obj.get('metadata') or {}
    status = obj.get('status') or {}
    scale_meta = scale.get('metadata') or {}
    replicas = (scale.get('spec') or {}).get('replicas')
    return Observation(
        exists=True, replicas=int(replicas or 0), annotations=dict(meta.get('annotations') or {}),
        resource_version=str(scale_meta.get('resourceVersion') or meta.get('resourceVersion') or ''),
        status_replicas=int(status.get('replicas') or 0), ready_replicas=int(status.get('readyReplicas') or 0),
        generation=meta.get('generation'), observed_generation=status.get('observedGeneration'))
