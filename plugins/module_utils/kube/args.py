# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes connection options shared by the modules that talk to the API server
(doc fragment: plugins/doc_fragments/kube_connection.py), and the client they build.

The option names and the `K8S_AUTH_*` environment fallbacks are kubernetes.core's (`k8s_auth_options`),
so the same values (or `module_defaults` written for kubernetes.core with these keys) work here:
`kubeconfig`, `context`, `host`, `api_key`, `validate_certs`, `ca_cert`. Unlike kubernetes.core,
`kubeconfig` is a path only (no inline dict).

Precedence: an explicit option, then its environment variable; without `kubeconfig` and `host` the
client uses the pod's service account when running in a pod, else `KUBECONFIG` or `~/.kube/config`.
`host`, `api_key`, `validate_certs` and `ca_cert` override what the kubeconfig says.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import HAS_KUBERNETES, KubeClient, load_configuration
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError

if HAS_KUBERNETES:
    import kubernetes

# Matches the kube_connection doc fragment.
KUBE_CONNECTION_SPEC: Dict[str, Any] = {
    'kubeconfig': {'type': 'path'},
    'context': {'type': 'str'},
    'host': {'type': 'str'},
    'api_key': {'type': 'str', 'no_log': True},
    'validate_certs': {'type': 'bool', 'aliases': ['verify_ssl']},
    'ca_cert': {'type': 'path', 'aliases': ['ssl_ca_cert']},
    'request_timeout': {'type': 'float', 'default': 30.0},
}

# Option -> environment variable (kubernetes.core's names).
ENVIRONMENT = {
    'kubeconfig': 'K8S_AUTH_KUBECONFIG',
    'context': 'K8S_AUTH_CONTEXT',
    'host': 'K8S_AUTH_HOST',
    'api_key': 'K8S_AUTH_API_KEY',
    'validate_certs': 'K8S_AUTH_VERIFY_SSL',
    'ca_cert': 'K8S_AUTH_SSL_CA_CERT',
}

_TRUE = ('1', 'true', 'yes', 'on', 'y', 't')
_FALSE = ('0', 'false', 'no', 'off', 'n', 'f')


def connection_settings(params: Mapping[str, Any], environ: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """The connection options with the environment fallbacks applied (None: not set anywhere)."""
    environ = os.environ if environ is None else environ
    settings: Dict[str, Any] = {}
    for option, variable in ENVIRONMENT.items():
        value = params.get(option)
        if value is None and environ.get(variable):
            value = environ[variable]
            if option == 'validate_certs':
                text = value.strip().lower()
                if text not in _TRUE + _FALSE:
                    raise KubeError('%s=%r: expected true or false' % (variable, value))
                value = text in _TRUE
            elif option in ('kubeconfig', 'ca_cert'):
                value = os.path.expanduser(value)
        settings[option] = value
    timeout = params.get('request_timeout')
    settings['request_timeout'] = 30.0 if timeout is None else validate.timeout(timeout, 'request_timeout')
    return settings


def describe_target(settings: Mapping[str, Any]) -> str:
    """Where the client connects from, for error messages (never the token)."""
    if settings.get('host') and not settings.get('kubeconfig'):
        return 'host %s' % settings['host']
    if settings.get('kubeconfig'):
        return 'kubeconfig %s%s' % (settings['kubeconfig'], ' context %s' % settings['context'] if settings.get('context') else '')
    return 'the in-cluster service account or the default kubeconfig%s' % (
        ' context %s' % settings['context'] if settings.get('context') else '')


def client_from_params(params: Mapping[str, Any], environ: Optional[Mapping[str, str]] = None) -> KubeClient:
    """A KubeClient for the module's connection options; raises KubeError naming what is missing."""
    if not HAS_KUBERNETES:
        raise KubeError('the python library kubernetes is required')
    settings = connection_settings(params, environ)
    kubeconfig, context, host = settings['kubeconfig'], settings['context'], settings['host']
    if host:
        validate.endpoint_url(host, 'host')
    if settings['api_key']:
        validate.credential(settings['api_key'], 'api_key')
    if kubeconfig:
        validate.existing_file(kubeconfig, 'kubeconfig')
    if settings['ca_cert']:
        validate.existing_file(settings['ca_cert'], 'ca_cert')
    if host and not kubeconfig:
        configuration = kubernetes.client.Configuration()
    else:
        try:
            configuration = load_configuration(kubeconfig, context)
        except KubeError as exc:
            raise KubeError('%s (tried %s)' % (exc, describe_target(settings))) from None
    if host:
        configuration.host = host.rstrip('/')
    if settings['api_key']:
        configuration.api_key = {'authorization': 'Bearer ' + settings['api_key']}
        configuration.api_key_prefix = {}
        configuration.refresh_api_key_hook = None   # the kubeconfig's token refresher would put its token back
    if settings['validate_certs'] is not None:
        configuration.verify_ssl = settings['validate_certs']
    if settings['ca_cert']:
        configuration.ssl_ca_cert = settings['ca_cert']
    # one attempt per request: request_timeout is the time a call may take, not the time of each of urllib3's retries
    configuration.retries = 0
    return KubeClient(configuration, timeout=settings['request_timeout'])
