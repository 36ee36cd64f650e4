"""The demo's fresh start (lab/manager.py reset(), also `make lab-reset`): whatever an earlier run, drill or crash
left in the state dir, what the old state records as the lab's is stopped, a stranger is never signalled, and the
state is gone; a dir that holds no lab is refused and left alone. Real processes (`sleep`)."""

import json
import os

import pytest

from support.processes import exec_started
from lab import manager, parts

SLEEP = ['sleep', '120']


def test_reset_stops_what_the_old_state_records_and_removes_it(tmp_path):
    state = tmp_path / 'lab'
    state.mkdir()
    f = parts.files(str(state))
    (state / 'kubeconfig').write_text('{}')
    (state / 'demo').mkdir()                             # a demo's logs, an earlier run's
    record = parts.start(f['nodes_pid'], SLEEP, str(state / 'nodes.log'))
    bystander = exec_started(SLEEP)                       # a pid file naming someone else's process
    try:
        with open(f['kube_pid'], 'w') as out:
            json.dump({'pid': bystander.pid, 'start_time': None, 'argv': SLEEP}, out)
        assert manager.reset(str(state)) == ['nodes']
        assert not state.exists()
        assert parts._start_time(record['pid']) is None or parts._start_time(record['pid']) != record['start_time']
        assert bystander.poll() is None, 'a process the state does not provably own was signalled'
    finally:
        bystander.kill()
        bystander.wait()


def test_reset_of_a_missing_or_empty_dir_is_a_fresh_start(tmp_path):
    assert manager.reset(str(tmp_path / 'none')) == []
    (tmp_path / 'empty').mkdir()
    assert manager.reset(str(tmp_path / 'empty')) == [] and not (tmp_path / 'empty').exists()


def test_reset_refuses_a_dir_that_holds_no_lab(tmp_path):
    (tmp_path / 'notes.txt').write_text('mine')
    with pytest.raises(RuntimeError, match='not a lab state dir'):
        manager.reset(str(tmp_path))
    assert (tmp_path / 'notes.txt').read_text() == 'mine'


def test_a_lab_that_cannot_come_up_names_the_reset(tmp_path):
    state = tmp_path / 'lab'
    state.mkdir()
    (state / 'inventory.yml').write_text(json.dumps({'etcd': {'hosts': {'etcd1': {}, 'etcd2': {}}}}))
    if not os.access(manager.ETCD_BINARY, os.X_OK):
        pytest.skip('needs `make all` (the etcd binary)')
    with pytest.raises(RuntimeError, match='make lab-reset'):
        manager.lab_up(str(state), members=3, sabakan=False, only=['etcd'])
