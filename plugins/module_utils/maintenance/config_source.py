# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a maintenance.yaml lives in the cluster: `secret/<namespace>/<name>[/<key>]` or
`configmap/...` (key default `maintenance.yaml`). Shared by the controller and the Ansible modules,
so both read the same object the same way."""

from __future__ import annotations

import base64
import binascii
import dataclasses
from typing import Any, Dict, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.names import is_configmap_key, is_dns_label, is_dns_subdomain
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.secrets import secret_text
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import ConfigError

DEFAULT_KEY = 'maintenance.yaml'
KINDS = {'secret': 'Secret', 'configmap': 'ConfigMap'}


@dataclasses.dataclass(frozen=True)
class ConfigSource:
    kind: str            # 'secret' or 'configmap'
    namespace: str
    name: str
    key: str = DEFAULT_KEY

    @property
    def path(self) -> str:
        return api_path('v1', 'secrets' if self.kind == 'secret' else 'configmaps', self.namespace, self.name)

    def involved(self, obj: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """The object for Events (its uid when it was read)."""
        uid = ((obj or {}).get('metadata') or {}).get('uid')
        meta = {'name': self.name, 'namespace': self.namespace}
        if uid:
            meta['uid'] = uid
        return {'apiVersion': 'v1', 'kind': KINDS[self.kind], 'metadata': meta}

    def __str__(self) -> str:
        return '%s/%s/%s/%s' % (self.kind, self.namespace, self.name, self.key)


def parse_config_source(text: Optional[str]) -> Optional[ConfigSource]:
    """`kind/namespace/name[/key]` -> ConfigSource; empty -> None (node maintenance off); ConfigError names the part."""
    text = (text or '').strip()
    if not text:
        return None
    parts = text.split('/')
    if len(parts) not in (3, 4):
        raise ConfigError('', 'config-source', '%r: expected secret/<namespace>/<name>[/<key>] or '
                          'configmap/<namespace>/<name>[/<key>]' % text, text)
    kind = parts[0].lower()
    if kind not in KINDS:
        raise ConfigError('', 'one-of', '%r: unknown kind %r (secret or configmap)' % (text, parts[0]), text)
    if not is_dns_label(parts[1]):
        raise ConfigError('', 'dns-label', '%r: namespace %r is not a valid Kubernetes name' % (text, parts[1]), text)
    if not is_dns_subdomain(parts[2]):
        raise ConfigError('', 'dns-subdomain', '%r: name %r is not a valid Kubernetes name' % (text, parts[2]), text)
    key = parts[3] if len(parts) == 4 else DEFAULT_KEY
    if not is_configmap_key(key):
        raise ConfigError('', 'configmap-key', '%r: key %r may only hold letters, digits, "-", "_" and "."' % (text, key), text)
    return ConfigSource(kind, parts[1], parts[2], key)


def extract_text(source: ConfigSource, obj: Mapping[str, Any]) -> str:
    """The key's text: a Secret's `data` is base64 (stringData as some servers keep it), a ConfigMap's `data`
    plain and its `binaryData` base64. Raises ConfigError when the key is missing or not UTF-8."""
    where = '%s %s/%s' % (KINDS[source.kind], source.namespace, source.name)
    encoded = dict(obj.get('data') or {}) if source.kind == 'secret' else dict(obj.get('binaryData') or {})
    plain = dict(obj.get('stringData') or {}) if source.kind == 'secret' else dict(obj.get('data') or {})
    if source.key not in plain and source.key not in encoded:
        keys = sorted(set(encoded) | set(plain))
        raise ConfigError('', 'key', '%s has no key "%s" (keys: %s)' % (where, source.key, ', '.join(keys) or 'none'))
    try:
        if source.kind == 'secret':
            return secret_text(obj, source.key) or ''
        if source.key in plain:
            return str(plain[source.key])
        return base64.b64decode(str(encoded[source.key]), validate=True).decode('utf-8')
    except InvalidInput as exc:   # the Secret decoder's refusal (kube/secrets)
        raise ConfigError('', 'base64', '%s key "%s" %s' % (where, source.key, exc.detail)) from None
    except (binascii.Error, ValueError) as exc:
        raise ConfigError('', 'base64', '%s key "%s" is not base64-encoded UTF-8 text: %s' % (where, source.key, exc)) from None
