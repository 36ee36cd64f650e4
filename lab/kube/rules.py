"""What the Kubernetes API server refuses on a write, for the lab's emulator (apimachinery's ValidateObjectMeta
and the few spec checks the collection relies on): invalid object names (422), invalid label keys and values
(422), annotations with invalid keys or over 256 KiB in total (422), label selectors in `spec.selector` that
do not parse (422), negative replica counts (422), and label/annotation values that are not strings (400, as
the JSON decoder answers).

The rules are the API server's, written here on purpose instead of imported from the engine
(plugins/module_utils/common/names.py): the emulator is a test double, and a double that shares the code
under test cannot catch its bugs. Messages follow the API server's wording so that clients see what they
would see against a real cluster.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from lab.kube.selectors import SelectorError, label_selector_from_spec, label_value_errors, qualified_name_errors

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024  # apimachinery TotalAnnotationSizeLimitB
_SUBDOMAIN = re.compile(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')
_LABEL = re.compile(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')
_DNS1035 = re.compile(r'^[a-z]([-a-z0-9]*[a-z0-9])?$')
_SUBDOMAIN_HELP = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                   "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                   "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
_LABEL_HELP = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
               "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
               "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
_DNS1035_HELP = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                 "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex "
                 "used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")

# Cause = (reason, field, message); reason as metav1.CauseType.
Cause = Tuple[str, str, str]


class RequestRefused(Exception):
    """The API server's answer to a bad write: status 422 Invalid (with causes) or 400 BadRequest."""

    def __init__(self, status: int, reason: str, message: str, details: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.status, self.reason, self.message, self.details = status, reason, message, details or {}


def _dns_subdomain(name: str) -> List[str]:
    errors = []
    if len(name) > 253:
        errors.append('must be no more than 253 characters')
    if not _SUBDOMAIN.match(name):
        errors.append(_SUBDOMAIN_HELP)
    return errors


def _dns_label(name: str) -> List[str]:
    errors = []
    if len(name) > 63:
        errors.append('must be no more than 63 characters')
    if not _LABEL.match(name):
        errors.append(_LABEL_HELP)
    return errors


def _dns1035_label(name: str) -> List[str]:
    errors = []
    if len(name) > 63:
        errors.append('must be no more than 63 characters')
    if not _DNS1035.match(name):
        errors.append(_DNS1035_HELP)
    return errors


def _path_segment(name: str) -> List[str]:
    """path.ValidatePathSegmentName: what RBAC objects allow (e.g. `system:controller:x`)."""
    if name in ('.', '..'):
        return ["may not be '%s'" % name]
    return ['may not contain %r' % c for c in ('/', '%') if c in name]


# Which name rule each resource's registry applies (ValidateObjectMeta's nameFn); the default is DNS subdomain.
NAME_RULES = {'namespaces': _dns_label, 'services': _dns1035_label, 'roles': _path_segment,
              'clusterroles': _path_segment, 'rolebindings': _path_segment, 'clusterrolebindings': _path_segment}
SELECTOR_KINDS = {'deployments', 'statefulsets', 'replicasets', 'daemonsets', 'poddisruptionbudgets'}
REPLICA_KINDS = {'deployments', 'statefulsets', 'replicasets', 'replicationcontrollers'}


def _quoted(value: Any) -> str:
    return '"%s"' % value if isinstance(value, str) else repr(value)


def invalid(kind: str, name: Any, group: str, causes: List[Cause]) -> RequestRefused:
    """422 Invalid as the API server words it: `Kind "name" is invalid: field: message[, ...]`."""
    parts = ['%s: %s' % (field, message) if field else message for _reason, field, message in causes]
    summary = parts[0] if len(parts) == 1 else '[%s]' % ', '.join(parts)
    return RequestRefused(422, 'Invalid', '%s %s is invalid: %s' % (kind, _quoted(name or ''), summary), {
        'name': name or '', 'group': group, 'kind': kind,
        'causes': [{'reason': reason, 'message': message, 'field': field} for reason, field, message in causes]})


def bad_request(message: str) -> RequestRefused:
    return RequestRefused(400, 'BadRequest', message)


def _string_map(md: Dict[str, Any], field: str) -> Dict[str, str]:
    """labels / annotations: strings only (a JSON null decodes to "", anything else is a decode error)."""
    values = md.get(field)
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise bad_request('json: cannot unmarshal %s into Go struct field ObjectMeta.metadata.%s of type '
                          'map[string]string' % (type(values).__name__, field))
    for key, value in list(values.items()):
        if value is None:
            values[key] = ''
        elif not isinstance(value, str):
            raise bad_request('json: cannot unmarshal %s into Go struct field ObjectMeta.metadata.%s of type string'
                              % ('bool' if isinstance(value, bool) else 'number' if isinstance(value, (int, float))
                                 else type(value).__name__, field))
    return values


def metadata_causes(plural: str, obj: Dict[str, Any], namespaced: bool) -> List[Cause]:
    """ValidateObjectMeta: name (per kind), namespace, labels, annotations (keys and total size)."""
    md = obj.get('metadata')
    if not isinstance(md, dict):
        return [('FieldValueRequired', 'metadata', 'Required value')]
    causes: List[Cause] = []
    name = md.get('name')
    if not name:
        causes.append(('FieldValueRequired', 'metadata.name', 'Required value: name or generateName is required'))
    else:
        for message in NAME_RULES.get(plural, _dns_subdomain)(str(name)):
            causes.append(('FieldValueInvalid', 'metadata.name', 'Invalid value: %s: %s' % (_quoted(name), message)))
    namespace = md.get('namespace')
    if namespaced and namespace:
        for message in _dns_label(str(namespace)):
            causes.append(('FieldValueInvalid', 'metadata.namespace',
                           'Invalid value: %s: %s' % (_quoted(namespace), message)))
    for key, value in sorted(_string_map(md, 'labels').items()):
        for message in qualified_name_errors(key):
            causes.append(('FieldValueInvalid', 'metadata.labels', 'Invalid value: %s: %s' % (_quoted(key), message)))
        for message in label_value_errors(value):
            causes.append(('FieldValueInvalid', 'metadata.labels',
                           'Invalid value: %s: %s' % (_quoted(value), message)))
    annotations = _string_map(md, 'annotations')
    for key in sorted(annotations):
        for message in qualified_name_errors(key.lower()):
            causes.append(('FieldValueInvalid', 'metadata.annotations',
                           'Invalid value: %s: %s' % (_quoted(key), message)))
    total = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        causes.append(('FieldValueTooLong', 'metadata.annotations',
                       'Too long: must have at most %d bytes' % TOTAL_ANNOTATION_SIZE_LIMIT))
    return causes


def spec_causes(plural: str, obj: Dict[str, Any]) -> List[Cause]:
    """The spec checks the collection relies on: selectors parse, replicas are not negative."""
    spec = obj.get('spec')
    if not isinstance(spec, dict):
        return []
    causes: List[Cause] = []
    if plural in SELECTOR_KINDS and spec.get('selector') is not None:
        try:
            label_selector_from_spec(spec['selector'], 'spec.selector')
        except SelectorError as exc:
            field, _sep, message = str(exc).partition(': ')
            causes.append(('FieldValueInvalid', field, message))
    if plural in REPLICA_KINDS and 'replicas' in spec:
        causes.extend(replicas_causes(spec['replicas'], 'spec.replicas'))
    return causes


def replicas_causes(replicas: Any, field: str) -> List[Cause]:
    if replicas is None:
        return []
    if isinstance(replicas, bool) or not isinstance(replicas, int):
        return [('FieldValueInvalid', field, 'Invalid value: %s: must be an integer' % _quoted(replicas))]
    if replicas < 0:
        return [('FieldValueInvalid', field, 'Invalid value: %d: must be greater than or equal to 0' % replicas)]
    return []


def check_write(plural: str, kind: str, group: str, obj: Dict[str, Any], namespaced: bool) -> None:
    """Raise RequestRefused (422 or 400) for an object the API server would not store."""
    causes = metadata_causes(plural, obj, namespaced) + spec_causes(plural, obj)
    if causes:
        raise invalid(kind, (obj.get('metadata') or {}).get('name'), group, causes)
