"""The bad-input sweep: every module in plugins/modules, run in-process through its own `main()` (as Ansible runs
it: patch_module_args, exit_json/fail_json caught), with wrong inputs derived from its argspec plus the hand-written
cases in tests/support/bad_input_cases.py. Each run is classified:

- refused:   fail_json with changed false and a message (no "Traceback", no "MODULE FAILURE")  <- a pass
- answered:  an info module reported an unreachable endpoint within its timeout, changing nothing <- a pass
- traceback: an exception other than SystemExit left main(), or the module printed no result
- hang:      it ran past twice its stated timeout (plus a fixed allowance for Python's start-up work)
- harm:      a file or directory under the case's scratch root changed, or a process it must not touch died
- silent:    exit_json (success) on input that is invalid
- changed:   fail_json that says changed
- unnamed:   a clean refusal that does not name what was wrong: neither its `field` nor its message names the option
             under test (or a field path inside it: `hosts[0].raft_index`), or, for an unreachable endpoint, the
             endpoint (the user must learn which option to fix, not only that something is wrong)

Used by tests/unit/plugins/modules/test_modules_bad_input.py (asserts) and bench/bad_input_sweep.py (the table).
"""

from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import importlib
import io
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple
from unittest import mock

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULES_DIR = os.path.join(REPO, 'plugins', 'modules')
PACKAGE = 'ansible_collections.steward.cluster.plugins.modules.'
CASES_FILE = 'tests/support/bad_input_cases.py'
PASSING = ('refused', 'answered')
OUTCOMES = ('refused', 'answered', 'traceback', 'hang', 'harm', 'silent', 'changed', 'unnamed')
# A module's stated timeout is doubled; this covers imports and argument parsing, which no timeout bounds.
HANG_ALLOWANCE = 3.0
# Without a stated timeout (validation-only cases) a run must still end: far above any clean refusal.
DEFAULT_LIMIT = 20.0
WEEK = 7 * 24 * 3600
TIMEOUT_BAD = (-1, 0, WEEK + 1, 10 ** 12)
TIMEOUT_BAD_FLOAT = (-1.0, 0.0, float('nan'), float('inf'), 1e999, -0.5)
NOT_A_NUMBER = 'twelve'
NOT_A_BOOL = 'maybe'
NOT_A_DICT = 'not a dict'
NOT_A_CHOICE = 'no-such-choice'
BAD_NAMES = ('', 'line\nbreak', 'nul\x00byte')
# Classes of text every str and path option refuses (issue 23 §4): a NUL byte (refused for every option by the
# module shell) and a control character (an S3 region with one ended in botocore's traceback).
TEXT_BAD = (('nul', 'nul\x00byte'), ('control-char', 'bell\x07char'), ('escape', '\x1b[31mred'))
# Classes of number every float option refuses: not finite.
FLOAT_BAD = (float('nan'), float('inf'), float('-inf'))
MALFORMED_YAML = 'apiVersion: v1\nclusters: [unclosed\n  - {{{\n'
# An etcdutl that never exits, whose child holds its output pipes (`{hanging_tool}`): killing the script alone
# would leave the caller waiting on the pipes.
HANGING_TOOL = '#!/bin/sh\nsleep 300 &\nwait\n'


def module_names() -> List[str]:
    """Every module in plugins/modules (the suite's discovery: being a module is how one joins)."""
    return sorted(name[:-3] for name in os.listdir(MODULES_DIR)
                  if name.endswith('.py') and not name.startswith('_') and name != '__init__.py')


class _Spec(Exception):
    pass


def argspec_of(name: str) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(argument_spec, other AnsibleModule keywords) as the module's main() builds them, read by stopping the
    AnsibleModule constructor before it parses anything."""
    module = importlib.import_module(PACKAGE + name)

    def capture(self: Any, argument_spec: Any = None, **kwargs: Any) -> None:
        raise _Spec(argument_spec or {}, kwargs)

    with mock.patch.object(basic.AnsibleModule, '__init__', capture):
        try:
            module.main()
        except _Spec as got:
            return got.args[0], got.args[1]
    raise AssertionError('%s.main() did not build an AnsibleModule' % name)


# --- the scratch world a case runs in ---------------------------------------------------------------------------
class World:
    """A scratch root with a regular file, a directory, a missing path, a kubeconfig, a closed port and a black hole
    (a listening socket that never accepts: connections open, nothing ever answers), a drip (answers a byte every
    half second: `{drip_url}`, `{kubeconfig_drip}`) and a header drip (`{slow_headers_url}`,
    `{kubeconfig_slow_headers}`: never finishes its status line and headers), a liar (`{liar_url}`,
    `{kubeconfig_liar}`: 200 at once with JSON of the wrong shape), and an etcdutl that never exits
    (`{hanging_tool}`). Placeholders in case data
    (`{root}`, `{file}`, `{dir}`, `{missing}`, `{closed_url}`, `{blackhole_url}`, `{kubeconfig}`, ...) name them."""

    def __init__(self, root: str, blackhole_port: int, closed_port: int, drip_port: int = 0, slow_headers_port: int = 0,
                 liar_port: int = 0):
        self.root = root
        self.values = {
            'root': root,
            'file': os.path.join(root, 'plain.txt'),
            'dir': os.path.join(root, 'somedir'),
            'missing': os.path.join(root, 'missing', 'nothing'),
            'store': os.path.join(root, 'store'),
            'closed_port': str(closed_port),
            'closed_host': '127.0.0.1:%d' % closed_port,
            'closed_url': 'http://127.0.0.1:%d' % closed_port,
            'blackhole_port': str(blackhole_port),
            'blackhole_host': '127.0.0.1:%d' % blackhole_port,
            'blackhole_url': 'http://127.0.0.1:%d' % blackhole_port,
            'kubeconfig': os.path.join(root, 'kubeconfig'),
            'kubeconfig_blackhole': os.path.join(root, 'kubeconfig-blackhole'),
            'drip_url': 'http://127.0.0.1:%d' % drip_port,
            'kubeconfig_drip': os.path.join(root, 'kubeconfig-drip'),
            'slow_headers_url': 'http://127.0.0.1:%d' % slow_headers_port,
            'kubeconfig_slow_headers': os.path.join(root, 'kubeconfig-slow-headers'),
            'liar_url': 'http://127.0.0.1:%d' % liar_port,
            'kubeconfig_liar': os.path.join(root, 'kubeconfig-liar'),
            'malformed_yaml': os.path.join(root, 'malformed.yml'),
            'json_list': os.path.join(root, 'list.json'),
            'hanging_tool': os.path.join(root, 'tools', 'etcdutl'),
        }
        os.makedirs(self.values['dir'])
        os.makedirs(self.values['store'])
        _write(self.values['file'], 'plain text\n')
        _write(self.values['kubeconfig'], kubeconfig_text(self.values['closed_url']))
        _write(self.values['kubeconfig_blackhole'], kubeconfig_text(self.values['blackhole_url']))
        _write(self.values['kubeconfig_drip'], kubeconfig_text(self.values['drip_url']))
        _write(self.values['kubeconfig_slow_headers'], kubeconfig_text(self.values['slow_headers_url']))
        _write(self.values['kubeconfig_liar'], kubeconfig_text(self.values['liar_url']))
        _write(self.values['malformed_yaml'], MALFORMED_YAML)
        _write(self.values['json_list'], '[1, 2, 3]\n')
        os.makedirs(os.path.dirname(self.values['hanging_tool']))
        _write(self.values['hanging_tool'], HANGING_TOOL)
        os.chmod(self.values['hanging_tool'], 0o755)

    def fill(self, value: Any) -> Any:
        """Placeholders replaced in strings, lists and dicts (other values as they are)."""
        if isinstance(value, str) and '{' in value:
            try:
                return value.format(**self.values)
            except (KeyError, IndexError, ValueError):
                return value
        if isinstance(value, list):
            return [self.fill(v) for v in value]
        if isinstance(value, dict):
            return {k: self.fill(v) for k, v in value.items()}
        return value

    def snapshot(self) -> Dict[str, Tuple[Any, ...]]:
        """What a harmless run leaves as it was: every path under the root with its type, size, mode and mtime."""
        seen: Dict[str, Tuple[Any, ...]] = {}
        for top, dirs, files in os.walk(self.root, followlinks=False):
            for entry in dirs + files:
                path = os.path.join(top, entry)
                st = os.lstat(path)
                seen[os.path.relpath(path, self.root)] = (st.st_mode, st.st_size if not os.path.isdir(path) else 0,
                                                          st.st_mtime_ns if not os.path.isdir(path) else 0)
        return seen


def kubeconfig_text(server: str) -> str:
    return ('apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster: {server: "%s"}\n'
            'contexts:\n- name: c\n  context: {cluster: c, user: u}\nusers:\n- name: u\n  user: {token: t}\n' % server)


def _write(path: str, text: str) -> None:
    with open(path, 'w') as handle:
        handle.write(text)


class BlackHole:
    """A TCP port that completes handshakes (the kernel's backlog) and never reads or answers."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(('127.0.0.1', 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]

    def close(self) -> None:
        self.sock.close()


def serve_each(handle: Callable[[socket.socket], None]) -> socket.socket:
    """A listening socket on a free loopback port whose every connection is handed to `handle` on a thread of its
    own (until the socket is closed). The misbehaving servers below differ only in `handle`."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(('127.0.0.1', 0))
    sock.listen(64)

    def accept() -> None:
        while True:
            try:
                conn, _addr = sock.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()
    threading.Thread(target=accept, daemon=True).start()
    return sock


class Drip:
    """A server that trickles: by default an HTTP server that answers 200 at once and then sends its body a byte every
    half second; with `headers=True` it sends the status line and headers themselves that way (a server that never
    finishes its headers). A per-read socket timeout never fires; only a deadline over the whole answer ends it.
    `script(conn)` replaces the HTTP part for another protocol: it does what it sends at once (reading the client's
    first words if the protocol has the client speak first) and returns the bytes to trickle."""

    HEAD = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n'

    def __init__(self, headers: bool = False, script: Optional[Callable[[socket.socket], bytes]] = None) -> None:
        self.headers = headers
        self.script = script or self._http
        self.closed = threading.Event()
        self.sock = serve_each(self._drip)
        self.port = self.sock.getsockname()[1]

    def _http(self, conn: socket.socket) -> bytes:
        conn.recv(65536)
        if self.headers:
            return self.HEAD + b''.join(b'X-Slow-%d: %s\r\n' % (n, b'y' * 40) for n in range(100))
        conn.sendall(self.HEAD + b'\r\n{')
        return b' ' * 4095

    def _drip(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(5)
            for byte in self.script(conn):
                if self.closed.wait(0.5):
                    break
                conn.sendall(bytes([byte]))
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.closed.set()
        self.sock.close()


class Liar:
    """An HTTP server that answers every request at once with 200 and JSON of the wrong shape for every client here
    (a Kubernetes list whose items are not a list, an etcd status without a header, sabakan machines that are not a
    list): a server that lies, rather than one that fails."""

    BODY = (b'{"kind": "NodeList", "apiVersion": "v1", "items": "not a list", "metadata": 5, "header": "x", '
            b'"members": "x", "version": 5, "data": {"searchMachines": "x", "machine": 5}}')

    def __init__(self) -> None:
        self.sock = serve_each(self._answer)
        self.port = self.sock.getsockname()[1]

    def _answer(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(5)
            conn.recv(65536)
            conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n'
                         b'Connection: close\r\n\r\n%s' % (len(self.BODY), self.BODY))
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.sock.close()


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


class Servers:
    """The misbehaving endpoints a sweep shares: a black hole, a body drip and a header drip."""

    def __init__(self) -> None:
        self.blackhole = BlackHole()
        self.drip = Drip()
        self.slow_headers = Drip(headers=True)
        self.liar = Liar()

    def close(self) -> None:
        self.liar.close()
        self.blackhole.close()
        self.drip.close()
        self.slow_headers.close()


@contextlib.contextmanager
def world(servers: Servers) -> Iterator[World]:
    with tempfile.TemporaryDirectory(prefix='steward-bad-input-') as root:
        yield World(root, servers.blackhole.port, closed_port(), servers.drip.port, servers.slow_headers.port,
                    servers.liar.port)


# --- cases --------------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Case:
    """One wrong input: `args` replace or add options on the module's base (None removes an option). `limit` is
    the stated timeout the run must end within twice of; `check_mode` runs it as --check. `setup(world)` may prepare
    state and return a callable that says what harm was done (a message) or None. `may_succeed`: the right answer
    may be a success that changes nothing (a stale pid file, an info module's unreachable endpoint); `may_remove`:
    scratch paths the module may rightly remove (a stale pid file); `startup`: seconds of start-up work no timeout
    bounds, beyond HANG_ALLOWANCE (boto3's import and client creation: about 4 s on a loaded 2-core machine).
    `names`: the options the refusal must name (default: every option in `args`, any one of them will do);
    `endpoint`: the value (a URL, or a file naming one) the refusal may name instead: an unreachable endpoint's
    error names the endpoint."""

    case_id: str
    args: Dict[str, Any]
    limit: Optional[float] = None
    check_mode: bool = False
    setup: Optional[Callable[['World'], Callable[[], Optional[str]]]] = None
    may_succeed: bool = False
    may_remove: Tuple[str, ...] = ()
    startup: float = 0.0
    names: Tuple[str, ...] = ()
    endpoint: Optional[str] = None


@dataclasses.dataclass
class ModuleCases:
    """A module's bad-input data. `base`: options that are valid except where they point (scratch paths, closed
    ports). `timeout`: the option bounding its waits (set to 1 for endpoint cases). `endpoint`: the option naming
    what it talks to, with `endpoint_value` giving the black-hole/closed form (`{blackhole_url}`, ...).
    `files`/`dirs`: path options that must name an existing file/directory (added to the argspec heuristics);
    `not_files`: path options the heuristics would wrongly treat as input files; `names`: one-line text options;
    `outputs`: path options the module writes (each gets a path below a regular file, which no write can create:
    refused before anything is written); `text_ok`: str options that take free text with control characters;
    `extra`: hand-written cases."""

    base: Dict[str, Any]
    timeout: Optional[str] = None
    endpoint: Optional[str] = None
    endpoint_values: Tuple[Any, ...] = ('{closed_url}', '{blackhole_url}', '{drip_url}', '{slow_headers_url}')
    files: Tuple[str, ...] = ()
    not_files: Tuple[str, ...] = ()
    dirs: Tuple[str, ...] = ()
    absolute: Tuple[str, ...] = ()
    names: Tuple[str, ...] = ()
    outputs: Tuple[str, ...] = ()
    text_ok: Tuple[str, ...] = ()
    skip: Tuple[str, ...] = ()
    endpoint_may_succeed: bool = False
    extra: List[Case] = dataclasses.field(default_factory=list)


INPUT_FILE_SUFFIXES = ('cert', 'key', 'ca', 'ca_path', 'kubeconfig', 'etcdutl_path', 'etcd_path', 'etcdctl_path')


def is_input_file(option: str, spec: Mapping[str, Any], cases: ModuleCases) -> bool:
    if option in cases.files:
        return True
    if option in cases.not_files or spec.get('type') != 'path':
        return False
    return option.endswith(INPUT_FILE_SUFFIXES)


def generated_cases(name: str, cases: ModuleCases) -> List[Case]:
    """The cases every module gets from its argspec: each required option missing, a wrong type per typed option,
    a value outside `choices`, bad timeouts (negative, zero, NaN, infinite, huge), NaN and infinities for every
    float, a NUL byte and control characters in every str and path option, missing and directory paths for input
    files, a file for directories, a path below a regular file for outputs, relative paths, empty and multi-line
    names, a closed and a black-hole endpoint, and malformed YAML/JSON where a file is parsed."""
    spec, _kwargs = argspec_of(name)
    out: List[Case] = []
    for option, opt in sorted(spec.items()):
        if option in cases.skip:
            continue
        kind = opt.get('type', 'str')
        if opt.get('required') and option in cases.base:
            out.append(Case('missing-%s' % option, {option: None}))
        if kind in ('int', 'float'):
            out.append(Case('%s-not-a-number' % option, {option: NOT_A_NUMBER}))
        elif kind == 'bool':
            out.append(Case('%s-not-a-bool' % option, {option: NOT_A_BOOL}))
        elif kind == 'dict' and not opt.get('options'):
            out.append(Case('%s-not-a-dict' % option, {option: NOT_A_DICT}))
        if opt.get('choices'):
            out.append(Case('%s-not-a-choice' % option, {option: NOT_A_CHOICE}))
        if option.endswith('timeout') and kind in ('int', 'float', 'raw'):
            for value in (TIMEOUT_BAD if kind == 'int' else TIMEOUT_BAD_FLOAT):
                out.append(Case('%s=%r' % (option, value), {option: value}))
        elif kind == 'float':
            for value in FLOAT_BAD:
                out.append(Case('%s=%r' % (option, value), {option: value}))
        if kind in ('str', 'path') and not opt.get('choices'):
            for label, value in TEXT_BAD:
                if label == 'nul' or option not in cases.text_ok:
                    out.append(Case('%s-%s' % (option, label), {option: value}))
        if option in cases.outputs:
            out.append(Case('%s-below-a-file' % option, {option: '{file}/out'}))
        if is_input_file(option, opt, cases):
            out.append(Case('%s-missing' % option, {option: '{missing}'}))
            out.append(Case('%s-is-a-directory' % option, {option: '{dir}'}))
            if option.endswith('kubeconfig'):
                out.append(Case('%s-malformed-yaml' % option, {option: '{malformed_yaml}'}))
                out.append(Case('%s-json-list' % option, {option: '{json_list}'}))
        if option in cases.dirs:
            out.append(Case('%s-missing-dir' % option, {option: '{missing}'}))
            out.append(Case('%s-is-a-file' % option, {option: '{file}'}))
        if option in cases.absolute:
            out.append(Case('%s-empty' % option, {option: ''}))
            out.append(Case('%s-relative' % option, {option: 'relative/dir'}))
        if option in cases.names:
            for value in BAD_NAMES:
                out.append(Case('%s=%r' % (option, value), {option: value}))
    if cases.endpoint:
        bound = {cases.timeout: 1} if cases.timeout else {}
        for label, value in zip(('closed', 'black-hole', 'drip', 'slow-headers'), cases.endpoint_values):
            out.append(Case('%s-%s' % (cases.endpoint, label), dict(bound, **{cases.endpoint: value}), limit=1.0,
                            may_succeed=cases.endpoint_may_succeed, names=(cases.endpoint,), endpoint=value))
    return out


def all_cases(name: str, cases: ModuleCases) -> List[Case]:
    return generated_cases(name, cases) + list(cases.extra)


# --- running one case ---------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Outcome:
    kind: str
    detail: str
    seconds: float
    result: Optional[Dict[str, Any]] = None


class _Hang(BaseException):
    pass


def _alarm(_signum: int, _frame: Any) -> None:
    raise _Hang()


def call_main(name: str, args: Mapping[str, Any], check_mode: bool, limit: float) -> Tuple[str, Optional[Dict[str, Any]], str]:
    """Run the module's main() in this process: ('exit'|'exception'|'hang', parsed result or None, text)."""
    module = importlib.import_module(PACKAGE + name)
    payload = dict(args, _ansible_check_mode=check_mode, _ansible_diff=True, _ansible_tmpdir=tempfile.gettempdir(),
                   _ansible_remote_tmp=tempfile.gettempdir())
    out = io.StringIO()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    # the last resort when the alarm's exception cannot end the run (raised inside a lock the module then waits on):
    # print every thread's stack and end the process, so a deadlock is a visible failure, never a stuck CI job
    faulthandler.dump_traceback_later(limit + 30, exit=True)
    try:
        with patch_module_args(payload), contextlib.redirect_stdout(out):
            try:
                module.main()
            except SystemExit:
                pass
    except _Hang:
        return 'hang', None, 'still running after %.1fs' % limit
    except Exception as exc:  # the point: anything but SystemExit is a traceback the user would see
        return 'exception', None, '%s: %s' % (type(exc).__name__, exc)
    finally:
        faulthandler.cancel_dump_traceback_later()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    text = out.getvalue()
    try:
        return 'exit', json.loads(text[text.index('{'):]), text
    except ValueError:
        return 'exception', None, 'no JSON result: %r' % text[-500:]


def run_case(name: str, cases: ModuleCases, case: Case, servers: Servers) -> Outcome:
    """Run one case in a fresh scratch world and classify it."""
    with world(servers) as here:
        args = {k: v for k, v in here.fill(dict(cases.base, **case.args)).items() if v is not None}
        harmed = case.setup(here) if case.setup else None
        endpoints = endpoint_names(here.fill(case.endpoint)) if case.endpoint else ()
        before = here.snapshot()
        stated = case.limit
        limit = 2 * stated + HANG_ALLOWANCE + case.startup if stated else DEFAULT_LIMIT
        started = time.monotonic()
        how, result, text = call_main(name, args, case.check_mode, limit)
        seconds = time.monotonic() - started
        after = here.snapshot()
        harm = harmed() if harmed else None
        for path in case.may_remove:
            if path not in after:
                before.pop(path, None)
    if how == 'hang' or (stated and seconds > 2 * stated + HANG_ALLOWANCE + case.startup):
        return Outcome('hang', '%.1fs (stated timeout %ss)' % (seconds, stated), seconds, result)
    if how == 'exception':
        return Outcome('traceback', text, seconds)
    if harm or before != after:
        changed = sorted(set(before.items()) ^ set(after.items()))
        return Outcome('harm', harm or 'disk changed: %s' % (changed[:4],), seconds, result)
    assert result is not None
    msg = str(result.get('msg', ''))
    if not result.get('failed') and case.may_succeed and not result.get('changed'):
        return Outcome('answered', 'reported within its timeout: %s' % _short(result), seconds, result)
    if not result.get('failed'):
        return Outcome('silent', 'succeeded: %s' % _short(result), seconds, result)
    if 'Traceback' in msg or 'MODULE FAILURE' in msg or 'exception' in result and 'Traceback' in str(result['exception']) \
            and not msg:
        return Outcome('traceback', msg[:300], seconds, result)
    if result.get('changed'):
        return Outcome('changed', 'failed but changed: %s' % msg[:200], seconds, result)
    wanted = case.names or tuple(case.args)
    if not names_option(result, wanted, endpoints):
        return Outcome('unnamed', 'refusal names none of %s (field %r): %s' % (
            ', '.join(wanted), result.get('field'), msg[:300]), seconds, result)
    return Outcome('refused', msg[:300], seconds, result)


def names_option(result: Mapping[str, Any], options: Sequence[str], endpoints: Sequence[str] = ()) -> bool:
    """Whether a refusal tells the user what to fix: its `field` is one of `options` or a path inside one
    (`hosts[0].raft_index` for `hosts`), or its message names one as a word (Ansible's own argspec errors:
    "argument 'timeout' is of type ..."), or it names one of the `endpoints` that could not be reached."""
    msg = str(result.get('msg', ''))
    field = str(result.get('field') or '')
    if field and re.split(r'[.\[]', field, maxsplit=1)[0] in options:
        return True
    if any(re.search(r'(?<![\w-])%s(?![\w-])' % re.escape(option), msg) for option in options):
        return True
    return any(endpoint in msg for endpoint in endpoints)


def endpoint_names(value: Any) -> Tuple[str, ...]:
    """How a refusal may name an endpoint option's value: its host:port (with or without the scheme); for a
    kubeconfig file, the file or its server's host:port."""
    names: List[str] = []
    for item in value if isinstance(value, list) else [value]:
        item = str(item)
        if os.path.isfile(item):
            names.append(item)
            with open(item) as handle:
                found = re.search(r'server: "?([^"\s}]+)', handle.read())
            item = found.group(1) if found else item
        names.append(item.split('://')[-1].rstrip('/'))
    return tuple(names)


def _short(result: Mapping[str, Any]) -> str:
    text = json.dumps({k: v for k, v in result.items() if k not in ('invocation', 'diff')}, default=str)
    return text[:300]


# --- helpers for hand-written cases ------------------------------------------------------------------------------
def bystander_process(here: World, pid_file: str) -> Callable[[], Optional[str]]:
    """Start a `sleep` (a stand-in for an unrelated process a stale pid file names), write its pid into
    `pid_file`, and return the check: harm when it was signalled. The process is ended by the check."""
    proc = subprocess.Popen(['sleep', '300'], start_new_session=True)
    _write(here.fill(pid_file), '%d\n' % proc.pid)

    def check() -> Optional[str]:
        alive = proc.poll() is None
        proc.kill()
        proc.wait()
        return None if alive else 'the unrelated process %d named by the pid file was signalled' % proc.pid
    return check
