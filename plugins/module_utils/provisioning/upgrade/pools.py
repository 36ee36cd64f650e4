# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cloud pools in a Kubernetes upgrade: workers that are machines of a MachineDeployment (the machines area, MCM's
API) are replaced, not upgraded where they stand. The upgrade writes a new MachineClass naming the new kubelet and
points the MachineDeployment at it; the machines controller's rolling update (the deployment's maxSurge /
maxUnavailable) does the rest, as MCM does when Gardener rolls a worker pool onto a new Kubernetes version.

How a class names its kubelet: the label `machine.steward.io/kubelet-version` on the MachineClass (`v1.32.4`), and,
for the AWS provider, the same key as a cloud tag (`providerSpec.tags`), so the instance, its volumes and its
network interfaces carry it too. Which kubelet a new machine really runs is what its image (`ami`) and its user
data (the class's Secret) install: the upgrade copies the current class and changes only what `class_patch` says
(a JSON merge patch in MCM's field names, e.g. `{"providerSpec": {"ami": "ami-new"}}` or `{"secretRef": {"name":
"workers-v1-32"}}`). The new class is named `<base>-v<major>-<minor>-<patch>` (dots as dashes), `<base>` being the
current class's name without the version suffix an earlier upgrade gave it; the old class is kept (its MachineSet
is kept at 0 replicas for a rollback, MCM's revision history).

The pure part (names, the new class, the pool as found, the gate) is plain data in and out; PoolOps acts through a
KubeClient.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, shown
from ansible_collections.steward.cluster.plugins.module_utils.common.names import dns_subdomain
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.objects import merge_patch
from ansible_collections.steward.cluster.plugins.module_utils.kube.selectors import selector_matches
from ansible_collections.steward.cluster.plugins.module_utils.kube.mcm import (
    API_VERSION, KIND_CLASS, KIND_DEPLOYMENT, KIND_MACHINE, KUBELET_VERSION_LABEL, LABEL_NODE, PLURALS, readiness,
)
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import Refused
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.installed import (
    node_kubelet_version, node_ready,
)
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.plan import (
    NodeInstalled, PoolInstalled,
)
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.versions import Version, parse

VERSION_LABEL = KUBELET_VERSION_LABEL
CLASS_FIELDS_KEPT = ('provider', 'providerSpec', 'secretRef', 'credentialsSecretRef', 'nodeTemplate')


# --- pure ---------------------------------------------------------------------------------------------------------
def parse_key(value: Any, field: str) -> Tuple[str, str]:
    """`namespace/name` of a MachineDeployment -> (namespace, name); a bad one names the field and the rule."""
    if not isinstance(value, str) or value.count('/') != 1:
        raise InvalidInput(field, 'namespace/name', 'name a MachineDeployment as namespace/name, got %s'
                           % shown(value), value)
    namespace, name = value.split('/')
    dns_subdomain(namespace, field)
    dns_subdomain(name, field)
    return namespace, name


def slug(version: Version) -> str:
    """`v1.32.4` -> `v1-32-4` (`v1.32.0-rc.1` -> `v1-32-0-rc-1`): a version as part of an object name."""
    return str(version).replace('.', '-').lower()


def class_version(cls: Optional[Mapping[str, Any]]) -> Optional[Version]:
    """The kubelet version a MachineClass names (its VERSION_LABEL); None when it names none."""
    labels = ((cls or {}).get('metadata') or {}).get('labels') or {}
    return parse(labels.get(VERSION_LABEL))


def class_name_for(current: Mapping[str, Any], version: Version) -> str:
    """The new class's name: the current one's without the suffix of the version it names, plus `-<slug>`."""
    name = current['metadata']['name']
    named = class_version(current)
    if named is not None and name.endswith('-' + slug(named)):
        name = name[:-len(slug(named)) - 1]
    out = '%s-%s' % (name, slug(version))
    dns_subdomain(out, 'machine class name')
    return out


def new_class(current: Mapping[str, Any], version: Version, class_patch: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """The MachineClass for `version`: the current class's provider, providerSpec, secretRefs and nodeTemplate,
    `class_patch` merged in (RFC 7386), the version label, and for AWS the version tag."""
    meta = current.get('metadata') or {}
    body: Dict[str, Any] = {'apiVersion': API_VERSION, 'kind': KIND_CLASS}
    for field in CLASS_FIELDS_KEPT:
        if field in current:
            body[field] = copy.deepcopy(current[field])
    if class_patch:
        body = merge_patch(body, dict(class_patch))
    labels = dict(meta.get('labels') or {})
    labels[VERSION_LABEL] = str(version)
    body['metadata'] = {'name': class_name_for(current, version), 'namespace': meta.get('namespace'), 'labels': labels}
    spec = body.get('providerSpec')
    if body.get('provider') == 'AWS' and isinstance(spec, dict):
        spec['tags'] = dict(spec.get('tags') or {}, **{VERSION_LABEL: str(version)})
    return body


def template_class(md: Mapping[str, Any]) -> str:
    return ((((md.get('spec') or {}).get('template') or {}).get('spec') or {}).get('class') or {}).get('name') or ''


def pool_machines(md: Mapping[str, Any], machines: Sequence[Mapping[str, Any]]) -> List[Mapping[str, Any]]:
    """The machines of the deployment: those of its namespace its selector matches (MCM's rule)."""
    selector = (md.get('spec') or {}).get('selector')
    return [m for m in machines if selector_matches(selector, (m.get('metadata') or {}).get('labels') or {})]


def pool_installed(key: str, md: Mapping[str, Any], cls: Optional[Mapping[str, Any]],
                   machines: Sequence[Mapping[str, Any]],
                   nodes: Mapping[str, Mapping[str, Any]]) -> Tuple[PoolInstalled, List[NodeInstalled]]:
    """The pool as found, and a NodeInstalled (worker, `pool` set) for each Node of its machines that reports a
    kubelet (a machine without a Node yet, or a Node before its first status, runs no kubelet to skew-check)."""
    found: List[NodeInstalled] = []
    for machine in pool_machines(md, machines):
        name = ((machine.get('metadata') or {}).get('labels') or {}).get(LABEL_NODE)
        version = node_kubelet_version(nodes.get(name)) if name else None
        if version is not None and name not in [n.name for n in found]:
            found.append(NodeInstalled(name=name, control_plane=False, kubelet=version, pool=key))
    pool = PoolInstalled(key=key, class_name=template_class(md), class_version=class_version(cls),
                         nodes=tuple(n.name for n in found), complete=bool(readiness(md)['ready']))
    return pool, found


def with_pools(nodes: Sequence[NodeInstalled], pool_nodes: Sequence[NodeInstalled]) -> Tuple[NodeInstalled, ...]:
    """The inventory's nodes with the pools' nodes: a worker of the inventory that is a pool's machine becomes that
    pool's (it is replaced, not upgraded in place); the pools' other nodes are added after them."""
    by_name = {n.name: n for n in pool_nodes}
    out = [by_name.pop(n.name) if n.name in by_name and not n.control_plane else n for n in nodes]
    return tuple(out) + tuple(n for n in pool_nodes if n.name in by_name)


def rolled(md: Mapping[str, Any], cls_name: str, machines: Sequence[Mapping[str, Any]],
           nodes: Mapping[str, Mapping[str, Any]], version: Version) -> Tuple[bool, str]:
    """The gate of a pool's step: the deployment points at the class, its rollout is complete (MCM's
    DeploymentComplete: the generation seen, every machine updated and available, no old one left) and every Node
    of its machines reports the kubelet and Ready. (False, what was seen) otherwise."""
    state = readiness(md)
    mine = pool_machines(md, machines)
    behind = []
    for machine in mine:
        name = ((machine.get('metadata') or {}).get('labels') or {}).get(LABEL_NODE)
        node = nodes.get(name) if name else None
        if node is None or node_kubelet_version(node) != version or not node_ready(node):
            behind.append('%s (%s)' % (machine['metadata']['name'], node_kubelet_version(node) if node else 'no Node'))
    seen = ('class %s, %d of %d machines updated, %d available, %d in all%s%s%s' % (
        template_class(md), state['updated'], state['desired'], state['available'], state['replicas'],
        '' if state['observed'] else ', generation not observed yet',
        ', frozen: %s' % state['frozen'].get('message') if state['frozen'] else '',
        ', not at %s: %s' % (version, ', '.join(sorted(behind))) if behind else ''))
    return template_class(md) == cls_name and state['ready'] and not behind, seen


# --- acting -------------------------------------------------------------------------------------------------------
class PoolOps:
    """run.py's ops for one pool (`key` = namespace/name of its MachineDeployment), through the API only."""

    def __init__(self, client: KubeClient, key: str, class_patch: Optional[Mapping[str, Any]] = None):
        self.client = client
        self.key = key
        self.node_name = key       # what run.pending_step matches a machine-deployment step's `pool` against
        self.namespace, self.name = key.split('/')
        self.class_patch = dict(class_patch or {})

    def _path(self, kind: str, name: Optional[str] = None) -> str:
        return api_path(API_VERSION, PLURALS[kind], self.namespace, name)

    def deployment(self) -> Dict[str, Any]:
        return self.client.get(self._path(KIND_DEPLOYMENT, self.name))

    def get_class(self, name: str) -> Optional[Dict[str, Any]]:
        return self.client.get_or_none(self._path(KIND_CLASS, name))

    def wanted_class(self, version: Version) -> Dict[str, Any]:
        """The class for `version`, made from the class the deployment names now."""
        md = self.deployment()
        current = self.get_class(template_class(md))
        if current is None:
            raise Refused('the MachineDeployment %s names the MachineClass %s, which does not exist'
                          % (self.key, template_class(md)), 'machine-class-missing', self.key)
        return new_class(current, version, self.class_patch)

    def create_class(self, body: Mapping[str, Any]) -> None:
        self.client.create(self._path(KIND_CLASS), body)

    def point_at(self, cls_name: str) -> None:
        """The deployment's template names the class (MCM's rolling update starts: a new MachineSet)."""
        self.client.merge_patch(self._path(KIND_DEPLOYMENT, self.name),
                                {'spec': {'template': {'spec': {'class': {'kind': KIND_CLASS, 'name': cls_name}}}}})

    def rolled(self, cls_name: str, version: Version) -> Tuple[bool, str]:
        md = self.deployment()
        machines = self.client.list(self._path(KIND_MACHINE))
        names = {((m.get('metadata') or {}).get('labels') or {}).get(LABEL_NODE) for m in pool_machines(md, machines)}
        nodes = {}
        for name in sorted(n for n in names if n):
            node = self.client.get_or_none(api_path('v1', 'nodes', name=name))
            if node is not None:
                nodes[name] = node
        return rolled(md, cls_name, machines, nodes, version)


def read_pools(client: KubeClient, keys: Sequence[str]) -> Tuple[List[PoolInstalled], List[NodeInstalled], Dict]:
    """Each named pool as found, its Nodes as NodeInstalled, and those Node objects by name."""
    pools, pool_nodes, objects = [], [], {}
    for key in keys:
        namespace, name = key.split('/')
        md = client.get_or_none(api_path(API_VERSION, PLURALS[KIND_DEPLOYMENT], namespace, name))
        if md is None:
            raise Refused('the MachineDeployment %s named in machine_deployments does not exist' % key,
                          'machine-deployment-missing', key)
        cls = client.get_or_none(api_path(API_VERSION, PLURALS[KIND_CLASS], namespace, template_class(md)))
        machines = client.list(api_path(API_VERSION, PLURALS[KIND_MACHINE], namespace))
        nodes = {}
        for machine in pool_machines(md, machines):
            node_name = ((machine.get('metadata') or {}).get('labels') or {}).get(LABEL_NODE)
            node = client.get_or_none(api_path('v1', 'nodes', name=node_name)) if node_name else None
            if node is not None:
                nodes[node_name] = node
        pool, found = pool_installed(key, md, cls, machines, nodes)
        pools.append(pool)
        pool_nodes.extend(found)
        objects.update(nodes)
    return pools, pool_nodes, objects
