# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node-local load balancer with a real HAProxy in master-worker mode (as its static pod runs it): a config
change validated with `haproxy -c`, replaced and reloaded through the master CLI while a client connection stays
open across the reload; an invalid render refused with the live config untouched; the apiserver_lb module's
idempotence and check mode."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time

import pytest

from support.ansible import local_play, run_playbook
from lab.env.controller import wait_for
from lab.env.ports import free_port

from ansible_collections.steward.cluster.plugins.module_utils.provisioning import haproxy, layout, lb
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import LoadBalancerConfigInvalid
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.files import Root, record_content
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.spec import parse_cluster

pytestmark = pytest.mark.skipif(shutil.which('haproxy') is None,
                                reason='haproxy is not installed (Debian package haproxy; .ci/run installs it as root)')


class EchoServer:
    """A TCP backend standing in for a kube-apiserver: echoes what it receives, on its own thread."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(('127.0.0.1', 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.stopped = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.stopped:
            try:
                conn, _address = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn):
        with conn:
            while True:
                data = conn.recv(4096)
                if not data:
                    return
                conn.sendall(data)

    def stop(self):
        self.stopped = True
        self.sock.close()


@pytest.fixture
def live(tmp_path):
    """A node root with a running HAProxy (master-worker, master CLI socket) in front of two echo backends."""
    root = Root(tempfile.mkdtemp(prefix='lb-', dir='/tmp'))   # short: the master socket path has a length limit
    backends = [EchoServer(), EchoServer()]
    lb_port = free_port()
    cluster = parse_cluster({'control_plane': [{'name': 'cp1', 'address': '127.0.0.1'}],
                             'apiserver_port': backends[0].port, 'lb_port': lb_port})
    root.write(layout.LB_CONFIG, haproxy.render(cluster, '127.0.0.1'), 0o644)
    root.write(layout.RECORD, record_content('w1', 'worker', [layout.LB_CONFIG]), 0o644)
    os.makedirs(root.host(layout.LB_RUN_DIR))
    proc = subprocess.Popen(['haproxy', '-W', '-db', '-f', root.host(layout.LB_CONFIG), '-S',
                             root.host(layout.LB_MASTER_SOCKET)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    wait_for(lambda: lb.processes(root.host(layout.LB_MASTER_SOCKET)), 10, what='haproxy master CLI')
    yield {'root': root, 'backends': backends, 'lb_port': lb_port, 'cluster': cluster}
    os.killpg(proc.pid, 9)
    proc.wait(10)
    for backend in backends:
        backend.stop()
    shutil.rmtree(root.root, ignore_errors=True)


def _connect(port):
    deadline = time.monotonic() + 10
    while True:
        try:
            return socket.create_connection(('127.0.0.1', port), timeout=5)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _echo(conn, text: bytes) -> bytes:
    conn.sendall(text)
    return conn.recv(4096)


def test_reload_keeps_open_connections_and_takes_the_new_config(live):
    root, lb_port = live['root'], live['lb_port']
    held = _connect(lb_port)
    assert _echo(held, b'before') == b'before'
    before = lb.processes(root.host(layout.LB_MASTER_SOCKET))
    bigger = parse_cluster({'control_plane': [{'name': 'cp1', 'address': '127.0.0.1'},
                                              {'name': 'cp2', 'address': '127.0.0.2'}],
                            'apiserver_port': live['backends'][0].port, 'lb_port': lb_port})
    result = lb.ensure_config(root, haproxy.render(bigger, '127.0.0.1'), check_mode=False,
                              validate_command=lb.DEFAULT_VALIDATE_COMMAND)
    assert result['changed'] and result['validated'] and result['reloaded']
    after = lb.processes(root.host(layout.LB_MASTER_SOCKET))
    assert after['reloads'] == before['reloads'] + 1 and set(after['workers']) - set(before['workers'])
    assert _echo(held, b'after reload') == b'after reload'   # the old worker still serves the open connection
    fresh = _connect(lb_port)
    assert _echo(fresh, b'new') == b'new'
    held.close()
    fresh.close()
    assert haproxy.backends(root.read(layout.LB_CONFIG)) == ['cp1', 'cp2']
    again = lb.ensure_config(root, haproxy.render(bigger, '127.0.0.1'), check_mode=False,
                             validate_command=lb.DEFAULT_VALIDATE_COMMAND)
    assert not again['changed'] and not again['reloaded']


def test_invalid_render_is_refused_and_the_live_config_stays(live):
    root = live['root']
    live_config = root.read(layout.LB_CONFIG)
    before = lb.processes(root.host(layout.LB_MASTER_SOCKET))
    broken = live_config.replace(b'  balance roundrobin', b'  balance no-such-algorithm')
    with pytest.raises(LoadBalancerConfigInvalid) as err:
        lb.ensure_config(root, broken, check_mode=False, validate_command=lb.DEFAULT_VALIDATE_COMMAND)
    assert 'balance only supports' in err.value.detail   # haproxy's own words, passed on
    assert root.read(layout.LB_CONFIG) == live_config
    assert lb.processes(root.host(layout.LB_MASTER_SOCKET))['reloads'] == before['reloads']


def test_apiserver_lb_module_check_mode_then_change_then_nothing(live):
    root = live['root']
    params = {'root': root.root, 'lb_port': live['lb_port'], 'apiserver_port': live['backends'][0].port,
              'control_plane': [{'name': 'cp10', 'address': '127.0.0.1'}, {'name': 'cp2', 'address': '127.0.0.2'}]}
    play = local_play([{'name': 'lb', 'steward.cluster.apiserver_lb': params}])
    live_config = root.read(layout.LB_CONFIG)
    check = run_playbook(play, check=True, diff=True)
    assert check.rc == 0 and check.changed() == 1 and check.result('lb')['validated']
    assert root.read(layout.LB_CONFIG) == live_config
    real = run_playbook(play)
    assert real.result('lb')['backends'] == ['cp10', 'cp2'] and real.result('lb')['reloaded']
    assert haproxy.backends(root.read(layout.LB_CONFIG)) == ['cp10', 'cp2']
    assert run_playbook(play).changed() == 0
