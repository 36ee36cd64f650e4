# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sabakan GraphQL client shared by modules, the inventory plugin and the controller.

Standard library only (urllib, ssl, json): modules run on hosts where `requests` may be missing,
and the controller must not pull Ansible's URL helpers. Every failure is one of three exceptions,
so callers can tell "sabakan is down, retry later" (SabakanUnavailable) from "sabakan said no"
(SabakanQueryError) from "sabakan answered something we cannot trust" (SabakanResponseError).
Machines are checked before they are returned, because the generator and the repairer act on them.
"""

from __future__ import annotations

import copy
import json
import socket
import ssl
import urllib.error
import urllib.request
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union
from urllib.parse import urlsplit, urlunsplit

from ansible_collections.steward.cluster.plugins.module_utils.common.times import parse_rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import Deadline, DeadlineExceeded, read_within
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.http_deadline import watched_handlers, watching
from ansible_collections.steward.cluster.plugins.module_utils.common.tls import client_context
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import (
    OptionError, SabakanQueryError, SabakanResponseError, SabakanUnavailable, SabakanVariablesError)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.machines import STATES as MACHINE_STATES
MACHINE_PARAMS_FIELDS = ('labels', 'racks', 'roles', 'states', 'minDaysBeforeRetire')
VARIABLE_KEYS = ('having', 'notHaving')

# CKE's defaults: the cluster generator (seed 000) and sabakan-triggered repair (seed 001).
GENERATOR_VARIABLES: Dict[str, Any] = {'having': None, 'notHaving': {'roles': ['boot'], 'states': ['RETIRED']}}
REPAIR_VARIABLES: Dict[str, Any] = {'having': {'states': ['UNHEALTHY', 'UNREACHABLE']}, 'notHaving': {'roles': ['boot']}}

MACHINE_FIELDS = ('spec { serial labels { name value } rack indexInRack role ipv4 registerDate retireDate '
                  'bmc { bmcType } } status { state timestamp duration }')
SEARCH_QUERY = ('query ckeSearch($having: MachineParams, $notHaving: MachineParams) { '
                'searchMachines(having: $having, notHaving: $notHaving) { %s } }' % MACHINE_FIELDS)
MACHINE_QUERY = 'query machine($serial: ID!) { machine(serial: $serial) { %s } }' % MACHINE_FIELDS
SET_STATE_MUTATION = ('mutation setMachineState($serial: ID!, $state: MachineState!) { '
                      'setMachineState(serial: $serial, state: $state) { state timestamp duration } }')

# How much of an unexpected body goes into an error message.
EXCERPT = 200


# --- query variables ------------------------------------------------------------------------------
def _check_params(value: Any, where: str) -> Optional[Dict[str, Any]]:
    """One MachineParams object, checked field by field the way sabakan's schema would coerce it."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise SabakanVariablesError(where, 'type', 'must be an object (MachineParams) or null, got %s: %r'
                                    % (type(value).__name__, value), value)
    unknown = sorted(set(value) - set(MACHINE_PARAMS_FIELDS))
    if unknown:
        raise SabakanVariablesError(where, 'known', 'unknown field(s) %s; MachineParams fields are %s'
                                    % (', '.join(repr(k) for k in unknown), ', '.join(MACHINE_PARAMS_FIELDS)))
    params: Dict[str, Any] = {}
    for key in MACHINE_PARAMS_FIELDS:
        if key not in value:
            continue
        item, field = value[key], '%s.%s' % (where, key)
        if item is None:
            params[key] = None
        elif key == 'minDaysBeforeRetire':
            if isinstance(item, bool) or not isinstance(item, int):
                raise SabakanVariablesError(field, 'type', 'must be an integer (days) or null, got %r' % (item,), item)
            params[key] = item
        else:
            if not isinstance(item, list):
                raise SabakanVariablesError(field, 'type', 'must be a list or null, got %s: %r' % (type(item).__name__, item), item)
            params[key] = [_check_item(key, element, '%s[%d]' % (field, i)) for i, element in enumerate(item)]
    return params


def _check_item(key: str, element: Any, where: str) -> Any:
    if key == 'labels':
        if not isinstance(element, Mapping) or set(element) != {'name', 'value'} or \
                not all(isinstance(element[k], str) for k in ('name', 'value')):
            raise SabakanVariablesError(where, 'type', 'must be {"name": string, "value": string}, got %r' % (element,), element)
        return {'name': element['name'], 'value': element['value']}
    if key == 'racks':
        if isinstance(element, bool) or not isinstance(element, int):
            raise SabakanVariablesError(where, 'type', 'must be an integer rack number, got %r' % (element,), element)
        return element
    if key == 'roles':
        if not isinstance(element, str):
            raise SabakanVariablesError(where, 'type', 'must be a role name (string), got %r' % (element,), element)
        return element
    if element not in MACHINE_STATES:
        hint = ''
        if isinstance(element, str) and element.upper() in MACHINE_STATES:
            hint = ' (states are upper case: did you mean %r?)' % element.upper()
        raise SabakanVariablesError(where, 'one-of', '%r is not a machine state; one of %s%s'
                                    % (element, ', '.join(MACHINE_STATES), hint), element)
    return element


def query_variables(variables: Union[Mapping[str, Any], str, None], defaults: Mapping[str, Any]) -> Dict[str, Any]:
    """The {having, notHaving} to send: the user's object (or its JSON text) over `defaults`.

    A key the user gives replaces the default for that key entirely (no deep merge), a key the user
    leaves out keeps the default, and an explicit null means "no condition". CKE instead sends a key
    left out as null; keeping the default is deliberate (docs/sabakan.md, "Query variables"): a
    narrowed `having` must not bring boot servers or RETIRED machines back.
    Unknown keys, unknown MachineParams fields and bad state names are rejected, naming the path.
    """
    if isinstance(variables, str):
        text = variables.strip()
        try:
            variables = json.loads(text) if text else None
        except ValueError as e:
            raise SabakanVariablesError('', 'json', 'query variables are not valid JSON: %s' % e) from None
    result = {key: copy.deepcopy(defaults.get(key)) for key in VARIABLE_KEYS}
    if variables is None:
        return result
    if not isinstance(variables, Mapping):
        raise SabakanVariablesError('', 'type', 'query variables must be an object with "having" and/or "notHaving", '
                                    'got %s: %r' % (type(variables).__name__, variables), variables)
    unknown = sorted(set(variables) - set(VARIABLE_KEYS))
    if unknown:
        raise SabakanVariablesError('', 'known', 'query variables have unknown key(s) %s; allowed: having, notHaving'
                                    % ', '.join(repr(k) for k in unknown))
    for key in VARIABLE_KEYS:
        if key in variables:
            result[key] = _check_params(variables[key], key)
    return result


# --- response checks ------------------------------------------------------------------------------
def _fail(where: str, field: str, problem: str, value: Any) -> SabakanResponseError:
    return SabakanResponseError('%s: %s %s, got %r' % (where, field, problem, value))


def check_machine(machine: Any, where: str) -> Dict[str, Any]:
    """Trust check of one Machine as CKE's query fetches it (every fetched field but labels is non-null in
    the schema); raises naming the machine and the field."""
    if not isinstance(machine, dict):
        raise _fail(where, 'machine', 'must be an object', machine)
    spec, status = machine.get('spec'), machine.get('status')
    if not isinstance(spec, dict):
        raise _fail(where, 'spec', 'must be an object', spec)
    serial = spec.get('serial')
    if not isinstance(serial, str) or not serial:
        raise _fail(where, 'spec.serial', 'must be a non-empty string', serial)
    where = '%s (serial %s)' % (where, serial)
    if not isinstance(status, dict):
        raise _fail(where, 'status', 'must be an object', status)
    ipv4 = spec.get('ipv4')
    if not isinstance(ipv4, list) or not all(isinstance(a, str) and a for a in ipv4):
        raise _fail(where, 'spec.ipv4', 'must be a list of addresses', ipv4)
    for field in ('rack', 'indexInRack'):
        if isinstance(spec.get(field), bool) or not isinstance(spec.get(field), int):
            raise _fail(where, 'spec.' + field, 'must be an integer', spec.get(field))
    if not isinstance(spec.get('role'), str):
        raise _fail(where, 'spec.role', 'must be a string', spec.get('role'))
    labels = spec.get('labels')
    if labels is not None and (not isinstance(labels, list) or not all(
            isinstance(label, dict) and isinstance(label.get('name'), str) and isinstance(label.get('value'), str)
            for label in labels)):
        raise _fail(where, 'spec.labels', 'must be a list of {name, value} or null', labels)
    for field in ('registerDate', 'retireDate'):
        try:
            parse_rfc3339(spec.get(field), 'spec.' + field)
        except ValueError:
            raise _fail(where, 'spec.' + field, 'must be an RFC 3339 date-time', spec.get(field)) from None
    bmc = spec.get('bmc')
    if not isinstance(bmc, dict) or not isinstance(bmc.get('bmcType'), str):
        raise _fail(where, 'spec.bmc', 'must be an object with a bmcType string', bmc)
    _check_status(status, where)
    return machine


def check_unique(machines: List[Dict[str, Any]], where: str) -> List[Dict[str, Any]]:
    """No two machines with one serial or one IPv4 address (sabakan's own invariants): a list that breaks them is
    not sabakan's answer, and planning from it would put one server in the cluster twice."""
    seen: Dict[Tuple[str, str], int] = {}
    for index, machine in enumerate(machines):
        spec = machine.get('spec') or {}
        for key, value in [('spec.serial', spec.get('serial'))] + [('spec.ipv4', a) for a in spec.get('ipv4') or []]:
            if (key, value) in seen:
                raise _fail('%s[%d]' % (where, index), key, 'is also %s[%d] (%s must be unique)' % (
                    where, seen[(key, value)], key), value)
            seen[(key, value)] = index
    return machines


def _check_status(status: Any, where: str) -> Dict[str, Any]:
    if not isinstance(status, dict):
        raise _fail(where, 'status', 'must be an object', status)
    if status.get('state') not in MACHINE_STATES:
        raise _fail(where, 'status.state', 'must be one of %s' % ', '.join(MACHINE_STATES), status.get('state'))
    try:
        parse_rfc3339(status.get('timestamp'), 'status.timestamp')
    except ValueError:
        raise _fail(where, 'status.timestamp', 'must be an RFC 3339 date-time', status.get('timestamp')) from None
    duration = status.get('duration')
    if isinstance(duration, bool) or not isinstance(duration, (int, float)):
        raise _fail(where, 'status.duration', 'must be a number of seconds', duration)
    return status


# --- the client -----------------------------------------------------------------------------------
def graphql_url(url: str) -> str:
    """Full GraphQL endpoint: `/graphql` is appended when the URL has no path."""
    if not isinstance(url, str) or not url.strip():
        raise OptionError('url', 'url', 'the sabakan URL must be a non-empty string like http://sabakan:10080, got %r' % (url,), url)
    try:
        validate.endpoint_url(url.strip(), 'url')
    except InvalidInput as exc:
        raise exc.recast(OptionError) from None
    parts = urlsplit(url.strip())
    if parts.scheme not in ('http', 'https') or not parts.netloc:
        raise OptionError('url', 'url', '%r must start with http:// or https:// and name a host' % url, url)
    path = parts.path if parts.path not in ('', '/') else '/graphql'
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ''))


class SabakanClient:
    """One sabakan endpoint. Each call is one fresh HTTP request bounded by `timeout` seconds."""

    def __init__(self, url: str, *, timeout: float = 30.0, validate_certs: bool = True,
                 ca_path: Optional[str] = None, headers: Optional[Mapping[str, str]] = None):
        self.url = graphql_url(url)
        try:
            self.timeout = validate.timeout(timeout, 'timeout')
            validate.optional_file(ca_path, 'ca_path')   # given, it must be a file even for an http:// URL
        except InvalidInput as exc:
            raise exc.recast(OptionError) from None
        self.headers = {'Content-Type': 'application/json', 'Accept': 'application/json'}
        self.headers.update(headers or {})
        context = self._ssl_context(validate_certs, ca_path) if self.url.startswith('https://') else None
        self._opener = urllib.request.build_opener(*watched_handlers(context))   # headers bounded too

    @staticmethod
    def _ssl_context(validate_certs: bool, ca_path: Optional[str]) -> ssl.SSLContext:
        try:
            return client_context(ca_path, verify=validate_certs)
        except (OSError, ssl.SSLError) as e:
            raise OptionError('ca_path', 'readable', 'cannot load CA certificates from %s: %s' % (ca_path, e), ca_path) from e

    # -- transport
    def execute(self, query: str, variables: Optional[Dict[str, Any]] = None,
                operation_name: Optional[str] = None) -> Dict[str, Any]:
        """POST one GraphQL request; returns `data` or raises one of the three error classes."""
        payload: Dict[str, Any] = {'query': query, 'variables': variables or {}}
        if operation_name:
            payload['operationName'] = operation_name
        request = urllib.request.Request(self.url, data=json.dumps(payload).encode('utf-8'),
                                         headers=dict(self.headers), method='POST')
        status, body = self._send(request)
        try:
            answer = json.loads(body.decode('utf-8'))
        except (ValueError, UnicodeDecodeError):
            if status >= 400:
                raise SabakanResponseError('sabakan at %s answered HTTP %d: %s'
                                           % (self.url, status, _excerpt(body))) from None
            raise SabakanResponseError('sabakan at %s answered something that is not JSON (HTTP %d): %s'
                                       % (self.url, status, _excerpt(body))) from None
        if not isinstance(answer, dict):
            raise SabakanResponseError('sabakan at %s answered JSON that is not an object: %s'
                                       % (self.url, _excerpt(body)))
        errors = answer.get('errors')
        if errors:
            messages = [e.get('message', str(e)) if isinstance(e, dict) else str(e)
                        for e in (errors if isinstance(errors, list) else [errors])]
            raise SabakanQueryError('sabakan at %s: %s' % (self.url, '; '.join(messages)), messages)
        if status >= 400:
            raise SabakanResponseError('sabakan at %s answered HTTP %d: %s' % (self.url, status, _excerpt(body)))
        data = answer.get('data')
        if not isinstance(data, dict):
            raise SabakanResponseError('sabakan at %s answered without a "data" object: %s'
                                       % (self.url, _excerpt(body)))
        return data

    def _send(self, request: urllib.request.Request) -> tuple:
        """(HTTP status, body bytes) for 2xx-4xx; 5xx and transport failures raise SabakanUnavailable."""
        deadline = Deadline(self.timeout, 'POST %s' % self.url)
        try:
            with watching(deadline, self.url), self._opener.open(request, timeout=self.timeout) as response:
                return response.status, self._read(response, deadline)
        except DeadlineExceeded as e:
            raise SabakanUnavailable('sabakan at %s did not answer within %gs (%.1fs spent)' % (
                self.url, self.timeout, e.spent)) from None
        except urllib.error.HTTPError as e:
            try:
                body = self._read(e, deadline)
            except (socket.timeout, TimeoutError, OSError):
                body = b''
            finally:
                e.close()
            if e.code >= 500:
                raise SabakanUnavailable('sabakan at %s failed with HTTP %d: %s'
                                         % (self.url, e.code, _excerpt(body))) from None
            return e.code, body
        except urllib.error.URLError as e:
            reason = e.reason
            if isinstance(reason, (socket.timeout, TimeoutError)):
                raise SabakanUnavailable('sabakan at %s did not answer within %gs' % (self.url, self.timeout)) from None
            raise SabakanUnavailable('cannot reach sabakan at %s: %s' % (self.url, reason)) from None
        except (socket.timeout, TimeoutError):
            raise SabakanUnavailable('sabakan at %s did not answer within %gs' % (self.url, self.timeout)) from None
        except (ConnectionError, OSError) as e:  # reset mid-answer, half-closed sockets, ...
            raise SabakanUnavailable('sabakan at %s: connection failed: %s' % (self.url, e)) from None

    def _read(self, response: Any, deadline: Deadline) -> bytes:
        """Read the body as it arrives (read1); the per-read timeout alone would let a trickling server run forever."""
        return read_within(lambda: response.read1(65536), deadline, self.url)

    # -- operations
    def search_machines(self, having: Optional[Mapping[str, Any]] = None,
                        not_having: Optional[Mapping[str, Any]] = None) -> List[Dict[str, Any]]:
        """CKE's `ckeSearch` query with exactly these MachineParams (None = no condition)."""
        variables = query_variables({'having': having, 'notHaving': not_having}, {})
        data = self.execute(SEARCH_QUERY, variables, 'ckeSearch')
        machines = data.get('searchMachines')
        if not isinstance(machines, list):
            raise SabakanResponseError('sabakan at %s: data.searchMachines must be a list, got %s'
                                       % (self.url, _excerpt(json.dumps(machines).encode())))
        return check_unique([check_machine(m, '%s: searchMachines[%d]' % (self.url, i)) for i, m in enumerate(machines)],
                            '%s: searchMachines' % self.url)

    def search(self, variables: Union[Mapping[str, Any], str, None] = None,
               defaults: Optional[Mapping[str, Any]] = None) -> List[Dict[str, Any]]:
        """searchMachines with user variables over `defaults` (GENERATOR_VARIABLES unless given)."""
        merged = query_variables(variables, GENERATOR_VARIABLES if defaults is None else defaults)
        return self.search_machines(merged['having'], merged['notHaving'])

    def machine(self, serial: str) -> Dict[str, Any]:
        data = self.execute(MACHINE_QUERY, {'serial': serial}, 'machine')
        return check_machine(data.get('machine'), '%s: machine(%s)' % (self.url, serial))

    def set_machine_state(self, serial: str, state: str) -> Dict[str, Any]:
        """Move a machine along sabakan's lifecycle; a forbidden transition is a SabakanQueryError."""
        if state not in MACHINE_STATES:
            raise SabakanVariablesError('state', 'one-of', '%r is not a machine state; one of %s' % (state, ', '.join(MACHINE_STATES)),
                                        state)
        data = self.execute(SET_STATE_MUTATION, {'serial': serial, 'state': state}, 'setMachineState')
        return _check_status(data.get('setMachineState'), '%s: setMachineState(%s)' % (self.url, serial))


def _excerpt(body: bytes) -> str:
    text = body.decode('utf-8', 'replace').strip()
    return repr(text[:EXCERPT] + ('...' if len(text) > EXCERPT else '')) if text else '(empty body)'
