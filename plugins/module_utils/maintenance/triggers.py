# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Trigger plugins: alterAnnotation and alterLabel change the working copy of the node (the caller
patches the difference); cordon, uncordon and drain (ours, beyond the seed) and upstream's newer
`eviction` act on the API through `kube/drain` with `Environment.kube`."""

from __future__ import annotations

import dataclasses
from typing import List, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError
from ansible_collections.steward.cluster.plugins.module_utils.kube import drain as kube_drain
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.environment import PluginParams
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import ConfigError, PluginError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.fields import Fields
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.plugin_base import TriggerPlugin


@dataclasses.dataclass(frozen=True)
class AlterAnnotation(TriggerPlugin):
    """Sets `key` to `value` (also an empty one), or with `remove: true` deletes it."""

    key: str
    value: str
    remove: bool
    type_name = 'alterAnnotation'

    @classmethod
    def from_config(cls, fields: Fields) -> 'AlterAnnotation':
        return cls(fields.string('key', required=True), fields.string('value'), fields.boolean('remove'))

    def _target(self, params: PluginParams) -> dict:
        return params.annotations

    def trigger(self, params: PluginParams) -> None:
        target = self._target(params)
        if self.remove:
            target.pop(self.key, None)
        else:
            target[self.key] = self.value


@dataclasses.dataclass(frozen=True)
class AlterLabel(AlterAnnotation):
    type_name = 'alterLabel'

    def _target(self, params: PluginParams) -> dict:
        return params.labels


def _client(params: PluginParams, what: str):
    if params.env.kube is None:
        raise PluginError('%s needs a Kubernetes client (Environment.kube)' % what)
    return params.env.kube


@dataclasses.dataclass(frozen=True)
class Cordon(TriggerPlugin):
    type_name = 'cordon'

    @classmethod
    def from_config(cls, fields: Fields) -> 'Cordon':
        return cls()

    def trigger(self, params: PluginParams) -> None:
        try:
            kube_drain.cordon(_client(params, self.type_name), params.node_name)
        except KubeError as exc:   # DrainError is one
            raise PluginError('cordon %s: %s' % (params.node_name, exc)) from None


@dataclasses.dataclass(frozen=True)
class Uncordon(TriggerPlugin):
    type_name = 'uncordon'

    @classmethod
    def from_config(cls, fields: Fields) -> 'Uncordon':
        return cls()

    def trigger(self, params: PluginParams) -> None:
        try:
            kube_drain.uncordon(_client(params, self.type_name), params.node_name)
        except KubeError as exc:   # DrainError is one
            raise PluginError('uncordon %s: %s' % (params.node_name, exc)) from None


@dataclasses.dataclass(frozen=True)
class Drain(TriggerPlugin):
    """Cordon and evict (PodDisruptionBudgets respected); an unfinished drain aborts the transition."""

    timeout: float
    eviction_timeout: float
    protected_namespaces: Tuple[str, ...]
    force: bool
    type_name = 'drain'

    @classmethod
    def from_config(cls, fields: Fields) -> 'Drain':
        return cls(fields.duration('timeout', default=600.0), fields.duration('evictionTimeout', default=120.0),
                   tuple(fields.string_list('protectedNamespaces')), fields.boolean('force'))

    def trigger(self, params: PluginParams) -> None:
        try:
            result = kube_drain.drain(_client(params, 'drain'), params.node_name, timeout=self.timeout,
                                      eviction_timeout=self.eviction_timeout,
                                      protected_namespaces=list(self.protected_namespaces), force=self.force,
                                      clock=params.env.clock, sleep=params.env.sleep)
        except KubeError as exc:   # DrainError is one
            raise PluginError('drain %s: %s' % (params.node_name, exc)) from None
        if not result.complete:
            raise PluginError('drain %s did not complete: %s' % (params.node_name, result.message))


@dataclasses.dataclass(frozen=True)
class Eviction(TriggerPlugin):
    """Upstream's `eviction` trigger (action cordon/uncordon/drain, deletionTimeout, evictionTimeout,
    forceEviction; both timeouts default to 10m), mapped onto the same functions."""

    action: str
    drain: Drain
    type_name = 'eviction'

    @classmethod
    def from_config(cls, fields: Fields) -> 'Eviction':
        action = fields.string('action', required=True)
        if action not in ('cordon', 'uncordon', 'drain'):
            raise ConfigError(fields.path('action'), 'one-of', 'got invalid eviction action %r (one of cordon, uncordon, drain)'
                              % (action,), action)
        drain = Drain(fields.duration('deletionTimeout', default=600.0), fields.duration('evictionTimeout', default=600.0),
                      (), fields.boolean('forceEviction'))
        return cls(action, drain)

    def trigger(self, params: PluginParams) -> None:
        if self.action == 'drain':
            self.drain.trigger(params)
        elif self.action == 'cordon':
            Cordon().trigger(params)
        else:
            Uncordon().trigger(params)


TRIGGERS: List[type] = [AlterAnnotation, AlterLabel, Cordon, Uncordon, Drain, Eviction]
