# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A SabakanIntegration's spec, checked and with its defaults (the CRD's), before a cycle acts on it.

The API server normally applies the CRD defaults, but a test double or an older object may not
have them, so every default is applied here too. Every error names the field
(`spec.constraints.minimum-workers: expected a whole number, got 'x'`), reusing the template,
constraints and query-variable checks the modules use.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.durations import positive_duration
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, input_errors_as
from ansible_collections.steward.cluster.plugins.module_utils.common.names import is_configmap_key, is_dns_subdomain
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.client import (
    GENERATOR_VARIABLES, REPAIR_VARIABLES, graphql_url, query_variables,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.constraints import Constraints, load_constraints
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import (
    ConstraintsError, FileError, RepairConfigError, SabakanVariablesError, SpecError, TemplateError,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.files import parse_document
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.repair_config import RepairConfig, load_repair_config
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.template import validate_template

DEFAULT_INTERVAL = 60.0
DEFAULT_WAIT_RETIRED_SECONDS = 300.0
DEFAULT_CLUSTER_KEY = 'cluster.yml'
DEFAULT_TEMPLATE_KEY = 'cluster-template.yml'
CLUSTER_CONFIGMAP_SUFFIX = '-cluster'


@dataclass(frozen=True)
class ConfigMapRef:
    name: str
    key: str


@dataclass(frozen=True)
class IntegrationSpec:
    url: str                                 # sabakan's GraphQL endpoint
    interval: float                          # seconds between cycles
    timeout: float                           # seconds per sabakan request
    template: Optional[Dict[str, Any]]       # inline template (validated), or None: see template_ref
    template_ref: Optional[ConfigMapRef]
    constraints: Constraints
    variables: Dict[str, Any]                # {having, notHaving} for generation, defaults applied
    wait_retired_seconds: float
    cluster_config_map: ConfigMapRef
    apply_nodes: bool
    delete_removed_nodes: bool
    auto_repair: bool
    repair_variables: Dict[str, Any]         # {having, notHaving} for failed machines, defaults applied
    repair: Optional[RepairConfig] = None    # CKE's `repair` object (spec.repair): None, no entry is acted on
    delete_finished_after: Optional[float] = None   # spec.autoRepair.deleteFinishedAfter; None: a person deletes


def _or_default(section: Mapping[str, Any], key: str, default: Any) -> Any:
    value = section.get(key)
    return default if value is None else value


def _section(spec: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = spec.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError(f'spec.{key}', 'type', f'expected an object, got {value!r}')
    return value


def is_enabled(spec: Any) -> bool:
    """`spec.enabled` (default true); anything but an explicit false counts as enabled, so a typo is
    reported by parse_spec instead of silently disabling the integration."""
    return not (isinstance(spec, Mapping) and spec.get('enabled') is False)


def interval_of(spec: Any) -> float:
    """The cycle interval even when the rest of the spec is invalid (an invalid spec is re-checked at this pace)."""
    try:
        return positive_duration(_or_default(spec, 'interval', '60s'), 'spec.interval')
    except (InvalidInput, AttributeError):
        return DEFAULT_INTERVAL


def _constraints(data: Any) -> Constraints:
    try:
        return load_constraints(data)
    except ConstraintsError as exc:   # its field is the constraint's key
        raise exc.at('spec.constraints').recast(SpecError) from None


def _variables(data: Any, defaults: Mapping[str, Any], where: str) -> Dict[str, Any]:
    try:
        return query_variables(data, defaults)
    except SabakanVariablesError as exc:   # its field is the path inside the variables (having.states[0])
        raise exc.at(where).recast(SpecError) from None


def _configmap_ref(section: Mapping[str, Any], where: str, default_name: Optional[str],
                   default_key: str) -> ConfigMapRef:
    name = section.get('name') or default_name
    key = section.get('key') or default_key
    if not is_dns_subdomain(name):
        raise SpecError(f'{where}.name', 'dns-subdomain', f'expected a ConfigMap name (lower-case DNS subdomain), got {name!r}',
                        name)
    if not is_configmap_key(key):
        raise SpecError(f'{where}.key', 'configmap-key', f'expected a ConfigMap key (letters, digits, "-", "_", "."), got {key!r}',
                        key)
    return ConfigMapRef(name=name, key=key)


def _repair(data: Any) -> Optional[RepairConfig]:
    if data is None:
        return None
    try:
        return load_repair_config(data, 'spec.repair')
    except RepairConfigError as exc:
        raise exc.recast(SpecError) from None


def check_template(template: Any, where: str) -> Dict[str, Any]:
    """The template checked like the modules check it; errors name fields under `where`."""
    try:
        validate_template(template, where)
    except TemplateError as exc:
        raise exc.recast(SpecError) from None
    return dict(template)


def parse_template_text(text: Optional[str], where: str) -> Dict[str, Any]:
    """A template kept in a ConfigMap key (YAML or JSON)."""
    if text is None or not text.strip():
        raise SpecError(where, 'required', 'is empty or missing; expected a CKE cluster template')
    try:
        data = parse_document(text, 'template', where)
    except FileError as exc:
        raise exc.recast(SpecError) from None
    return check_template(data, where)


@input_errors_as(SpecError)
def parse_spec(spec: Any, name: str) -> IntegrationSpec:
    """The checked spec of the SabakanIntegration `name`, with every CRD default applied; SpecError names the
    field (the shared checks' InvalidInput, durations included, comes as SpecError too)."""
    if not isinstance(spec, Mapping):
        raise SpecError('spec', 'type', f'expected an object, got {spec!r}')
    url = spec.get('url')
    if not isinstance(url, str) or not url:
        raise SpecError('spec.url', 'required', f'required, the sabakan URL such as http://sabakan:10080; got {url!r}')
    url = graphql_url(validate.endpoint_url(url, 'spec.url'))
    template = spec.get('template')
    ref_section = spec.get('templateConfigMapRef')
    if (template is None) == (ref_section is None):
        raise SpecError('spec.template, spec.templateConfigMapRef', 'exactly-one', 'give exactly one (the template inline, '
                        'or the ConfigMap key that holds it)')
    template_ref = None
    if template is not None:
        template = check_template(template, 'spec.template')
    else:
        template_ref = _configmap_ref(_section(spec, 'templateConfigMapRef'), 'spec.templateConfigMapRef', None,
                                      DEFAULT_TEMPLATE_KEY)
    wait = _or_default(spec, 'waitRetiredSeconds', DEFAULT_WAIT_RETIRED_SECONDS)
    if isinstance(wait, str):   # a number, not text (validate.number would read "300")
        raise SpecError('spec.waitRetiredSeconds', 'number', f'expected a number of seconds, got {wait!r}', wait)
    wait = validate.number(wait, 'spec.waitRetiredSeconds', minimum=0, maximum=validate.MAX_TIMEOUT_SECONDS)
    nodes = _section(spec, 'nodes')
    repair = _section(spec, 'autoRepair')
    return IntegrationSpec(
        url=url,
        interval=positive_duration(_or_default(spec, 'interval', '60s'), 'spec.interval'),
        timeout=positive_duration(_or_default(spec, 'timeout', '30s'), 'spec.timeout'),
        template=template,
        template_ref=template_ref,
        constraints=_constraints(spec.get('constraints')),
        variables=_variables(spec.get('variables'), GENERATOR_VARIABLES, 'spec.variables'),
        wait_retired_seconds=float(wait),
        cluster_config_map=_configmap_ref(_section(spec, 'clusterConfigMap'), 'spec.clusterConfigMap',
                                          name + CLUSTER_CONFIGMAP_SUFFIX, DEFAULT_CLUSTER_KEY),
        apply_nodes=validate.optional_boolean(nodes, 'apply', True, 'spec.nodes'),
        delete_removed_nodes=validate.optional_boolean(nodes, 'deleteRemoved', False, 'spec.nodes'),
        auto_repair=validate.optional_boolean(repair, 'enabled', False, 'spec.autoRepair'),
        repair_variables=_variables(repair.get('variables'), REPAIR_VARIABLES, 'spec.autoRepair.variables'),
        repair=_repair(spec.get('repair')),
        delete_finished_after=(None if repair.get('deleteFinishedAfter') is None else
                               positive_duration(repair['deleteFinishedAfter'], 'spec.autoRepair.deleteFinishedAfter')),
    )


def template_hash(template: Mapping[str, Any]) -> str:
    """A short, stable fingerprint of the template (key order does not matter)."""
    canonical = json.dumps(template, sort_keys=True, separators=(',', ':'), default=str)
    return hashlib.sha256(canonical.encode('utf-8')).hexdigest()[:16]
