# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Names as Kubernetes and DNS define them (k8s.io/apimachinery/pkg/util/validation): the one home
of these rules. Each check returns the name or raises InvalidInput naming the field and the rule."""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, shown

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
_LABEL = re.compile(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')
_SUBDOMAIN = re.compile(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')
_QUALIFIED_NAME = re.compile(r'^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$')
_CONFIGMAP_KEY = re.compile(r'^[-._a-zA-Z0-9]+$')


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise InvalidInput(field, 'string', 'expected a string, got %s' % shown(value), value)
    return value


def is_dns_subdomain(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= DNS1123_SUBDOMAIN_MAX and bool(_SUBDOMAIN.match(value))


def is_dns_label(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= DNS1123_LABEL_MAX and bool(_LABEL.match(value))


def is_label_name(value: Any) -> bool:
    """The name part of a qualified name (after the optional `prefix/`): 1-63 of letters, digits, `-`, `_`, `.`,
    starting and ending with a letter or digit."""
    return isinstance(value, str) and 0 < len(value) <= 63 and bool(_QUALIFIED_NAME.match(value))


def is_qualified_name(value: Any) -> bool:
    """A label, annotation or taint key: optional DNS-subdomain prefix and `/`, then a label name."""
    if not isinstance(value, str):
        return False
    parts = value.rpartition('/')
    return (not parts[1] or is_dns_subdomain(parts[0])) and is_label_name(parts[2])


def is_label_value(value: Any) -> bool:
    """A label value: empty, or a label name."""
    return isinstance(value, str) and (value == '' or is_label_name(value))


def is_configmap_key(value: Any) -> bool:
    """A key of a ConfigMap's or Secret's data: 1-253 of letters, digits, `-`, `_`, `.`."""
    return isinstance(value, str) and 0 < len(value) <= DNS1123_SUBDOMAIN_MAX and bool(_CONFIGMAP_KEY.match(value))


def dns_subdomain(value: Any, field: str) -> str:
    """RFC 1123 subdomain: most object names (Nodes, ConfigMaps, Secrets, custom resources)."""
    text = _text(value, field)
    if not is_dns_subdomain(text):
        raise InvalidInput(field, 'dns-subdomain', '%s is not a valid name (lowercase letters, digits, "-" and ".", '
                           'starting and ending with a letter or digit, at most %d characters)'
                           % (shown(value), DNS1123_SUBDOMAIN_MAX), value)
    return text


def dns_label(value: Any, field: str) -> str:
    """RFC 1123 label: namespaces, Services, host name parts."""
    text = _text(value, field)
    if not is_dns_label(text):
        raise InvalidInput(field, 'dns-label', '%s is not a valid DNS label (lowercase letters, digits and "-", '
                           'starting and ending with a letter or digit, at most %d characters)'
                           % (shown(value), DNS1123_LABEL_MAX), value)
    return text


def qualified_name(value: Any, field: str) -> str:
    """A label or annotation key: optional DNS-subdomain prefix and `/`, then a name of at most 63."""
    text = _text(value, field)
    if not is_qualified_name(text):
        raise InvalidInput(field, 'qualified-name', '%s is not a valid label or annotation key ([prefix/]name, name at '
                           'most 63 characters of letters, digits, "-", "_", ".")' % shown(value), value)
    return text


def label_value(value: Any, field: str) -> str:
    """A label value: empty, or at most 63 characters of letters, digits, `-`, `_`, `.`."""
    text = _text(value, field)
    if not is_label_value(text):
        raise InvalidInput(field, 'label-value', '%s is not a valid label value (at most 63 characters of letters, '
                           'digits, "-", "_", ".", starting and ending with a letter or digit)' % shown(value), value)
    return text
