# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The druid modules' parameters, parsed once: one `parse_<module>(params)` per module, raising InvalidInput (its
field names the option) before the cluster is contacted, in check mode too."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common import names
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.kube.selectors import parse_label_selector


def parse_etcd_druid_info(params: Mapping[str, Any]) -> Dict[str, Any]:
    """`namespace` (None: every namespace), `name` and `label_selector` (kubernetes.core's `label_selectors`
    joined by commas, each term must hold, as k8s_info joins them), each checked as the API server would check
    it, so a typo is refused naming its option instead of answering an empty list."""
    namespace: Optional[str] = None
    if params.get('namespace') is not None:
        namespace = names.dns_label(params['namespace'], 'namespace')
    name: Optional[str] = None
    if params.get('name') is not None:
        name = names.dns_subdomain(params['name'], 'name')
    selectors: List[str] = []
    for index, selector in enumerate(params.get('label_selectors') or []):
        field = 'label_selectors[%d]' % index
        if not isinstance(selector, str) or not selector.strip():
            raise InvalidInput(field, 'label-selector', 'must be a non-empty label selector such as app=etcd-main',
                               selector)
        parse_label_selector(selector, field)
        selectors.append(selector.strip())
    return dict(namespace=namespace, name=name, label_selector=','.join(selectors) or None)
