# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which Secrets the controller may read on a custom resource's behalf, and reading them (the one decoder).

Whoever may create an EtcdBackup in a namespace could otherwise name any Secret of that namespace and have the
controller send its content (an etcd password, S3 keys) to an endpoint of their choice. So a Secret is used only when
it carries the opt-in label below, set by whoever owns the Secret (the controller's `--secret-opt-in`, on by default;
turning it off restores the old behaviour and is said in the controller's log at start).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Dict, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path

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


def secret_text(secret: Mapping[str, Any], key: str, field: str = 'data', strict: bool = True) -> Optional[str]:
    """One key of a Secret as text, None when it has no such key: `stringData` (plain, as some servers and
    emulators keep what was written) before `data` (base64, as the API server answers).

    strict: a value that is not base64 of UTF-8 text raises InvalidInput naming `field.key` (rule `base64`): a
    credential that is not what it claims must stop the caller, not reach an endpoint garbled. Not strict: such
    bytes become U+FFFD (the machines loop hands the map to a cloud driver that reports what it cannot use)."""
    plain = secret.get('stringData') or {}
    if key in plain:
        return str(plain[key])
    encoded = (secret.get('data') or {}).get(key)
    if encoded is None:
        return None
    try:
        raw = base64.b64decode(str(encoded), validate=strict)
        return raw.decode('utf-8') if strict else raw.decode('utf-8', 'replace')
    except (binascii.Error, ValueError) as exc:
        raise InvalidInput('%s.%s' % (field, key), 'base64', 'is not base64-encoded UTF-8 text: %s' % exc,
                           secret=True) from None


def secret_data(secret: Mapping[str, Any], field: str = 'data', strict: bool = True) -> Dict[str, str]:
    """Every key of a Secret as text (secret_text's rules for each)."""
    keys = list(secret.get('data') or {}) + [k for k in (secret.get('stringData') or {}) if k not in (secret.get('data') or {})]
    return {key: secret_text(secret, key, field, strict) or '' for key in keys}


def read_secret(client: KubeClient, namespace: str, name: str, field: str, opt_in: bool = True) -> Dict[str, str]:
    """A Secret a custom resource names in `field`, decoded strictly: InvalidInput naming `field` when it does not
    exist (rule `exists`) or, with `opt_in` (the controller's --secret-opt-in), lacks the opt-in label."""
    secret: Optional[Mapping[str, Any]] = client.get_or_none(api_path('v1', 'secrets', namespace, name))
    if secret is None:
        raise InvalidInput(field, 'exists', 'secret %s/%s does not exist' % (namespace, name), name)
    require_opt_in(secret, field, required=opt_in)
    return secret_data(secret, field)
