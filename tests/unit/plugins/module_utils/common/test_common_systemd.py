"""common/systemd.systemctl: the command line it builds, the runner it takes (Ansible's shape too), and a hung
systemctl ended at its deadline."""

import os
import stat
import subprocess
import time

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import DeadlineExceeded
from ansible_collections.steward.cluster.plugins.module_utils.common.systemd import ansible_runner, answer, systemctl


def test_command_line_and_runner():
    seen = []

    def run(argv):
        seen.append(argv)
        return subprocess.CompletedProcess(argv, 3, '', '')

    assert systemctl('etcd.service', 'is-active', '--quiet', run=run).returncode == 3
    systemctl('', 'daemon-reload', run=run)
    assert seen == [['systemctl', 'is-active', '--quiet', 'etcd.service'], ['systemctl', 'daemon-reload']]


def test_ansible_runner_and_answer():
    run = ansible_runner(lambda argv: (1, 'out', 'Failed to start kubelet.service: Unit not found.\n'))
    done = systemctl('kubelet.service', 'start', run=run)
    assert (done.args, done.returncode) == (['systemctl', 'start', 'kubelet.service'], 1)
    assert answer(done) == 'Failed to start kubelet.service: Unit not found.'
    assert answer(subprocess.CompletedProcess([], 1, 'only stdout\n', '')) == 'only stdout'


def test_a_hung_systemctl_ends_at_its_deadline(tmp_path, monkeypatch):
    fake = tmp_path / 'systemctl'
    fake.write_text('#!/bin/sh\nsleep 30\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv('PATH', '%s:%s' % (tmp_path, os.environ['PATH']))
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded, match='systemctl stop etcd.service'):
        systemctl('etcd.service', 'stop', timeout=0.5)
    assert time.monotonic() - started < 5
