"""The pod runtime stops a pod as a kubelet does (lab/pods/runtime.stop_pod): every container at once, each after its
own preStop hook (httpGet against the pod IP here), SIGTERM once the hook returned, SIGKILL at the end of the pod's
terminationGracePeriodSeconds counted from the start (hooks included), at least 2 s after SIGTERM. Real processes
(python one-liners that note when SIGTERM came) and a real HTTP server standing in for the hook's endpoint."""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lab import parts
from lab.pods import runtime

# notes the wall time of SIGTERM in the file argv[1], then exits; with argv[2] == 'stubborn' it ignores SIGTERM
TERM_NOTER = ('import signal, sys, time\n'
              'def term(*_):\n'
              '    open(sys.argv[1], "w").write(repr(time.time()))\n'
              '    if sys.argv[2] != "stubborn":\n'
              '        sys.exit(0)\n'
              'signal.signal(signal.SIGTERM, term)\n'
              'open(sys.argv[1] + ".ready", "w").close()\n'
              'while True:\n'
              '    time.sleep(0.05)\n')


class Hook:
    """The endpoint a preStop httpGet calls: notes when it was called and answers after `delay` seconds."""

    def __init__(self, delay):
        self.called, hook = [], self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_):
                return

            def do_GET(self):  # noqa: N802
                hook.called.append((self.path, time.time()))
                time.sleep(delay)
                self.send_response(200)
                self.send_header('Content-Length', '2')
                self.end_headers()
                self.wfile.write(b'{}')

        self.server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook():
    made = []

    def make(delay=0.0):
        made.append(Hook(delay))
        return made[-1]
    yield make
    for h in made:
        h.close()


def _container(tmp_path, name, pod, container, mode='polite'):
    path = str(tmp_path / (name + '.json'))
    argv = [sys.executable, '-c', TERM_NOTER, str(tmp_path / (name + '.term')), mode]
    record = parts.start(path, argv, str(tmp_path / (name + '.log')),
                         peers=dict(runtime.stop_rules(pod, container, '127.0.0.1'), uid='u1', restarts='0'))
    deadline = time.monotonic() + 10
    while not (tmp_path / (name + '.term.ready')).exists() and time.monotonic() < deadline:
        time.sleep(0.02)    # its SIGTERM handler is in place
    return path, record


def _term_time(tmp_path, name):
    return float((tmp_path / (name + '.term')).read_text())


def test_the_hook_runs_before_its_container_is_signalled_and_the_others_are_not_held(tmp_path, hook):
    endpoint = hook(delay=0.8)
    pod = {'spec': {'terminationGracePeriodSeconds': 20}}
    etcd = {'name': 'etcd', 'ports': [{'name': 'server', 'containerPort': endpoint.port}],
            'lifecycle': {'preStop': {'httpGet': {'path': '/leader/handoff', 'port': 'server'}}}}
    paths = [_container(tmp_path, 'etcd', pod, etcd)[0], _container(tmp_path, 'backup-restore', pod, {'name': 'b'})[0]]
    said = []
    started = time.time()
    stopped = runtime.stop_pod(paths, said.append)
    assert [p for p, _r in stopped] == sorted(paths)
    ((path, called_at),) = endpoint.called
    assert path == '/leader/handoff'
    assert _term_time(tmp_path, 'etcd') >= called_at + 0.8                 # etcd only once its hook answered
    assert _term_time(tmp_path, 'backup-restore') < called_at + 0.8        # the other container is not held
    assert time.time() - started < 5
    assert any('preStop GET http://127.0.0.1:%d/leader/handoff: HTTP 200' % endpoint.port in s for s in said), said
    assert not any((tmp_path / n).exists() for n in ('etcd.json', 'backup-restore.json'))   # records removed


def test_the_grace_counts_the_hook_and_ends_in_sigkill(tmp_path, hook):
    endpoint = hook(delay=5.0)           # a hook slower than the pod's whole grace
    pod = {'spec': {'terminationGracePeriodSeconds': 1}}
    etcd = {'name': 'etcd', 'lifecycle': {'preStop': {'httpGet': {'path': '/leader/handoff', 'port': endpoint.port}}}}
    path, record = _container(tmp_path, 'etcd', pod, etcd, mode='stubborn')
    assert json.loads(record['peers']['preStop'])['hook'] == etcd['lifecycle']['preStop']
    assert record['peers']['grace'] == '1.0'
    said = []
    started = time.time()
    runtime.stop_pod([path], said.append)
    took = time.time() - started
    term = _term_time(tmp_path, 'etcd')
    assert term - started < 2.0                        # the hook was cut at the grace (1 s)
    assert 2.0 <= took < 5.0                           # then SIGKILL the minimum 2 s after SIGTERM
    assert parts.running(path) is None and parts._start_time(record['pid']) != record['start_time']
    assert any('FailedPreStopHook' in s for s in said), said


def test_rules_kept_in_the_record_default_to_kubernetes_grace_and_no_hook():
    assert runtime.stop_rules({'spec': {}}, {'name': 'c'}, None) == {'grace': '30.0'}
    rules = runtime.stop_rules({'spec': {'terminationGracePeriodSeconds': 0}},
                               {'name': 'c', 'lifecycle': {'preStop': {'sleep': {'seconds': 3}}}}, '127.0.100.7')
    assert rules['grace'] == '0.0' and json.loads(rules['preStop'])['ip'] == '127.0.100.7'
    assert runtime.run_pre_stop(rules, time.monotonic() + 0.2).startswith('preStop sleep 0.')
    assert 'not run by the lab' in runtime.run_pre_stop({'preStop': json.dumps(
        {'hook': {'exec': {'command': ['true']}}, 'ip': '127.0.0.1', 'ports': []})}, time.monotonic() + 1)
