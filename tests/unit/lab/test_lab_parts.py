"""The lab's process records (lab/parts.py): a part is kept while its command line and peers are the ones
wanted, restarted when either changes, and only a process whose pid, start time and argv all match is ever
signalled. Real processes (`sleep`); the whole lab is in tests/integration/test_lab_contract.py."""

import json
import os
import signal
import subprocess
import time

import pytest

from support.processes import exec_started
from lab import parts

SLEEP = ['sleep', '120']


@pytest.fixture
def pid_file(tmp_path):
    path = str(tmp_path / 'part.pid')
    yield path
    parts.stop(path, timeout=5)


def test_a_part_is_kept_while_its_argv_and_peers_are_the_same(pid_file, tmp_path):
    log = str(tmp_path / 'part.log')
    first = parts._ensure(pid_file, SLEEP, log, peers={'kube': 'http://127.0.0.1:1'})
    again = parts._ensure(pid_file, SLEEP, log, peers={'kube': 'http://127.0.0.1:1'})
    assert first['started'] and not again['started'] and again['pid'] == first['pid']
    assert parts.running(pid_file)['start_time'] == first['start_time']


def test_a_new_peer_url_restarts_the_part(pid_file, tmp_path):
    log = str(tmp_path / 'part.log')
    first = parts._ensure(pid_file, SLEEP, log, peers={'kube': 'http://127.0.0.1:1'})
    second = parts._ensure(pid_file, SLEEP, log, peers={'kube': 'http://127.0.0.1:2'})
    assert second['started'] and second['pid'] != first['pid']
    assert not parts._start_time(first['pid']) or parts._start_time(first['pid']) != first['start_time']


def test_stop_signals_only_the_recorded_process(pid_file):
    bystander = exec_started(SLEEP)
    try:
        start_time = parts._start_time(bystander.pid)
        for record in ({'pid': bystander.pid, 'start_time': '1', 'argv': SLEEP},           # another start time
                       {'pid': bystander.pid, 'start_time': start_time, 'argv': ['other']},  # another program
                       {'pid': 'x'}):                                                         # not a record
            with open(pid_file, 'w') as f:
                json.dump(record, f)
            assert parts.running(pid_file) is None
            assert parts.stop(pid_file) is False
            assert bystander.poll() is None
        with open(pid_file, 'w') as f:
            json.dump({'pid': bystander.pid, 'start_time': start_time, 'argv': SLEEP}, f)
        assert parts.running(pid_file) is not None  # provably this process: it would be stopped
    finally:
        os.unlink(pid_file)
        bystander.kill()
        bystander.wait()


def _alive(pid):
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return False


def test_what_a_dead_part_left_in_its_session_is_killed_and_nothing_else(tmp_path):
    # a container whose main process is killed: its children (the lab's etcd under etcd-wrapper) go with it
    path = str(tmp_path / 'c.json')
    child_file = tmp_path / 'child.pid'
    record = parts.start(path, ['sh', '-c', 'sleep 300 & echo $! > %s; wait' % child_file], str(tmp_path / 'log'))
    outsider = subprocess.Popen(['sleep', '300'], start_new_session=True)   # not of the part's session
    try:
        deadline = time.monotonic() + 10
        while not child_file.exists() or not child_file.read_text().strip():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        child = int(child_file.read_text())
        assert parts.stop_remnants(record) == [] and _alive(child)   # the part still runs: nothing is touched
        os.kill(record['pid'], signal.SIGKILL)
        os.waitpid(record['pid'], 0)
        assert _alive(child), 'a SIGKILL of the main process leaves the child running (what the runtime must end)'
        assert parts.stop_remnants(record) == [child]
        deadline = time.monotonic() + 5
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(child) and outsider.poll() is None
    finally:
        outsider.kill()
        outsider.wait()
