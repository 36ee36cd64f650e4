# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the machine modules need: as pure functions, a MachineDeployment from module options (checked, field by
field, before the cluster is contacted), the change to an existing one as a merge patch with a before/after diff,
and machines described for machine_info; and the one I/O sequence machine_deployment runs (`apply_change`: create,
patch or delete, then wait; what `wait` waits for is waiting.py's).

Only options that were given are applied: an existing deployment keeps every field the task does not name
(amazon.aws's rule), so `replicas: 5` alone scales and touches nothing else.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common import names, validate
from ansible_collections.steward.cluster.plugins.module_utils.common.durations import positive_duration
from ansible_collections.steward.cluster.plugins.module_utils.kube.objects import merge_patch
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from ansible_collections.steward.cluster.plugins.module_utils.machines import objects as o
from ansible_collections.steward.cluster.plugins.module_utils.kube.intstr import parse_int_or_percent
from ansible_collections.steward.cluster.plugins.module_utils.machines import rollout
from ansible_collections.steward.cluster.plugins.module_utils.machines.config import parse_node_conditions
from ansible_collections.steward.cluster.plugins.module_utils.kube.mcm import API_VERSION, KIND_DEPLOYMENT
from ansible_collections.steward.cluster.plugins.module_utils.machines.waiting import wait_gone, wait_ready

# module option -> Machine spec field (MCM's MachineConfiguration, inlined in the template's spec)
TIMEOUT_OPTIONS = {'creation_timeout': 'creationTimeout', 'health_timeout': 'healthTimeout', 'drain_timeout': 'drainTimeout'}
VOLATILE = ('resourceVersion', 'generation', 'uid', 'creationTimestamp', 'managedFields', 'selfLink')


@dataclasses.dataclass
class DeploymentChange:
    action: str                       # create | patch | none | delete | absent
    body: Optional[Dict[str, Any]]    # the object to create, or the merge patch
    before: Dict[str, Any]
    after: Dict[str, Any]
    namespace: str = ''
    name: str = ''

    @property
    def changed(self) -> bool:
        return self.action in ('create', 'patch', 'delete')


def _labels(value: Any, field: str) -> Dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInput(field, 'mapping', 'expected a mapping of label keys to values', value)
    out = {}
    for key, val in value.items():
        names.qualified_name(key, '%s.%s' % (field, key))
        out[key] = names.label_value('' if val is None else str(val), '%s.%s' % (field, key))
    return out


def _annotations(value: Any, field: str) -> Dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInput(field, 'mapping', 'expected a mapping of annotation keys to values', value)
    out = {}
    for key, val in value.items():
        names.qualified_name(key, '%s.%s' % (field, key))
        out[key] = '' if val is None else str(val)
    return out


def _taints(value: Any) -> List[Dict[str, Any]]:
    out = []
    for i, taint in enumerate(value or []):
        where = 'node_taints[%d]' % i
        if not isinstance(taint, Mapping) or not taint.get('key'):
            raise InvalidInput(where, 'taint', 'a taint needs a key (and an effect)', taint)
        effect = validate.one_of(taint.get('effect'), where + '.effect', ('NoSchedule', 'PreferNoSchedule', 'NoExecute'))
        item = {'key': str(taint['key']), 'effect': effect}
        if taint.get('value') not in (None, ''):
            item['value'] = str(taint['value'])
        out.append(item)
    return out


def desired_deployment(params: Mapping[str, Any]) -> Dict[str, Any]:
    """The MachineDeployment the options describe, with only the fields they set; raises InvalidInput naming
    the option. `name`, `namespace` and (for a new deployment) `class_name` come first."""
    name = names.dns_subdomain(params.get('name'), 'name')
    namespace = names.dns_label(params.get('namespace') or 'default', 'namespace')
    spec: Dict[str, Any] = {}
    template_spec: Dict[str, Any] = {}
    template_meta: Dict[str, Any] = {}
    if params.get('replicas') is not None:
        spec['replicas'] = validate.integer(params['replicas'], 'replicas', minimum=0, maximum=10000)
    if params.get('class_name') is not None:
        template_spec['class'] = {'kind': 'MachineClass', 'name': names.dns_subdomain(params['class_name'], 'class_name')}
    labels = _labels(params.get('labels'), 'labels')
    if params.get('labels') is not None:
        template_meta['labels'] = dict(labels, name=name)
    if params.get('annotations') is not None:
        template_meta['annotations'] = _annotations(params['annotations'], 'annotations')
    node_template: Dict[str, Any] = {}
    if params.get('node_labels') is not None or params.get('node_annotations') is not None:
        node_template['metadata'] = {}
        if params.get('node_labels') is not None:
            node_template['metadata']['labels'] = _labels(params['node_labels'], 'node_labels')
        if params.get('node_annotations') is not None:
            node_template['metadata']['annotations'] = _annotations(params['node_annotations'], 'node_annotations')
    if params.get('node_taints') is not None:
        node_template['spec'] = {'taints': _taints(params['node_taints'])}
    if node_template:
        template_spec['nodeTemplate'] = node_template
    for option, field in TIMEOUT_OPTIONS.items():
        if params.get(option) is not None:
            positive_duration(params[option], option)
            template_spec[field] = str(params[option]).strip() if isinstance(params[option], str) else '%ss' % params[option]
    if params.get('max_evict_retries') is not None:
        template_spec['maxEvictRetries'] = validate.integer(params['max_evict_retries'], 'max_evict_retries', minimum=0)
    if params.get('node_conditions') is not None:
        template_spec['nodeConditions'] = ','.join(parse_node_conditions(','.join(params['node_conditions']), 'node_conditions'))
    if params.get('disable_health_timeout') is not None:
        template_spec['disableHealthTimeout'] = bool(params['disable_health_timeout'])
    surge, unavailable = (parse_int_or_percent(_int_or_percent(params.get(option, 1)), option)
                          for option in ('max_surge', 'max_unavailable'))   # checked with or without `strategy`
    if surge[0] == 0 and unavailable[0] == 0 and params.get('strategy') != 'Recreate':
        raise InvalidInput('max_surge', 'not-both-zero', 'max_surge and max_unavailable cannot both be 0 with a '
                           'RollingUpdate (the default strategy)', 0)
    if params.get('strategy') is not None:
        strategy: Dict[str, Any] = {'type': params['strategy']}
        if params['strategy'] in ('RollingUpdate', 'InPlaceUpdate'):
            key = 'rollingUpdate' if params['strategy'] == 'RollingUpdate' else 'inPlaceUpdate'
            strategy[key] = {'maxSurge': _int_or_percent(params.get('max_surge', 1)),
                             'maxUnavailable': _int_or_percent(params.get('max_unavailable', 1))}
            if key == 'inPlaceUpdate':
                strategy[key]['orchestrationType'] = params.get('orchestration_type') or 'Auto'
        try:
            rollout.strategy_values(strategy)
        except InvalidInput as exc:
            raise InvalidInput({'spec.strategy.rollingUpdate': 'max_surge', 'spec.strategy.rollingUpdate.maxSurge': 'max_surge',
                                'spec.strategy.rollingUpdate.maxUnavailable': 'max_unavailable',
                                'spec.strategy.inPlaceUpdate': 'max_surge', 'spec.strategy.inPlaceUpdate.maxSurge': 'max_surge',
                                'spec.strategy.inPlaceUpdate.maxUnavailable': 'max_unavailable',
                                'spec.strategy.inPlaceUpdate.orchestrationType': 'orchestration_type',
                                }.get(exc.field, 'strategy'), exc.rule, exc.detail, exc.value) from None
        spec['strategy'] = strategy
    for option, field in (('min_ready_seconds', 'minReadySeconds'), ('revision_history_limit', 'revisionHistoryLimit'),
                          ('progress_deadline_seconds', 'progressDeadlineSeconds')):
        if params.get(option) is not None:
            spec[field] = validate.integer(params[option], option, minimum=1 if field == 'progressDeadlineSeconds' else 0)
    if params.get('paused') is not None:
        spec['paused'] = bool(params['paused'])
    if template_meta or template_spec:
        spec['template'] = {}
        if template_meta:
            spec['template']['metadata'] = template_meta
        if template_spec:
            spec['template']['spec'] = template_spec
    return {'apiVersion': API_VERSION, 'kind': KIND_DEPLOYMENT, 'metadata': {'name': name, 'namespace': namespace}, 'spec': spec}


def _int_or_percent(value: Any) -> Any:
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return value


def new_deployment(desired: Dict[str, Any]) -> Dict[str, Any]:
    """A complete new deployment: MCM's selector convention (`name: <deployment>`), template labels, defaults."""
    body = copy.deepcopy(desired)
    name = body['metadata']['name']
    spec = body['spec']
    if not ((spec.get('template') or {}).get('spec') or {}).get('class'):
        raise InvalidInput('class_name', 'required', 'a new machine deployment needs class_name (the MachineClass)', None)
    spec.setdefault('replicas', 0)
    spec['selector'] = {'matchLabels': {'name': name}}
    template = spec['template']
    template.setdefault('metadata', {}).setdefault('labels', {})['name'] = name
    spec.setdefault('strategy', {'type': 'RollingUpdate', 'rollingUpdate': {'maxSurge': 1, 'maxUnavailable': 1}})
    return body


def _strip(obj: Mapping[str, Any]) -> Dict[str, Any]:
    out = copy.deepcopy(dict(obj))
    md = out.get('metadata') or {}
    out['metadata'] = {k: v for k, v in md.items() if k not in VOLATILE}
    out.pop('status', None)
    return out


def plan_change(existing: Optional[Mapping[str, Any]], desired: Dict[str, Any], state: str) -> DeploymentChange:
    """create / patch / none / delete / absent; `after` is what the object would be."""
    change = _plan_change(existing, desired, state)
    change.namespace, change.name = desired['metadata']['namespace'], desired['metadata']['name']
    return change


def _plan_change(existing: Optional[Mapping[str, Any]], desired: Dict[str, Any], state: str) -> DeploymentChange:
    if state == 'absent':
        if existing is None:
            return DeploymentChange('absent', None, {}, {})
        return DeploymentChange('delete', None, _strip(existing), {})
    if existing is None:
        body = new_deployment(desired)
        return DeploymentChange('create', body, {}, _strip(body))
    if o.deleting(existing):
        raise InvalidInput('name', 'deleting', 'machine deployment %s/%s is being deleted; wait until it is gone' % (
            o.namespace(existing), o.name(existing)), o.name(existing))
    patch = {'spec': copy.deepcopy(desired['spec'])}
    template = (patch['spec'].get('template') or {})
    labels = (template.get('metadata') or {}).get('labels')
    if labels is not None:
        labels['name'] = o.name(existing)
    for path in REPLACED_MAPS:
        _replace_at(patch['spec'], o.spec(existing), path)
    after = merge_patch(existing, patch)
    if _strip(after) == _strip(existing):
        return DeploymentChange('none', None, _strip(existing), _strip(existing))
    return DeploymentChange('patch', patch, _strip(existing), _strip(after))


# Maps an option sets as a whole: the patch removes the keys the task no longer names (a merge patch alone would
# keep them), so `node_labels: {pool: a}` after `{pool: a, tier: web}` takes `tier` off the template and the Nodes.
REPLACED_MAPS = (('template', 'metadata', 'labels'), ('template', 'metadata', 'annotations'),
                 ('template', 'spec', 'nodeTemplate', 'metadata', 'labels'),
                 ('template', 'spec', 'nodeTemplate', 'metadata', 'annotations'))


def _replace_at(patch: Dict[str, Any], current: Mapping[str, Any], path: Tuple[str, ...]) -> None:
    """Where `patch` sets the map at `path`, turn it into the merge patch that makes the current map equal to it."""
    holder: Any = patch
    have: Any = current
    for key in path[:-1]:
        if not isinstance(holder, dict) or not isinstance(holder.get(key), dict):
            return
        holder = holder[key]
        have = have.get(key) if isinstance(have, Mapping) else None
    last = path[-1]
    if not isinstance(holder, dict) or not isinstance(holder.get(last), dict):
        return
    before = have.get(last) if isinstance(have, Mapping) else None
    holder[last] = o.replacing_patch(before or {}, holder[last])


def describe_machine(machine: Mapping[str, Any], sets: Mapping[str, Mapping[str, Any]],
                     deployments: Mapping[str, Mapping[str, Any]]) -> Dict[str, Any]:
    """One machine for machine_info (snake case keys, as amazon.aws returns them)."""
    ms = sets.get(o.owner_uid(machine))
    md = deployments.get(o.owner_uid(ms)) if ms is not None else None
    op = o.last_operation(machine)
    ready = next((c for c in o.status(machine).get('conditions') or [] if c.get('type') == 'Ready'), None)
    return {
        'name': o.name(machine), 'namespace': o.namespace(machine), 'phase': o.phase(machine).value,
        'node': o.node_name(machine), 'provider_id': o.provider_id(machine),
        'class_name': o.class_name(o.spec(machine)),
        'machine_set': o.name(ms) if ms is not None else '', 'machine_deployment': o.name(md) if md is not None else '',
        'created': o.meta(machine).get('creationTimestamp') or '', 'deleting': o.deleting(machine),
        'phase_since': (o.status(machine).get('currentStatus') or {}).get('lastUpdateTime') or '',
        'last_operation': {'type': op.get('type') or '', 'state': op.get('state') or '', 'description': op.get('description') or '',
                           'error_code': op.get('errorCode') or '', 'step': op.get('step') or '',
                           'last_update_time': op.get('lastUpdateTime') or ''},
        'node_ready': (ready or {}).get('status') or '',
        'priority': o.priority(machine),
    }


@dataclasses.dataclass(frozen=True)
class Wait:
    """The module's `wait` and `wait_timeout` (seconds, a deadline for the whole wait)."""
    enabled: bool
    timeout: float


def apply_change(client: KubeClient, change: DeploymentChange, wait: Wait) -> Dict[str, Any]:
    """Apply a planned change (create, merge-patch or delete the MachineDeployment), then, with `wait`, wait until
    it is ready (or gone, for a deletion or an absent one). Returns what the module reports: the deployment as
    stored (`machine_deployment`, when there is one) and, after a wait for readiness, `readiness`. Raises KubeError
    or WaitTimeout."""
    path = api_path(API_VERSION, 'machinedeployments', change.namespace, change.name)
    out: Dict[str, Any] = {}
    if change.action == 'create':
        out['machine_deployment'] = client.create(api_path(API_VERSION, 'machinedeployments', change.namespace), change.body)
    elif change.action == 'patch':
        out['machine_deployment'] = client.merge_patch(path, change.body or {})
    elif change.action == 'delete':
        client.delete(path)
    if wait.enabled:
        if change.action in ('delete', 'absent'):
            wait_gone(client, path, wait.timeout)
        else:
            md, ready = wait_ready(client, path, wait.timeout)
            out.update(machine_deployment=md, readiness=ready)
    return out
