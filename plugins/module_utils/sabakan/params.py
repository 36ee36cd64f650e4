# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sabakan modules' parameters, parsed once: one `parse_<module>(params)` per module, raising the area's
OptionError (an InvalidInput naming the option) before any input is read or anything is written, in check mode
too. The inputs the options point at (template, constraints, machines, files) are checked where they are read
(source.py, files.py), as the controller and the inventory plugin read them."""

from __future__ import annotations

from typing import Any, Dict, Mapping

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import about_option, input_errors_as
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.args import check_node_taints, check_wait_seconds
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.client import query_variables
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import OptionError
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.files import parse_mode
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.machines import resolve_now
from ansible_collections.steward.cluster.plugins.module_utils.sabakan import repair_file
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.repair_config import load_repair_config


PATH_OPTIONS = ('cluster_file', 'queue_file', 'reboot_queue_file', 'template_file', 'constraints_file', 'machines_file')


@input_errors_as(OptionError)
def check_paths(params: Mapping[str, Any]) -> None:
    """The file options: one line of text without control characters (what a name in a directory listing shows)."""
    for option in PATH_OPTIONS:
        if params.get(option) is not None:
            validate.text(params[option], option)


def parse_sabakan_cluster(params: Mapping[str, Any]) -> Dict[str, Any]:
    check_paths(params)
    return dict(now=resolve_now(params['now']), mode=parse_mode(params['mode']),
                node_taints=check_node_taints(params['node_taints']),
                wait_retired_seconds=check_wait_seconds(params['wait_retired_seconds']))


def parse_sabakan_repair(params: Mapping[str, Any]) -> Dict[str, Any]:
    check_paths(params)
    return dict(now=resolve_now(params['now']), mode=parse_mode(params['mode']))


def parse_sabakan_machine_info(params: Mapping[str, Any], preset: Mapping[str, Any]) -> Dict[str, Any]:
    """The query variables: the user's `variables` over the preset's (`having: {colour: ...}` is about the option
    `variables`)."""
    with about_option('variables'):
        return query_variables(params['variables'], preset)


@input_errors_as(OptionError)
def check_repair_run_options(params: Mapping[str, Any]) -> None:
    """The options of state=run / absent, whatever the state (a bad value is refused even where it is unused)."""
    validate.timeout(params['run_timeout'], 'run_timeout')
    validate.timeout(params['poll_interval'], 'poll_interval')
    if params['index'] is not None:
        validate.integer(params['index'], 'index', minimum=0)
    if params['kubeconfig'] is not None:
        validate.existing_file(params['kubeconfig'], 'kubeconfig')
    if params['context'] is not None:
        validate.text(params['context'], 'context', max_length=253)
    if params['api_key'] is not None:
        validate.credential(params['api_key'], 'api_key')
    if params['host'] is not None:
        validate.endpoint_url(params['host'], 'host')
    if repair_file.wants_kube(params):
        repair_file.kube_client(params)   # read and checked now; no request is sent
    if params['repair'] is not None:
        load_repair_config(params['repair'])
