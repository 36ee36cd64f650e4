# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The thin I/O layer of the node maintenance modules: read the maintenance.yaml from where it lives (the
`config` option, a file, or the controller's ConfigMap/Secret), give the checks an Environment that
reads the cluster through the Kubernetes API, read the nodes a view describes (describe_nodes) and patch the
one node an edit changes (edit_node). Everything they compute is pure: node_view.py (reading),
node_edit.py (writing)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, about_option
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import NotFound
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config import Config, load_config_for_viewing
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config_source import (
    ConfigSource, extract_text, parse_config_source as parse_source_text)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.environment import Environment
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import ConfigError, OptionError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.leases import KubeLeaseStore
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.node_edit import NodePlan, plan_node_change
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.node_view import node_view


def parse_config_source(text: str) -> ConfigSource:
    """The `config_source` option: `configmap/<ns>/<name>[/<key>]` or `secret/<ns>/<name>[/<key>]` (the controller's
    syntax, config_source.py); OptionError."""
    try:
        source = parse_source_text(text)
    except ConfigError as exc:
        raise exc.inside('config_source').recast(OptionError) from None
    if source is None:
        raise OptionError('config_source', 'required', 'expected configmap/<namespace>/<name>[/<key>] or '
                          'secret/<namespace>/<name>[/<key>], got %r' % (text,), text)
    return source


def config_text(obj: Mapping[str, Any], source: ConfigSource) -> str:
    """The maintenance.yaml text out of the ConfigMap or Secret; OptionError when the key is missing or unreadable."""
    try:
        return extract_text(source, obj)
    except ConfigError as exc:
        raise exc.inside(str(source)).recast(OptionError) from None


def read_config(config: Optional[Mapping[str, Any]], config_file: Optional[str], config_source: Optional[str],
                client: Optional[KubeClient]) -> Tuple[Optional[Config], str]:
    """(Config or None, where it came from). Raises OptionError (unreadable source) or ConfigError (bad content);
    either names the option (`config_file`, `config_source`) as its field, the message then says where inside."""
    if config is not None:
        return load_config_for_viewing(dict(config), 'config'), 'config'
    if config_file:
        try:   # a regular, readable file: opening a FIFO would block
            validate.existing_file(config_file, 'config_file')
        except InvalidInput as exc:
            raise exc.recast(OptionError) from None
        try:
            with open(config_file, 'rb') as handle:
                text = handle.read()
        except OSError as exc:
            raise OptionError('config_file', 'readable', 'cannot read %s: %s' % (config_file, exc.strerror or exc),
                              config_file) from None
        with about_option('config_file'):   # the error's field is the file (and the path in it): name the option
            return load_config_for_viewing(text, config_file), config_file
    if config_source:
        source = parse_config_source(config_source)
        plural = 'configmaps' if source.kind == 'configmap' else 'secrets'
        if client is None:
            raise OptionError('config_source', 'client', '%s: no Kubernetes client' % source)
        try:
            obj = client.get(api_path('v1', plural, source.namespace, source.name))
        except NotFound:
            raise OptionError('config_source', 'exists', '%s %s/%s does not exist'
                              % (source.kind, source.namespace, source.name)) from None
        with about_option('config_source'):   # a missing key, or the YAML inside
            return load_config_for_viewing(config_text(obj, source), str(source)), str(source)
    return None, ''


def kube_environment(client: KubeClient, all_nodes: Optional[List[Dict[str, Any]]] = None) -> Environment:
    """What the checks of the info view may read: all nodes (listed once, or `all_nodes`), pods per node, leases."""
    cache: Dict[str, List[Dict[str, Any]]] = {} if all_nodes is None else {'nodes': all_nodes}

    def nodes() -> List[Dict[str, Any]]:
        if 'nodes' not in cache:
            cache['nodes'] = client.list(api_path('v1', 'nodes'))
        return cache['nodes']

    def pods_on_node(node_name: str) -> List[Dict[str, Any]]:
        return client.list(api_path('v1', 'pods'), field_selector='spec.nodeName=%s' % node_name)

    return Environment(nodes=nodes, pods_on_node=pods_on_node, leases=KubeLeaseStore(client))


def _node(client: KubeClient, name: str) -> Dict[str, Any]:
    try:
        return client.get(api_path('v1', 'nodes', name=name))
    except NotFound:
        raise OptionError('name', 'exists', 'node %s not found (API server %s)' % (name, client.host), name) from None


def describe_nodes(client: KubeClient, *, name: Optional[str], label_selector: Optional[str],
                   config: Optional[Mapping[str, Any]], config_file: Optional[str], config_source: Optional[str],
                   now: float) -> Dict[str, Any]:
    """node_maintenance_info's read: the maintenance config, then the node `name` (OptionError when it does not
    exist) or the nodes `label_selector` selects (all without one), each viewed as of `now`."""
    loaded, source = read_config(config, config_file, config_source, client)
    all_nodes = None
    if name:
        nodes = [_node(client, name)]
    else:
        nodes = client.list(api_path('v1', 'nodes'), label_selector=label_selector)
        all_nodes = None if label_selector else nodes
    env = kube_environment(client, all_nodes)
    views = [node_view(n, loaded, now, env) for n in sorted(nodes, key=lambda n: n['metadata']['name'])]
    return dict(changed=False, nodes=views, config_source=source,
                config_warnings=list(loaded.warnings) if loaded else [])


def edit_node(client: KubeClient, name: str, annotations: Dict[str, Any], labels: Dict[str, Any],
              profiles: Optional[List[str]], profile_mode: str, check_mode: bool) -> NodePlan:
    """node_maintenance's write: read the node (OptionError when it does not exist), plan the change, and merge-patch
    it unless nothing changes or this is check mode."""
    path = api_path('v1', 'nodes', name=name)
    plan = plan_node_change(_node(client, name), annotations, labels, profiles, profile_mode)
    if plan.changed and not check_mode:
        client.merge_patch(path, plan.patch)
    return plan
