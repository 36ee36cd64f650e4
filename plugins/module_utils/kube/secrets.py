# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which Secrets the controller may read on a custom resource's behalf.

Whoever may create an EtcdBackup in a namespace could otherwise name any Secret of that namespace and have the
controller send its content (an etcd password, S3 keys) to an endpoint of their choice. So a Secret is used only when
it carries the opt-in label below, set by whoever owns the Secret (the controller's `--secret-opt-in`, on by default;
turning it off restores the old behaviour and is said in the controller's log at start).
"""

from __future__ import annotations

from typing import Any, Mapping

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput

USABLE_BY_CONTROLLER = 'cluster.steward.io/usable-by-controller'
OPT_IN_VALUE = 'true'


def opted_in(secret: Mapping[str, Any]) -> bool:
    labels = (secret.get('metadata') or {}).get('labels') or {}
    return labels.get(USABLE_BY_CONTROLLER) == OPT_IN_VALUE


def require_opt_in(secret: Mapping[str, Any], field: str, required: bool = True) -> None:
    """InvalidInput (rule `secret-opt-in`) naming the resource's field when the Secret lacks the label."""
    if required and not opted_in(secret):
        meta = secret.get('metadata') or {}
        raise InvalidInput(field, 'secret-opt-in', 'secret %s/%s does not carry the label %s=%s: the controller uses '
                           'only Secrets their owner has marked for it (kubectl label secret -n %s %s %s=%s)'
                           % (meta.get('namespace'), meta.get('name'), USABLE_BY_CONTROLLER, OPT_IN_VALUE,
                              meta.get('namespace'), meta.get('name'), USABLE_BY_CONTROLLER, OPT_IN_VALUE),
                           meta.get('name'))
