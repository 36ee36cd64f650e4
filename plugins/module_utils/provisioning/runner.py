# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the provisioning modules share around the engine, written against the module object's interface
(params, check_mode, _diff, run_command, warn, exit_json, fail_json) without importing AnsibleModule."""

from __future__ import annotations

import os
import traceback
from typing import Any, Dict, List

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import layout
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.args import failure, provision_request
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import ProvisioningError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.pki import HAS_CRYPTOGRAPHY
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.provision import provision
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.render import HAS_YAML

KNOWN = (InvalidInput, ProvisioningError, EtcdError, KubeError)
KUBELET_FILES = (layout.KUBELET_UNIT, layout.KUBELET_CONFIG, layout.KUBELET_FLAGS, layout.KUBECONFIG['kubelet'],
                 layout.KUBELET_CLIENT_PEM)


def missing_libraries() -> List[str]:
    return [name for name, present in (('cryptography', HAS_CRYPTOGRAPHY), ('PyYAML', HAS_YAML)) if not present]


def kubelet_hook(module: Any, root: str, manage: bool):
    """After the files are written: on a real root, (re)start the kubelet when its files changed, and make sure it
    runs; elsewhere (a lab root, a build root) nothing, a stand-in runs the static pods."""
    def hook(changed: List[str]) -> None:
        if not manage or os.path.normpath(root) != '/':
            return
        steps = [['systemctl', 'daemon-reload'], ['systemctl', 'enable', 'kubelet.service']]
        steps.append(['systemctl', 'restart' if any(p in KUBELET_FILES for p in changed) else 'start',
                      'kubelet.service'])
        for argv in steps:
            rc, out, err = module.run_command(argv)
            if rc != 0:
                raise ProvisioningError('%s failed (rc=%d): %s' % (' '.join(argv), rc, (err or out).strip()), 'kubelet')
    return hook


def exit_with(module: Any, result: Dict[str, Any]) -> None:
    for warning in result.pop('warnings', []) or []:
        module.warn(warning)
    diff = result.pop('diff', None)
    if module._diff and result.get('changed') and diff:
        result['diff'] = diff
    module.exit_json(**result)


def fail_with(module: Any, exc: Exception) -> None:
    kwargs = failure(exc)
    if not isinstance(exc, (InvalidInput,)):
        kwargs['exception'] = traceback.format_exc()
    module.fail_json(**kwargs)


def run_provision(module: Any, bootstrap: bool) -> None:
    """cluster_genesis (bootstrap) and node_join: validate, provision, report."""
    try:
        request = provision_request(module.params, bootstrap=bootstrap)
        result = provision(request, module.check_mode,
                           after_write=kubelet_hook(module, request.root, module.params['manage_kubelet']))
    except KNOWN as exc:
        fail_with(module, exc)
        return
    exit_with(module, result)
