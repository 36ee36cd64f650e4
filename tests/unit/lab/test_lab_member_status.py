"""lab.manager.member_status reads a member's /health with the etcd process helpers' poll (one deadline over the
whole answer, one reading of the answer): healthy, unhealthy with what /health said, or not answering."""

from __future__ import annotations

import http.server
import threading

import pytest

from lab import manager

# Loopback addresses of their own (the member URL's port is etcd's fixed 2379): one per test, so the unit suite's
# two workers (`make unit`: -n 2) can run this file's tests at once - one test's server never answers another's.
HOSTS = {'healthy': '127.0.0.231', 'unhealthy': '127.0.0.232', 'silent': '127.0.0.233'}


class Health(http.server.BaseHTTPRequestHandler):
    answer = (200, b'{"health":"true","reason":""}')

    def do_GET(self):  # noqa: N802 (the standard library's name)
        code, body = self.answer if self.path == '/health' else (404, b'')
        self.send_response(code)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def hostvars(tmp_path, host):
    return {'ansible_host': host, 'etcd_pid_file': str(tmp_path / 'etcd.pid'), 'etcd_binary': '/nonexistent/etcd',
            'etcd_config_dir': str(tmp_path / 'conf')}


def serve(host):
    """A /health server on host:2379 with its own answer (a subclass per server: tests never share one)."""
    handler = type('Health', (Health,), {})
    try:
        server = http.server.ThreadingHTTPServer((host, 2379), handler)
    except OSError as exc:
        pytest.skip('cannot listen on %s:2379: %s' % (host, exc))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, handler


@pytest.fixture
def member(request):
    server, handler = serve(HOSTS[request.param])
    yield handler
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize('member', ['healthy'], indirect=True)
def test_a_healthy_member(member, tmp_path):
    status = manager.member_status(hostvars(tmp_path, HOSTS['healthy']))
    assert status == {'client_url': 'http://%s:2379' % HOSTS['healthy'], 'pid': None, 'healthy': True}


@pytest.mark.parametrize('member', ['unhealthy'], indirect=True)
def test_an_unhealthy_member_shows_what_health_said(member, tmp_path):
    member.answer = (503, b'{"health":"false","reason":"RAFT NO LEADER"}\n')
    status = manager.member_status(hostvars(tmp_path, HOSTS['unhealthy']))
    assert status['healthy'] is False
    assert status['error'] == '/health answered 503'
    member.answer = (200, b'{"health":"false"}')
    status = manager.member_status(hostvars(tmp_path, HOSTS['unhealthy']))
    assert status['healthy'] is False and status['error'] == '/health answered 200 {"health":"false"}'


def test_a_member_not_answering(tmp_path):
    status = manager.member_status(hostvars(tmp_path, HOSTS['silent']))
    assert status['healthy'] is False and status['error'] == 'no answer from /health within 2s'
