# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every handler shares: the API client, settings, metrics, health, and how to report."""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any, Callable, Dict, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError, NotFound
from ansible_collections.steward.cluster.plugins.module_utils.kube.events import NORMAL, WARNING, post_event

from steward_controller import API_VERSION
from steward_controller.core.metrics import Health, Metrics
from steward_controller.core.settings import Settings

log = logging.getLogger('steward.controller')


def resource_label(body: Mapping[str, Any]) -> str:
    meta = body.get('metadata') or {}
    return '%s/%s' % (meta.get('namespace'), meta.get('name')) if meta.get('namespace') else str(meta.get('name'))


@dataclasses.dataclass
class Runtime:
    settings: Settings
    client: KubeClient
    metrics: Metrics
    health: Health
    clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        # /metrics shows the same loop heartbeats /healthz judges (steward_controller_heartbeat_age_seconds)
        self.metrics.watch(self.health)

    def path(self, plural: str, namespace: Optional[str] = None, name: Optional[str] = None,
             subresource: Optional[str] = None) -> str:
        """Path of one of our own custom resources."""
        return api_path(API_VERSION, plural, namespace, name, subresource)

    def report(self, body: Mapping[str, Any], reason: str, message: str, warning: bool = False,
               kind: str = '', outcome: str = '') -> None:
        """Every action is a log line, an Event on the object concerned and a counter."""
        level = logging.WARNING if warning else logging.INFO
        log.log(level, message, extra={'object': resource_label(body), 'kind': body.get('kind'), 'reason': reason})
        posted = post_event(self.client, body, WARNING if warning else NORMAL, reason, message, self.clock(),
                            default_namespace=self.settings.namespace)
        if posted:
            self.health.api_ok()
        self.metrics.actions.labels(kind or body.get('kind') or '', reason, outcome or ('warning' if warning else 'ok')).inc()

    def patch_status(self, plural: str, body: Mapping[str, Any], status: Dict[str, Any]) -> bool:
        """Merge `status` into the object's status subresource; False when the object is gone."""
        meta = body.get('metadata') or {}
        try:
            self.client.merge_patch(self.path(plural, meta.get('namespace'), meta.get('name'), 'status'),
                                    {'status': status})
        except NotFound:
            return False
        except KubeError as exc:
            log.warning('cannot update status: %s', exc, extra={'object': resource_label(body)})
            return False
        self.health.api_ok()
        return True
