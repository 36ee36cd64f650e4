# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks of Machines, MachineSets and MachineDeployments beyond what the API server's schema guarantees (a CRD
installed without its schema, an older one, an API emulator): `spec.replicas: "3"` read as "not an integer, so 0"
would scale a pool down to nothing. MCM's own validation is kept too (pkg/apis/machine/validation): a selector that
does not match the template's labels (the set would never count the machines it creates, and create more), an
empty class kind or name. A wrong field raises InvalidInput naming it, and reconcile.plan_pass leaves the object
(and a deployment whose sets are wrong) waiting - nothing is created, scaled or deleted for it."""

from __future__ import annotations

from typing import Any, Mapping

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput

# Far above any pool (MCM has no limit; the meltdown and safety limits bound what one pass does anyway).
MAX_REPLICAS = 100000


def check_scalable(obj: Mapping[str, Any]) -> None:
    """A MachineSet or MachineDeployment: `spec` an object, `spec.replicas` (unset: 0) a whole number >= 0."""
    spec = obj.get('spec')
    if spec is None:
        return
    if not isinstance(spec, Mapping):
        raise InvalidInput('spec', 'object', 'expected an object, got %r' % (spec,), spec)
    if spec.get('replicas') is not None:
        validate.integer(spec['replicas'], 'spec.replicas', minimum=0, maximum=MAX_REPLICAS)


def check_class_reference(class_spec: Any, field: str) -> None:
    """MCM's validateClassReference: `kind` and `name` are required."""
    if class_spec is not None and not isinstance(class_spec, dict):       # plain data, as the API returns it
        raise InvalidInput(field, 'object', 'expected an object, got %r' % (class_spec,), class_spec)
    for part in ('kind', 'name'):
        value = (class_spec or {}).get(part)
        if not value or not isinstance(value, str):
            raise InvalidInput('%s.%s' % (field, part), 'required', '%s is required' % part.capitalize(), value)


def check_selector_matches_template(spec: Mapping[str, Any]) -> None:
    """MCM: every selector.matchLabels pair must be among the template's labels."""
    match = (spec.get('selector') or {}).get('matchLabels') or {}
    labels = ((spec.get('template') or {}).get('metadata') or {}).get('labels') or {}
    for key, value in match.items():
        if labels.get(key) != value:
            raise InvalidInput('spec.selector.matchLabels', 'matches-template',
                               'is not matching with spec.template.metadata.labels (%s=%s; the template has %s)' % (
                                   key, value, '%s=%s' % (key, labels[key]) if key in labels else 'no %s' % key), match)


def check_owner(obj: Mapping[str, Any]) -> None:
    """A MachineSet or MachineDeployment as MCM validates it: replicas, selector against template, class reference."""
    check_scalable(obj)
    spec = obj.get('spec') or {}
    check_selector_matches_template(spec)
    check_class_reference(((spec.get('template') or {}).get('spec') or {}).get('class'), 'spec.template.spec.class')


def check_machine(machine: Mapping[str, Any]) -> None:
    """A Machine as MCM validates it: its class reference."""
    check_class_reference((machine.get('spec') or {}).get('class'), 'spec.class')
