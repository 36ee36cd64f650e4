"""What the lab's API emulator tells clients about itself, as kube-apiserver does: discovery documents that kubectl's
RESTMapper can use, a minimal OpenAPI v2 document, and strategic merge patches (what `kubectl apply` sends for
built-in kinds). Pure functions over plain data; the emulator (emulator.py) serves them.

Why each piece exists (each was a failure of `kubectl apply -k controller/deploy` against the emulator):
* kmock answers `/api/v1` with `groupVersion: "/v1"` (the core group is `v1`, no slash) and lists subresources with
  the parent's kind, short names and verbs: kubectl then finds no `Namespace`, `ServiceAccount` or `Service` kind and
  warns that `ns` also matches `namespaces/status`. `fixed_resource_list` writes the list as the API server does.
* kubectl validates manifests against the server's OpenAPI document and refuses to go on when it cannot download
  one. client-go asks for `/openapi/v2` in protobuf; an empty protobuf message is a valid, empty
  `openapi_v2.Document` (every field at its default), and kubectl skips the validation of kinds a document does
  not define. A JSON client gets the same empty document as JSON. `/openapi/v3` answers 404, which makes kubectl
  fall back to v2 (as against a server before 1.27).
* `kubectl apply` patches built-in kinds with `application/strategic-merge-patch+json`: lists of objects merge by
  key and the patch carries directives (`$patch`, `$setElementOrder/<list>`, `$retainKeys`,
  `$deleteFromPrimitiveList/<list>`). `strategic_merge` applies the subset kubectl sends; a list of objects that all
  have a `name` (containers, env, volumes, ports of a container ...) merges by `name`, Service ports by `port`,
  any other list is replaced, as in a JSON merge patch.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Optional, Tuple

# What client-go asks for, and what kube-apiserver answers with (Go's mime parser refuses the '@' in an answer).
OPENAPI_V2_PROTOBUF = 'application/com.github.proto-openapi.spec.v2@v1.0+protobuf'
OPENAPI_V2_PROTOBUF_ANSWER = 'application/com.github.proto-openapi.spec.v2.v1.0+protobuf'
STRATEGIC_MERGE_PATCH = 'application/strategic-merge-patch+json'

# Subresources as the API server lists them: (kind, group, version, verbs); None: the parent's kind and group.
_SUBRESOURCES: Dict[str, Tuple[Optional[str], Optional[str], Optional[str], List[str]]] = {
    'status': (None, None, None, ['get', 'patch', 'update']),
    'scale': ('Scale', 'autoscaling', 'v1', ['get', 'patch', 'update']),
    'eviction': ('Eviction', 'policy', 'v1', ['create']),
    'token': ('TokenRequest', 'authentication.k8s.io', 'v1', ['create']),
    'finalize': (None, None, None, ['update']),
    'binding': ('Binding', '', 'v1', ['create']),
    'log': ('Pod', '', 'v1', ['get']),
    'exec': ('PodExecOptions', '', 'v1', ['create', 'get']),
    'approval': (None, None, None, ['get', 'patch', 'update']),
}


def fixed_resource_list(doc: Dict[str, Any]) -> Dict[str, Any]:
    """kmock's APIResourceList, corrected: the core group's `groupVersion` is `v1`, subresources carry no short
    names, no singular name and their own kind and verbs."""
    out = dict(doc)
    out['groupVersion'] = str(doc.get('groupVersion', '')).lstrip('/')
    resources = []
    for entry in doc.get('resources') or []:
        entry = dict(entry)
        if '/' in str(entry.get('name', '')):
            sub = entry['name'].split('/', 1)[1]
            kind, group, version, verbs = _SUBRESOURCES.get(sub, (None, None, None, ['get']))
            entry.update(singularName='', shortNames=[], categories=[], verbs=verbs)
            if kind is not None:
                entry['kind'] = kind
                entry['group'], entry['version'] = group, version
        else:
            entry['verbs'] = sorted(entry.get('verbs') or [])
        resources.append(entry)
    out['resources'] = resources
    return out


def openapi_v2(accept: str) -> Tuple[bytes, str]:
    """The (body, content type) of /openapi/v2: an empty document, in protobuf when the client accepts it."""
    if OPENAPI_V2_PROTOBUF in (accept or '') or OPENAPI_V2_PROTOBUF_ANSWER in (accept or ''):
        return b'', OPENAPI_V2_PROTOBUF_ANSWER
    return (b'{"swagger": "2.0", "info": {"title": "steward.cluster lab API emulator", "version": "v1"}, '
            b'"paths": {}, "definitions": {}}', 'application/json')


# --- strategic merge patch -------------------------------------------------------------------------------------
_MERGE_KEYS = ('name', 'port', 'containerPort', 'ip', 'type', 'mountPath', 'devicePath', 'topologyKey')


def _merge_key(items: List[Any]) -> Optional[str]:
    """The key a list of objects merges on: the first of _MERGE_KEYS every element has; None: replace the list."""
    if not items or not all(isinstance(i, dict) for i in items):
        return None
    return next((key for key in _MERGE_KEYS if all(key in i for i in items if i.get('$patch') != 'replace')), None)


def _merge_list(base: List[Any], patch: List[Any], order: Optional[List[Any]]) -> List[Any]:
    if any(isinstance(i, dict) and i.get('$patch') == 'replace' for i in patch):
        return [strip_directives(i) for i in patch if not (isinstance(i, dict) and i.get('$patch') == 'replace')]
    key = _merge_key([i for i in base if isinstance(i, dict)] + [i for i in patch if isinstance(i, dict)])
    if key is None or not all(isinstance(i, dict) for i in base):
        return [strip_directives(i) for i in patch]
    out = [copy.deepcopy(i) for i in base]
    for item in patch:
        index = next((n for n, cur in enumerate(out) if cur.get(key) == item.get(key)), None)
        if item.get('$patch') == 'delete':
            if index is not None:
                del out[index]
        elif index is None:
            out.append(strip_directives(item))
        else:
            out[index] = strategic_merge(out[index], item)
    if order:
        wanted = [o.get(key) if isinstance(o, dict) else o for o in order]
        out.sort(key=lambda i: wanted.index(i.get(key)) if i.get(key) in wanted else len(wanted))
    return out


def strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip_directives(v) for k, v in value.items() if not k.startswith('$')}
    if isinstance(value, list):
        return [strip_directives(v) for v in value]
    return copy.deepcopy(value)


def strategic_merge(base: Dict[str, Any], patch: Dict[str, Any]) -> Dict[str, Any]:
    """`base` with a strategic merge patch applied (the subset of the directives `kubectl apply` sends)."""
    if patch.get('$patch') == 'replace':
        return strip_directives(patch)
    if patch.get('$patch') == 'delete':
        return {}
    out = copy.deepcopy(base)
    retain = patch.get('$retainKeys')
    for key, value in patch.items():
        if key.startswith('$deleteFromPrimitiveList/'):
            field = key.split('/', 1)[1]
            out[field] = [v for v in out.get(field) or [] if v not in value]
        if key.startswith('$'):
            continue
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):
            out[key] = strategic_merge(out[key] if isinstance(out.get(key), dict) else {}, value)
        elif isinstance(value, list):
            current = out.get(key) if isinstance(out.get(key), list) else []
            out[key] = _merge_list(current, value, patch.get('$setElementOrder/' + key))
        else:
            out[key] = copy.deepcopy(value)
    if isinstance(retain, list):
        out = {k: v for k, v in out.items() if k in retain}
    return out
