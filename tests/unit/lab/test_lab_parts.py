"""The lab's process records (lab/parts.py): a part is kept while its command line and peers are the ones
wanted, restarted when either changes, and only a process whose pid, start time and argv all match is ever
signalled. Real processes (`sleep`); the whole lab is in tests/integration/test_lab_contract.py."""

import json
import os

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
