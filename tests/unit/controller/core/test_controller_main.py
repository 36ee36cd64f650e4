"""The program itself (`python -m steward_controller`) when it cannot start: a port another process holds stops it
at once, naming the address, the flag and its environment variable, with exit code 2 and no traceback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

import steward_controller

CONTROLLER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(steward_controller.__file__)))


def run(tmp_path, *argv: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    kubeconfig = tmp_path / 'kubeconfig'
    kubeconfig.write_text(json.dumps({
        'apiVersion': 'v1', 'kind': 'Config', 'current-context': 'c',
        'clusters': [{'name': 'c', 'cluster': {'server': 'http://127.0.0.1:9'}}],   # never reached: it stops first
        'users': [{'name': 'u', 'user': {'token': 't'}}],
        'contexts': [{'name': 'c', 'context': {'cluster': 'c', 'user': 'u'}}]}))
    env = dict(os.environ, KUBECONFIG=str(kubeconfig),
               PYTHONPATH=os.pathsep.join([CONTROLLER_DIR, os.environ.get('PYTHONPATH', '')]))
    return subprocess.run([sys.executable, '-m', 'steward_controller', '--http-host', '127.0.0.1',
                           '--no-leader-election', '--log-format', 'plain', '--controllers', 'etcd-backup'] + list(argv),
                          env=env, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture
def taken_port():
    holder = socket.socket()
    holder.bind(('127.0.0.1', 0))
    holder.listen()
    yield holder.getsockname()[1]
    holder.close()


def test_a_busy_metrics_port_names_the_port_and_the_flag(tmp_path, taken_port):
    done = run(tmp_path, '--http-port', str(taken_port))
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert 'Traceback' not in output
    assert 'cannot listen on 127.0.0.1:%d (another process, perhaps a second controller, listens there)' % taken_port \
        in output
    assert 'choose another port with --http-port (env STEWARD_HTTP_PORT)' in output


def test_a_busy_health_port_names_its_own_flag(tmp_path, taken_port):
    done = run(tmp_path, '--http-port', '0', '--health-port', str(taken_port))
    output = done.stdout + done.stderr
    assert done.returncode == 2 and 'Traceback' not in output, output
    assert 'cannot listen on 127.0.0.1:%d' % taken_port in output
    assert '--health-port (env STEWARD_HEALTH_PORT)' in output
