# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plugin interface: checks decide, triggers act, notifiers tell.

A plugin class has a `type_name` (the `type:` in maintenance.yaml) and builds an instance from its
`config:` block with `from_config(Fields)`, raising ConfigError that names the field. Instances are
shared by all reconciliations (and threads), so they keep no per-call state: anything a check wants
to hand to its after-transition hook travels in its CheckResult.info.

* `CheckPlugin.check(params) -> CheckResult` must have no side effects (the info view calls it).
  `cluster_scoped = True` marks checks that read other nodes or cluster-wide leases; a transition
  whose chain has one is decided again inside the caller's gate (see state.reconcile).
  `on_transition(params, result)` runs once the chain containing the instance caused a transition,
  before the triggers (stagger takes its lease there); it may raise PluginError to stop the transition.
* `TriggerPlugin.trigger(params)` changes `params.node` (the working copy the caller patches) or acts
  through `params.env`; raising PluginError aborts the transition and the node's changes of that chain.
* `NotificationPlugin.notify(params)` sends; a failure is reported and retried next reconcile.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Dict

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.environment import PluginParams
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.fields import Fields


@dataclasses.dataclass
class CheckResult:
    passed: bool
    info: Dict[str, Any] = dataclasses.field(default_factory=dict)


def passed(**info: Any) -> CheckResult:
    return CheckResult(True, info)


def failed(**info: Any) -> CheckResult:
    return CheckResult(False, info)


class Plugin:
    type_name: ClassVar[str] = ''

    @classmethod
    def from_config(cls, fields: Fields) -> 'Plugin':
        raise NotImplementedError


class CheckPlugin(Plugin):
    cluster_scoped: ClassVar[bool] = False

    def check(self, params: PluginParams) -> CheckResult:
        raise NotImplementedError

    def on_transition(self, params: PluginParams, result: CheckResult) -> None:
        return None


class TriggerPlugin(Plugin):
    def trigger(self, params: PluginParams) -> None:
        raise NotImplementedError


class NotificationPlugin(Plugin):
    def notify(self, params: PluginParams) -> None:
        raise NotImplementedError
