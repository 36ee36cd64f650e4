# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pure logic of the `node_maintenance_info` and `node_maintenance` modules.

Reading (`node_view`): `info.describe_node` plus what an operator asks next - which checks each
transition still waits for (`pending`: a check chain's literals that do not hold yet, `!x` meaning x
must fail), one readable `waiting_for` line per profile, the parsed data annotation.

Writing (`plan_node_change`): the merge patch of `metadata.labels`/`metadata.annotations` that sets or
removes the given keys (None removes), with Kubernetes' key and value rules checked first, the
`state: requested|approved|released` shortcuts, and `cloud.sap/maintenance-profile` editing that keeps
the other profiles of an `A--B` label. The controller owns `cloud.sap/maintenance-state` and
`cloud.sap/maintenance-data`: they may be removed (recovery), never set.

Also `parse_config_source`: the controller's `configmap/<ns>/<name>[/<key>]` / `secret/...` syntax.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import NotFound
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.chain import And, Name, Not, Or
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config import Config, load_config
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.constants import (
    DATA_ANNOTATION, IN_MAINTENANCE, PROFILE_LABEL, PROFILE_SEPARATOR, STATE_LABEL, split_profiles)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.data import NodeData, parse_data
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.environment import Environment
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import ConfigError, DataError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.gotime import format_time_ns
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config_source import (
    ConfigSource, extract_text, parse_config_source as shared_parse_config_source)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.info import describe_node
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.leases import KubeLeaseStore

APPROVAL_ANNOTATION = {'cloud.sap/maintenance-approved': 'true'}
SHORTCUT_STATES = ('requested', 'approved', 'released')
PROFILE_MODES = ('add', 'replace', 'remove')

_DNS_SUBDOMAIN = re.compile(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')
_NAME = re.compile(r'^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$')
_VARIABLE = re.compile(r'\$\$\{|\$\{([^}:]+)(?::(\??)([^}]*))?\}')   # config.interpolate's syntax


class OptionError(ValueError):
    """A module option is malformed; the message names the option and the offending item."""


# --- config source -----------------------------------------------------------------------------------

def parse_config_source(text: str) -> ConfigSource:
    """`configmap/<ns>/<name>[/<key>]` or `secret/<ns>/<name>[/<key>]` (the controller's syntax); OptionError."""
    try:
        source = shared_parse_config_source(text)
    except ValueError as exc:
        raise OptionError('config_source: %s' % exc) from None
    if source is None:
        raise OptionError('config_source: expected configmap/<namespace>/<name>[/<key>] or secret/<namespace>/<name>[/<key>], '
                          'got %r' % (text,))
    return source


def config_text(obj: Mapping[str, Any], source: ConfigSource) -> str:
    """The maintenance.yaml text out of the ConfigMap or Secret; OptionError when the key is missing or unreadable."""
    try:
        return extract_text(source, obj)
    except ConfigError as exc:
        raise OptionError('%s: %s' % (source, exc)) from None


def read_config(config: Optional[Mapping[str, Any]], config_file: Optional[str], config_source: Optional[str],
                client: Optional[KubeClient]) -> Tuple[Optional[Config], str]:
    """(Config or None, where it came from). Raises OptionError (unreadable source) or ConfigError (bad content,
    the message starting with where the config came from)."""
    if config is not None:
        return _load(dict(config), 'config'), 'config'
    if config_file:
        try:
            with open(config_file, 'rb') as handle:
                text = handle.read()
        except OSError as exc:
            raise OptionError('config_file %s: cannot read it: %s' % (config_file, exc.strerror or exc)) from None
        return _load(text, config_file), config_file
    if config_source:
        source = parse_config_source(config_source)
        plural = 'configmaps' if source.kind == 'configmap' else 'secrets'
        if client is None:
            raise OptionError('config_source %s: no Kubernetes client' % source)
        try:
            obj = client.get(api_path('v1', plural, source.namespace, source.name))
        except NotFound:
            raise OptionError('config_source %s: %s %s/%s does not exist' % (source, source.kind, source.namespace, source.name)) from None
        return _load(config_text(obj, source), str(source)), str(source)
    return None, ''


def unset_variables(source: Any, environ: Mapping[str, str]) -> List[str]:
    """`${VAR}` references without a default whose variable is not set in `environ` (in order, once each)."""
    found: List[str] = []
    if isinstance(source, bytes):
        source = source.decode('utf-8', 'replace')
    if isinstance(source, str):
        for match in _VARIABLE.finditer(source):
            name = (match.group(1) or '').strip()
            has_default = match.group(3) is not None and not match.group(2)
            if name and not has_default and name not in environ and name not in found:
                found.append(name)
    elif isinstance(source, Mapping):
        for value in source.values():
            found += [n for n in unset_variables(value, environ) if n not in found]
    elif isinstance(source, (list, tuple)):
        for value in source:
            found += [n for n in unset_variables(value, environ) if n not in found]
    return found


def _load(source: Any, where: str, environ: Optional[Mapping[str, str]] = None) -> Config:
    """load_config for looking only: a `${VAR}` the controller's environment has but this one lacks is left as
    the text `${VAR}` (reported in the warnings) instead of failing - the info view sends nothing, so hooks,
    tokens and passwords do not matter to it; a check option that needs the real value still fails, by name."""
    environ = dict(os.environ if environ is None else environ)
    missing = unset_variables(source, environ)
    environ.update({name: '${%s}' % name for name in missing})
    try:
        config = load_config(source, environ)
    except ConfigError as exc:
        raise ConfigError(where, exc.rule, str(exc), exc.value) from None
    if missing:
        note = ('%s: environment variable(s) %s not set where the module runs: left as ${...} (only the controller needs '
                'their values)' % (where, ', '.join(missing)))
        config = dataclasses.replace(config, warnings=tuple(config.warnings) + (note,))
    return config


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


# --- reading -----------------------------------------------------------------------------------------

def literals(expr: Any, negated: bool = False, out: Optional[Dict[str, Set[bool]]] = None) -> Dict[str, Set[bool]]:
    """Instance name -> the results the chain wants from it (True: must pass, False: must fail, via `!`)."""
    out = {} if out is None else out
    if isinstance(expr, Name):
        out.setdefault(expr.name, set()).add(not negated)
    elif isinstance(expr, Not):
        literals(expr.operand, not negated, out)
    elif isinstance(expr, (And, Or)):
        literals(expr.left, negated, out)
        literals(expr.right, negated, out)
    return out


def pending_checks(expr: Any, checks: Mapping[str, Mapping[str, Any]]) -> List[str]:
    """The chain's literals that do not hold now (`x`: x must pass, `!x`: x must fail), in chain order.

    For `a || b` both are listed while neither passes (either would do); an errored check is listed as is.
    """
    pending: List[str] = []
    for name, wanted in literals(expr).items():
        check = checks.get(name) or {}
        for polarity in sorted(wanted, reverse=True):
            if check.get('error') or bool(check.get('passed')) != polarity:
                pending.append(name if polarity else '!' + name)
    return pending


def _reason(check: Mapping[str, Any], negated: bool) -> str:
    if check.get('error'):
        return 'error: %s' % check['error']
    info = check.get('info') or {}
    if negated and check.get('passed'):
        detail = 'passes'
    elif 'reason' in info:
        detail = str(info['reason'])
    elif info:
        detail = ', '.join('%s=%s' % (k, json.dumps(v, sort_keys=True)) for k, v in sorted(info.items()))
    else:
        detail = 'passes' if check.get('passed') else 'fails'
    return '%s: %s' % (check.get('type', '?'), detail)


def waiting_line(profile: Mapping[str, Any]) -> str:
    """One sentence: what the profile will do next or what it waits for."""
    head = 'profile %s is %s' % (profile['name'], profile['state'])
    transitions = profile.get('transitions') or []
    if profile.get('next'):
        return '%s; moves to %s at the next reconcile' % (head, profile['next'])
    if not transitions:
        return '%s; this state has no transitions' % head
    parts = []
    for transition in transitions:
        if transition.get('error'):
            parts.append('to %s: %s' % (transition['next'], transition['error']))
        elif transition.get('blocked'):
            parts.append('to %s: blocked, %s' % (transition['next'], transition['blocked']))
        else:
            reasons = []
            for literal in transition.get('pending') or []:
                name = literal.lstrip('!')
                reasons.append('%s (%s)' % (literal, _reason((transition.get('checks') or {}).get(name) or {}, literal.startswith('!'))))
            parts.append('to %s: waiting for %s' % (transition['next'], ' and '.join(reasons) or 'check %r' % transition.get('check')))
    return '%s; %s' % (head, '; '.join(parts))


def data_view(data: NodeData) -> Dict[str, Any]:
    return {'profiles': {name: {'current': p.current, 'previous': p.previous, 'transition': format_time_ns(p.transition)}
                         for name, p in sorted(data.profiles.items())},
            'notifications': {name: format_time_ns(when) for name, when in sorted(data.notifications.items())},
            'version': data.version}


def node_view(node: Mapping[str, Any], config: Optional[Config], now: float, env: Optional[Environment] = None) -> Dict[str, Any]:
    """Everything node_maintenance_info reports about one node (JSON-safe). Without a config only what the
    node itself says (labels, data annotation) is reported: no transitions, no `waiting_for`."""
    md = node.get('metadata') or {}
    labels = dict(md.get('labels') or {})
    annotations = dict(md.get('annotations') or {})
    profile_label = labels.get(PROFILE_LABEL, '')
    view: Dict[str, Any] = {
        'name': md.get('name') or '', 'state': labels.get(STATE_LABEL, ''), 'profile_label': profile_label,
        'profile_names': split_profiles(profile_label), 'unschedulable': bool((node.get('spec') or {}).get('unschedulable')),
        'labels': labels, 'annotations': annotations, 'data': None, 'data_error': '', 'profiles': [], 'unknown_profiles': [],
        'computed_state': '', 'waiting_for': [], 'error': ''}
    try:
        data = parse_data(annotations.get(DATA_ANNOTATION), labels)
        view['data'] = data_view(data) if annotations.get(DATA_ANNOTATION) else None
    except DataError as exc:
        view['data_error'] = view['error'] = str(exc)
        return view
    if config is None:
        for name in view['profile_names']:
            entry = data.profiles.get(name)
            if entry is not None:
                view['profiles'].append({'name': name, 'state': entry.current, 'previous': entry.previous,
                                         'last_transition': format_time_ns(entry.transition), 'next': None,
                                         'transitions': [], 'notify': []})
        return view
    described = describe_node(node, config, now, env)
    view['unknown_profiles'] = described['unknown_profiles']
    view['computed_state'] = described.get('computed_state', '')
    view['error'] = described['error']
    for profile in described['profiles']:
        chains = config.profiles[profile['name']].chains(profile['state'])
        for transition, spec in zip(profile['transitions'], chains.transitions):
            transition['pending'] = [] if transition['passed'] else pending_checks(spec.check.expr, transition['checks'])
        view['profiles'].append(profile)
        view['waiting_for'].append(waiting_line(profile))
    for name in view['unknown_profiles']:
        view['waiting_for'].append('profile %s is not defined in the config: the controller ignores it' % name)
    return view


# --- writing -----------------------------------------------------------------------------------------

def check_key(key: Any, what: str) -> str:
    """Kubernetes' qualified names: `[prefix/]name`, prefix a DNS subdomain (<= 253), name <= 63."""
    if not isinstance(key, str) or not key:
        raise OptionError('%s: keys must be non-empty strings, got %r' % (what, key))
    prefix, slash, name = key.rpartition('/')
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        raise OptionError('%s: %r is not a valid key: the prefix %r must be a DNS subdomain (lower case, digits, "-" and ".")'
                          % (what, key, prefix))
    if len(name) > 63 or not _NAME.match(name):
        raise OptionError('%s: %r is not a valid key: the name part %r must be 1-63 characters of letters, digits, "-", "_" '
                          'and ".", starting and ending with a letter or digit' % (what, key, name))
    return key


def as_value(value: Any, where: str) -> Optional[str]:
    """Option values as Kubernetes strings: YAML booleans become `true`/`false`, numbers their text, None removes."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, (int, float)):
        return str(value)
    raise OptionError('%s: values must be strings (or null to remove), got %s' % (where, type(value).__name__))


def check_label_value(value: Optional[str], where: str) -> Optional[str]:
    if value is None or value == '':
        return value
    if len(value) > 63 or not _NAME.match(value):
        raise OptionError('%s: %r is not a valid label value: at most 63 characters of letters, digits, "-", "_" and ".", '
                          'starting and ending with a letter or digit' % (where, value))
    return value


def changes_from(option: str, mapping: Optional[Mapping[str, Any]], labels: bool = False) -> Dict[str, Optional[str]]:
    """A `{key: value-or-None}` option, checked."""
    out: Dict[str, Optional[str]] = {}
    for key, value in (mapping or {}).items():
        check_key(key, option)
        text = as_value(value, '%s[%s]' % (option, key))
        out[key] = check_label_value(text, '%s[%s]' % (option, key)) if labels else text
    return out


def shortcut_changes(state: Optional[str], request_annotation: Optional[Mapping[str, Any]] = None,
                     request_label: Optional[Mapping[str, Any]] = None,
                     approval_annotation: Optional[Mapping[str, Any]] = None) -> Tuple[Dict[str, Optional[str]], Dict[str, Optional[str]]]:
    """(annotations, labels) that `state` stands for: requested sets the request keys, approved the approval
    annotation, released removes both (the approval too, should no trigger have removed it yet)."""
    if state is None:
        return {}, {}
    if state not in SHORTCUT_STATES:
        raise OptionError('state: %r is not one of %s' % (state, ', '.join(SHORTCUT_STATES)))
    request_a = changes_from('request_annotation', request_annotation)
    request_l = changes_from('request_label', request_label, labels=True)
    approval = changes_from('approval_annotation', APPROVAL_ANNOTATION if approval_annotation is None else approval_annotation)
    if state == 'requested':
        if not request_a and not request_l:
            raise OptionError('state=requested: give request_annotation (or request_label): the key your profile checks, '
                              'for the flatcar example {"flatcar-linux-update.v1.flatcar-linux.net/reboot-needed": "true"}')
        return request_a, request_l
    if state == 'approved':
        if not approval:
            raise OptionError('state=approved: approval_annotation is empty')
        return approval, {}
    if not request_a and not request_l:
        raise OptionError('state=released: give request_annotation (or request_label), the keys to remove')
    annotations = {key: None for key in request_a}
    annotations.update({key: None for key in approval})
    return annotations, {key: None for key in request_l}


def edit_profile_label(current: str, profiles: Sequence[str], mode: str = 'add') -> Optional[str]:
    """The new `cloud.sap/maintenance-profile` value (None: remove the label). `add` appends missing names
    and keeps the others in order, `replace` sets exactly these, `remove` drops them."""
    if mode not in PROFILE_MODES:
        raise OptionError('profile_mode: %r is not one of %s' % (mode, ', '.join(PROFILE_MODES)))
    wanted: List[str] = []
    for name in profiles:
        if not isinstance(name, str) or not name or PROFILE_SEPARATOR in name or not _NAME.match(name):
            raise OptionError('profile: %r is not a valid profile name (letters, digits, "_" and "."; "-" but not "--", '
                              'which separates profiles in the label)' % (name,))
        if name not in wanted:
            wanted.append(name)
    names = [n for n in (current or '').split(PROFILE_SEPARATOR) if n]
    if mode == 'add':
        result = names + [n for n in wanted if n not in names]
    elif mode == 'replace':
        result = wanted
    else:
        result = [n for n in names if n not in wanted]
    value = PROFILE_SEPARATOR.join(result)
    if len(value) > 63:
        raise OptionError('profile: the label value %r would be longer than 63 characters, the limit of a label value' % value)
    return value or None


def check_controller_keys(annotations: Mapping[str, Optional[str]], labels: Mapping[str, Optional[str]]) -> None:
    """The state label and the data annotation belong to the controller: removing them (recovery) is allowed."""
    if labels.get(STATE_LABEL) is not None:
        raise OptionError('labels[%s]: the controller sets this label; remove it (null) to have it recomputed, never set it'
                          % STATE_LABEL)
    if annotations.get(DATA_ANNOTATION) is not None:
        raise OptionError('annotations[%s]: the controller writes this annotation; remove it (null) to reset every profile to '
                          'operational, never set it' % DATA_ANNOTATION)


@dataclasses.dataclass
class NodePlan:
    patch: Dict[str, Any]               # merge patch ({} when nothing changes); None values delete keys
    before: Dict[str, Dict[str, str]]   # {'labels': ..., 'annotations': ...}
    after: Dict[str, Dict[str, str]]
    changes: List[str]
    warnings: List[str]

    @property
    def changed(self) -> bool:
        return bool(self.patch)


def plan_node_change(node: Mapping[str, Any], annotations: Mapping[str, Optional[str]], labels: Mapping[str, Optional[str]],
                     profiles: Optional[Sequence[str]] = None, profile_mode: str = 'add') -> NodePlan:
    """The merge patch that makes the node's labels and annotations match (keys already checked)."""
    labels = dict(labels)
    if profiles:
        if PROFILE_LABEL in labels:
            raise OptionError('profile and labels[%s] both set the profile label: use one' % PROFILE_LABEL)
        current_label = ((node.get('metadata') or {}).get('labels') or {}).get(PROFILE_LABEL, '')
        labels[PROFILE_LABEL] = edit_profile_label(current_label, profiles, profile_mode)
    check_controller_keys(annotations, labels)
    md = node.get('metadata') or {}
    before = {'labels': dict(md.get('labels') or {}), 'annotations': dict(md.get('annotations') or {})}
    after = copy.deepcopy(before)
    patch: Dict[str, Any] = {}
    changes: List[str] = []
    for section, wanted, noun in (('labels', labels, 'label'), ('annotations', annotations, 'annotation')):
        for key, value in wanted.items():
            current = before[section].get(key)
            if value is None and key in before[section]:
                del after[section][key]
                changes.append('remove %s %s (was %r)' % (noun, key, current))
            elif value is not None and (key not in before[section] or current != value):
                after[section][key] = value
                changes.append('set %s %s=%r%s' % (noun, key, value, '' if key not in before[section] else ' (was %r)' % current))
            else:
                continue
            patch.setdefault('metadata', {}).setdefault(section, {})[key] = value
    warnings = profile_removal_warnings(node, before['labels'].get(PROFILE_LABEL, ''), after['labels'].get(PROFILE_LABEL, ''))
    return NodePlan(patch, before, after, changes, warnings)


def profile_removal_warnings(node: Mapping[str, Any], old_label: str, new_label: str) -> List[str]:
    """Detaching a profile that is in-maintenance drops its state: the node may leave maintenance at once."""
    if old_label == new_label:
        return []
    md = node.get('metadata') or {}
    try:
        data = parse_data((md.get('annotations') or {}).get(DATA_ANNOTATION), md.get('labels') or {})
    except DataError:
        return []
    kept = split_profiles(new_label)
    return ['profile %s is in-maintenance on node %s and is being detached: the controller forgets its state and the node '
            'may leave maintenance without its in-maintenance transition (and triggers)' % (name, md.get('name'))
            for name, entry in sorted(data.profiles.items()) if name not in kept and entry.current == IN_MAINTENANCE]
