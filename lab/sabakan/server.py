#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A sabakan GraphQL server for tests and the lab: sabakan's schema, matching and lifecycle over real HTTP.

It serves `POST /graphql` (and `GET /graphql?query=`) with the schema of cybozu-go/sabakan
(`gql/graph/schema.graphqls`), executed by graphql-core, and answers like gqlgen does:
`{"data": ...}`, `{"errors": [{"message": ...}], "data": null}`, HTTP 422 for a query that does
not parse or validate, HTTP 400 for a body that is not JSON. Matching follows `gql/match.go`;
`setMachineState` follows sabakan's lifecycle (docs/lifecycle.md). The server owns its clock, so
`status.duration` can be moved forward without sleeping.

sabakan's REST state API too (docs/api.md), which repair scripts call (lab/sabakan_repair_tool.py does):
    PUT  /api/v1/state/<serial>   body: the state in lower case (healthy, unhealthy, ...), along the lifecycle
                                  as setMachineState; 200, 400 (bad state or forbidden transition), 404
    GET  /api/v1/state/<serial>   the state in lower case, as text

Control endpoints for tests and the lab (not part of sabakan), under /lab/:
    GET  /lab/machines                       every machine (searchMachines shape, with duration)
    POST /lab/machines  [machine, ...]       replace the inventory (status.timestamp optional: now)
    POST /lab/state     {"serial", "state"}  force a state (no lifecycle check), timestamp = now
    GET  /lab/clock                          {"now", "offset_seconds"}
    POST /lab/clock     {"offset_seconds": N} move the clock forward by N seconds (N >= 0)
    POST /lab/fault     {"mode", "seconds"}  none | http500 | graphql_error | garbage | slow (seconds)

    python -m lab.sabakan.server --host 127.0.0.1 --port 10080 --racks 4 --per-rack 8 --seed 1 \
        [--pid-file F] [--state-file F] [--tls-cert F --tls-key F]

Python callers: `start_server(machines)` runs it in a daemon thread and returns a `SabakanServer`.
"""

from __future__ import annotations

import argparse
import copy
import http.server
import ipaddress
import json
import os
import signal
import ssl
import sys
import threading
import time
import urllib.parse
from typing import Any, Dict, List, Optional, Tuple

from graphql import GraphQLError, build_schema, execute, parse, validate

from lab.sabakan.datacenter import (
    MACHINE_STATES, format_rfc3339, generate_datacenter, parse_rfc3339)

SCHEMA_SDL = '''
type Query {
    machine(serial: ID!): Machine!
    searchMachines(having: MachineParams, notHaving: MachineParams): [Machine!]!
}

type Mutation {
    setMachineState(serial: ID!, state: MachineState!): MachineStatus!
}

input MachineParams {
    labels: [LabelInput!] = null
    racks: [Int!] = null
    roles: [String!] = null
    states: [MachineState!] = null
    minDaysBeforeRetire: Int = null
}

input LabelInput {
    name: String!
    value: String!
}

type Machine {
    spec: MachineSpec!
    status: MachineStatus!
    info: MachineInfo!
}

type MachineSpec {
    serial: ID!
    labels: [Label!]
    rack: Int!
    indexInRack: Int!
    role: String!
    ipv4: [IPAddress!]!
    registerDate: DateTime!
    retireDate: DateTime!
    bmc: BMC!
}

type Label {
    name: String!
    value: String!
}

scalar IPAddress

scalar DateTime

type BMC {
    bmcType: String!
    ipv4: IPAddress!
}

type MachineStatus {
    state: MachineState!
    timestamp: DateTime!
    duration: Float!
}

enum MachineState {
    UNINITIALIZED
    HEALTHY
    UNHEALTHY
    UNREACHABLE
    UPDATING
    RETIRING
    RETIRED
}

type MachineInfo {
    network: NetworkInfo!
    bmc: BMCInfo!
}

type NetworkInfo {
    ipv4: [NICConfig!]!
}

type BMCInfo {
    ipv4: NICConfig!
}

type NICConfig {
    address: IPAddress!
    netmask: IPAddress!
    maskbits: Int!
    gateway: IPAddress!
}
'''

# sabakan docs/lifecycle.md: the states each state may move to.
TRANSITIONS: Dict[str, Tuple[str, ...]] = {
    'UNINITIALIZED': ('HEALTHY', 'RETIRING'),
    'HEALTHY': ('UNHEALTHY', 'UNREACHABLE', 'UPDATING', 'RETIRING'),
    'UNHEALTHY': ('HEALTHY', 'UNREACHABLE', 'UPDATING', 'RETIRING'),
    'UNREACHABLE': ('HEALTHY', 'UNHEALTHY', 'UPDATING', 'RETIRING'),
    'UPDATING': ('UNINITIALIZED',),
    'RETIRING': ('RETIRED',),
    'RETIRED': ('UNINITIALIZED',),
}
FAULT_MODES = ('none', 'http500', 'graphql_error', 'garbage', 'slow')
MAX_BODY = 16 * 1024 * 1024


class MachineInputError(ValueError):
    """A machine given to the server is malformed; the message names its index, serial and field."""


# --- machines: validation and rendering -----------------------------------------------------------
def _where(index: int, serial: Any) -> str:
    return 'machines[%d]%s' % (index, ' (serial %r)' % serial if isinstance(serial, str) and serial else '')


def _ip(value: Any, where: str, field: str) -> str:
    try:
        return str(ipaddress.ip_address(value if isinstance(value, str) else ''))
    except ValueError:
        raise MachineInputError('%s: %s %r is not an IP address' % (where, field, value)) from None


def _int(value: Any, where: str, field: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise MachineInputError('%s: %s must be an integer >= %d, got %r' % (where, field, minimum, value))
    return value


def _str(value: Any, where: str, field: str, empty: bool = False) -> str:
    if not isinstance(value, str) or (not empty and not value):
        kind = 'a string' if empty else 'a non-empty string'
        raise MachineInputError('%s: %s must be %s, got %r' % (where, field, kind, value))
    return value


def _date(value: Any, where: str, field: str) -> float:
    try:
        return parse_rfc3339(value)
    except ValueError as e:
        raise MachineInputError('%s: %s: %s' % (where, field, e)) from None


def _labels(value: Any, where: str) -> Dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, dict):
        value = [{'name': k, 'value': v} for k, v in value.items()]
    if not isinstance(value, list):
        raise MachineInputError('%s: spec.labels must be a list of {name, value}, got %r' % (where, value))
    labels: Dict[str, str] = {}
    for i, label in enumerate(value):
        if not isinstance(label, dict) or set(label) != {'name', 'value'}:
            raise MachineInputError('%s: spec.labels[%d] must be {name, value}, got %r' % (where, i, label))
        labels[_str(label['name'], where, 'spec.labels[%d].name' % i)] = \
            _str(label['value'], where, 'spec.labels[%d].value' % i, empty=True)
    return labels


def _nic(value: Any, where: str, field: str) -> Dict[str, Any]:
    if not isinstance(value, dict):
        raise MachineInputError('%s: %s must be a NICConfig object, got %r' % (where, field, value))
    return {'address': _ip(value.get('address'), where, field + '.address'),
            'netmask': _ip(value.get('netmask'), where, field + '.netmask'),
            'maskbits': _int(value.get('maskbits'), where, field + '.maskbits'),
            'gateway': _ip(value.get('gateway'), where, field + '.gateway')}


def _default_nic(address: str) -> Dict[str, Any]:
    net = ipaddress.ip_network(address + ('/24' if ':' not in address else '/64'), strict=False)
    return {'address': address, 'netmask': str(net.netmask), 'maskbits': net.prefixlen,
            'gateway': str(net.network_address + (254 if ':' not in address else 1))}


def normalize_machine(raw: Any, index: int, now: float) -> Dict[str, Any]:
    """The server's record for one machine in the searchMachines shape; dates become epoch seconds."""
    if not isinstance(raw, dict):
        raise MachineInputError('machines[%d]: must be an object with spec and status, got %r' % (index, raw))
    spec, status = raw.get('spec'), raw.get('status')
    serial = spec.get('serial') if isinstance(spec, dict) else None
    where = _where(index, serial)
    if not isinstance(spec, dict):
        raise MachineInputError('%s: spec must be an object, got %r' % (where, spec))
    if not isinstance(status, dict):
        raise MachineInputError('%s: status must be an object, got %r' % (where, status))
    bmc = spec.get('bmc')
    if not isinstance(bmc, dict):
        raise MachineInputError('%s: spec.bmc must be an object with bmcType and ipv4, got %r' % (where, bmc))
    ipv4 = spec.get('ipv4')
    if not isinstance(ipv4, list):
        raise MachineInputError('%s: spec.ipv4 must be a list of addresses, got %r' % (where, ipv4))
    state = status.get('state')
    if state not in MACHINE_STATES:
        raise MachineInputError('%s: status.state %r is not one of %s' % (where, state, ', '.join(MACHINE_STATES)))
    record = {
        'spec': {
            'serial': _str(serial, where, 'spec.serial'),
            'labels': _labels(spec.get('labels'), where),
            'rack': _int(spec.get('rack'), where, 'spec.rack'),
            'indexInRack': _int(spec.get('indexInRack'), where, 'spec.indexInRack'),
            'role': _str(spec.get('role'), where, 'spec.role', empty=True),
            'ipv4': [_ip(a, where, 'spec.ipv4[%d]' % i) for i, a in enumerate(ipv4)],
            'registerDate': _date(spec.get('registerDate'), where, 'spec.registerDate'),
            'retireDate': _date(spec.get('retireDate'), where, 'spec.retireDate'),
            'bmc': {'bmcType': _str(bmc.get('bmcType'), where, 'spec.bmc.bmcType', empty=True),
                    'ipv4': _ip(bmc.get('ipv4'), where, 'spec.bmc.ipv4')},
        },
        'status': {'state': state,
                   'timestamp': now if status.get('timestamp') is None
                   else _date(status['timestamp'], where, 'status.timestamp')},
    }
    info = raw.get('info')
    if info is None:
        info = {'network': {'ipv4': [_default_nic(a) for a in record['spec']['ipv4']]},
                'bmc': {'ipv4': _default_nic(record['spec']['bmc']['ipv4'])}}
    elif not isinstance(info, dict) or not isinstance(info.get('network'), dict) or \
            not isinstance(info['network'].get('ipv4'), list) or not isinstance(info.get('bmc'), dict):
        raise MachineInputError('%s: info must be {network: {ipv4: [NICConfig]}, bmc: {ipv4: NICConfig}}, got %r'
                                % (where, info))
    else:
        info = {'network': {'ipv4': [_nic(n, where, 'info.network.ipv4[%d]' % i)
                                     for i, n in enumerate(info['network']['ipv4'])]},
                'bmc': {'ipv4': _nic(info['bmc'].get('ipv4'), where, 'info.bmc.ipv4')}}
    record['info'] = info
    return record


def normalize_machines(raw: Any, now: float) -> List[Dict[str, Any]]:
    if not isinstance(raw, list):
        raise MachineInputError('machines must be a JSON list, got %s' % type(raw).__name__)
    records = [normalize_machine(m, i, now) for i, m in enumerate(raw)]
    seen: Dict[str, int] = {}
    for i, record in enumerate(records):
        serial = record['spec']['serial']
        if serial in seen:
            raise MachineInputError('%s: serial is also used by machines[%d]' % (_where(i, serial), seen[serial]))
        seen[serial] = i
    return records


def render_machine(record: Dict[str, Any], now: float) -> Dict[str, Any]:
    """A record as sabakan answers it at `now`: RFC 3339 dates, sorted labels (null when none), duration."""
    spec, status = record['spec'], record['status']
    labels = [{'name': k, 'value': spec['labels'][k]} for k in sorted(spec['labels'])] or None
    return {
        'spec': dict(spec, labels=labels, ipv4=list(spec['ipv4']), bmc=dict(spec['bmc']),
                     registerDate=format_rfc3339(spec['registerDate']),
                     retireDate=format_rfc3339(spec['retireDate'])),
        'status': {'state': status['state'], 'timestamp': format_rfc3339(status['timestamp']),
                   'duration': now - status['timestamp']},
        'info': copy.deepcopy(record['info']),
    }


# --- matching: gql/match.go -----------------------------------------------------------------------
def _contains(params: Optional[Dict[str, Any]], key: str, target: Any, base: bool) -> bool:
    values = (params or {}).get(key)
    if not values:
        return base
    return target in values


def match_machine(record: Dict[str, Any], having: Optional[Dict[str, Any]], not_having: Optional[Dict[str, Any]],
                  now: float) -> bool:
    """sabakan's matchMachine: having narrows, notHaving excludes; empty lists mean "no condition"."""
    spec, state = record['spec'], record['status']['state']
    labels = spec['labels']
    for label in (having or {}).get('labels') or []:
        if labels.get(label['name']) != label['value']:
            return False
    for label in (not_having or {}).get('labels') or []:
        if label['name'] in labels and labels[label['name']] == label['value']:
            return False
    for key, target in (('racks', spec['rack']), ('roles', spec['role']), ('states', state)):
        if not _contains(having, key, target, True):
            return False
        if _contains(not_having, key, target, False):
            return False
    days = int((spec['retireDate'] - now) / 3600.0 / 24.0)  # Go's int() truncates toward zero, as does Python's
    if having and having.get('minDaysBeforeRetire') is not None and having['minDaysBeforeRetire'] > days:
        return False
    if not_having and not_having.get('minDaysBeforeRetire') is not None and not_having['minDaysBeforeRetire'] <= days:
        return False
    return True


# --- state --------------------------------------------------------------------------------------
class Inventory:
    """The machines, the clock offset and the fault, shared by every request thread (one lock)."""

    def __init__(self, machines: List[Dict[str, Any]], state_file: Optional[str] = None):
        self.lock = threading.RLock()
        self.offset = 0.0
        self.fault: Dict[str, Any] = {'mode': 'none', 'seconds': 0.0}
        self.state_file = state_file
        self.records: List[Dict[str, Any]] = normalize_machines(machines, self.now())

    def now(self) -> float:
        return time.time() + self.offset

    def set_machines(self, machines: Any) -> int:
        records = normalize_machines(machines, self.now())
        with self.lock:
            self.records = records
            self.save()
        return len(records)

    def find(self, serial: str) -> Dict[str, Any]:
        for record in self.records:
            if record['spec']['serial'] == serial:
                return record
        raise KeyError(serial)

    def set_state(self, serial: str, state: str, enforce: bool) -> Dict[str, Any]:
        """Move a machine to `state`; with enforce, only along sabakan's lifecycle. Same state: no change."""
        if state not in MACHINE_STATES:
            raise ValueError('%r is not a machine state (one of %s)' % (state, ', '.join(MACHINE_STATES)))
        with self.lock:
            try:
                record = self.find(serial)
            except KeyError:
                raise LookupError('machine not found: serial %s' % serial) from None
            current = record['status']['state']
            if current != state:
                if enforce and state not in TRANSITIONS[current]:
                    raise ValueError('transition from [ %s ] to [ %s ] is forbidden (serial %s; allowed from %s: %s)'
                                     % (current, state, serial, current, ', '.join(TRANSITIONS[current])))
                record['status'] = {'state': state, 'timestamp': self.now()}
                self.save()
            return dict(record['status'])

    def advance(self, seconds: float) -> float:
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
            raise ValueError('offset_seconds must be a number >= 0 (the clock only moves forward), got %r'
                             % (seconds,))
        with self.lock:
            self.offset += float(seconds)
            self.save()
            return self.offset

    def set_fault(self, mode: str, seconds: float = 0) -> Dict[str, Any]:
        if mode not in FAULT_MODES:
            raise ValueError('fault mode %r is not one of %s' % (mode, ', '.join(FAULT_MODES)))
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
            raise ValueError('fault seconds must be a number >= 0, got %r' % (seconds,))
        with self.lock:
            self.fault = {'mode': mode, 'seconds': float(seconds)}
            return dict(self.fault)

    def dump(self) -> List[Dict[str, Any]]:
        with self.lock:
            now = self.now()
            return [render_machine(r, now) for r in self.records]

    def search(self, having: Optional[Dict[str, Any]], not_having: Optional[Dict[str, Any]],
               now: float) -> List[Dict[str, Any]]:
        with self.lock:
            return [render_machine(r, now) for r in self.records if match_machine(r, having, not_having, now)]

    def machine(self, serial: str, now: float) -> Dict[str, Any]:
        with self.lock:
            try:
                return render_machine(self.find(serial), now)
            except KeyError:
                raise LookupError('machine not found: serial %s' % serial) from None

    # A state file lets the lab's server keep states and clock across restarts.
    def save(self) -> None:
        if not self.state_file:
            return
        with self.lock:
            data = {'offset_seconds': self.offset, 'machines': [render_machine(r, self.now()) for r in self.records]}
        write_json_atomic(self.state_file, data)

    @classmethod
    def load(cls, state_file: str) -> 'Inventory':
        with open(state_file) as f:
            data = json.load(f)
        inventory = cls(data['machines'], state_file)
        inventory.offset = float(data.get('offset_seconds', 0.0))
        return inventory


def write_json_atomic(path: str, data: Any) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, '.%s.tmp.%d.%d' % (os.path.basename(path), os.getpid(), threading.get_ident()))
    with open(tmp, 'w') as f:
        json.dump(data, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- GraphQL ------------------------------------------------------------------------------------
def build_sabakan_schema():
    schema = build_schema(SCHEMA_SDL)
    query, mutation = schema.query_type, schema.mutation_type

    def search_machines(_root, info, having=None, notHaving=None):  # noqa: N803 (GraphQL argument name)
        ctx = info.context
        return ctx['inventory'].search(having, notHaving, ctx['now'])

    def machine(_root, info, serial):
        ctx = info.context
        try:
            return ctx['inventory'].machine(serial, ctx['now'])
        except LookupError as e:
            raise GraphQLError(str(e), extensions={'serial': serial, 'type': 'MACHINE_NOT_FOUND'}) from None

    def set_machine_state(_root, info, serial, state):
        try:
            status = info.context['inventory'].set_state(serial, state, enforce=True)
        except LookupError as e:
            raise GraphQLError(str(e), extensions={'serial': serial, 'type': 'MACHINE_NOT_FOUND'}) from None
        except ValueError as e:
            raise GraphQLError(str(e), extensions={'serial': serial, 'type': 'INVALID_STATE_TRANSITION'}) from None
        now = info.context['inventory'].now()
        return {'state': status['state'], 'timestamp': format_rfc3339(status['timestamp']),
                'duration': max(0.0, now - status['timestamp'])}

    query.fields['searchMachines'].resolve = search_machines
    query.fields['machine'].resolve = machine
    mutation.fields['setMachineState'].resolve = set_machine_state
    return schema


def error_body(message: str) -> Dict[str, Any]:
    return {'errors': [{'message': message}], 'data': None}


def run_graphql(schema, inventory: Inventory, request: Any) -> Tuple[int, Dict[str, Any]]:
    """(HTTP status, body) for one GraphQL request object, the way gqlgen answers."""
    if not isinstance(request, dict):
        return 400, error_body('json request body could not be decoded: expected an object')
    query, variables, operation = request.get('query'), request.get('variables'), request.get('operationName')
    if not isinstance(query, str) or not query.strip():
        return 422, error_body('no operation provided')
    if variables is not None and not isinstance(variables, dict):
        return 400, error_body('variables must be an object')
    try:
        document = parse(query)
    except GraphQLError as e:
        return 422, {'errors': [e.formatted], 'data': None}
    problems = validate(schema, document)
    if problems:
        return 422, {'errors': [p.formatted for p in problems], 'data': None}
    result = execute(schema, document, variable_values=variables, operation_name=operation,
                     context_value={'inventory': inventory, 'now': inventory.now()})
    body: Dict[str, Any] = {}
    if result.errors:
        body['errors'] = [e.formatted for e in result.errors]
    body['data'] = result.data
    return 200, body


class Handler(http.server.BaseHTTPRequestHandler):
    server_version = 'steward-lab-sabakan/1.0'
    timeout = 120  # idle keep-alive connections do not hold a thread forever
    protocol_version = 'HTTP/1.1'

    # -- plumbing
    def setup(self):
        if isinstance(self.request, ssl.SSLSocket):
            self.request.do_handshake()  # here, in the request thread, not in the accept loop
        super().setup()

    def log_message(self, format, *args):  # noqa: A002 (signature of the base class)
        if self.server.verbose:  # type: ignore[attr-defined]
            sys.stderr.write('%s - %s\n' % (self.address_string(), format % args))

    def _send(self, status: int, body: Any, content_type: str = 'application/json') -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header('Content-Type', content_type)
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _read_json(self) -> Tuple[bool, Any]:
        length = int(self.headers.get('Content-Length') or 0)
        if length > MAX_BODY:
            self.close_connection = True  # the unread body would otherwise be taken for the next request
            return False, 'request body of %d bytes is too large' % length
        raw = self.rfile.read(length) if length else b''
        try:
            return True, json.loads(raw.decode('utf-8'))
        except (ValueError, UnicodeDecodeError) as e:
            return False, 'json request body could not be decoded: %s' % e

    @property
    def inventory(self) -> Inventory:
        return self.server.inventory  # type: ignore[attr-defined]

    # -- routes
    def _get(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        if url.path == '/graphql':
            params = urllib.parse.parse_qs(url.query)
            request: Dict[str, Any] = {'query': (params.get('query') or [''])[0],
                                       'operationName': (params.get('operationName') or [None])[0]}
            if params.get('variables'):
                try:
                    request['variables'] = json.loads(params['variables'][0])
                except ValueError as e:
                    return self._send(400, error_body('variables could not be decoded: %s' % e))
            return self._graphql(request)
        if url.path == '/lab/machines':
            return self._send(200, self.inventory.dump())
        if url.path == '/lab/clock':
            return self._send(200, {'now': format_rfc3339(self.inventory.now()), 'offset_seconds': self.inventory.offset})
        if url.path == '/lab/fault':
            return self._send(200, dict(self.inventory.fault))
        return self._send(404, error_body('no route for GET %s' % url.path))

    # sabakan's REST state API (docs/api.md of cybozu-go/sabakan): the body of PUT is the state in lower case,
    # moved only along sabakan's lifecycle, as setMachineState does; GET answers the state as plain text.
    def _state_serial(self) -> Optional[str]:
        path = urllib.parse.urlsplit(self.path).path
        prefix = '/api/v1/state/'
        return urllib.parse.unquote(path[len(prefix):]) if path.startswith(prefix) and len(path) > len(prefix) else None

    def do_PUT(self):  # noqa: N802 (http.server naming)
        serial = self._state_serial()
        if serial is None:
            return self._send(404, error_body('no route for PUT %s' % urllib.parse.urlsplit(self.path).path))
        length = int(self.headers.get('Content-Length') or 0)
        if length > 64:
            self.close_connection = True  # the unread body would otherwise be taken for the next request
            return self._send(400, error_body('the body must be a machine state'))
        state = self.rfile.read(length).decode('utf-8', 'replace').strip()
        try:
            status = self.inventory.set_state(serial, state.upper(), enforce=True)
        except LookupError as e:
            return self._send(404, error_body(str(e.args[0]) if e.args else str(e)))
        except ValueError as e:
            return self._send(400, error_body(str(e)))
        del status
        return self._send(200, b'', 'text/plain')

    def do_GET(self):  # noqa: N802 (http.server naming)
        serial = self._state_serial()
        if serial is not None:
            try:
                record = self.inventory.find(serial)
            except KeyError:
                return self._send(404, error_body('machine not found: serial %s' % serial))
            return self._send(200, record['status']['state'].lower().encode(), 'text/plain')
        return self._get()

    def do_POST(self):  # noqa: N802 (http.server naming)
        path = urllib.parse.urlsplit(self.path).path
        ok, body = self._read_json()
        if path == '/graphql':
            return self._graphql(body) if ok else self._send(400, error_body(body))
        if not ok:
            return self._send(400, error_body(body))
        try:
            if path == '/lab/machines':
                return self._send(200, {'count': self.inventory.set_machines(body)})
            if path == '/lab/state':
                if not isinstance(body, dict) or not isinstance(body.get('serial'), str):
                    raise ValueError('expected {"serial": "...", "state": "..."}')
                status = self.inventory.set_state(body['serial'], body.get('state'), enforce=False)
                return self._send(200, {'state': status['state'], 'timestamp': format_rfc3339(status['timestamp'])})
            if path == '/lab/clock':
                if not isinstance(body, dict) or 'offset_seconds' not in body:
                    raise ValueError('expected {"offset_seconds": N}')
                offset = self.inventory.advance(body['offset_seconds'])
                return self._send(200, {'now': format_rfc3339(self.inventory.now()), 'offset_seconds': offset})
            if path == '/lab/fault':
                if not isinstance(body, dict) or 'mode' not in body:
                    raise ValueError('expected {"mode": ..., "seconds": N}')
                return self._send(200, self.inventory.set_fault(body['mode'], body.get('seconds', 0)))
        except LookupError as e:
            return self._send(404, error_body(str(e.args[0]) if e.args else str(e)))
        except ValueError as e:
            return self._send(400, error_body(str(e)))
        return self._send(404, error_body('no route for POST %s' % path))

    def _graphql(self, request: Any) -> None:
        fault = dict(self.inventory.fault)
        if fault['mode'] == 'http500':
            return self._send(500, b'internal server error (lab fault)\n', 'text/plain')
        if fault['mode'] == 'graphql_error':
            return self._send(200, error_body('lab fault: injected GraphQL error'))
        if fault['mode'] == 'garbage':
            return self._send(200, b'<html><body>502 Bad Gateway (lab fault)</body></html>', 'text/html')
        if fault['mode'] == 'slow':
            self.server.stopping.wait(fault['seconds'])  # type: ignore[attr-defined]
        status, body = run_graphql(self.server.schema, self.inventory, request)  # type: ignore[attr-defined]
        return self._send(status, body)


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # A client that gave up (timeout tests) closes its socket; that is expected, not worth a traceback.
        exc = sys.exc_info()[1]
        if isinstance(exc, (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, ssl.SSLError)):
            return
        super().handle_error(request, client_address)


class SabakanServer:
    """A running server; every control method is thread-safe and takes effect for the next request."""

    def __init__(self, inventory: Inventory, host: str = '127.0.0.1', port: int = 0, verbose: bool = False,
                 ssl_context: Optional[ssl.SSLContext] = None):
        self.inventory = inventory
        self.httpd = _HTTPServer((host, port), Handler)
        self.scheme = 'https' if ssl_context else 'http'
        if ssl_context:
            self.httpd.socket = ssl_context.wrap_socket(self.httpd.socket, server_side=True,
                                                        do_handshake_on_connect=False)
        self.httpd.inventory = inventory  # type: ignore[attr-defined]
        self.httpd.schema = build_sabakan_schema()  # type: ignore[attr-defined]
        self.httpd.stopping = threading.Event()  # type: ignore[attr-defined]
        self.httpd.verbose = verbose  # type: ignore[attr-defined]
        self.host, self.port = self.httpd.server_address[:2]
        self._thread: Optional[threading.Thread] = None

    @property
    def base_url(self) -> str:
        host = '[%s]' % self.host if ':' in str(self.host) else self.host
        return '%s://%s:%d' % (self.scheme, host, self.port)

    @property
    def url(self) -> str:
        return self.base_url + '/graphql'

    def start(self) -> 'SabakanServer':
        # A short poll interval makes stop() quick (tests start and stop a server per test).
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={'poll_interval': 0.05},
                                        name='sabakan-server', daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def set_machines(self, machines: List[Dict[str, Any]]) -> int:
        return self.inventory.set_machines(machines)

    def machines(self) -> List[Dict[str, Any]]:
        return self.inventory.dump()

    def set_state(self, serial: str, state: str) -> Dict[str, Any]:
        """Force a state (lab control: no lifecycle check); the timestamp becomes the server's now."""
        return self.inventory.set_state(serial, state, enforce=False)

    def advance(self, seconds: float) -> float:
        return self.inventory.advance(seconds)

    def now(self) -> float:
        return self.inventory.now()

    def set_fault(self, mode: str, seconds: float = 0) -> Dict[str, Any]:
        return self.inventory.set_fault(mode, seconds)

    def stop(self) -> None:
        self.httpd.stopping.set()  # type: ignore[attr-defined]
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)


def start_server(machines: List[Dict[str, Any]], host: str = '127.0.0.1', port: int = 0,
                 verbose: bool = False, ssl_context: Optional[ssl.SSLContext] = None) -> SabakanServer:
    """Serve `machines` in a daemon thread; port 0 picks a free port (see `.url`); HTTPS with ssl_context."""
    return SabakanServer(Inventory(machines), host, port, verbose, ssl_context).start()


# --- CLI ----------------------------------------------------------------------------------------
def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', 1)[0])
    parser.add_argument('--host', default='127.0.0.1')
    parser.add_argument('--port', type=int, default=10080, help='0 picks a free port (printed on start)')
    parser.add_argument('--racks', type=int, default=4)
    parser.add_argument('--per-rack', type=int, default=8, help='machines per rack, boot servers included')
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--machines-file', help='serve this JSON list of machines instead of generating them')
    parser.add_argument('--pid-file', help='write our pid here (removed on exit)')
    parser.add_argument('--state-file', help='load machines and clock from here when it exists; save every change')
    parser.add_argument('--tls-cert', help='serve HTTPS with this certificate (PEM) ...')
    parser.add_argument('--tls-key', help='... and this key (PEM)')
    parser.add_argument('--verbose', action='store_true', help='log every request to stderr')
    args = parser.parse_args(argv)
    try:
        if args.state_file and os.path.exists(args.state_file):
            inventory = Inventory.load(args.state_file)
        else:
            if args.machines_file:
                with open(args.machines_file) as f:
                    machines = json.load(f)
            else:
                machines = generate_datacenter(args.racks, args.per_rack, seed=args.seed, now=time.time())
            inventory = Inventory(machines, args.state_file)
            inventory.save()
        context = None
        if args.tls_cert:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(args.tls_cert, args.tls_key)
        server = SabakanServer(inventory, args.host, args.port, args.verbose, context)
    except (OSError, ValueError, KeyError) as e:
        print('sabakan_server: %s' % e, file=sys.stderr)
        return 1
    if args.pid_file:
        tmp = '%s.tmp.%d' % (args.pid_file, os.getpid())
        with open(tmp, 'w') as f:
            f.write('%d\n' % os.getpid())
        os.replace(tmp, args.pid_file)

    def on_signal(signum, _frame):
        threading.Thread(target=server.stop, daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print('sabakan server listening on %s (%d machines)' % (server.url, len(inventory.records)), flush=True)
    try:
        server.serve_forever()
    finally:
        server.httpd.server_close()
        if args.pid_file:
            try:
                os.unlink(args.pid_file)
            except OSError:
                pass
    print('sabakan server stopped', flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
