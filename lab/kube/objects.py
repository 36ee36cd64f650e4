"""Object helpers for the lab's Kubernetes API emulator: merge patches, whole-object replacement expressed as a
kmock patch, CRD schemas as JSON Schema, and the API server's timestamp format."""

from __future__ import annotations

import base64
import copy
import datetime
from typing import Any, Dict


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')


def structural(schema: Any) -> Any:
    """A CRD schema as JSON Schema: drop the x-kubernetes-* keys, map int-or-string."""
    if isinstance(schema, list):
        return [structural(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: Dict[str, Any] = {}
    if schema.get('x-kubernetes-int-or-string'):
        out['anyOf'] = [{'type': 'integer'}, {'type': 'string'}]
    for key, value in schema.items():
        if key.startswith('x-kubernetes-') or (key == 'format' and value == 'int-or-string'):
            continue
        if key in ('properties', 'patternProperties', 'definitions'):
            out[key] = {k: structural(v) for k, v in value.items()}
        else:
            out[key] = structural(value)
    if schema.get('x-kubernetes-preserve-unknown-fields'):
        out.pop('additionalProperties', None)
    return out


def merge(base: Dict[str, Any], patch: Dict[str, Any]) -> Dict[str, Any]:
    """RFC 7386 merge patch."""
    out = dict(base)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):  # RFC 7386: a missing or non-object target merges as {} (nulls dropped)
            out[key] = merge(out[key] if isinstance(out.get(key), dict) else {}, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def replace_patch(current: Dict[str, Any], after: Dict[str, Any]) -> Dict[str, Any]:
    """A kmock merge patch that turns `current` into `after` (None deletes a key; lists are replaced)."""
    patch: Dict[str, Any] = {}
    for key in set(current) | set(after):
        if key not in after:
            patch[key] = None
        elif isinstance(after[key], dict) and isinstance(current.get(key), dict):
            sub = replace_patch(current[key], after[key])
            if sub:
                patch[key] = sub
        elif current.get(key, object()) != after[key] or key not in current:
            patch[key] = after[key]
    return patch


def fold_string_data(group: str, plural: str, obj: Dict[str, Any]) -> None:
    """A Secret's `stringData` is write-only on the API server: merged into `data` (base64, its keys winning)
    and never stored. Clients that read `data` (kubectl's DATA column, `-o jsonpath={.data.x}`) see the keys."""
    if group or plural != 'secrets' or not isinstance(obj.get('stringData'), dict):
        return
    data = obj.get('data') if isinstance(obj.get('data'), dict) else {}
    for key, value in obj.pop('stringData').items():
        data[key] = base64.b64encode(str(value).encode('utf-8')).decode('ascii')
    obj['data'] = data
