# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What cluster_genesis and node_join share around the engine: parameters into a Request and the kubelet hook
(which runs systemctl through the module's run_command, passed in: nothing here imports AnsibleModule)."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping

from ansible_collections.steward.cluster.plugins.module_utils.common.systemd import ansible_runner, answer, systemctl
from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, shown
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import layout, lb
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.args import cluster_params, parse_now
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.certs import parse_authority
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import ProvisioningError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.kubelet import (
    KUBELET_BINARY, check_registration_labels,
)
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.provision import Request, provision
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.spec import (
    ROLES, WORKER, parse_cluster, parse_node,
)

KUBELET_FILES = (layout.KUBELET_UNIT, layout.KUBELET_CONFIG, layout.KUBELET_FLAGS, layout.KUBECONFIG['kubelet'],
                 layout.KUBELET_CLIENT_PEM)


def provision_request(params: Mapping[str, Any], *, bootstrap: bool) -> Request:
    """A genesis (`bootstrap`) or join request from module parameters; InvalidInput names the first bad option."""
    cluster = parse_cluster(cluster_params(params))
    node_params = dict(params, role='control-plane' if bootstrap else (params.get('role') or WORKER))
    validate.one_of(node_params['role'], 'role', ROLES)
    node = parse_node(node_params, cluster)
    check_registration_labels(node.labels)
    root = validate.absolute_path('/' if params.get('root') is None else params['root'], 'root')
    command = params.get('lb_validate_command') or list(lb.DEFAULT_VALIDATE_COMMAND)
    if not any('{config}' in part for part in command):
        raise InvalidInput('lb_validate_command', 'placeholder', 'must contain {config} (the file to check), got %s'
                           % shown(command), command)
    return Request(
        cluster=cluster, node=node, root=root, now=parse_now(params.get('now')),
        authority=parse_authority(params.get('authority')), bootstrap=bootstrap,
        renew_ca=bool(params.get('renew_ca')), wait=bool(params.get('wait', True)),
        wait_timeout=validate.timeout(params.get('wait_timeout', 300.0), 'wait_timeout'),
        etcd_timeout=validate.timeout(params.get('etcd_timeout', 5.0), 'etcd_timeout', maximum=300),
        lb_validate_command=tuple(command) if params.get('lb_validate', True) else None,
        kubelet_binary=validate.absolute_path(params.get('kubelet_binary') or KUBELET_BINARY, 'kubelet_binary'),
        allow_downgrade=bool(params.get('allow_downgrade')),
    )


def kubelet_hook(run_command: Any, root: str, manage: bool):
    """After the files are written: on a real root, (re)start the kubelet when its files changed, and make sure it
    runs; elsewhere (a lab root, a build root) nothing, a stand-in runs the static pods."""
    def hook(changed: List[str]) -> None:
        if not manage or os.path.normpath(root) != '/':
            return
        run = ansible_runner(run_command)
        steps = [('', 'daemon-reload'), (layout.KUBELET_SERVICE, 'enable'),
                 (layout.KUBELET_SERVICE, 'restart' if any(p in KUBELET_FILES for p in changed) else 'start')]
        for unit, verb in steps:
            done = systemctl(unit, verb, run=run)
            if done.returncode != 0:
                raise ProvisioningError('%s failed (rc=%d): %s' % (' '.join(done.args), done.returncode, answer(done)),
                                        'kubelet')
    return hook


def provision_node(run_command: Any, params: Mapping[str, Any], check_mode: bool, *,
                   bootstrap: bool) -> Dict[str, Any]:
    """cluster_genesis (`bootstrap`) and node_join: parse the request, provision, and (re)start the kubelet through
    `run_command` (the module's) when its files changed."""
    request = provision_request(params, bootstrap=bootstrap)
    hook = kubelet_hook(run_command, request.root, params.get('manage_kubelet', True))
    return provision(request, check_mode, after_write=hook)


def disable_kubelet(run_command: Any, root: str, manage: bool) -> List[str]:
    """After a teardown on a real root: stop and disable the kubelet (`run_command` is the module's); the warnings
    to report when systemctl fails (the files are gone either way, so this is no failure)."""
    if not manage or os.path.normpath(root) != '/':
        return []
    done = systemctl(layout.KUBELET_SERVICE, 'disable', '--now', run=ansible_runner(run_command))
    return [] if done.returncode == 0 else ['stopping the kubelet failed (rc=%d): %s' % (done.returncode, answer(done))]
