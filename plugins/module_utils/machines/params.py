# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The machines modules' parameters, parsed once: one `parse_<module>(params)` per module, raising InvalidInput
(its field names the option) before the cluster is contacted, in check mode too. The MachineDeployment itself is
built and checked by ansible_view.desired_deployment, as the controller checks one."""

from __future__ import annotations

from typing import Any, Dict, Mapping

from ansible_collections.steward.cluster.plugins.module_utils.common import names, validate
from ansible_collections.steward.cluster.plugins.module_utils.kube.selectors import parse_label_selector
from ansible_collections.steward.cluster.plugins.module_utils.machines.ansible_view import desired_deployment


def parse_machine_deployment(params: Mapping[str, Any]) -> Dict[str, Any]:
    """The desired MachineDeployment; `wait_timeout` is checked with or without `wait`, before any call."""
    desired = desired_deployment(params)
    validate.timeout(params['wait_timeout'], 'wait_timeout')
    return desired


def parse_machine_info(params: Mapping[str, Any]) -> str:
    """The namespace; the filters checked as the names they must be, the label selector refused here rather than by
    the API server."""
    namespace = names.dns_label(params['namespace'], 'namespace')
    for option in ('name', 'machine_deployment'):
        if params[option] is not None:
            names.dns_subdomain(params[option], option)
    if params['label_selector']:
        parse_label_selector(params['label_selector'], 'label_selector')
    return namespace
