# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The inputs the modules and the inventory plugin share: machines (live from sabakan or offline
from a list or file), the template and the constraints, each checked with errors that say where.

Offline machine lists go through the same query variables as a live query, matched locally with
sabakan's rules (gql/match.go), so planning from a dump of every machine gives the same answer
as asking sabakan, and the repairer never sees a HEALTHY machine as a failure.
"""

from __future__ import annotations

import copy
from datetime import datetime, timedelta
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.common.times import format_rfc3339, parse_rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import about_option
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.client import (
    GENERATOR_VARIABLES, SabakanClient, check_machine, check_unique, query_variables,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.constraints import Constraints, load_constraints
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import (
    ConstraintsError, MachineError, SabakanResponseError, SourceError,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.files import (
    load_cluster_file, load_document, load_mapping,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.machines import resolve_now
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.template import validate_cluster, validate_template


# --- machines ---------------------------------------------------------------------------------
def _params_match(machine: Mapping[str, Any], params: Optional[Mapping[str, Any]], having: bool,
                  now: datetime) -> bool:
    """sabakan's matchMachine for one side: `having` needs every condition, `notHaving` any one."""
    if not params:
        return True
    spec, state = machine['spec'], machine['status']['state']
    labels = {label['name']: label['value'] for label in spec.get('labels') or []}
    hits: List[bool] = []
    for label in params.get('labels') or []:
        hits.append(labels.get(label['name']) == label['value'])
    for key, value in (('racks', spec['rack']), ('roles', spec['role']), ('states', state)):
        if params.get(key):
            hits.append(value in params[key])
    minimum = params.get('minDaysBeforeRetire')
    if minimum is not None:
        days = int((parse_rfc3339(spec['retireDate'], 'spec.retireDate') - now).total_seconds() / 3600.0 / 24.0)
        hits.append(days >= minimum)
    return all(hits) if having else not any(hits)


def match_machine(machine: Mapping[str, Any], variables: Mapping[str, Any], now: datetime) -> bool:
    """Whether searchMachines(having, notHaving) would return `machine` (checked variables)."""
    return (_params_match(machine, variables.get('having'), True, now)
            and _params_match(machine, variables.get('notHaving'), False, now))


def _machine_list(data: Any, where: str) -> List[Any]:
    """A list of machines, also accepted inside {machines: ...}, {searchMachines: ...} or {data: {searchMachines}}
    (a saved sabakan_machine_info result or GraphQL answer)."""
    if isinstance(data, dict):
        for path in (('machines',), ('searchMachines',), ('data', 'searchMachines')):
            found: Any = data
            for key in path:
                found = found.get(key) if isinstance(found, dict) else None
            if found is not None:
                data = found
                break
    if not isinstance(data, list):
        raise MachineError(where, 'type', f'expected a list of sabakan machines (searchMachines result), '
                           f'got {type(data).__name__}')
    return data


def _complete_status(machine: Any, now: datetime) -> Any:
    """Offline machines may lack status.timestamp or status.duration: derive one from the other and `now`."""
    if not isinstance(machine, dict) or not isinstance(machine.get('status'), dict):
        return machine
    status = machine['status']
    if status.get('duration') is not None and status.get('timestamp') is not None:
        return machine
    machine = copy.deepcopy(machine)
    status = machine['status']
    if status.get('duration') is None and status.get('timestamp') is None:
        status['timestamp'], status['duration'] = format_rfc3339(now), 0.0
    elif status.get('duration') is None:
        try:
            status['duration'] = max((now - parse_rfc3339(status['timestamp'], 'status.timestamp')).total_seconds(), 0.0)
        except ValueError:
            pass  # check_machine names the bad timestamp
    elif isinstance(status['duration'], (int, float)) and not isinstance(status['duration'], bool):
        status['timestamp'] = format_rfc3339(now - timedelta(seconds=float(status['duration'])))
    return machine


def offline_machines(machines: Sequence[Any], variables: Mapping[str, Any], *, now: datetime,
                     where: str = 'machines') -> List[Dict[str, Any]]:
    """Check offline machines like the client checks sabakan's answer, then apply the query variables."""
    checked = []
    try:
        for index, raw in enumerate(machines):
            checked.append(check_machine(_complete_status(raw, now), f'{where}[{index}]'))
        check_unique(checked, where)
    except SabakanResponseError as exc:   # the message names the machine and the field
        # the option when the list is the option itself; a file's machines are named by about_option('machines_file')
        raise MachineError('machines' if where == 'machines' else '', 'machine', str(exc)) from None
    return [m for m in checked if match_machine(m, variables, now)]


def machines_from(*, url: Optional[str] = None, machines: Optional[Sequence[Any]] = None,
                  machines_file: Optional[str] = None, variables: Any = None,
                  defaults: Optional[Mapping[str, Any]] = None, timeout: float = 30.0, validate_certs: bool = True,
                  ca_path: Optional[str] = None, now: Any = None) -> List[Dict[str, Any]]:
    """The machines from exactly one source: sabakan at `url`, a `machines` list, or a `machines_file`.

    `variables` ({having, notHaving}) are laid over `defaults` (seed 000's generator variables unless
    given) as CKE does. Raises SourceError, SabakanError (unreachable, GraphQL errors, bad answer, bad
    variables), FileError or MachineError.
    """
    given = [name for name, value in (('url', url), ('machines', machines), ('machines_file', machines_file))
             if value is not None]
    if len(given) != 1:
        raise SourceError('', 'exactly-one', 'give exactly one machine source: url (sabakan), machines (a list) or '
                          'machines_file; ' + (f'got {" and ".join(given)}' if given else 'got none'))
    defaults = GENERATOR_VARIABLES if defaults is None else defaults
    with about_option('variables'):   # `having: {colour: ...}` is about the option `variables`
        merged = query_variables(variables, defaults)
    if url is not None:
        client = SabakanClient(url, timeout=timeout, validate_certs=validate_certs, ca_path=ca_path)
        return client.search(merged, {})
    current = resolve_now(now)
    if machines_file is not None:
        where = f'machines file {machines_file}'
        with about_option('machines_file'):
            data = load_document(machines_file, 'machines')
            return offline_machines(_machine_list(data, where), merged, now=current, where=f'{where}: machines')
    return offline_machines(_machine_list(machines, 'machines'), merged, now=current)


# --- template and constraints -----------------------------------------------------------------
def load_current_cluster(path: str, option: str = 'cluster_file') -> Optional[Dict[str, Any]]:
    """The cluster file the generator will update (None when it does not exist yet), validated as a
    CKE cluster.yml so a hand-edited mistake is reported with the option and the file's name before anything runs."""
    with about_option(option, 'cluster file %s' % path):
        current = load_cluster_file(path)
        if current is not None:
            validate_cluster(current)
    return current


def load_template(template: Optional[Mapping[str, Any]] = None, template_file: Optional[str] = None) -> Dict[str, Any]:
    """The validated cluster template from exactly one of `template` / `template_file`."""
    if (template is None) == (template_file is None):
        raise SourceError('', 'exactly-one', 'give exactly one of template (a mapping) or template_file (a path)')
    if template_file is not None:
        with about_option('template_file', f'template file {template_file}'):
            data = load_mapping(template_file, 'template')
            validate_template(data)
        return data  # type: ignore[return-value]
    validate_template(template)
    return dict(template)  # type: ignore[arg-type]


def load_constraints_input(constraints: Optional[Mapping[str, Any]] = None,
                           constraints_file: Optional[str] = None) -> Constraints:
    """CKE constraints from `constraints` or `constraints_file` (not both); neither = CKE's defaults."""
    if constraints is not None and constraints_file is not None:
        raise SourceError('', 'at-most-one', 'give at most one of constraints (a mapping) or constraints_file (a path)')
    if constraints_file is not None:
        with about_option('constraints_file', f'constraints file {constraints_file}'):
            return load_constraints(load_mapping(constraints_file, 'constraints', empty_ok=True))
    try:
        return load_constraints(constraints)
    except ConstraintsError as exc:   # its field is the constraint's key: name the option too
        raise exc.at('constraints') from None


def count_by(machines: Sequence[Mapping[str, Any]]) -> Dict[str, Dict[str, int]]:
    """Machine counts by state and by role (for reports and metrics)."""
    states: Dict[str, int] = {}
    roles: Dict[str, int] = {}
    for machine in machines:
        state = machine['status']['state']
        role = machine['spec']['role']
        states[state] = states.get(state, 0) + 1
        roles[role] = roles.get(role, 0) + 1
    return {'by_state': dict(sorted(states.items())), 'by_role': dict(sorted(roles.items()))}
