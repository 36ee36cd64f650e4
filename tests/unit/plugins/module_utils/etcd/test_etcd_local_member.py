"""Setting data dirs aside never deletes anything; data detection matches etcd's layout."""

import os
import shutil

from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.process import process_start_time
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.local_member import (
    data_dir_state,
    pid_alive,
    reset_data_dir,
)
from support.processes import exec_started


def make_data_dir(path):
    os.makedirs(os.path.join(path, 'member', 'wal'))
    os.makedirs(os.path.join(path, 'member', 'snap'))
    with open(os.path.join(path, 'member', 'wal', '0000000000000000-0000000000000000.wal'), 'w') as f:
        f.write('x')
    with open(os.path.join(path, 'member', 'snap', 'db'), 'w') as f:
        f.write('db')


def test_data_dir_state(tmp_path):
    d = str(tmp_path / 'data')
    assert data_dir_state(d) == {'state': 'absent', 'exists': False, 'has_data': False, 'wal_files': 0, 'db_size': 0}
    os.makedirs(d)
    assert data_dir_state(d)['has_data'] is False and data_dir_state(d)['state'] == 'empty'
    make_data_dir(os.path.join(d, 'x'))
    assert data_dir_state(d)['state'] == 'present' and data_dir_state(d)['has_data'] is False   # something, not etcd's
    make_data_dir(str(tmp_path / 'full'))
    assert data_dir_state(str(tmp_path / 'full')) == {'state': 'present', 'exists': True, 'has_data': True, 'wal_files': 1,
                                                      'db_size': 2}
    (tmp_path / 'file').write_text('x')
    os.symlink(str(tmp_path / 'full'), str(tmp_path / 'link'))
    assert data_dir_state(str(tmp_path / 'file'))['state'] == 'not-a-directory'
    assert data_dir_state(str(tmp_path / 'link'))['state'] == 'not-a-directory' and data_dir_state(str(tmp_path / 'link'))['exists']


def test_reset_moves_aside_and_is_idempotent(tmp_path):
    d = str(tmp_path / 'data')
    make_data_dir(d)
    changed, moved = reset_data_dir(d, state='empty', reason='lost', now=1000, check_mode=False)
    assert changed and moved == d + '.lost-1000'
    assert data_dir_state(moved)['has_data'], 'old data kept'
    assert os.listdir(d) == []
    assert reset_data_dir(d, state='empty', reason='lost', now=1001) == (False, None)
    make_data_dir(d)
    changed, moved2 = reset_data_dir(d, state='absent', reason='lost', now=1000)
    assert changed and moved2 == d + '.lost-1000.1' and not os.path.exists(d)
    assert reset_data_dir(d, state='absent', reason='lost', now=1000) == (False, None)


def test_reset_check_mode_changes_nothing(tmp_path):
    d = str(tmp_path / 'data')
    make_data_dir(d)
    changed, moved = reset_data_dir(d, state='empty', reason='lost', now=5, check_mode=True)
    assert changed and moved == d + '.lost-5'
    assert data_dir_state(d)['has_data'] and not os.path.exists(moved)


def test_pid_alive(tmp_path):
    assert pid_alive(None) is None
    pid_file = tmp_path / 'etcd.pid'
    assert pid_alive(str(pid_file)) is False
    pid_file.write_text(str(os.getpid()))
    assert pid_alive(str(pid_file)) is False        # alive, but not etcd: facts must not call it the member
    fake_etcd = tmp_path / 'etcd'
    fake_etcd.symlink_to(shutil.which('sleep'))
    proc = exec_started([str(fake_etcd), '60'])
    try:
        pid_file.write_text('%d\nstart %d\n' % (proc.pid, process_start_time(proc.pid)))
        assert pid_alive(str(pid_file)) is True
        pid_file.write_text('%d\nstart 1\n' % proc.pid)   # recorded for an earlier process with this pid
        assert pid_alive(str(pid_file)) is False
    finally:
        proc.kill()
        proc.wait()
    pid_file.write_text('999999999')
    assert pid_alive(str(pid_file)) is False
    pid_file.write_text('garbage')
    assert pid_alive(str(pid_file)) is False
