"""The demo's alerts line after each act (lab/demo/alerts.py) against a stub of Prometheus's HTTP API (http.server,
answering as Prometheus 2.42 does; it imports nothing of the demo): names fired during the act (ALERTS over the act's
duration) and firing now; no Prometheus, or one that does not answer, is a note and never an exception."""

from __future__ import annotations

import http.server
import json
import threading
import urllib.parse

import pytest

from lab.demo.alerts import act_alerts


class StubPrometheus(http.server.BaseHTTPRequestHandler):
    alerts = []
    fired = []
    queries = []
    status = 200

    def do_GET(self):  # noqa: N802 (http.server's name)
        url = urllib.parse.urlsplit(self.path)
        if self.status != 200:
            self.send_error(self.status)
            return
        if url.path == '/api/v1/alerts':
            body = {'status': 'success', 'data': {'alerts': [
                {'labels': {'alertname': name, 'severity': 'critical'}, 'state': state, 'value': '1e+00'}
                for name, state in self.alerts]}}
        elif url.path == '/api/v1/query':
            StubPrometheus.queries.append(urllib.parse.parse_qs(url.query)['query'][0])
            body = {'status': 'success', 'data': {'resultType': 'vector', 'result': [
                {'metric': {'alertname': name}, 'value': [1700000000, '1']} for name in self.fired]}}
        else:
            self.send_error(404)
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def prometheus(tmp_path):
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), StubPrometheus)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    (tmp_path / 'prometheus.url').write_text('http://127.0.0.1:%d\n' % server.server_address[1])
    StubPrometheus.alerts, StubPrometheus.fired, StubPrometheus.queries, StubPrometheus.status = [], [], [], 200
    yield StubPrometheus
    server.shutdown()
    server.server_close()


def test_alerts_fired_during_the_act_and_firing_now(prometheus, tmp_path):
    prometheus.fired = ['EtcdInsufficientMembers', 'EtcdNoLeader', 'EtcdMembersDown']
    prometheus.alerts = [('EtcdMembersDown', 'firing'), ('EtcdBackupStale', 'pending')]
    line = act_alerts(str(tmp_path), 41.2)
    assert line == ('fired during the act: EtcdInsufficientMembers, EtcdMembersDown, EtcdNoLeader; '
                    'firing now: EtcdMembersDown')
    assert prometheus.queries == ['count by (alertname) (max_over_time(ALERTS{alertstate="firing"}[42s]))']


def test_a_quiet_act(prometheus, tmp_path):
    prometheus.alerts = [('EtcdBackupStale', 'pending')]   # pending is not firing
    assert act_alerts(str(tmp_path), 0.2) == 'fired during the act: none; firing now: none'
    assert prometheus.queries[-1].endswith('[1s]))')


def test_no_prometheus_is_a_note(tmp_path):
    line = act_alerts(str(tmp_path), 10)
    assert line.startswith('no Prometheus in this lab') and 'prometheus.url missing' in line


def test_a_prometheus_that_does_not_answer_is_a_note(prometheus, tmp_path):
    prometheus.status = 503
    line = act_alerts(str(tmp_path), 10)
    assert line.startswith('Prometheus at http://127.0.0.1:') and 'did not answer' in line and '503' in line
    (tmp_path / 'prometheus.url').write_text('http://127.0.0.1:9\n')   # nothing listens
    assert 'did not answer' in act_alerts(str(tmp_path), 10)
