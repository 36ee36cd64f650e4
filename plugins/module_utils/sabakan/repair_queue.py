# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""RepairEntry objects (cluster-scoped) as seed 001's repair queue.

The decision is repair.decide_repairs; this module only translates. Object names come from the
machine's address, so a second create for the same machine is refused by the API server (409)
instead of becoming a second entry, even when two loops decided at the same moment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.kube.conditions import rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.machines import STATES, TimeLike
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.repair import RepairDecision, decide_repairs
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.repair_run import Entry, stored_entry

API_VERSION = 'cluster.steward.io/v1alpha1'
KIND = 'RepairEntry'
PLURAL = 'repairentries'
NAME_PREFIX = 'repair-'
STATUS_QUEUED = 'queued'
STATUSES = ('queued', 'processing', 'succeeded', 'failed')
STEP_STATUSES = ('waiting', 'draining', 'watching')
OPERATIONS = tuple(state.lower() for state in STATES)
_NOT_NAME = re.compile(r'[^a-z0-9]+')


def entry_name(address: str) -> str:
    """`10.0.0.1` -> `repair-10-0-0-1`, `fd00::1` -> `repair-fd00-1`: a valid, deterministic object name."""
    return NAME_PREFIX + _NOT_NAME.sub('-', address.lower()).strip('-')


def queue_entry(obj: Mapping[str, Any]) -> Dict[str, str]:
    """A RepairEntry object as a repair queue entry for decide_repairs ({address, machine_type, operation, status})."""
    spec = obj.get('spec') or {}
    status = obj.get('status') or {}
    return {'address': str(spec.get('address') or ''), 'machine_type': str(spec.get('machineType') or ''),
            'operation': str(spec.get('operation') or ''), 'status': str(status.get('status') or STATUS_QUEUED),
            'name': str((obj.get('metadata') or {}).get('name') or '')}


def entry_problem(obj: Mapping[str, Any]) -> Optional[InvalidInput]:
    """What is wrong with a RepairEntry (one made by hand, or written by a repair tool), or None. The controller
    still counts a wrong entry toward maximum-repair-queue-entries - never more repairs than the limit - and says
    what is wrong on it (status.message, an Event); it acts on nothing."""
    try:
        spec = obj.get('spec')
        if not isinstance(spec, Mapping):
            raise InvalidInput('spec', 'object', 'expected an object, got %r' % (spec,), spec)
        validate.ip_address(spec.get('address'), 'spec.address')
        validate.one_of(spec.get('operation'), 'spec.operation', OPERATIONS)
        for key in ('machineType', 'serial', 'integration'):
            if spec.get(key) is not None:
                validate.text(spec[key], 'spec.' + key, allow_empty=True, max_length=253)
        status = (obj.get('status') or {}).get('status')
        if status is not None:
            validate.one_of(status, 'status.status', STATUSES)
    except InvalidInput as exc:
        return exc
    return None


def entry_object(planned: Mapping[str, Any], *, serial: str = '', integration: str = '') -> Dict[str, Any]:
    """The RepairEntry to create for one planned entry ({address, machine_type, operation})."""
    spec = {'address': planned['address'], 'machineType': planned.get('machine_type') or '',
            'operation': planned.get('operation') or ''}
    if serial:
        spec['serial'] = serial
    if integration:
        spec['integration'] = integration
    return {'apiVersion': API_VERSION, 'kind': KIND, 'metadata': {'name': entry_name(planned['address'])},
            'spec': spec}


@dataclass
class RepairPlan:
    decision: RepairDecision
    objects: List[Dict[str, Any]]   # RepairEntry objects to create (status set afterwards: queued)
    existing: int                   # RepairEntry objects that exist, from every integration

    @property
    def blocked(self) -> Optional[str]:
        return self.decision.blocked


def _serials(machines: Sequence[Any]) -> Dict[str, str]:
    serials: Dict[str, str] = {}
    for machine in machines:
        spec = machine.get('spec') if isinstance(machine, Mapping) else None
        if isinstance(spec, Mapping) and spec.get('ipv4'):
            serials.setdefault(str(spec['ipv4'][0]), str(spec.get('serial') or ''))
    return serials


def plan_repair_entries(machines: Sequence[Any], objects: Sequence[Mapping[str, Any]], cluster: Any,
                        constraints: Any, *, now: TimeLike = None, integration: str = '',
                        reboot_entries: Optional[Sequence[Any]] = None) -> RepairPlan:
    """Seed 001 over RepairEntry objects: `objects` are every entry in the cluster (finished or not,
    whoever created them), `machines` sabakan's failed machines (repair query)."""
    existing = [queue_entry(obj) for obj in objects]
    decision = decide_repairs(machines, existing, reboot_entries or [], cluster, constraints, now=now)
    serials = _serials(machines)
    new = [entry_object(planned, serial=serials.get(planned['address'], ''), integration=integration)
           for planned in decision.entries]
    return RepairPlan(decision=decision, objects=new, existing=len(existing))


# --- execution (repair_run) over RepairEntry objects -------------------------------------------------------
def run_entry(obj: Mapping[str, Any], node: Optional[str], api_server: bool) -> Entry:
    """A RepairEntry object as repair_run's Entry; `node` is the Node of its address (None: not in the cluster)."""
    spec = obj.get('spec') or {}
    status = obj.get('status') or {}
    metadata = obj.get('metadata') or {}
    return stored_entry(str(metadata.get('name') or ''), spec.get('address'), spec.get('machineType'),
                        spec.get('operation'), status.get('status'), status.get('step'), status.get('stepStatus'),
                        status.get('lastTransitionTime'), status.get('drainBackOffCount'),
                        status.get('drainBackOffExpire'), metadata.get('creationTimestamp'), node=node,
                        api_server=api_server)


_STATUS_KEYS = {'status': 'status', 'step': 'step', 'step_status': 'stepStatus', 'node': 'nodeName',
                'drain_backoff_count': 'drainBackOffCount', 'message': 'message', 'cordoned': 'cordoned'}


def status_fields(fields: Mapping[str, Any]) -> Dict[str, Any]:
    """repair_exec's field names (snake case, times in seconds) as RepairEntry status (camel case, RFC 3339)."""
    status: Dict[str, Any] = {}
    for key, value in fields.items():
        if key == 'last_transition':
            status['lastTransitionTime'] = rfc3339(value)
        elif key == 'drain_backoff_expire':
            status['drainBackOffExpire'] = rfc3339(value) if value else None
        else:
            status[_STATUS_KEYS[key]] = value
    return status
