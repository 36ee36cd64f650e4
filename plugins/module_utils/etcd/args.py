# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Argument specs shared by the etcd modules; each has a same-named doc fragment in plugins/doc_fragments."""

from __future__ import annotations

import copy
from typing import Any, Dict

ETCD_CONNECTION_SPEC: Dict[str, Any] = {
    'endpoints': {'type': 'list', 'elements': 'str', 'default': ['http://127.0.0.1:2379']},
    'ca_cert': {'type': 'path'},
    'client_cert': {'type': 'path'},
    'client_key': {'type': 'path', 'no_log': False},
    'user': {'type': 'str'},
    'password': {'type': 'str', 'no_log': True},
    'timeout': {'type': 'float', 'default': 5.0},
}

ETCD_STORE_SPEC: Dict[str, Any] = {
    'store': {'type': 'str', 'required': True},
    's3_endpoint_url': {'type': 'str'},
    'aws_access_key_id': {'type': 'str', 'no_log': True},
    'aws_secret_access_key': {'type': 'str', 'no_log': True},
    'aws_session_token': {'type': 'str', 'no_log': True},
    'region': {'type': 'str'},
    'encrypt': {'type': 'bool', 'default': True},
    'encryption_mode': {'type': 'str', 'default': 'AES256', 'choices': ['AES256', 'aws:kms', 'SSE-C']},
    'encryption_kms_key_id': {'type': 'str'},
    'sse_customer_key': {'type': 'str', 'no_log': True},
}

# Where etcd's own binaries are (binaries.resolve_tools); matches the etcd_tools doc fragment.
ETCD_TOOLS_SPEC: Dict[str, Any] = {
    'etcdutl_path': {'type': 'path'},
    'etcd_path': {'type': 'path'},
    'bin_dirs': {'type': 'list', 'elements': 'path'},
}


def argspec(*specs: Dict[str, Any], **own: Any) -> Dict[str, Any]:
    """Deep-copied union of shared specs plus the module's own options."""
    merged: Dict[str, Any] = {}
    for spec in specs:
        merged.update(copy.deepcopy(spec))
    merged.update(own)
    return merged
