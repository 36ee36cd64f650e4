# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks of MachineSets and MachineDeployments beyond what the API server's schema guarantees (a CRD installed
without its schema, an older one, an API emulator): `spec.replicas: "3"` read as "not an integer, so 0" would scale
a pool down to nothing. A wrong field raises InvalidInput naming it, and reconcile.plan_pass leaves the object (and
a deployment whose sets are wrong) waiting - nothing is created, scaled or deleted for it."""

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
