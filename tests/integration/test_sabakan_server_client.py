# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sabakan client against the lab's sabakan GraphQL server over real HTTP.

Covers sabakan's matching semantics (gql/match.go), the lifecycle rules of setMachineState, the
server-owned clock behind `duration`, every injected fault mapped to the right client exception,
malformed answers (from a canned HTTP server), HTTPS, the control endpoints and the server CLI.
"""

from __future__ import annotations

import http.server
import json
import os
import select
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.client import (
    GENERATOR_VARIABLES,
    REPAIR_VARIABLES,
    SEARCH_QUERY,
    SabakanClient,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import (
    SabakanError,
    SabakanQueryError,
    SabakanResponseError,
    SabakanUnavailable,
)
from lab.env.ports import free_port

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from lab.sabakan.datacenter import format_rfc3339, generate_datacenter, parse_rfc3339
from lab.sabakan.server import start_server

DAY = 86400.0
STATES = ('UNINITIALIZED', 'HEALTHY', 'UNHEALTHY', 'UNREACHABLE', 'UPDATING', 'RETIRING', 'RETIRED')
# sabakan docs/lifecycle.md, written out here independently of the server's table.
ALLOWED = {
    ('UNINITIALIZED', 'HEALTHY'), ('UNINITIALIZED', 'RETIRING'),
    ('HEALTHY', 'UNHEALTHY'), ('HEALTHY', 'UNREACHABLE'), ('HEALTHY', 'UPDATING'), ('HEALTHY', 'RETIRING'),
    ('UNHEALTHY', 'HEALTHY'), ('UNHEALTHY', 'UNREACHABLE'), ('UNHEALTHY', 'UPDATING'), ('UNHEALTHY', 'RETIRING'),
    ('UNREACHABLE', 'HEALTHY'), ('UNREACHABLE', 'UNHEALTHY'), ('UNREACHABLE', 'UPDATING'), ('UNREACHABLE', 'RETIRING'),
    ('UPDATING', 'UNINITIALIZED'),
    ('RETIRING', 'RETIRED'),
    ('RETIRED', 'UNINITIALIZED'),
}


def machine(serial, now, *, rack=0, index=1, role='cs', state='HEALTHY', labels=None, retire_days=400.0,
            timestamp=None):
    m = {'spec': {'serial': serial,
                  'labels': [{'name': k, 'value': v} for k, v in (labels or {}).items()],
                  'rack': rack, 'indexInRack': index, 'role': role,
                  'ipv4': ['10.%d.0.%d' % (rack, index)],
                  'registerDate': format_rfc3339(now - 1000 * DAY),
                  'retireDate': format_rfc3339(now + retire_days * DAY),
                  'bmc': {'bmcType': 'IPMI-2.0', 'ipv4': '10.%d.1.%d' % (rack, index)}},
         'status': {'state': state}}
    if timestamp is not None:
        m['status']['timestamp'] = format_rfc3339(timestamp)
    return m


def fleet(now):
    """Seven machines that tell every matching rule apart; days to retire in the comments."""
    return [
        machine('b0', now, rack=0, index=1, role='boot', labels={'product': 'R640'}),                  # 400
        machine('c1', now, rack=0, index=2, labels={'product': 'R640', 'gpu': 'true'},
                retire_days=10 + 1 / 24.0),                                                             # 10
        machine('c2', now, rack=1, index=1, state='UNHEALTHY', labels={'product': 'R6525'}, retire_days=800),
        machine('s3', now, rack=1, index=2, role='ss', state='UNREACHABLE', labels={'product': 'R640'},
                retire_days=-10.5),                                                                     # -10
        machine('s4', now, rack=2, index=1, role='ss', state='RETIRED', retire_days=-400),
        machine('c5', now, rack=2, index=2, state='RETIRING', labels={'product': 'R6525', 'gpu': 'false'},
                retire_days=1200),
        machine('b6', now, rack=2, index=3, role='boot', state='RETIRED', retire_days=-100),
    ]


ALL = ['b0', 'c1', 'c2', 's3', 's4', 'c5', 'b6']


@pytest.fixture
def fleet_server(sabakan_server):
    sabakan_server.set_machines(fleet(sabakan_server.now()))
    return sabakan_server


def serials(machines):
    return [m['spec']['serial'] for m in machines]


def call(method, url, body=None, timeout=10):
    """(status, parsed JSON or raw text) of one plain HTTP request."""
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={'Content-Type': 'application/json'})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    try:
        return status, json.loads(raw.decode())
    except ValueError:
        return status, raw.decode()


def without_duration(machines):
    return [dict(m, status=dict(m['status'], duration=None)) for m in machines]


def base(server):
    return server.url.rsplit('/graphql', 1)[0]


# --- matching semantics (gql/match.go) ---------------------------------------------------------------
MATCH_TABLE = [
    ('no conditions', None, None, ALL),
    ('empty params', {}, {}, ALL),
    ('empty lists are no condition', {'racks': [], 'roles': [], 'states': [], 'labels': []},
     {'racks': [], 'roles': [], 'states': [], 'labels': []}, ALL),
    ('having labels: the one label matches', {'labels': [{'name': 'product', 'value': 'R640'}]}, None,
     ['b0', 'c1', 's3']),
    ('having labels: all must match', {'labels': [{'name': 'product', 'value': 'R640'},
                                                  {'name': 'gpu', 'value': 'true'}]}, None, ['c1']),
    ('having labels: value must be equal', {'labels': [{'name': 'gpu', 'value': 'false'}]}, None, ['c5']),
    ('notHaving labels: a match excludes', None, {'labels': [{'name': 'gpu', 'value': 'true'}]},
     ['b0', 'c2', 's3', 's4', 'c5', 'b6']),
    ('notHaving labels: any match excludes', None, {'labels': [{'name': 'product', 'value': 'R6525'},
                                                               {'name': 'gpu', 'value': 'true'}]},
     ['b0', 's3', 's4', 'b6']),
    ('notHaving labels: other value does not exclude', None, {'labels': [{'name': 'gpu', 'value': 'maybe'}]}, ALL),
    ('having racks', {'racks': [1, 2]}, None, ['c2', 's3', 's4', 'c5', 'b6']),
    ('having racks: none there', {'racks': [7]}, None, []),
    ('notHaving racks', None, {'racks': [0]}, ['c2', 's3', 's4', 'c5', 'b6']),
    ('having roles', {'roles': ['ss']}, None, ['s3', 's4']),
    ('notHaving roles', None, {'roles': ['cs', 'boot']}, ['s3', 's4']),
    ('having states', {'states': ['HEALTHY']}, None, ['b0', 'c1']),
    ('notHaving states', None, {'states': ['HEALTHY', 'RETIRED']}, ['c2', 's3', 'c5']),
    ('having minDays: days >= n (boundary)', {'minDaysBeforeRetire': 10}, None, ['b0', 'c1', 'c2', 'c5']),
    ('having minDays: days >= n (above)', {'minDaysBeforeRetire': 11}, None, ['b0', 'c2', 'c5']),
    ('notHaving minDays: days >= n excluded', None, {'minDaysBeforeRetire': 10}, ['s3', 's4', 'b6']),
    ('having negative minDays: truncation toward zero', {'minDaysBeforeRetire': -10}, None,
     ['b0', 'c1', 'c2', 's3', 'c5']),
    ('having negative minDays: just above', {'minDaysBeforeRetire': -9}, None, ['b0', 'c1', 'c2', 'c5']),
    ('minDays window', {'minDaysBeforeRetire': 0}, {'minDaysBeforeRetire': 801}, ['b0', 'c1', 'c2']),
    ('having and notHaving together', {'roles': ['cs'], 'states': ['HEALTHY', 'UNHEALTHY']}, {'racks': [1]},
     ['c1']),
]


@pytest.mark.parametrize('having, not_having, expected', [row[1:] for row in MATCH_TABLE],
                         ids=[row[0] for row in MATCH_TABLE])
def test_matching_semantics(fleet_server, having, not_having, expected):
    client = SabakanClient(fleet_server.url)
    assert serials(client.search_machines(having, not_having)) == expected


def test_cke_generator_defaults_exclude_boot_and_retired(fleet_server):
    client = SabakanClient(fleet_server.url)
    assert serials(client.search()) == ['c1', 'c2', 's3', 'c5']
    assert serials(client.search(defaults=GENERATOR_VARIABLES)) == ['c1', 'c2', 's3', 'c5']


def test_cke_repair_defaults_select_unhealthy_and_unreachable(fleet_server):
    client = SabakanClient(fleet_server.url)
    assert serials(client.search(defaults=REPAIR_VARIABLES)) == ['c2', 's3']
    # a user key replaces the default for that key only
    assert serials(client.search({'notHaving': None}, defaults=REPAIR_VARIABLES)) == ['c2', 's3']
    assert serials(client.search({'having': {'states': ['RETIRED']}}, defaults=REPAIR_VARIABLES)) == ['s4']


def test_min_days_follow_the_server_clock(fleet_server):
    client = SabakanClient(fleet_server.url)
    assert 'c1' in serials(client.search_machines({'minDaysBeforeRetire': 10}))
    fleet_server.advance(2 * DAY)  # c1 now retires in 8 days, s3 retired 12 days ago
    assert serials(client.search_machines({'minDaysBeforeRetire': 8})) == ['b0', 'c1', 'c2', 'c5']
    assert serials(client.search_machines({'minDaysBeforeRetire': 9})) == ['b0', 'c2', 'c5']
    assert 's3' in serials(client.search_machines({'minDaysBeforeRetire': -12}))
    assert 's3' not in serials(client.search_machines({'minDaysBeforeRetire': -11}))


# --- answer shape ------------------------------------------------------------------------------
def test_machine_fields_as_sabakan_answers_them(fleet_server):
    client = SabakanClient(fleet_server.url)
    c1 = client.machine('c1')
    assert c1['spec']['labels'] == [{'name': 'gpu', 'value': 'true'}, {'name': 'product', 'value': 'R640'}]
    assert (c1['spec']['rack'], c1['spec']['indexInRack'], c1['spec']['role']) == (0, 2, 'cs')
    assert c1['spec']['ipv4'] == ['10.0.0.2'] and c1['spec']['bmc'] == {'bmcType': 'IPMI-2.0'}
    assert c1['status']['state'] == 'HEALTHY' and c1['status']['duration'] >= 0
    assert parse_rfc3339(c1['spec']['retireDate']) > fleet_server.now()
    assert client.machine('s4')['spec']['labels'] is None  # no labels: null, like sabakan
    # info is in the schema too (CKE does not fetch it)
    data = client.execute('{ machine(serial: "c2") { info { network { ipv4 { address netmask maskbits gateway } } '
                          'bmc { ipv4 { address } } } spec { bmc { ipv4 } } } }')
    assert data['machine'] == {'info': {'network': {'ipv4': [{'address': '10.1.0.1', 'netmask': '255.255.255.0',
                                                              'maskbits': 24, 'gateway': '10.1.0.254'}]},
                                        'bmc': {'ipv4': {'address': '10.1.1.1'}}},
                               'spec': {'bmc': {'ipv4': '10.1.1.1'}}}


def test_get_query_and_gqlgen_style_errors(fleet_server):
    url = fleet_server.url
    status, body = call('GET', url + '?query=' + urllib.request.quote('{ machine(serial: "b0") { spec { role } } }'))
    assert (status, body) == (200, {'data': {'machine': {'spec': {'role': 'boot'}}}})
    status, body = call('POST', url, b'{"query": ')
    assert status == 400 and 'could not be decoded' in body['errors'][0]['message']
    status, body = call('POST', url, {'query': '{ searchMachines { spec { nope } } }'})
    assert status == 422 and "Cannot query field 'nope'" in body['errors'][0]['message'] and body['data'] is None
    status, body = call('POST', url, {'query': '{ machine(serial: "zz") { spec { serial } } }'})
    assert status == 200 and body['data'] is None and 'machine not found: serial zz' in body['errors'][0]['message']


def test_client_reports_query_errors(fleet_server):
    client = SabakanClient(fleet_server.url)
    with pytest.raises(SabakanQueryError, match='Syntax Error'):
        client.execute('{ searchMachines { ')
    with pytest.raises(SabakanQueryError, match="Cannot query field 'nope'"):
        client.execute('{ searchMachines { nope } }')
    with pytest.raises(SabakanQueryError, match='BROKEN') as info:
        client.execute(SEARCH_QUERY, {'having': {'states': ['BROKEN']}})
    assert info.value.messages and fleet_server.url in str(info.value)
    with pytest.raises(SabakanQueryError, match='machine not found: serial nope'):
        client.machine('nope')


# --- setMachineState: sabakan's lifecycle ------------------------------------------------------------
@pytest.mark.parametrize('source, target', [(a, b) for a in STATES for b in STATES if a != b],
                         ids=['%s->%s' % (a, b) for a in STATES for b in STATES if a != b])
def test_set_machine_state_follows_the_lifecycle(fleet_server, source, target):
    client = SabakanClient(fleet_server.url)
    fleet_server.set_state('c1', source)  # lab control: forced, no lifecycle check
    if (source, target) in ALLOWED:
        status = client.set_machine_state('c1', target)
        assert status['state'] == target
        assert client.machine('c1')['status']['state'] == target
    else:
        with pytest.raises(SabakanQueryError) as info:
            client.set_machine_state('c1', target)
        assert '[ %s ] to [ %s ]' % (source, target) in str(info.value) and 'c1' in str(info.value)
        assert client.machine('c1')['status']['state'] == source


def test_full_lifecycle_walk(fleet_server):
    client = SabakanClient(fleet_server.url)
    for state in ('UNHEALTHY', 'UPDATING', 'UNINITIALIZED', 'HEALTHY', 'RETIRING', 'RETIRED', 'UNINITIALIZED'):
        assert client.set_machine_state('c1', state)['state'] == state


def test_unknown_serial_is_an_error(fleet_server):
    with pytest.raises(SabakanQueryError, match='machine not found: serial zz'):
        SabakanClient(fleet_server.url).set_machine_state('zz', 'HEALTHY')


def test_state_change_restarts_duration_and_same_state_does_not(sabakan_server):
    # fixture machines changed state 1 h .. 30 days ago
    client = SabakanClient(sabakan_server.url)
    first, second = client.search()[:2]
    assert first['status']['duration'] >= 3600 and second['status']['duration'] >= 3600
    client.set_machine_state(first['spec']['serial'], 'UNHEALTHY')
    client.set_machine_state(second['spec']['serial'], 'HEALTHY')  # same state: nothing changes
    sabakan_server.advance(400)
    after = {m['spec']['serial']: m['status'] for m in client.search()}
    assert 400 <= after[first['spec']['serial']]['duration'] < 3600
    assert after[second['spec']['serial']]['duration'] >= 3600 + 400
    assert after[second['spec']['serial']]['timestamp'] == second['status']['timestamp']


# --- the server's clock -------------------------------------------------------------------------
def test_retired_for_400_seconds_without_sleeping(sabakan_server):
    client = SabakanClient(sabakan_server.url)
    serial = client.search()[0]['spec']['serial']
    sabakan_server.set_state(serial, 'RETIRED')
    retired = client.search_machines({'states': ['RETIRED']})
    assert serials(retired) == [serial] and retired[0]['status']['duration'] < 300
    status, body = call('POST', base(sabakan_server) + '/lab/clock', {'offset_seconds': 400})
    assert status == 200 and body['offset_seconds'] == 400
    retired = client.search_machines({'states': ['RETIRED']})
    assert retired[0]['status']['duration'] >= 400
    assert parse_rfc3339(retired[0]['status']['timestamp']) + 400 <= parse_rfc3339(body['now'])
    assert serial not in serials(client.search())  # CKE's default query never sees it


def test_clock_only_moves_forward(sabakan_server):
    status, body = call('POST', base(sabakan_server) + '/lab/clock', {'offset_seconds': -5})
    assert status == 400 and 'only moves forward' in body['errors'][0]['message']
    assert call('GET', base(sabakan_server) + '/lab/clock')[1]['offset_seconds'] == 0
    with pytest.raises(ValueError):
        sabakan_server.advance(-1)


def test_timestamp_defaults_to_now_when_machines_are_loaded(sabakan_server):
    now = sabakan_server.now()
    sabakan_server.set_machines([machine('new', now), machine('old', now, index=2, timestamp=now - 7200)])
    durations = {m['spec']['serial']: m['status']['duration'] for m in SabakanClient(sabakan_server.url).search()}
    assert durations['new'] < 3600 <= 7200 <= durations['old']


# --- faults -------------------------------------------------------------------------------------------
@pytest.mark.parametrize('mode, seconds, timeout, error, fragment', [
    ('http500', 0, 10, SabakanUnavailable, 'failed with HTTP 500'),
    ('graphql_error', 0, 10, SabakanQueryError, 'injected GraphQL error'),
    ('garbage', 0, 10, SabakanResponseError, 'not JSON'),
    ('slow', 5, 0.5, SabakanUnavailable, 'did not answer within 0.5s'),
])
def test_fault_gives_the_right_exception(sabakan_server, mode, seconds, timeout, error, fragment):
    client = SabakanClient(sabakan_server.url, timeout=timeout)
    sabakan_server.set_fault(mode, seconds)
    with pytest.raises(error, match=fragment) as info:
        client.search()
    assert sabakan_server.url in str(info.value)
    assert call('GET', base(sabakan_server) + '/lab/machines')[0] == 200  # control endpoints are not faulted
    sabakan_server.set_fault('none')
    assert len(client.search()) == 28


def test_slow_answer_within_the_timeout_is_accepted(sabakan_server):
    status, body = call('POST', base(sabakan_server) + '/lab/fault', {'mode': 'slow', 'seconds': 0.3})
    assert (status, body) == (200, {'mode': 'slow', 'seconds': 0.3})
    assert len(SabakanClient(sabakan_server.url, timeout=30).search()) == 28


def test_bad_fault_request(sabakan_server):
    status, body = call('POST', base(sabakan_server) + '/lab/fault', {'mode': 'meteor'})
    assert status == 400 and "'meteor' is not one of none, http500" in body['errors'][0]['message']


def test_unreachable_port():
    url = 'http://127.0.0.1:%d' % free_port()
    with pytest.raises(SabakanUnavailable, match='cannot reach sabakan at %s/graphql' % url):
        SabakanClient(url, timeout=5).search()


def test_stopped_server_is_unavailable():
    server = start_server([])
    client = SabakanClient(server.url, timeout=5)
    assert client.search() == []
    server.stop()
    with pytest.raises(SabakanUnavailable):
        client.search()


# --- malformed answers (a canned HTTP server) ------------------------------------------------------
GOOD = {'spec': {'serial': 'g1', 'labels': None, 'rack': 0, 'indexInRack': 1, 'role': 'cs', 'ipv4': ['10.0.0.1'],
                 'registerDate': '2020-01-01T00:00:00Z', 'retireDate': '2030-01-01T00:00:00.123456789+09:00',
                 'bmc': {'bmcType': 'IPMI-2.0'}},
        'status': {'state': 'HEALTHY', 'timestamp': '2024-01-01T00:00:00Z', 'duration': 12.5}}


def broken(path, value, serial='bad1'):
    m = json.loads(json.dumps(GOOD))
    m['spec']['serial'] = serial
    target = m
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return {'data': {'searchMachines': [GOOD, m]}}


class Canned:
    """A tiny HTTP server that answers every request with one canned (status, content type, body)."""

    def __init__(self):
        self.answer = (200, 'application/json', b'{}')
        self.requests = []
        canned = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get('Content-Length') or 0))
                canned.requests.append({'path': self.path, 'headers': dict(self.headers), 'body': body})
                status, ctype, data = canned.answer
                self.send_response(status)
                self.send_header('Content-Type', ctype)
                self.send_header('Content-Length', str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.url = 'http://127.0.0.1:%d' % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def canned():
    server = Canned()
    yield server
    server.stop()


def test_request_is_ckes_query_as_json_post(canned):
    canned.answer = (200, 'application/json', json.dumps({'data': {'searchMachines': [GOOD]}}).encode())
    client = SabakanClient(canned.url, headers={'Authorization': 'Bearer t0ken'})
    assert client.search() == [GOOD]
    request = canned.requests[-1]
    assert request['path'] == '/graphql'
    assert request['headers']['Content-Type'] == 'application/json'
    assert request['headers']['Authorization'] == 'Bearer t0ken'
    assert json.loads(request['body']) == {'query': SEARCH_QUERY, 'operationName': 'ckeSearch',
                                           'variables': GENERATOR_VARIABLES}


@pytest.mark.parametrize('status, body, error, fragment', [
    (200, {'data': {'searchMachines': {'a': 1}}}, SabakanResponseError, 'data.searchMachines must be a list'),
    (200, {'data': {'searchMachines': None}}, SabakanResponseError, 'data.searchMachines must be a list'),
    (200, [], SabakanResponseError, 'JSON that is not an object'),
    (200, {}, SabakanResponseError, 'without a "data" object'),
    (200, broken(['status', 'state'], 'BROKEN'), SabakanResponseError,
     "searchMachines[1] (serial bad1): status.state must be one of UNINITIALIZED"),
    (200, broken(['spec', 'serial'], ''), SabakanResponseError, 'searchMachines[1]: spec.serial must be a non-empty'),
    (200, broken(['spec', 'ipv4'], '10.0.0.1'), SabakanResponseError, '(serial bad1): spec.ipv4 must be a list'),
    (200, broken(['spec', 'retireDate'], '2030-01-01'), SabakanResponseError,
     '(serial bad1): spec.retireDate must be an RFC 3339 date-time'),
    (200, broken(['spec', 'registerDate'], KeyError), SabakanResponseError, 'spec.registerDate must be an RFC 3339'),
    (200, broken(['status', 'timestamp'], 'now'), SabakanResponseError, 'status.timestamp must be an RFC 3339'),
    (200, broken(['status', 'duration'], '12'), SabakanResponseError, 'status.duration must be a number'),
    (200, broken(['spec', 'rack'], None), SabakanResponseError, 'spec.rack must be an integer'),
    (200, broken(['spec', 'labels'], [{'name': 'x'}]), SabakanResponseError, 'spec.labels must be a list'),
    (200, broken(['spec', 'bmc'], {}), SabakanResponseError, 'spec.bmc must be an object with a bmcType'),
    (200, broken(['status'], KeyError), SabakanResponseError, '(serial bad1): status must be an object'),
    (200, {'data': {'searchMachines': [GOOD, 7]}}, SabakanResponseError, 'searchMachines[1]: machine must be'),
    (200, {'errors': [{'message': 'a'}, {'message': 'b'}], 'data': None}, SabakanQueryError, ': a; b'),
    (200, {'errors': [{'message': 'partial'}], 'data': {'searchMachines': []}}, SabakanQueryError, 'partial'),
    (422, {'errors': [{'message': 'validation failed'}], 'data': None}, SabakanQueryError, 'validation failed'),
    (404, '404 page not found', SabakanResponseError, 'answered HTTP 404'),
    (401, {'message': 'unauthorized'}, SabakanResponseError, 'answered HTTP 401'),
    (503, 'upstream down', SabakanUnavailable, 'failed with HTTP 503'),
    (502, '', SabakanUnavailable, 'failed with HTTP 502: (empty body)'),
])
def test_malformed_answers(canned, status, body, error, fragment):
    raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    canned.answer = (status, 'application/json' if not isinstance(body, str) else 'text/plain', raw)
    with pytest.raises(error) as info:
        SabakanClient(canned.url, timeout=5).search()
    assert fragment in str(info.value)
    assert canned.url in str(info.value)


# --- HTTPS --------------------------------------------------------------------------------------------
@pytest.fixture
def tls_files(tmp_path):
    if not shutil.which('openssl'):
        pytest.skip('openssl is needed to make a test certificate')
    cert, key = str(tmp_path / 'cert.pem'), str(tmp_path / 'key.pem')
    subprocess.run(['openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1',
                    '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', key, '-out', cert],
                   check=True, capture_output=True)
    return cert, key


def test_https_certificate_checks(tls_files):
    import ssl
    cert, key = tls_files
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = start_server(generate_datacenter(1, 3, seed=2, now=time.time()), ssl_context=context)
    try:
        assert server.url.startswith('https://127.0.0.1:')
        with pytest.raises(SabakanUnavailable, match='CERTIFICATE_VERIFY_FAILED'):
            SabakanClient(server.url, timeout=5).search()
        assert len(SabakanClient(server.url, timeout=5, ca_path=cert).search()) == 2
        assert len(SabakanClient(server.url, timeout=5, validate_certs=False).search()) == 2
        with pytest.raises(SabakanError, match='ca_path: .* does not exist'):
            SabakanClient(server.url, ca_path=key + '.missing')
        with pytest.raises(SabakanError, match='ca_path.*cannot load CA certificates'):
            SabakanClient(server.url, ca_path=key)
    finally:
        server.stop()


# --- control endpoints ------------------------------------------------------------------------------
@pytest.mark.parametrize('mutate, fragment', [
    (lambda m: m['spec'].pop('serial'), "machines[1]: spec.serial must be a non-empty string"),
    (lambda m: m['status'].update(state='OK'), "machines[1] (serial 'x'): status.state 'OK' is not one of"),
    (lambda m: m['spec'].update(ipv4=['10.0.0.300']), "spec.ipv4[0] '10.0.0.300' is not an IP address"),
    (lambda m: m['spec'].update(retireDate='soon'), "spec.retireDate: 'soon' is not an RFC 3339"),
    (lambda m: m['spec'].update(rack=-1), 'spec.rack must be an integer >= 0'),
    (lambda m: m['spec'].update(labels=[{'name': 'a'}]), 'spec.labels[0] must be {name, value}'),
    (lambda m: m['spec'].update(serial='a'), "(serial 'a'): serial is also used by machines[0]"),
    (lambda m: m['status'].update(timestamp=5), 'status.timestamp'),
    (lambda m: m.update(info={'network': {}}), 'info must be'),
])
def test_bad_machines_are_rejected_and_change_nothing(sabakan_server, mutate, fragment):
    now = sabakan_server.now()
    machines = [machine('a', now), machine('x', now, index=2)]
    mutate(machines[1])
    before = without_duration(sabakan_server.machines())
    status, body = call('POST', base(sabakan_server) + '/lab/machines', machines)
    assert status == 400 and fragment in body['errors'][0]['message'], body
    assert without_duration(sabakan_server.machines()) == before


def test_machines_roundtrip_and_forced_state(sabakan_server):
    now = sabakan_server.now()
    url = base(sabakan_server)
    status, body = call('POST', url + '/lab/machines', [machine('a', now), machine('b', now, index=2)])
    assert (status, body) == (200, {'count': 2})
    status, dump = call('GET', url + '/lab/machines')
    assert status == 200 and serials(dump) == ['a', 'b']
    assert dump[1]['info']['network']['ipv4'] == [{'address': '10.0.0.2', 'netmask': '255.255.255.0',
                                                   'maskbits': 24, 'gateway': '10.0.0.254'}]
    # the dump is accepted back as it is
    assert call('POST', url + '/lab/machines', dump) == (200, {'count': 2})
    status, body = call('POST', url + '/lab/state', {'serial': 'a', 'state': 'RETIRED'})  # not a lifecycle step
    assert status == 200 and body['state'] == 'RETIRED'
    assert SabakanClient(sabakan_server.url).machine('a')['status']['state'] == 'RETIRED'
    assert call('POST', url + '/lab/state', {'serial': 'zz', 'state': 'HEALTHY'})[0] == 404
    assert call('POST', url + '/lab/state', {'serial': 'a', 'state': 'FINE'})[0] == 400
    assert call('GET', url + '/lab/nothing')[0] == 404
    assert call('POST', url + '/lab/machines', b'[{')[0] == 400


def test_concurrent_clients(sabakan_server):
    client = SabakanClient(sabakan_server.url)
    targets = serials(client.search())[:8]
    errors = []

    def flap(serial):
        try:
            for _round in range(15):
                client.set_machine_state(serial, 'UNHEALTHY')
                assert len(client.search()) == 28
                client.set_machine_state(serial, 'HEALTHY')
        except Exception as e:  # collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=flap, args=(s,)) for s in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert {m['status']['state'] for m in client.search()} == {'HEALTHY'}


# --- the generated data center ------------------------------------------------------------------
def test_fixture_serves_the_generated_datacenter(sabakan_server):
    client = SabakanClient(sabakan_server.url)
    everything = client.search_machines()
    assert len(everything) == 32 and sum(m['spec']['role'] == 'boot' for m in everything) == 4
    assert len(client.search()) == 28 and client.search(defaults=REPAIR_VARIABLES) == []


def test_generate_datacenter_is_deterministic_and_shaped():
    now = 1700000000.0
    first = generate_datacenter(3, 5, seed=4, now=now)
    assert first == generate_datacenter(3, 5, seed=4, now=now)
    assert serials(first) != serials(generate_datacenter(3, 5, seed=5, now=now))
    assert len(first) == 15 and len(set(serials(first))) == 15
    for m in first:
        spec = m['spec']
        assert spec['ipv4'] == ['10.%d.0.%d' % (spec['rack'], spec['indexInRack'])]
        assert spec['bmc']['ipv4'] == '10.%d.1.%d' % (spec['rack'], spec['indexInRack'])
        assert (spec['role'] == 'boot') == (spec['indexInRack'] == 1)
        assert parse_rfc3339(spec['registerDate']) < now
        assert -1200 <= (parse_rfc3339(spec['retireDate']) - now) / DAY < 1501
        assert m['status']['state'] == 'HEALTHY'
        assert {label['name'] for label in spec['labels']} == {'datacenter', 'product'}
    for rack in range(3):
        roles = [m['spec']['role'] for m in first if m['spec']['rack'] == rack]
        assert roles.count('boot') == 1 and {'cs', 'ss'} <= set(roles)


def test_generate_datacenter_states_and_spread():
    now = 1700000000.0
    dc = generate_datacenter(10, 20, seed=3, now=now, states={'UNHEALTHY': 3, 'RETIRED': 0.1, 'UNREACHABLE': 1})
    counts = {}
    for m in dc:
        counts[m['status']['state']] = counts.get(m['status']['state'], 0) + 1
    assert counts == {'HEALTHY': 200 - 3 - 19 - 1, 'UNHEALTHY': 3, 'RETIRED': 19, 'UNREACHABLE': 1}
    assert all(m['status']['state'] == 'HEALTHY' for m in dc if m['spec']['role'] == 'boot')
    days = [(parse_rfc3339(m['spec']['retireDate']) - now) / DAY for m in dc]
    assert min(days) < -1000 and max(days) > 1000  # every lifetime score bucket of CKE is populated
    fixed = generate_datacenter(1, 3, seed=3, now=now, status_age_seconds=60)
    assert {parse_rfc3339(m['status']['timestamp']) for m in fixed} == {now - 60}


@pytest.mark.parametrize('kwargs, fragment', [
    ({'racks': 0}, 'racks must be 1..255'),
    ({'per_rack': 254}, 'per_rack must be 1..253'),
    ({'boot_per_rack': 9}, 'boot_per_rack must be 0..per_rack'),
    ({'states': {'BROKEN': 1}}, "'BROKEN' is not a machine state"),
    ({'states': {'RETIRED': 1.5}}, 'fraction 1.5 is above 1'),
    ({'states': {'RETIRED': 30}}, 'ask for 30 non-HEALTHY machines but only 28'),
    ({'roles': ()}, 'roles must be non-empty strings'),
])
def test_generate_datacenter_rejects_bad_arguments(kwargs, fragment):
    args = dict(racks=4, per_rack=8, seed=1, now=0.0)
    args.update(kwargs)
    with pytest.raises(ValueError) as info:
        generate_datacenter(**args)
    assert fragment in str(info.value)


# --- the CLI ----------------------------------------------------------------------------------------
def start_cli(*args):
    proc = subprocess.Popen([sys.executable, '-m', 'lab.sabakan.server', '--port', '0'] + list(args),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    ready, _unused, _unused2 = select.select([proc.stdout], [], [], 30)
    line = proc.stdout.readline() if ready else ''
    if 'listening on' not in line:
        proc.kill()
        raise AssertionError('server did not start: %r %s' % (line, proc.stdout.read()))
    return proc, line.split('listening on ', 1)[1].split()[0]


def stop_cli(proc):
    proc.terminate()  # SIGTERM: the server shuts down cleanly
    try:
        return proc.wait(timeout=30)
    finally:
        proc.stdout.close()


def test_cli_serves_and_keeps_state_across_restarts(tmp_path):
    pid_file, state_file = str(tmp_path / 'sabakan.pid'), str(tmp_path / 'state.json')
    proc, url = start_cli('--racks', '2', '--per-rack', '3', '--seed', '7', '--pid-file', pid_file,
                          '--state-file', state_file)
    try:
        assert open(pid_file).read().strip() == str(proc.pid)
        client = SabakanClient(url, timeout=10)
        machines = client.search()
        assert len(machines) == 4  # 2 racks x (3 - 1 boot)
        serial = machines[0]['spec']['serial']
        client.set_machine_state(serial, 'UNREACHABLE')
        assert call('POST', url.rsplit('/graphql', 1)[0] + '/lab/clock', {'offset_seconds': 600})[0] == 200
    finally:
        rc = stop_cli(proc)
    assert rc == 0 and not os.path.exists(pid_file)
    saved = json.load(open(state_file))
    assert saved['offset_seconds'] == 600
    assert [m['status']['state'] for m in saved['machines'] if m['spec']['serial'] == serial] == ['UNREACHABLE']

    proc, url = start_cli('--racks', '9', '--state-file', state_file)  # the state file wins over generation
    try:
        client = SabakanClient(url, timeout=10)
        assert client.machine(serial)['status']['state'] == 'UNREACHABLE'
        assert client.machine(serial)['status']['duration'] >= 600
        assert len(client.search_machines()) == 6
    finally:
        assert stop_cli(proc) == 0


def test_cli_rejects_bad_arguments():
    proc = subprocess.run([sys.executable, '-m', 'lab.sabakan.server', '--port', '0', '--racks', '0'],
                          capture_output=True, text=True, timeout=60, check=False, cwd=REPO)
    assert proc.returncode == 1 and 'racks must be 1..255' in proc.stderr


# --- the lab's background server (lab/manager.py; the etcd part of lab_up is tested elsewhere) ------------
def test_lab_starts_and_stops_its_sabakan_server(tmp_path):
    from lab import manager
    state = str(tmp_path / 'lab')
    try:
        first = manager.sabakan_up(state, port=0, racks=2, per_rack=4, seed=3)
        assert first['started'] and first['pid'] and manager.sabakan_url(state) == first['url']
        assert len(SabakanClient(first['url'], timeout=10).search()) == 6
        again = manager.sabakan_up(state, port=0)
        assert again == dict(first, started=False)
        status = manager.sabakan_status(state)
        assert status['healthy'] and status['machines'] == 8 and status['pid'] == first['pid']
        inventory = manager.build_inventory(state, 3, '127.0.0.11', sabakan_url=first['url'])
        assert inventory['all'] == {'vars': {'sabakan_url': first['url']}}
        assert 'all' not in manager.build_inventory(state, 3, '127.0.0.11')
    finally:
        stopped = manager.sabakan_down(state)
    assert stopped and manager.sabakan_pid(state) is None and not os.path.exists(os.path.join(state, 'sabakan.pid'))
    with pytest.raises(SabakanUnavailable):
        SabakanClient(first['url'], timeout=5).search()
    assert manager.sabakan_down(state) is False
