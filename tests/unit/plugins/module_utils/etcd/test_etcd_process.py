"""Pure helpers of module_utils/etcd/member/process.py: pid files, /proc parsing, stale pid detection."""

from __future__ import annotations

import os

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput

from ansible_collections.steward.cluster.plugins.module_utils.etcd.member import process
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.process import (
    ProcessSpec, cmdline_matches, ensure_process, health_ok, parse_pid, running_pid, split_cmdline, stat_state,
    tail_lines)

BIN = '/opt/etcd/bin/etcd'
CONF = '/etc/etcd/m1.conf.yml'


@pytest.mark.parametrize('text,expected', [
    ('1234\n', 1234),
    ('  77  ', 77),
    ('4242\nextra line\n', 4242),
    ('', None),
    ('\n', None),
    ('abc', None),
    ('-5', None),
    ('12.5', None),
    ('1', None),        # init is never ours
    ('0', None),
    (None, None),
], ids=['newline', 'spaces', 'first-line-only', 'empty', 'blank', 'garbage', 'negative', 'float', 'init', 'zero', 'none'])
def test_parse_pid(text, expected):
    assert parse_pid(text) == expected


@pytest.mark.parametrize('raw,expected', [
    (b'/usr/bin/etcd\0--config-file\0/etc/etcd.yml\0', ['/usr/bin/etcd', '--config-file', '/etc/etcd.yml']),
    (b'', []),
    (b'sleep\x0010\x00', ['sleep', '10']),
], ids=['etcd', 'kernel-thread', 'other'])
def test_split_cmdline(raw, expected):
    assert split_cmdline(raw) == expected


@pytest.mark.parametrize('argv,binary,config,expected', [
    ([BIN, '--config-file', CONF], BIN, CONF, True),
    (['/some/link/etcd', '--config-file', CONF], BIN, CONF, True),           # symlinked binary: same name
    ([BIN, '--config-file=' + CONF], BIN, CONF, True),
    ([BIN, '--config-file', '/etc/etcd/m2.conf.yml'], BIN, CONF, False),    # another member on the host
    (['/usr/bin/sleep', '100'], BIN, CONF, False),                          # pid reused by another program
    (['/usr/bin/python3', 'x.py', CONF], BIN, CONF, False),                 # config named by another program
    ([], BIN, CONF, False),                                                 # gone / kernel thread
    ([BIN, '--config-file', CONF], BIN, None, True),                        # stop without config: name only
    ([BIN, '--config-file', '/etc/etcd/../etcd/m1.conf.yml'], BIN, CONF, True),
], ids=['exact', 'symlink-name', 'equals-form', 'other-member', 'pid-reused', 'other-program', 'empty',
        'no-config', 'normalised-path'])
def test_cmdline_matches(argv, binary, config, expected):
    assert cmdline_matches(argv, binary, config) is expected


@pytest.mark.parametrize('stat,expected', [
    ('123 (etcd) S 1 123 123 0', 'S'),
    ('123 (my prog) R 1 2 3', 'R'),
    ('9 (a) b) Z 1 2', 'Z'),
    ('', ''),
], ids=['sleeping', 'space-in-comm', 'paren-in-comm', 'empty'])
def test_stat_state(stat, expected):
    assert stat_state(stat) == expected


@pytest.mark.parametrize('path,status,body,expected', [
    ('/health', 200, '{"health":"true","reason":""}', True),
    ('/health', 503, '{"health":"false","reason":"RAFT NO LEADER"}', False),
    ('/health', 200, '{"health":"false"}', False),
    ('/health', 200, 'not json', False),
    ('/version', 200, '{"etcdserver":"3.5.1"}', True),
    ('/version', 0, '', False),
], ids=['healthy', 'no-leader', 'unhealthy-200', 'garbage', 'version', 'refused'])
def test_health_ok(path, status, body, expected):
    assert health_ok(path, status, body) is expected


def test_tail_lines_keeps_the_panic_reason_ahead_of_the_stack():
    lines = ['{"level":"info","msg":"starting"}', '{"level":"panic","msg":"tocommit(8) is out of range"}']
    lines += ['\tstack frame %d' % i for i in range(40)]
    out = tail_lines('\n'.join(lines), count=5).splitlines()
    assert out[0] == lines[1]
    assert out[-1] == '\tstack frame 39'
    assert len(out) == 7  # reason, '...', 5 tail lines


def fake_proc(root, pid, argv, state='S', start=777):
    d = root / str(pid)
    d.mkdir(parents=True)
    (d / 'cmdline').write_bytes(b'\0'.join(a.encode() for a in argv) + b'\0')
    # fields 3..22 of /proc/<pid>/stat: state, 18 others, the start time
    (d / 'stat').write_text('%d (%s) %s %s %d' % (pid, os.path.basename(argv[0]), state, ' '.join(['1'] * 18), start))


@pytest.mark.parametrize('pid_text,proc,expected', [
    ('4242\n', {4242: ([BIN, '--config-file', CONF], 'S')}, 4242),                # legacy file, full match
    ('4242\nstart 777\n', {4242: ([BIN, '--config-file', CONF], 'S')}, 4242),
    ('4242\nstart 5\n', {4242: ([BIN, '--config-file', CONF], 'S')}, None),      # same argv, started later
    ('4242\n', {}, None),                                                   # process gone
    ('4242\n', {4242: (['/bin/sleep', '1000'], 'S')}, None),                # pid reused
    ('4242\n', {4242: ([BIN, '--config-file', CONF], 'Z')}, None),          # zombie
    ('garbage', {4242: ([BIN, '--config-file', CONF], 'S')}, None),
    (None, {4242: ([BIN, '--config-file', CONF], 'S')}, None),              # no pid file
], ids=['running-legacy', 'running', 'restarted-since', 'dead', 'reused', 'zombie', 'garbage-file', 'no-file'])
def test_running_pid_detects_stale_pid_files(tmp_path, pid_text, proc, expected):
    root = tmp_path / 'proc'
    root.mkdir()
    for pid, (argv, state) in proc.items():
        fake_proc(root, pid, argv, state)
    pid_file = tmp_path / 'etcd.pid'
    if pid_text is not None:
        pid_file.write_text(pid_text)
    spec = ProcessSpec(pid_file=str(pid_file), binary=BIN, config_file=CONF)
    assert running_pid(spec, proc_root=str(root)) == expected


@pytest.mark.parametrize('state,running,changed', [
    ('started', False, True),
    ('started', True, False),
    ('stopped', True, True),
    ('stopped', False, False),
    ('restarted', True, True),
    ('restarted', False, True),
], ids=['start', 'already-started', 'stop', 'already-stopped', 'restart', 'restart-stopped'])
def test_ensure_process_plans_the_same_in_check_mode(monkeypatch, tmp_path, state, running, changed):
    monkeypatch.setattr(process, 'running_pid', lambda spec, proc_root='/proc': 4242 if running else None)
    for name in ('start_process', 'stop_process', 'wait_ready'):
        monkeypatch.setattr(process, name, lambda *a, **k: pytest.fail('check mode acted'))
    binary, conf = real_files(tmp_path)
    spec = ProcessSpec(pid_file=str(tmp_path / 'x.pid'), binary=binary, config_file=conf, wait_url='http://x:2379')
    result = ensure_process(spec, state, check_mode=True)
    assert result['changed'] is changed
    assert result['after']['running'] is (state != 'stopped')


def real_files(tmp_path):
    binary, conf = tmp_path / 'etcd', tmp_path / 'etcd.conf.yml'
    binary.write_text('#!/bin/sh\n')
    binary.chmod(0o755)
    conf.write_text('name: m1\n')
    return str(binary), str(conf)


@pytest.mark.parametrize('state,spec_kwargs,field,rule', [
    ('bogus', {}, 'state', 'choice'),
    ('started', {'binary': None}, 'binary', 'required'),
    ('restarted', {'config_file': None}, 'config_file', 'required'),
    ('started', {'binary': '/nonexistent/etcd'}, 'binary', 'exists'),
    ('stopped', {'pid_file': 'relative.pid'}, 'pid_file', 'absolute-path'),
    ('stopped', {'stop_timeout': 0}, 'stop_timeout', 'minimum'),
    ('stopped', {'client_cert': '/etc/hostname'}, 'client_key', 'key-pair'),
], ids=['bad-state', 'start-without-binary', 'restart-without-config', 'missing-binary', 'relative-pid-file',
        'zero-stop-timeout', 'cert-without-key'])
def test_ensure_process_rejects_bad_input_in_check_mode(tmp_path, state, spec_kwargs, field, rule):
    binary, conf = real_files(tmp_path)
    kwargs = dict(pid_file=str(tmp_path / 'x.pid'), binary=binary, config_file=conf)
    kwargs.update(spec_kwargs)
    with pytest.raises(InvalidInput) as caught:
        ensure_process(ProcessSpec(**kwargs), state, check_mode=True)
    assert (caught.value.field, caught.value.rule) == (field, rule)
