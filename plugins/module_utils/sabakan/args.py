# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Argument specs shared by the sabakan modules (doc fragment: plugins/doc_fragments/sabakan_connection.py),
and the checks of option values that Ansible's argspec cannot express."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import OptionError
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.template import TAINT_EFFECTS

# How to reach sabakan; matches the sabakan_connection doc fragment.
SABAKAN_CONNECTION_SPEC: Dict[str, Any] = {
    'url': {'type': 'str'},
    'timeout': {'type': 'float', 'default': 30.0},
    'validate_certs': {'type': 'bool', 'default': True},
    'ca_path': {'type': 'path', 'aliases': ['ca_cert']},  # ca_cert: the etcd and Kubernetes options' name
    'variables': {'type': 'dict'},
}

# Offline alternatives to `url` (exactly one of the three).
MACHINES_SOURCE_SPEC: Dict[str, Any] = {
    'machines': {'type': 'list', 'elements': 'dict'},
    'machines_file': {'type': 'path'},
}
MACHINES_SOURCE_EXCLUSIVE = [('url', 'machines', 'machines_file')]

CONSTRAINTS_SPEC: Dict[str, Any] = {
    'constraints': {'type': 'dict'},
    'constraints_file': {'type': 'path'},
}


def check_node_taints(value: Optional[Mapping[str, Any]]) -> Dict[str, List[Dict[str, str]]]:
    """`node_taints`: node name (address) -> its current Kubernetes taints [{key, value, effect}]."""
    if not value:
        return {}
    if not isinstance(value, Mapping):
        raise OptionError('node_taints', 'type', f'expected a mapping of node name to a list of taints, got {value!r}')
    result: Dict[str, List[Dict[str, str]]] = {}
    for node, taints in value.items():
        if taints is None:
            taints = []
        if not isinstance(taints, list):
            raise OptionError(f'node_taints[{node}]', 'type', f'expected a list of taints {{key, value, effect}}, got {taints!r}')
        checked = []
        for index, taint in enumerate(taints):
            where = f'node_taints[{node}][{index}]'
            if not isinstance(taint, Mapping) or not isinstance(taint.get('key'), str) or not taint.get('key'):
                raise OptionError(where, 'required', f'expected {{key, value, effect}} with a non-empty key, got {taint!r}')
            effect = taint.get('effect') or ''
            if effect and effect not in TAINT_EFFECTS:
                raise OptionError(f'{where}.effect', 'one-of', f'{effect!r} is not one of {", ".join(TAINT_EFFECTS)}')
            checked.append({'key': taint['key'], 'value': str(taint.get('value') or ''), 'effect': effect})
        result[str(node)] = checked
    return result


def check_wait_seconds(value: Any) -> float:
    """`wait_retired_seconds`: a finite number of seconds >= 0 (NaN would make every comparison false, so a retired
    machine would never be waited for nor let go; infinity would wait forever)."""
    try:
        return validate.number(value, 'wait_retired_seconds', minimum=0)
    except InvalidInput as exc:
        raise exc.recast(OptionError) from None
