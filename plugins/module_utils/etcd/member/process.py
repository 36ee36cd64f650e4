# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One detached etcd process with a pid file, for hosts without systemd (the lab, containers).

The process is identified by its pid file *and* its identity: the pid file records the pid and the process's
start time (/proc/<pid>/stat field 22), and a process is ours only when it is alive, started at that time, and its
command line runs etcd (the given binary and config file when given). A pid file whose process is gone, or whose pid
now belongs to another program (a reboot recycles pids), is stale: it counts as stopped and nothing is signalled.
A pid file without a start time (written before it was recorded) is trusted only when both binary and config_file
are given and match. etcd is always run as `etcd --config-file <file>` (etcd ignores every other flag when
--config-file is given), so the config file path is what tells two members on one host apart.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import ssl
import stat
import subprocess
import time
import urllib.request
from urllib.parse import urlsplit
from typing import Any, Callable, Dict, List, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import Deadline
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.files import write_atomic
from ansible_collections.steward.cluster.plugins.module_utils.common.http_deadline import watched_handlers, watching
from ansible_collections.steward.cluster.plugins.module_utils.common.tls import client_context
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError, EtcdUnavailable


STATES = ('started', 'stopped', 'restarted')
# Without `wait`, a freshly started process is trusted once its client port accepts connections (etcd binds
# it after reading its config and data dir), or after this long alive, whichever comes first.
SETTLE_SECONDS = 1.0
POLL_SECONDS = 0.05
LOG_TAIL_LINES = 12
HEALTH_GET_SECONDS = 2.0   # one /health or /version poll, the whole answer
KEY_MARKS = ('"level":"panic"', '"level":"fatal"', '"level":"error"', 'panic: ')


class ProcessError(EtcdError):
    """etcd could not be started or stopped (exited at once, not healthy in time, cannot signal)."""


class ProcessExited(ProcessError):
    """etcd exited before it served: a port another process holds, a refused flag, a damaged data dir.

    Its own type so a caller that picked the ports itself (the scratch etcd of a restore check) can try
    again on others without reading the message."""


@dataclasses.dataclass(frozen=True)
class ProcessSpec:
    """Everything needed to find, start and stop one member process."""

    pid_file: str
    binary: Optional[str] = None
    config_file: Optional[str] = None
    log_file: Optional[str] = None
    wait: bool = True
    wait_url: Optional[str] = None
    wait_timeout: int = 60
    stop_timeout: int = 10
    ca_cert: Optional[str] = None
    client_cert: Optional[str] = None
    client_key: Optional[str] = None
    # a throwaway etcd (replay, restore verification) dies with the thread that started it, even on SIGKILL
    die_with_parent: bool = False

    def command(self) -> List[str]:
        return [str(self.binary), '--config-file', str(self.config_file)]


# --- pure helpers ---------------------------------------------------------------------------------
def parse_pid(text: Optional[str]) -> Optional[int]:
    """The pid in a pid file's text, or None when it is empty or not a positive integer."""
    if text is None:
        return None
    first = text.strip().split('\n', 1)[0].strip()
    if not first.isdigit():
        return None
    pid = int(first)
    return pid if pid > 1 else None


def split_cmdline(raw: bytes) -> List[str]:
    """/proc/<pid>/cmdline is NUL-separated with a trailing NUL."""
    return [part.decode('utf-8', 'replace') for part in raw.split(b'\0') if part]


def cmdline_matches(argv: List[str], binary: Optional[str], config_file: Optional[str]) -> bool:
    """True when argv is our etcd: the program has the binary's name and the config file is an argument.

    Matching on the name (not the full path) keeps symlinked binaries working; matching the config file
    keeps two members on one host apart and rejects a recycled pid owned by another program."""
    if not argv:
        return False
    if binary and os.path.basename(argv[0]) != os.path.basename(binary):
        return False
    if config_file:
        wanted = os.path.abspath(config_file)
        return any(os.path.abspath(a) == wanted for a in argv[1:] if not a.startswith('-')) or \
            any(a == '--config-file=' + config_file for a in argv[1:])
    return True


def stat_start_time(stat_text: str) -> Optional[int]:
    """The start time in clock ticks since boot (field 22 of /proc/<pid>/stat), None when unreadable."""
    rest = stat_text[stat_text.rfind(')') + 1:].split()
    return int(rest[19]) if len(rest) > 19 and rest[19].isdigit() else None


def parse_start_time(text: Optional[str]) -> Optional[int]:
    """The start time recorded on a pid file's second line (`start <ticks>`), None when absent."""
    lines = (text or '').splitlines()
    if len(lines) > 1 and lines[1].startswith('start ') and lines[1][6:].strip().isdigit():
        return int(lines[1][6:].strip())
    return None


def is_etcd_argv(argv: List[str]) -> bool:
    """The program is an etcd binary (`etcd`, or a versioned name such as `etcd-3.5`)."""
    return bool(argv) and os.path.basename(argv[0]).split('-')[0] == 'etcd'


def stat_state(stat_text: str) -> str:
    """The one-letter state from /proc/<pid>/stat ('R', 'S', 'Z', ...); the comm field may hold spaces."""
    closing = stat_text.rfind(')')
    rest = stat_text[closing + 1:].split()
    return rest[0] if rest else ''


def tail_lines(text: str, count: int = LOG_TAIL_LINES) -> str:
    """The last `count` lines, preceded by the last fatal/panic/error lines (a Go panic ends in a long
    stack trace that would otherwise push the reason out of the tail)."""
    lines = [line for line in text.splitlines() if line.strip()]
    tail = lines[-count:]
    key = [line for line in lines if any(mark in line for mark in KEY_MARKS)][-3:]
    key = [line for line in key if line not in tail]
    return '\n'.join(key + (['...'] if key else []) + tail)


def health_ok(path: str, status: int, body: str) -> bool:
    """/health says {"health":"true"}; /version answering 200 means the member is serving (it joined)."""
    if status != 200:
        return False
    if path == '/health':
        try:
            return str(json.loads(body).get('health')).lower() == 'true'
        except (ValueError, AttributeError):
            return False
    return True


# --- /proc access ---------------------------------------------------------------------------------
def read_pid_file(path: str) -> Optional[int]:
    return read_pid_record(path)[0]


def read_pid_record(path: str) -> tuple:
    """(pid, recorded start time) from a pid file; (None, None) when it cannot be read (or is no regular file:
    opening a FIFO would block)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None, None
        with open(path) as f:
            text = f.read()
    except (IOError, OSError, ValueError):
        return None, None
    return parse_pid(text), parse_start_time(text)


def process_start_time(pid: int, proc_root: str = '/proc') -> Optional[int]:
    try:
        with open(os.path.join(proc_root, str(pid), 'stat')) as f:
            return stat_start_time(f.read())
    except (IOError, OSError):
        return None


def process_alive(pid: int, proc_root: str = '/proc') -> bool:
    """Alive and not a zombie (a zombie child of ours is reaped on the way)."""
    try:
        with open(os.path.join(proc_root, str(pid), 'stat')) as f:
            state = stat_state(f.read())
    except (IOError, OSError):
        return False
    if state == 'Z':
        _reap(pid)
        return False
    return True


def process_argv(pid: int, proc_root: str = '/proc') -> List[str]:
    try:
        with open(os.path.join(proc_root, str(pid), 'cmdline'), 'rb') as f:
            return split_cmdline(f.read())
    except (IOError, OSError):
        return []


def running_pid(spec: ProcessSpec, proc_root: str = '/proc') -> Optional[int]:
    """The pid of our running etcd, or None when the pid file is missing or stale (see the module docstring:
    alive, the recorded start time, an etcd command line matching the given binary and config file)."""
    pid, started = read_pid_record(spec.pid_file)
    if pid is None or not process_alive(pid, proc_root):
        return None
    argv = process_argv(pid, proc_root)
    if not cmdline_matches(argv, spec.binary, spec.config_file):
        return None
    if started is None:
        # a pid file from before start times were recorded: only a full match on binary and config file
        return pid if spec.binary and spec.config_file else None
    if process_start_time(pid, proc_root) != started or not (spec.binary or is_etcd_argv(argv)):
        return None
    return pid


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except (ChildProcessError, OSError):
        pass


def log_tail(path: Optional[str], offset: int = 0) -> str:
    if not path:
        return '(no log_file set)'
    try:
        with open(path, 'rb') as f:
            f.seek(offset)
            return tail_lines(f.read().decode('utf-8', 'replace')) or '(log is empty)'
    except (IOError, OSError) as e:
        return '(cannot read %s: %s)' % (path, e)


# Linux prctl(PR_SET_PDEATHSIG, SIGKILL), resolved before any fork: only this call runs in the child.
try:
    import ctypes
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (ImportError, OSError, AttributeError):
    _PRCTL = None
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL)


# --- actions --------------------------------------------------------------------------------------
def start_process(spec: ProcessSpec, sleep: Callable[[float], None] = time.sleep) -> int:
    """Start etcd detached from us (own session, stdin /dev/null, output to the log) and write the pid file."""
    if not spec.binary or not os.path.isfile(spec.binary) or not os.access(spec.binary, os.X_OK):
        raise ProcessError('binary %r is not an executable file' % (spec.binary,))
    if not spec.config_file or not os.path.isfile(spec.config_file):
        raise ProcessError('config_file %r does not exist' % (spec.config_file,))
    for path in (spec.pid_file, spec.log_file):
        if path and os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
    log_path = spec.log_file or os.devnull
    offset = os.path.getsize(log_path) if spec.log_file and os.path.exists(log_path) else 0
    # etcd ignores flags with --config-file, but it would still read ETCD_* variables on some versions.
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith('ETCD_'))
    with open(os.devnull, 'rb') as stdin, open(log_path, 'ab') as log:
        proc = subprocess.Popen(spec.command(), stdin=stdin, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True, cwd='/', env=env,
                                preexec_fn=_die_with_parent if spec.die_with_parent and _PRCTL else None)
    _write_pid_file(spec.pid_file, proc.pid)
    deadline = time.time() + SETTLE_SECONDS
    while True:
        if proc.poll() is not None:
            _remove(spec.pid_file)
            raise ProcessExited('etcd exited at once with code %s (%s); last lines of %s:\n%s'
                                % (proc.returncode, ' '.join(spec.command()), spec.log_file,
                                   log_tail(spec.log_file, offset)))
        if time.time() >= deadline or (spec.wait_url and _listening(spec.wait_url)):
            break
        sleep(POLL_SECONDS)
    if spec.wait and spec.wait_url:
        try:
            wait_ready(spec, proc.pid, offset, sleep)
        except EtcdError as exc:
            # a failed run leaves nothing behind: stop the etcd this run started and remove its pid file
            ended = stop_process(proc.pid, spec.stop_timeout) if process_alive(proc.pid) else 'gone'
            _remove(spec.pid_file)
            raise type(exc)('%s; stopped the etcd this run started (pid %d, %s) and removed %s'
                            % (exc, proc.pid, ended, spec.pid_file)) from exc
    return proc.pid


def _listening(url: str) -> bool:
    """Whether something accepts TCP connections at the URL's host and port (no request is sent)."""
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or '127.0.0.1', parts.port or 2379), timeout=0.2):
            return True
    except OSError:
        return False


def answers(spec: ProcessSpec, timeout: float = HEALTH_GET_SECONDS) -> Optional[str]:
    """Which of /health and /version answers as a serving member does at spec.wait_url now, or None. A member
    that has bound its client port but does not serve yet accepts the connection and says nothing: `timeout`
    bounds each request, so a sub-second poll stays sub-second."""
    base = str(spec.wait_url).rstrip('/')
    for path in ('/health', '/version'):
        status, body = http_get(base + path, spec, timeout)
        if health_ok(path, status, body):
            return path
        if not status:
            return None  # nothing answered at all: the other path would not either
    return None


def wait_ready(spec: ProcessSpec, pid: int, log_offset: int = 0, sleep: Callable[[float], None] = time.sleep) -> str:
    """Poll /health, then /version, until one answers; fail early when the process dies."""
    deadline = time.time() + spec.wait_timeout
    base = str(spec.wait_url).rstrip('/')
    while True:
        path = answers(spec)
        if path is not None:
            return path
        if not process_alive(pid):
            _remove(spec.pid_file)
            raise ProcessExited('etcd (pid %d) died while waiting for %s; last lines of %s:\n%s'
                                % (pid, base, spec.log_file, log_tail(spec.log_file, log_offset)))
        if time.time() > deadline:
            raise EtcdUnavailable('etcd (pid %d) is running but %s did not answer /health or /version within %ss; '
                                  'last lines of %s:\n%s' % (pid, base, spec.wait_timeout, spec.log_file,
                                                             log_tail(spec.log_file, log_offset)))
        sleep(0.1)


def http_get(url: str, spec: ProcessSpec, timeout: float = HEALTH_GET_SECONDS) -> tuple:
    """(status, body) of a GET; the standard library only (this module runs on every start and stop, and
    ansible's URL helpers cost more to import than the whole poll)."""
    context = None
    if url.startswith('https://'):
        try:
            context = client_context(spec.ca_cert, spec.client_cert, spec.client_key)
        except (OSError, ssl.SSLError) as exc:
            raise ProcessError('cannot use the TLS files (ca_cert %s, client_cert %s, client_key %s) for %s: %s' % (
                spec.ca_cert, spec.client_cert, spec.client_key, url, exc)) from exc
    try:
        opener = urllib.request.build_opener(*watched_handlers(context))
        # `timeout` for the whole answer, headers included: whatever holds the port and drips is "not answering yet"
        with watching(Deadline(timeout, 'GET %s' % url), url), \
                opener.open(url, timeout=timeout) as resp:  # nosec - our own member's URL
            return resp.status, resp.read().decode('utf-8', 'replace')
    except Exception as e:  # HTTPError carries a status; anything else means "not answering yet"
        return getattr(e, 'code', 0) or 0, ''


def stop_process(pid: int, stop_timeout: int = 10, sleep: Callable[[float], None] = time.sleep) -> str:
    """SIGTERM, then SIGKILL after stop_timeout seconds. Returns the signal that ended it."""
    for sig, grace in ((signal.SIGTERM, stop_timeout), (signal.SIGKILL, 10)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return 'gone'
        except PermissionError as e:
            raise ProcessError('cannot signal etcd pid %d: %s' % (pid, e)) from e
        deadline = time.time() + grace
        while time.time() < deadline:
            if not process_alive(pid):
                return sig.name
            sleep(0.1)
    raise ProcessError('etcd pid %d still alive after SIGKILL' % pid)


def stop_running(spec: ProcessSpec) -> Optional[str]:
    """Stop our etcd when it runs (see running_pid) and remove its pid file: the signal that ended it, or None
    when it was not running."""
    pid = running_pid(spec)
    if pid is None:
        return None
    ended = stop_process(pid, spec.stop_timeout)
    _remove(spec.pid_file)
    return ended


def _write_pid_file(path: str, pid: int) -> None:
    """The pid and, on the second line, the process's start time: what later proves the pid is still ours."""
    started = process_start_time(pid)
    write_atomic(path, '%d\n' % pid + ('start %d\n' % started if started is not None else ''), 0o644)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except (IOError, OSError):
        pass


# --- engine entry point ---------------------------------------------------------------------------
def check_spec(spec: ProcessSpec, state: str, config_written_first: bool = False) -> None:
    """Every check the real run makes, before anything acts, check mode included (a check-mode run that says ok
    while the real one would fail on a missing config file is no check); InvalidInput names the option.

    `config_written_first`: the caller writes the config file itself before it starts etcd (etcd_recover_member),
    so only its path is checked. (The etcd role skips its start in check mode when its etcd_config task, in check
    mode too, wrote a config file that did not exist.)"""
    validate.one_of(state, 'state', STATES)
    validate.regular_file_or_absent(spec.pid_file, 'pid_file')   # a directory or a FIFO: refused
    if spec.log_file is not None:
        validate.absolute_path(spec.log_file, 'log_file')
        if os.path.isdir(spec.log_file):
            raise InvalidInput('log_file', 'file', '%s is a directory' % spec.log_file, spec.log_file)
    if state in ('started', 'restarted') and (not spec.binary or not spec.config_file):
        raise InvalidInput('binary' if not spec.binary else 'config_file', 'required',
                           'state=%s needs binary and config_file' % state)
    if spec.binary is not None:
        validate.existing_file(spec.binary, 'binary')
        if not os.access(spec.binary, os.X_OK):
            raise InvalidInput('binary', 'executable', '%s is not executable' % spec.binary, spec.binary)
    if config_written_first and spec.config_file is not None and not os.path.exists(spec.config_file):
        validate.absolute_path(spec.config_file, 'config_file')
    else:
        validate.optional_file(spec.config_file, 'config_file')
    validate.tls_files(spec.ca_cert, spec.client_cert, spec.client_key)
    if spec.wait_url is not None:
        validate.endpoint_url(spec.wait_url, 'wait_url')
    validate.timeout(spec.wait_timeout, 'wait_timeout')
    validate.timeout(spec.stop_timeout, 'stop_timeout')


def ensure_process(spec: ProcessSpec, state: str = 'started', check_mode: bool = False) -> Dict[str, Any]:
    """Bring the process to `state`. Same decision and the same checks in check mode; only the actions are
    skipped. A pid file naming a process that is not provably ours is stale: nothing is signalled."""
    check_spec(spec, state)
    before = running_pid(spec)
    stale = before is None and os.path.exists(spec.pid_file)
    result: Dict[str, Any] = {'changed': False, 'pid': before, 'state': state,
                              'before': {'running': before is not None, 'pid': before}}
    if state == 'stopped':
        if before is not None:
            result.update(changed=True, pid=None, msg='stopped etcd pid %d' % before)
            if not check_mode:
                result['signal'] = stop_running(spec) or 'gone'
        else:
            result['msg'] = 'etcd is not running' + (
                ' (stale pid file: its pid is not the etcd this module started; nothing was signalled, the file %s'
                % ('would be removed' if check_mode else 'was removed') + ')' if stale else '')
            if stale and not check_mode:
                _remove(spec.pid_file)
    elif state == 'started' and before is not None:
        result['msg'] = 'etcd is running as pid %d' % before
        if spec.wait and spec.wait_url and not check_mode:
            result['ready'] = wait_ready(spec, before)
    else:
        result.update(changed=True, msg=('restarted' if before is not None else 'started') + ' etcd')
        if not check_mode:
            if before is not None:
                stop_process(before, spec.stop_timeout)
                _remove(spec.pid_file)
            result['pid'] = start_process(spec)
        else:
            result['pid'] = None
    result['after'] = {'running': state != 'stopped', 'pid': result['pid']}
    return result
