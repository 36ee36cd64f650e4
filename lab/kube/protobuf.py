"""Request bodies in Kubernetes' protobuf encoding, for the kinds kubectl's imperative commands send that way.

kubectl (client-go's typed clients) writes built-in objects as `application/vnd.kubernetes.protobuf`: `kubectl
create namespace`, `create secret generic`, `create configmap`, `create serviceaccount`, and the Eviction that
`kubectl drain` posts. kmock parses JSON only, so such a request reached the emulator with no body and failed with
a 500. Here the envelope (`k8s\\0` + runtime.Unknown: TypeMeta, raw) is read and the raw object decoded with the
field numbers of the kinds below (k8s.io/api's generated.proto); the result is the JSON object the same command
would have sent. Zero values are left out, as the JSON encoding's `omitempty` does (an empty `resourceVersion`
must not read as a precondition).

Other kinds answer 415 naming what is decoded and how to send JSON instead (`kubectl apply -f`).
"""

from __future__ import annotations

import base64
from typing import Any, Dict, List, Mapping, Tuple

CONTENT_TYPE = 'application/vnd.kubernetes.protobuf'
MAGIC = b'k8s\x00'

Schema = Mapping[int, Tuple[str, str, Any]]   # field number -> (json name, kind, sub-schema)

TYPE_META: Schema = {1: ('apiVersion', 'string', None), 2: ('kind', 'string', None)}
OWNER_REFERENCE: Schema = {1: ('kind', 'string', None), 3: ('name', 'string', None), 4: ('uid', 'string', None),
                           5: ('apiVersion', 'string', None), 6: ('controller', 'bool', None),
                           7: ('blockOwnerDeletion', 'bool', None)}
OBJECT_META: Schema = {1: ('name', 'string', None), 2: ('generateName', 'string', None),
                       3: ('namespace', 'string', None), 5: ('uid', 'string', None),
                       6: ('resourceVersion', 'string', None), 7: ('generation', 'int', None),
                       11: ('labels', 'map', 'string'), 12: ('annotations', 'map', 'string'),
                       13: ('ownerReferences', 'messages', OWNER_REFERENCE), 14: ('finalizers', 'strings', None)}
OBJECT_REFERENCE: Schema = {1: ('kind', 'string', None), 2: ('namespace', 'string', None), 3: ('name', 'string', None),
                            4: ('uid', 'string', None), 5: ('apiVersion', 'string', None),
                            6: ('resourceVersion', 'string', None), 7: ('fieldPath', 'string', None)}
PRECONDITIONS: Schema = {1: ('uid', 'string', None), 2: ('resourceVersion', 'string', None)}
DELETE_OPTIONS: Schema = {1: ('gracePeriodSeconds', 'int', None), 2: ('preconditions', 'message', PRECONDITIONS),
                          3: ('orphanDependents', 'bool', None), 4: ('propagationPolicy', 'string', None),
                          5: ('dryRun', 'strings', None)}
KINDS: Dict[str, Schema] = {
    'Namespace': {1: ('metadata', 'message', OBJECT_META),
                  2: ('spec', 'message', {1: ('finalizers', 'strings', None)})},
    'Secret': {1: ('metadata', 'message', OBJECT_META), 2: ('data', 'map', 'bytes'), 3: ('type', 'string', None),
               4: ('stringData', 'map', 'string'), 5: ('immutable', 'bool', None)},
    'ConfigMap': {1: ('metadata', 'message', OBJECT_META), 2: ('data', 'map', 'string'),
                  3: ('binaryData', 'map', 'bytes'), 4: ('immutable', 'bool', None)},
    'ServiceAccount': {1: ('metadata', 'message', OBJECT_META), 2: ('secrets', 'messages', OBJECT_REFERENCE),
                       3: ('imagePullSecrets', 'messages', {1: ('name', 'string', None)}),
                       4: ('automountServiceAccountToken', 'bool', None)},
    'Eviction': {1: ('metadata', 'message', OBJECT_META), 2: ('deleteOptions', 'message', DELETE_OPTIONS)},
    'DeleteOptions': DELETE_OPTIONS,
}


class ProtobufError(ValueError):
    """The body is not a protobuf message this module reads (`unsupported`: a kind it has no schema for)."""

    def __init__(self, message: str, unsupported: bool = False):
        super().__init__(message)
        self.unsupported = unsupported


def is_protobuf(content_type: str) -> bool:
    return (content_type or '').split(';', 1)[0].strip() == CONTENT_TYPE


def _varint(buf: bytes, pos: int) -> Tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ProtobufError('a truncated varint at byte %d' % pos)
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def fields(buf: bytes) -> List[Tuple[int, int, Any]]:
    """The (field number, wire type, value) of a message: varints as int, length-delimited as bytes."""
    out, pos = [], 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            size, pos = _varint(buf, pos)
            if pos + size > len(buf):
                raise ProtobufError('field %d runs past the end of the message' % number)
            value, pos = buf[pos:pos + size], pos + size
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ProtobufError('field %d has wire type %d, which Kubernetes objects do not use' % (number, wire))
        out.append((number, wire, value))
    return out


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def message(buf: bytes, schema: Schema) -> Dict[str, Any]:
    """The JSON object of a message, zero values left out."""
    out: Dict[str, Any] = {}
    for number, wire, value in fields(buf):
        if number not in schema:
            continue  # a field this emulator does not read (timestamps, managedFields, status)
        name, kind, sub = schema[number]
        if kind == 'string' and wire == 2 and value:
            out[name] = value.decode('utf-8')
        elif kind == 'int' and wire == 0 and value:
            out[name] = _signed(value)
        elif kind == 'bool' and wire == 0 and value:
            out[name] = True
        elif kind == 'message' and wire == 2:
            inner = message(value, sub)
            if inner:
                out[name] = inner
        elif kind == 'messages' and wire == 2:
            out.setdefault(name, []).append(message(value, sub))
        elif kind == 'strings' and wire == 2:
            out.setdefault(name, []).append(value.decode('utf-8'))
        elif kind == 'map' and wire == 2:
            entry = {n: v for n, w, v in fields(value) if w == 2}
            key = entry.get(1, b'').decode('utf-8')
            raw = entry.get(2, b'')
            out.setdefault(name, {})[key] = base64.b64encode(raw).decode('ascii') if sub == 'bytes' \
                else raw.decode('utf-8')
    return out


def decode(body: bytes) -> Dict[str, Any]:
    """The JSON object of a protobuf request body (the `k8s\\0` envelope around runtime.Unknown)."""
    if not body.startswith(MAGIC):
        raise ProtobufError('the body does not start with the protobuf envelope k8s\\0')
    unknown = {n: v for n, w, v in fields(body[len(MAGIC):]) if w == 2}
    type_meta = message(unknown.get(1, b''), TYPE_META)
    kind = type_meta.get('kind') or ''
    if kind not in KINDS:
        raise ProtobufError('the lab API emulator reads protobuf bodies of %s only, not %s: send it as JSON '
                            '(kubectl apply -f, or kubectl create ... --dry-run=client -o yaml | kubectl apply -f -)'
                            % (', '.join(sorted(KINDS)), kind or 'an object without a kind'), unsupported=True)
    obj = message(unknown.get(2, b''), KINDS[kind])
    return dict({'apiVersion': type_meta.get('apiVersion') or 'v1', 'kind': kind}, **obj)
