# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""maintenance.yaml -> Config, in upstream's format (controllers/config.go, plugin/plugin.go).

    intervals: {requeue: 1m, notify: 5h}     # requeue required; notify: the periodic schedule of
                                             # notification instances without one (older configs)
    instances:
      check|trigger|notify: [{type, name, config, schedule: {type, config}}]   # schedule: notify only
    profiles:
    - name: NAME
      operational|maintenance-required|in-maintenance:
        enter: trigger chain               # run once after entering the state
        notify: notification chain
        transitions: [{check: check chain, trigger: trigger chain, next: STATE}]

`${VAR}` in a value is replaced from the environment (go-ucfg's variable expansion: `${VAR:default}`
gives a default, `$${` is a literal `${`); an unset variable without default is an error. The `default`
profile exists without configuration and does nothing; a profile named `default` replaces it.

Every error names its place: `instances.check[2] (name "x"): unknown plugin type "hasLabl" (known: ...)`,
`profiles[0].maintenance-required.transitions[0].check: unknown instance "foo" at position 12`.
Unknown keys are accepted (as upstream) and listed in `Config.warnings`.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.durations import parse_duration
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import input_errors_as
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.chain import (
    ChainSyntaxError, Expr, names, parse_and_list, parse_check_chain)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.constants import (
    DEFAULT_PROFILE, PROFILE_SEPARATOR, STATES)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import ConfigError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.fields import Fields, as_list, as_mapping
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.plugin_base import Plugin
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.registry import (
    KINDS, SCHEDULE_TYPES, UPSTREAM_ONLY, known)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.schedules import Periodic, Schedule

try:
    import yaml
    HAS_YAML = True
except ImportError:  # reported when a YAML text is loaded
    HAS_YAML = False

_YAML_INT, _YAML_FLOAT, _YAML_STR = 'tag:yaml.org,2002:int', 'tag:yaml.org,2002:float', 'tag:yaml.org,2002:str'

if HAS_YAML:
    class _GoYamlLoader(yaml.SafeLoader):  # pylint: disable=too-many-ancestors
        """YAML as upstream reads it (go-yaml v2): YAML 1.1, but without base-60 numbers.

        PyYAML reads an unquoted `start: 11:00` as the integer 660; go-yaml, and so upstream, as the text
        "11:00". Every clock time in maintenance.yaml (timeWindow, scheduled) depends on that.
        """

        def resolve(self, kind, value, implicit):
            tag = super().resolve(kind, value, implicit)
            if kind is yaml.ScalarNode and implicit[0] and ':' in value and tag in (_YAML_INT, _YAML_FLOAT):
                return _YAML_STR
            return tag


_VARIABLE = re.compile(r'\$\$\{|\$\{([^}:]+)(?::(\??)([^}]*))?\}')
_NAME_FORBIDDEN = re.compile(r'[\s!&|()]')


@dataclasses.dataclass(frozen=True)
class Instance:
    name: str
    type: str
    plugin: Plugin
    schedule: Optional[Schedule] = None


@dataclasses.dataclass(frozen=True)
class CheckChain:
    text: str
    expr: Optional[Expr]
    instances: Tuple[Instance, ...]           # each referenced instance once, in order of appearance

    @property
    def cluster_scoped(self) -> bool:
        return any(getattr(i.plugin, 'cluster_scoped', False) for i in self.instances)


@dataclasses.dataclass(frozen=True)
class Transition:
    check: CheckChain
    trigger: Tuple[Instance, ...]
    next: str


@dataclasses.dataclass(frozen=True)
class StateChains:
    enter: Tuple[Instance, ...] = ()
    notify: Tuple[Instance, ...] = ()
    transitions: Tuple[Transition, ...] = ()


@dataclasses.dataclass(frozen=True)
class Profile:
    name: str
    states: Dict[str, StateChains]

    def chains(self, state: str) -> StateChains:
        return self.states.get(state) or StateChains()


@dataclasses.dataclass(frozen=True)
class Config:
    requeue: float
    notify_interval: Optional[float]
    instances: Dict[str, Dict[str, Instance]]     # kind ('check', 'trigger', 'notify') -> name -> instance
    profiles: Dict[str, Profile]                  # includes 'default'
    warnings: Tuple[str, ...] = ()
    dashboard_label_filter: Tuple[str, ...] = ()


# --- interpolation ---------------------------------------------------------------------------------

def interpolate(value: Any, environ: Mapping[str, str], where: str = '') -> Any:
    """Replace `${VAR}` in every string value (not in keys)."""
    if isinstance(value, str):
        def replace(match: 're.Match[str]') -> str:
            if match.group(0) == '$${':
                return '${'
            name, error, default = match.group(1).strip(), match.group(2), match.group(3)
            if name in environ:
                return environ[name]
            if default is not None and not error:
                return default
            raise ConfigError(where or '(top)', 'environment', 'environment variable %s is not set%s' % (name, ': ' + default if error and default else ''))
        return _VARIABLE.sub(replace, value)
    if isinstance(value, Mapping):
        return {k: interpolate(v, environ, '%s.%s' % (where, k) if where else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, environ, '%s[%d]' % (where, i)) for i, v in enumerate(value)]
    return value


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


def _warn_unknown(warnings: List[str], where: str, raw: Mapping[str, Any], allowed: Tuple[str, ...]) -> None:
    for key in raw:
        if key not in allowed:
            warnings.append('%s: unknown key "%s" ignored (known: %s)' % (where, key, ', '.join(allowed)))


# --- instances -------------------------------------------------------------------------------------

def _load_instance(kind: str, index: int, raw: Any, notify_interval: Optional[float], warnings: List[str]) -> Instance:
    where = 'instances.%s[%d]' % (kind, index)
    item = as_mapping(raw, where)
    name = item.get('name')
    if not isinstance(name, str) or not name:
        raise ConfigError(where + '.name', 'required', 'required, a non-empty string')
    where = '%s (name "%s")' % (where, name)
    if _NAME_FORBIDDEN.search(name):
        raise ConfigError(where + '.name', 'instance-name', '%r may not contain whitespace or any of ! & | ( )' % (name,))
    plugin_type = item.get('type')
    types = KINDS[kind]
    if plugin_type not in types:
        if plugin_type in UPSTREAM_ONLY:
            raise ConfigError(where, 'supported', 'plugin type "%s" of the maintenance-controller is not supported here '
                              '(known: %s)' % (plugin_type, ', '.join(known(kind))))
        hint = ''
        for other, other_types in KINDS.items():
            if other != kind and plugin_type in other_types:
                hint = '; "%s" is a %s plugin, list it under instances.%s' % (plugin_type, other, other)
        raise ConfigError(where, 'known', 'unknown plugin type "%s" (known: %s)%s' % (plugin_type, ', '.join(known(kind)), hint))
    allowed = ('type', 'name', 'config') + (('schedule',) if kind == 'notify' else ())
    _warn_unknown(warnings, where, item, allowed)
    fields = Fields(item.get('config'), where + '.config')
    plugin = types[plugin_type].from_config(fields)
    for key in fields.unknown():
        warnings.append('%s: unknown option "%s" ignored by %s (known: %s)' % (fields.where, key, plugin_type, ', '.join(fields.read)))
    schedule = _load_schedule(item, where, notify_interval) if kind == 'notify' else None
    return Instance(name, plugin_type, plugin, schedule)


def _load_schedule(item: Mapping[str, Any], where: str, notify_interval: Optional[float]) -> Schedule:
    raw = item.get('schedule')
    if raw is None:
        if notify_interval is not None:
            return Periodic(notify_interval)
        raise ConfigError(where + '.schedule', 'required', 'required (periodic, scheduled or oneshot), or set intervals.notify')
    schedule = as_mapping(raw, where + '.schedule')
    kind = str(schedule.get('type') or '')
    cls = SCHEDULE_TYPES.get(kind.lower())
    if cls is None:
        raise ConfigError(where + '.schedule.type', 'known', 'unknown schedule "%s" (known: %s)' % (kind, ', '.join(sorted(SCHEDULE_TYPES))))
    return cls.from_config(Fields(schedule.get('config'), where + '.schedule.config'))


# --- chains and profiles ---------------------------------------------------------------------------

def _lookup(kind: str, name: str, column: int, where: str, instances: Dict[str, Dict[str, Instance]]) -> Instance:
    found = instances[kind].get(name)
    if found is None:
        hint = ''
        for other in ('check', 'trigger', 'notify'):
            if other != kind and name in instances[other]:
                hint = ' (it is a %s instance)' % other
        raise ConfigError(where, 'known', 'unknown instance "%s" at position %d%s' % (name, column, hint))
    return found


def _text(value: Any, where: str) -> str:
    if value is None:
        return ''
    if isinstance(value, (Mapping, list)):
        raise ConfigError(where, 'type', 'expected a chain as a string, got %s' % (type(value).__name__,))
    return str(value)


def _and_chain(kind: str, raw: Any, where: str, instances: Dict[str, Dict[str, Instance]]) -> Tuple[Instance, ...]:
    try:
        items = parse_and_list(_text(raw, where))
    except ChainSyntaxError as exc:
        raise ConfigError(where, 'chain-syntax', str(exc)) from None
    return tuple(_lookup(kind, name, column, where, instances) for name, column in items)


def _check_chain(raw: Any, where: str, instances: Dict[str, Dict[str, Instance]]) -> CheckChain:
    text = _text(raw, where)
    try:
        expr = parse_check_chain(text)
    except ChainSyntaxError as exc:
        raise ConfigError(where, 'chain-syntax', str(exc)) from None
    used: List[Instance] = []
    for ref in names(expr):
        instance = _lookup('check', ref.name, ref.column, where, instances)
        if instance not in used:
            used.append(instance)
    return CheckChain(text, expr, tuple(used))


def _load_state(raw: Any, where: str, instances: Dict[str, Dict[str, Instance]], warnings: List[str]) -> StateChains:
    spec = as_mapping(raw, where)
    _warn_unknown(warnings, where, spec, ('enter', 'notify', 'transitions'))
    transitions = []
    for index, item in enumerate(as_list(spec.get('transitions'), where + '.transitions')):
        at = '%s.transitions[%d]' % (where, index)
        entry = as_mapping(item, at)
        _warn_unknown(warnings, at, entry, ('check', 'trigger', 'next'))
        following = entry.get('next')
        if following not in STATES:
            raise ConfigError(at + '.next', 'required' if following in (None, '') else 'one-of', '%s (one of %s)' % (
                'required' if following in (None, '') else 'unknown state "%s"' % following, ', '.join(STATES)))
        transitions.append(Transition(_check_chain(entry.get('check'), at + '.check', instances),
                                      _and_chain('trigger', entry.get('trigger'), at + '.trigger', instances), following))
    return StateChains(_and_chain('trigger', spec.get('enter'), where + '.enter', instances),
                       _and_chain('notify', spec.get('notify'), where + '.notify', instances), tuple(transitions))


def _load_profile(index: int, raw: Any, instances: Dict[str, Dict[str, Instance]], warnings: List[str]) -> Profile:
    where = 'profiles[%d]' % index
    spec = as_mapping(raw, where)
    name = spec.get('name')
    if not isinstance(name, str) or not name:
        raise ConfigError(where + '.name', 'required', 'required, a non-empty string')
    if PROFILE_SEPARATOR in name or _NAME_FORBIDDEN.search(name):
        raise ConfigError(where + '.name', 'profile-name', '%r may not contain "--" (it separates profiles in the label) or whitespace' % (name,))
    _warn_unknown(warnings, where, spec, ('name',) + STATES)
    return Profile(name, {state: _load_state(spec.get(state), '%s.%s' % (where, state), instances, warnings) for state in STATES})


@input_errors_as(ConfigError)
def load_config(source: Union[str, bytes, Mapping[str, Any]], environ: Optional[Mapping[str, str]] = None) -> Config:
    """Parse and validate; raises ConfigError naming the field (the shared checks' InvalidInput included)."""
    if isinstance(source, (str, bytes)):
        if not HAS_YAML:
            raise ConfigError('', 'dependency', 'the python library PyYAML is required to read maintenance.yaml')
        try:
            loader = _GoYamlLoader(source)
            try:
                source = loader.get_single_data() or {}
            finally:
                loader.dispose()
        except yaml.YAMLError as exc:
            raise ConfigError('', 'yaml', 'maintenance.yaml is not valid YAML: %s' % exc) from None
    validate.document_size(source, '(top)')   # before interpolation walks it
    top = as_mapping(interpolate(source, os.environ if environ is None else environ), '(top)')
    warnings: List[str] = []
    _warn_unknown(warnings, '(top)', top, ('intervals', 'instances', 'profiles', 'dashboard'))
    intervals = as_mapping(top.get('intervals'), 'intervals')
    if intervals.get('requeue') is None:
        raise ConfigError('intervals.requeue', 'required', 'required (e.g. 1m)')
    requeue = parse_duration(intervals['requeue'], 'intervals.requeue')
    notify = parse_duration(intervals['notify'], 'intervals.notify') if intervals.get('notify') is not None else None
    _warn_unknown(warnings, 'intervals', intervals, ('requeue', 'notify'))

    raw_instances = as_mapping(top.get('instances'), 'instances')
    _warn_unknown(warnings, 'instances', raw_instances, ('check', 'trigger', 'notify'))
    instances: Dict[str, Dict[str, Instance]] = {'check': {}, 'trigger': {}, 'notify': {}}
    for kind in ('check', 'trigger', 'notify'):
        for index, item in enumerate(as_list(raw_instances.get(kind), 'instances.' + kind)):
            instance = _load_instance(kind, index, item, notify, warnings)
            if instance.name in instances[kind]:
                raise ConfigError('instances.%s[%d] (name "%s")' % (kind, index, instance.name), 'unique',
                                  'duplicate %s instance name' % kind)
            instances[kind][instance.name] = instance

    profiles: Dict[str, Profile] = {DEFAULT_PROFILE: Profile(DEFAULT_PROFILE, {state: StateChains() for state in STATES})}
    seen = set()
    for index, item in enumerate(as_list(top.get('profiles'), 'profiles')):
        profile = _load_profile(index, item, instances, warnings)
        if profile.name in seen:
            raise ConfigError('profiles[%d] (name "%s")' % (index, profile.name), 'unique', 'duplicate profile name')
        seen.add(profile.name)
        profiles[profile.name] = profile
    dashboard = as_mapping(top.get('dashboard'), 'dashboard')
    label_filter = tuple(Fields(dashboard, 'dashboard').string_list('labelFilter'))
    return Config(requeue, notify, instances, profiles, tuple(warnings), label_filter)


def load_config_for_viewing(source: Any, where: str, environ: Optional[Mapping[str, str]] = None) -> Config:
    """load_config for looking only: a `${VAR}` the controller's environment has but this one lacks is left as
    the text `${VAR}` (reported in the warnings) instead of failing - the info view sends nothing, so hooks,
    tokens and passwords do not matter to it; a check option that needs the real value still fails, by name."""
    environ = dict(os.environ if environ is None else environ)
    missing = unset_variables(source, environ)
    environ.update({name: '${%s}' % name for name in missing})
    try:
        config = load_config(source, environ)
    except ConfigError as exc:
        raise exc.inside(where) from None
    if missing:
        note = ('%s: environment variable(s) %s not set where the module runs: left as ${...} (only the controller needs '
                'their values)' % (where, ', '.join(missing)))
        config = dataclasses.replace(config, warnings=tuple(config.warnings) + (note,))
    return config
