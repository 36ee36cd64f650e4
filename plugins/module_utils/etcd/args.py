# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Argument specs shared by the etcd modules; each has a same-named doc fragment in plugins/doc_fragments."""

from __future__ import annotations

from typing import Any, Dict


ETCD_CONNECTION_SPEC: Dict[str, Any] = {
    'endpoints': {'type': 'list', 'elements': 'str', 'default': ['http://127.0.0.1:2379']},
    'ca_cert': {'type': 'path'},
    'client_cert': {'type': 'path'},
    'client_key': {'type': 'path', 'no_log': False},
    'user': {'type': 'str', 'aliases': ['username']},
    'password': {'type': 'str', 'no_log': True},
    'timeout': {'type': 'float', 'default': 5.0},
}

# The aliases are amazon.aws's option names (access_key, secret_key, session_token, endpoint_url, region and
# their aws_* forms), so the same values and module_defaults work here.
ETCD_STORE_SPEC: Dict[str, Any] = {
    'store': {'type': 'str', 'required': True},
    's3_endpoint_url': {'type': 'str', 'aliases': ['endpoint_url', 'aws_endpoint_url']},
    'aws_access_key_id': {'type': 'str', 'no_log': True, 'aliases': ['access_key', 'aws_access_key']},
    'aws_secret_access_key': {'type': 'str', 'no_log': True, 'aliases': ['secret_key', 'aws_secret_key']},
    'aws_session_token': {'type': 'str', 'no_log': True, 'aliases': ['session_token']},
    'region': {'type': 'str', 'aliases': ['aws_region']},
    'encrypt': {'type': 'bool', 'default': True},
    'encryption_mode': {'type': 'str', 'default': 'AES256', 'choices': ['AES256', 'aws:kms', 'SSE-C']},
    'encryption_kms_key_id': {'type': 'str'},
    'sse_customer_key': {'type': 'str', 'no_log': True},
    'store_timeout': {'type': 'float', 'default': 30.0},
}

# Where etcd's own binaries are (binaries.resolve_tools); matches the etcd_tools doc fragment.
ETCD_TOOLS_SPEC: Dict[str, Any] = {
    'etcdutl_path': {'type': 'path'},
    'etcd_path': {'type': 'path'},
    'bin_dirs': {'type': 'list', 'elements': 'path'},
    'tool_timeout': {'type': 'float'},
}

# etcd_recovery_plan (the module and the action plugin that computes it on the controller).
RECOVERY_PLAN_SPEC: Dict[str, Any] = {
    'hosts': {'type': 'list', 'elements': 'dict', 'required': True},
    'store_configured': {'type': 'bool', 'default': False},
}
