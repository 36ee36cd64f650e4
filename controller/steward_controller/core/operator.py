# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kopf side: a registry with every handler, and kopf's own settings."""

from __future__ import annotations

import logging
from typing import Any

import kopf

from steward_controller import GROUP
from steward_controller.core.loops import all_loops
from steward_controller.core.runtime import Runtime

log = logging.getLogger('steward.operator')


CANCELLATION_POLLING = 1.0   # seconds between two checks that a stopped timer of a deleted object has exited


def connection_info(configuration: Any, trust_env: bool = False) -> kopf.ConnectionInfo:
    """kopf's credentials from the kubernetes client Configuration our own client was built from (as kopf's
    login_via_client reads the client library's default one)."""
    header = configuration.get_api_key_with_prefix('BearerToken') or configuration.get_api_key_with_prefix('authorization')
    parts = header.split(' ', 1) if header else []
    scheme, token = (None, None) if not parts else (None, parts[0]) if len(parts) == 1 else (parts[0], parts[1])
    return kopf.ConnectionInfo(server=configuration.host, ca_path=configuration.ssl_ca_cert,
                               insecure=not configuration.verify_ssl, username=configuration.username or None,
                               password=configuration.password or None, scheme=scheme, token=token,
                               certificate_path=configuration.cert_file, private_key_path=configuration.key_file,
                               trust_env=trust_env)


def build_registry(runtime: Runtime) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    loops = [loop for loop in all_loops() if runtime.settings.enabled(loop.name)]
    # kopf discovers CRDs and namespaces only for loops with resource handlers: the others' roles grant no list
    scanning = any(loop.watches_resources for loop in loops)

    @kopf.on.login(registry=registry)
    def login(settings: kopf.OperatorSettings, **kwargs: Any) -> Any:
        """kopf's watches use the credentials of our own client: with --kubeconfig that file (kopf alone would read
        only $KUBECONFIG or ~/.kube/config, and prefer a pod's service account), else what kopf finds itself."""
        if runtime.settings.kubeconfig:
            return connection_info(runtime.client.configuration, settings.networking.trust_env)
        return kopf.login_via_client(settings=settings, **kwargs)

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        # Progress and diff-base in annotations of our own group: status stays ours and schema-valid.
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
            prefix=GROUP, key='last-handled-configuration')
        settings.persistence.finalizer = GROUP + '/finalizer'
        settings.posting.enabled = False  # we post our own, meaningful Events
        settings.watching.server_timeout = 60
        settings.watching.client_timeout = 90
        settings.networking.request_timeout = 30
        settings.process.ultimate_exiting_timeout = 10
        settings.scanning.disabled = not scanning
        # A timer (kopf puts its finalizer on every object a timer watches) that is mid-tick when its object is
        # deleted -- the EtcdOperatorTask loop deletes a finished task from its own tick -- is checked again only
        # after `cancellation_polling`, kopf's default a minute: the object stayed Terminating that long.
        settings.background.cancellation_polling = CANCELLATION_POLLING
        logging.getLogger('kopf.objects').setLevel(logging.WARNING)

    for loop in loops:
        loop.register(registry, runtime)
    log.info('control loops: %s', ', '.join(runtime.settings.controllers) or 'none')
    return registry
