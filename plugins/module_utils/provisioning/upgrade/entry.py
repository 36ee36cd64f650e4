# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""steward.cluster.cluster_upgrade's work: options validated (all of them, in check mode too), what is installed
read, the plan made, and this node's step of the asked stage run. The module is a shell around `cluster_upgrade`."""

from __future__ import annotations

import datetime
from typing import Any, Dict, List, Mapping

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, field_of, shown
from ansible_collections.steward.cluster.plugins.module_utils.common.names import dns_subdomain
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.versions import format_version
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.versions import image_version as etcd_version
from ansible_collections.steward.cluster.plugins.module_utils.kube.args import client_from_params
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import NotFound
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.constants import (
    IN_MAINTENANCE, PROFILE_LABEL, REQUIRED, STATE_LABEL, split_profiles,
)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config_source import parse_config_source
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import ConfigError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.kube_reads import read_config
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import Refused
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.files import Root
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.spec import DEFAULTS
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade import batches, host, pools, renewal, run
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade import record as records
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.plan import (
    APISERVER, COMPONENTS, KINDS, KUBELET, MACHINE_DEPLOYMENT, etcd_wanted, plan_upgrade,
)
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.pools import parse_key
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.versions import parse_option

PLAN = 'plan'
STAGES = (PLAN,) + KINDS
PLACEHOLDERS = {'version': 'v1.0.0', 'semver': '1.0.0', 'root': '/', 'binary': '/usr/bin/kubelet'}


def _strings(value: Any, field: str) -> List[str]:
    if not isinstance(value, (list, tuple)):
        raise InvalidInput(field, 'list', 'expected a list of strings, got %s' % shown(value), value)
    return [validate.text(item, field_of(field, i)) for i, item in enumerate(value)]


def _names(value: Any, field: str, required: bool) -> List[str]:
    items = _strings(value, field) if value is not None else []
    if required and not items:
        raise InvalidInput(field, 'required', 'name at least one node', value)
    for i, name in enumerate(items):
        dns_subdomain(name, field_of(field, i))
    if len(set(items)) != len(items):
        raise InvalidInput(field, 'unique', 'a node is named twice: %s' % shown(items), items)
    return items


def _install_command(value: Any) -> List[str]:
    command = _strings(value or [], 'kubelet_install_command')
    for i, part in enumerate(command):
        try:
            part.format(**PLACEHOLDERS)
        except (KeyError, IndexError, ValueError) as exc:
            raise InvalidInput(field_of('kubelet_install_command', i), 'placeholder', 'only {version}, {semver}, '
                               '{root} and {binary} may be used (write {{ and }} for braces): %s' % exc, part) from None
    return command


def _etcd_image(value: Any) -> Any:
    if value is None or value == '':
        return None
    image = validate.text(value, 'etcd_image')
    if etcd_version(image) is None:
        raise InvalidInput('etcd_image', 'version-tag', 'must be an etcd image whose tag names its version (like '
                           'registry.k8s.io/etcd:3.5.21-0), got %s' % shown(image), image)
    return image


def _config_source(value: Any) -> Any:
    """`configmap/<ns>/<name>[/<key>]` or `secret/...` (the maintenance controller's syntax), kept as text."""
    if not value:
        return None
    text = validate.text(value, 'maintenance_config_source')
    try:
        parse_config_source(text)
    except ConfigError as exc:
        raise InvalidInput('maintenance_config_source', exc.rule, str(exc), text) from None
    return text


def parse(params: Mapping[str, Any]) -> Dict[str, Any]:
    stage = validate.one_of(params.get('stage') or PLAN, 'stage', STAGES)
    control_plane = _names(params.get('control_plane'), 'control_plane', True)
    workers = _names(params.get('workers'), 'workers', False)
    both = set(control_plane) & set(workers)
    if both:
        raise InvalidInput('workers', 'unique', '%s named in control_plane too' % ', '.join(sorted(both)), sorted(both))
    pools = [parse_key(v, field_of('machine_deployments', i)) for i, v in enumerate(
        _strings(params.get('machine_deployments') or [], 'machine_deployments'))]
    pool_keys = ['%s/%s' % p for p in pools]
    if len(set(pool_keys)) != len(pool_keys):
        raise InvalidInput('machine_deployments', 'unique', 'a MachineDeployment is named twice: %s' % shown(pool_keys),
                           pool_keys)
    pool = params.get('machine_deployment')
    if pool is not None:
        pool = '%s/%s' % parse_key(pool, 'machine_deployment')
    if stage == MACHINE_DEPLOYMENT:
        if not pool:
            raise InvalidInput('machine_deployment', 'required', 'stage %s acts on one pool: name its '
                               'MachineDeployment (namespace/name)' % stage, pool)
        if pool not in pool_keys:
            raise InvalidInput('machine_deployment', 'member', '%s is not in machine_deployments' % pool, pool)
    class_patch = params.get('class_patch')
    if class_patch is not None and not isinstance(class_patch, dict):
        raise InvalidInput('class_patch', 'mapping', 'a JSON merge patch of the MachineClass (MCM field names, e.g. '
                           '{"providerSpec": {"ami": "ami-..."}}), got %s' % shown(class_patch), class_patch)
    for forbidden in ('metadata', 'apiVersion', 'kind'):
        if class_patch and forbidden in class_patch:
            raise InvalidInput('class_patch', 'fields', '%s is set by the upgrade (name and version label), not by '
                               'the patch' % forbidden, class_patch)
    node_name = params.get('node_name')
    if stage != MACHINE_DEPLOYMENT and (stage != PLAN or node_name):
        if not node_name:
            raise InvalidInput('node_name', 'required', 'stage %s runs on one node: name it' % stage, node_name)
        dns_subdomain(node_name, 'node_name')
        if node_name not in control_plane + workers:
            raise InvalidInput('node_name', 'member', '%s is in neither control_plane nor workers' % node_name,
                               node_name)
    return {
        'stage': stage,
        'target': parse_option(params.get('version'), 'version'),
        'via': [parse_option(v, field_of('via', i)) for i, v in enumerate(params.get('via') or [])],
        'control_plane': control_plane, 'workers': workers, 'node_name': node_name,
        'root': validate.absolute_path('/' if params.get('root') is None else params['root'], 'root'),
        'kubelet_binary': validate.absolute_path(params.get('kubelet_binary') or '/usr/bin/kubelet', 'kubelet_binary'),
        'install_command': _install_command(params.get('kubelet_install_command')),
        'etcd_image': _etcd_image(params.get('etcd_image')),
        'max_unavailable': validate.integer(params.get('max_unavailable', 1), 'max_unavailable', minimum=1),
        'max_maintenance': (None if params.get('max_maintenance') is None else
                            validate.integer(params['max_maintenance'], 'max_maintenance', minimum=1)),
        'renew_certificates': bool(params.get('renew_certificates', True)),
        'renew_before_days': validate.integer(params.get('renew_before_days', DEFAULTS['renew_before_days']), 'renew_before_days', minimum=0,
                                              maximum=3650),
        'cert_days': validate.integer(params.get('cert_days', DEFAULTS['cert_days']), 'cert_days', minimum=1, maximum=3650),
        'maintenance_config_source': _config_source(params.get('maintenance_config_source')),
        'maintenance_config_file': (validate.absolute_path(params['maintenance_config_file'], 'maintenance_config_file')
                                    if params.get('maintenance_config_file') else None),
        'maintenance_profile': (validate.text(params['maintenance_profile'], 'maintenance_profile')
                                if params.get('maintenance_profile') else None),
        'timeout': validate.timeout(params.get('timeout', 300.0), 'timeout'),
        'machine_deployments': pool_keys, 'machine_deployment': pool, 'class_patch': class_patch or {},
        'rollout_timeout': validate.timeout(params.get('rollout_timeout', 1800.0), 'rollout_timeout'),
        'drain': host.DrainOptions(
            timeout=validate.timeout(params.get('drain_timeout', 600.0), 'drain_timeout'),
            eviction_timeout=validate.timeout(params.get('eviction_timeout', 120.0), 'eviction_timeout'),
            force=bool(params.get('force')),
            protected_namespaces=tuple(_names(params.get('protected_namespaces'), 'protected_namespaces', False))),
    }


def _list_or_none(client: KubeClient, path: str) -> List[Dict[str, Any]]:
    try:
        return client.list(path)
    except NotFound:   # a server without the policy/v1 API: no budgets
        return []


def workers_under_way(nodes: Mapping[str, Any], workers: List[str], target: str) -> List[str]:
    """Workers under way: a record for the target before `done`, or a node-maintenance state past operational."""
    out = []
    for name in workers:
        rec = records.read(nodes.get(name))
        state = (((nodes.get(name) or {}).get('metadata') or {}).get('labels') or {}).get(STATE_LABEL)
        if (rec is not None and rec.version == target and rec.phase != 'done') or state in (REQUIRED, IN_MAINTENANCE):
            out.append(name)
    return out


def _limits(p: Dict[str, Any], client: KubeClient, nodes: Mapping[str, Any]) -> batches.Limits:
    """What bounds the workers' batches: max_unavailable; maxMaintenance (the option, and the profile's in the
    maintenance config named by maintenance_config_source / _file - `maintenance_profile`, else every profile the
    workers' `cloud.sap/maintenance-profile` labels name, the smallest - less the nodes in maintenance that are not
    ours); the PodDisruptionBudgets and the pods on the workers."""
    if not p['workers']:
        return batches.Limits(p['max_unavailable'])
    bound = p['max_maintenance']
    if p['maintenance_config_source'] or p['maintenance_config_file']:
        config, _where = read_config(None, p['maintenance_config_file'], p['maintenance_config_source'], client)
        if p['maintenance_profile']:
            profiles = [p['maintenance_profile']]
        else:
            profiles = sorted({name for w in p['workers'] for name in split_profiles(
                (((nodes.get(w) or {}).get('metadata') or {}).get('labels') or {}).get(PROFILE_LABEL, ''))})
        found = [m for m in (batches.max_maintenance_of(config, name) for name in profiles) if m is not None]
        if found:
            others = batches.in_maintenance_elsewhere(
                {n['metadata']['name']: n for n in client.list(api_path('v1', 'nodes'))}, p['workers'], STATE_LABEL)
            slots = max(1, min(found) - len(others))
            bound = slots if bound is None else min(bound, slots)
    pods = _list_or_none(client, api_path('v1', 'pods'))
    budgets = tuple(batches.budget_of(pdb, pods)
                    for pdb in _list_or_none(client, api_path('policy/v1', 'poddisruptionbudgets')))
    return batches.Limits(p['max_unavailable'], bound, budgets, batches.evictable_pods(pods, p['workers']))


def _certificates_due(plan: Any, p: Dict[str, Any]) -> List[Dict[str, Any]]:
    """For the plan stage on a control-plane node (node_name, root): the certificates its pending control-plane
    steps will renew on the way, each with the step (check mode shows them: "renew apiserver cert: expires in N
    days")."""
    now = datetime.datetime.now(datetime.timezone.utc)
    kinds = []
    for step in plan.node_steps(p['node_name'], (APISERVER, COMPONENTS)):
        if step.kind not in kinds:
            kinds.append(step.kind)
    read = Root(p['root']).read
    return [dict(d.as_dict(), step=kind) for kind in kinds for d in renewal.due(read, kind, now, p['renew_before_days'])]


def cluster_upgrade(params: Mapping[str, Any], check_mode: bool, runner: host.Runner = host.default_runner) -> Dict[str, Any]:
    p = parse(params)
    client = client_from_params(params)
    installed, nodes = host.read_installed(client, p['control_plane'], p['workers'], local_node=p['node_name'],
                                           root=p['root'], kubelet_binary=p['kubelet_binary'], run=runner,
                                           machine_deployments=p['machine_deployments'])
    limits = _limits(p, client, nodes) if p['stage'] == PLAN else batches.Limits(p['max_unavailable'])
    plan = plan_upgrade(installed, p['target'], p['via'], p['max_unavailable'],
                        etcd_check=bool(params.get('etcd_check', True)), etcd_image=p['etcd_image'],
                        batching=limits, in_flight=workers_under_way(nodes, p['workers'], str(p['target'])))
    result: Dict[str, Any] = {
        'changed': False, 'target': str(p['target']), 'plan': plan.as_dict(), 'status': run.status(plan, nodes),
        'installed': {n.name: {k: str(v) if v is not None else None for k, v in (
            ('kubelet', n.kubelet), ('kube-apiserver', n.apiserver), ('kube-controller-manager', n.controller_manager),
            ('kube-scheduler', n.scheduler))} for n in installed.nodes},
        'step': None, 'actions': [], 'blocked': False, 'warnings': [],
    }
    plan.check()
    if p['etcd_image'] is not None:
        table = etcd_wanted(plan.hops)
        named = etcd_version(p['etcd_image'])
        if table is not None and named is not None and named < table:
            result['warnings'].append('etcd_image names etcd %s, older than the %s kubeadm ships with %s (its '
                                      'SupportedEtcdVersion): the upgrade uses it as asked' % (
                                          format_version(named), format_version(table), plan.hops[-1]))
    if not p['install_command'] and any(s.kind == KUBELET for s in plan.steps):
        result['warnings'].append('kubelets are to be upgraded and kubelet_install_command is not set: the kubelet '
                                  'stage will refuse (kubelet-install) unless the binaries already name the target')
    if p['stage'] == PLAN and p['node_name'] and p['renew_certificates']:
        result['certificates'] = _certificates_due(plan, p)
    if p['stage'] == PLAN:
        result['msg'] = ('cluster at %s: nothing to do' % p['target'] if plan.done else
                         'upgrade to %s through %s: %d step(s), next %s' % (
                             p['target'], ', '.join(str(h) for h in plan.hops), len(plan.steps),
                             ', '.join('%s on %s' % (s['kind'], ','.join(s['nodes']) or 'the cluster')
                                       for s in result['status']['next'])))
        return result
    ops: Any
    if p['stage'] == MACHINE_DEPLOYMENT:
        ops, timeout = pools.PoolOps(client, p['machine_deployment'], p['class_patch']), p['rollout_timeout']
    else:
        ops, timeout = host.HostOps(
            node_name=p['node_name'], root=p['root'], client=client, kubelet_binary=p['kubelet_binary'],
            install_command=p['install_command'], manage_kubelet=bool(params.get('manage_kubelet', True)),
            drain=p['drain'], run=runner, maintenance=bool(params.get('maintenance')),
            renew_before_days=p['renew_before_days'] if p['renew_certificates'] else None,
            cert_days=p['cert_days']), p['timeout']
    try:
        done = run.run_step(plan, p['stage'], ops, check_mode=check_mode, timeout=timeout)
    except Refused as exc:
        if exc.rule != 'order' or params.get('strict_order'):
            raise
        result.update(blocked=True, msg=str(exc))
        return result
    result.update(done)
    return result
