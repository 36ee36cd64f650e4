# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node maintenance modules' parameters, parsed once: one `parse_<module>(params)` per module, raising the
area's OptionError (an InvalidInput naming the option) before the cluster is contacted, in check mode too. The
maintenance config itself is checked where it is read (kube_reads.read_config), as the controller reads it."""

from __future__ import annotations

import time
from typing import Any, Dict, Mapping

from ansible_collections.steward.cluster.plugins.module_utils.common import names
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import input_errors_as
from ansible_collections.steward.cluster.plugins.module_utils.common.times import parse_rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.kube.selectors import parse_label_selector
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import OptionError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.node_edit import changes_from, shortcut_changes


@input_errors_as(OptionError)
def parse_node_maintenance(params: Mapping[str, Any]) -> Dict[str, Any]:
    """The node (a Node name) and the (annotations, labels) to apply, checked before the cluster is contacted."""
    name = names.dns_subdomain(params['name'], 'name')
    annotations, labels = shortcut_changes(params['state'], params['request_annotation'], params['request_label'],
                                           params['approval_annotation'])
    annotations.update(changes_from('annotations', params['annotations']))
    labels.update(changes_from('labels', params['labels'], labels=True))
    return dict(name=name, annotations=annotations, labels=labels, profiles=params['profile'],
                profile_mode=params['profile_mode'])


@input_errors_as(OptionError)
def parse_node_maintenance_info(params: Mapping[str, Any]) -> Dict[str, Any]:
    """`now` (RFC 3339, else the current time) in seconds, and the label selector, refused here before any request."""
    now = parse_rfc3339(params['now'], 'now').timestamp() if params['now'] else time.time()
    if params['name'] is not None:
        names.dns_subdomain(params['name'], 'name')   # a Node name, before any request
    if params['label_selector']:
        parse_label_selector(params['label_selector'], 'label_selector')
    return dict(name=params['name'], label_selector=params['label_selector'], config=params['config'],
                config_file=params['config_file'], config_source=params['config_source'], now=now)
