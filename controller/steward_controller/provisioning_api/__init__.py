# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `provisioning-api` loop: Promenade's API, compatible paths and parameters, served by the controller.

    GET /api/v1.0/health                       204, no authentication (probes)
    GET /api/v1.0/join-scripts?hostname=&ip=[&labels.static=k=v...][&labels.dynamic=k=v...][&design_ref=...]
                                               200 text/x-shellscript: the node's self-contained join.sh
    PUT /api/v1.0/node-labels/<node>           {"key": "value", ...}: the owned labels of the node (foreign labels
                                               are never touched, unlike Promenade's full replace)

Every request but health carries `Authorization: Bearer <token>`, checked with the TokenReview API; the user must
be in --provisioning-api-allowed-users or one of --provisioning-api-allowed-groups. server.py holds the server.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.names import dns_label, dns_subdomain

from steward_controller.core import flags
from steward_controller.core.flags import Flag
from steward_controller.core.loops import Loop


@dataclasses.dataclass(frozen=True)
class ApiOptions:
    host: str
    port: Optional[int]                         # None: the API is off (the loop runs in every `all` process)
    tls_cert: Optional[str]
    tls_key: Optional[str]
    cluster_config: Optional[Tuple[str, str]]   # (namespace, ConfigMap name) with cluster.yaml
    authority: Optional[Tuple[str, str]]        # (namespace, Secret name) with ca.crt and ca.key
    allowed_users: Tuple[str, ...]
    allowed_groups: Tuple[str, ...]


def _ref(value: str, flag: str) -> Optional[Tuple[str, str]]:
    if not value:
        return None
    namespace, _slash, name = value.partition('/')
    if not name:
        raise InvalidInput(flag, 'namespace/name', 'expected <namespace>/<name>, got %r' % value, value)
    return dns_label(namespace, flag), dns_subdomain(name, flag)


def _port(value: str) -> Optional[int]:
    text = str(value).strip()
    if not text:
        return None
    return validate.integer(int(text) if text.isdigit() else text, '--provisioning-api-port', 0, 65535)


def _words(value: str) -> Tuple[str, ...]:
    return tuple(w.strip() for w in value.split(',') if w.strip())


FLAGS = (
    Flag('provisioning-api-host', 'text', '0.0.0.0', 'bind address of the provisioning API'),
    Flag('provisioning-api-port', 'text', '', 'port of the provisioning API (0 = a free one); not set: the API is off '
                                              '(the deploy manifest sets 9000)'),
    Flag('provisioning-api-tls-cert', 'text', '', 'serve HTTPS with this certificate (and key); without it the API '
                                                  'must sit behind TLS termination: it receives bearer tokens'),
    Flag('provisioning-api-tls-key', 'text', '', 'the key of --provisioning-api-tls-cert'),
    Flag('provisioning-cluster-config', 'text', '', '<namespace>/<configmap> whose key cluster.yaml holds the cluster '
                                                    'options of the provisioning modules'),
    Flag('provisioning-authority', 'text', '', '<namespace>/<secret> holding ca.crt and ca.key, to sign the kubelet '
                                               'certificates of join scripts'),
    Flag('provisioning-api-allowed-users', 'text', '', 'comma-separated users allowed to call the API',
         env='STEWARD_PROVISIONING_API_USERS'),
    Flag('provisioning-api-allowed-groups', 'text', 'system:masters', 'comma-separated groups allowed to call the API',
         env='STEWARD_PROVISIONING_API_GROUPS'),
)


def add_arguments(group: Any) -> None:
    flags.add(group, FLAGS)


def options(args: argparse.Namespace) -> ApiOptions:
    try:
        value = flags.values(args, FLAGS)
        if bool(value['provisioning_api_tls_cert']) != bool(value['provisioning_api_tls_key']):
            raise InvalidInput('--provisioning-api-tls-cert', 'together', 'the TLS certificate and key go together')
        return ApiOptions(
            host=validate.text(value['provisioning_api_host'], '--provisioning-api-host'),
            port=_port(value['provisioning_api_port']),
            tls_cert=value['provisioning_api_tls_cert'] or None, tls_key=value['provisioning_api_tls_key'] or None,
            cluster_config=_ref(value['provisioning_cluster_config'], '--provisioning-cluster-config'),
            authority=_ref(value['provisioning_authority'], '--provisioning-authority'),
            allowed_users=_words(value['provisioning_api_allowed_users']),
            allowed_groups=_words(value['provisioning_api_allowed_groups']))
    except InvalidInput as exc:
        raise ValueError(str(exc)) from exc


def register(registry: Any, runtime: Any) -> None:
    from steward_controller.provisioning_api.server import register as register_server
    register_server(registry, runtime)


LOOPS = (Loop(name='provisioning-api', help='Promenade-compatible API: join scripts and owned node labels, bearer '
                                            'tokens checked with TokenReview',
              register=register, add_arguments=add_arguments, options=options, watches_resources=False),)
