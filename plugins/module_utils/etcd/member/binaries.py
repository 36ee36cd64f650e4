# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Find etcd's own tools. etcd 3.5+ restores with etcdutl; 3.4 only has etcdctl, so both are accepted.

A candidate is used only when it runs: every executable found is asked for its version first, and one
that cannot answer (a broken wrapper script, a binary for another architecture, a dangling symlink) is
skipped and named in the error. The directory of the etcd binary in use is searched first, so the tools
that come with that etcd win over others on PATH; then the directories given by the caller, then
STEWARD_ETCD_BIN_DIRS, PATH and the usual install places. When nothing usable is found the error names
every place looked at and every candidate that was rejected, with why.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.commands import run_bounded
from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import DeadlineExceeded
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import BinaryNotFound

SEARCH_ENV = 'STEWARD_ETCD_BIN_DIRS'
STANDARD_DIRS = ('/usr/local/bin', '/usr/bin', '/opt/etcd/bin')
SNAPSHOT_TOOLS = ('etcdutl', 'etcdctl')
PROBE_TIMEOUT = 20
# How each binary is asked for its version (etcd takes a flag, its client tools a subcommand).
VERSION_ARGS = {'etcd': ('--version',), 'etcdctl': ('version',), 'etcdutl': ('version',)}

# (realpath, size, mtime) -> None when the binary ran, else why it did not. A controller verifies many
# snapshots with the same tool: it is probed once per process (a replaced file is probed again).
_PROBES: Dict[Tuple[str, int, float], Optional[str]] = {}


class ToolPath(str):
    """A tool's path that carries how long one run of it may take (the module's `tool_timeout`, None: each run's
    own default). The engine passes tool paths down as strings, through code that has no business with time; the
    code that runs the tool reads the bound back with `run_seconds`."""

    timeout: Optional[float]

    def __new__(cls, path: str, timeout: Optional[float] = None) -> 'ToolPath':
        made = super().__new__(cls, path)
        made.timeout = timeout
        return made


def run_seconds(tool: Any, default: float) -> float:
    """How long one run of `tool` may take: its ToolPath bound, else `default`."""
    bound = getattr(tool, 'timeout', None)
    return default if bound is None else bound


def search_places(dirs: Sequence[str] = (), etcd_binary: Optional[str] = None) -> List[Tuple[str, str]]:
    """(directory, where it came from) in search order, each directory once."""
    places: List[Tuple[str, str]] = []
    if etcd_binary:
        places.append((os.path.dirname(os.path.abspath(etcd_binary)), 'the directory of %s' % etcd_binary))
    places += [(d, 'bin_dirs') for d in dirs if d]
    places += [(d, SEARCH_ENV) for d in os.environ.get(SEARCH_ENV, '').split(os.pathsep) if d]
    places += [(d, 'PATH') for d in os.environ.get('PATH', '').split(os.pathsep) if d]
    places += [(d, 'usual install place') for d in STANDARD_DIRS]
    seen = set()
    ordered = []
    for directory, origin in places:
        key = os.path.normpath(directory)
        if key not in seen:
            seen.add(key)
            ordered.append((directory, origin))
    return ordered


def probe(path: str, name: str) -> Optional[str]:
    """None when `path` answers its version command (within 20 s, or the smaller `tool_timeout`), else why not."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return 'cannot be read: %s' % exc.strerror
    key = (os.path.realpath(path), st.st_size, st.st_mtime)
    if key in _PROBES:
        return _PROBES[key]
    command = [path] + list(VERSION_ARGS.get(name, ('--version',)))
    try:
        proc = run_bounded(command, min(PROBE_TIMEOUT, run_seconds(path, PROBE_TIMEOUT)))
    except DeadlineExceeded as exc:
        problem: Optional[str] = '`%s` did not answer: %s' % (' '.join(command[1:]), exc)
    except OSError as exc:
        problem = 'cannot run: %s' % (exc.strerror or exc)
    else:
        problem = None
        if proc.returncode != 0:
            lines = (proc.stderr or proc.stdout).strip().splitlines()
            problem = '`%s %s` failed (rc=%d%s)' % (name, ' '.join(command[1:]), proc.returncode,
                                                    ': ' + lines[-1].strip() if lines else '')
    _PROBES[key] = problem
    return problem


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _not_found(what: str, places: List[Tuple[str, str]], rejected: List[str], hint: str) -> BinaryNotFound:
    looked = ', '.join('%s (%s)' % place for place in places)
    message = '%s; looked in %s' % (what, looked)
    if rejected:
        message += '; rejected (cannot run): %s' % '; '.join(rejected)
    return BinaryNotFound('%s. %s' % (message, hint))


def _explicit(name: str, path: str) -> str:
    if not _executable(path):
        raise BinaryNotFound('%s not executable at %s' % (name, path))
    problem = probe(path, name)
    if problem:
        raise BinaryNotFound('%s at %s cannot run: %s' % (name, path, problem))
    return path


def find_binary(name: str, path: Optional[str] = None, dirs: Sequence[str] = (),
                etcd_binary: Optional[str] = None, timeout: Optional[float] = None) -> str:
    """Return the path of a working `name`; an explicit `path` wins (and must work)."""
    if path:
        return _explicit(name, path)
    places = search_places(dirs, etcd_binary)
    rejected: List[str] = []
    for directory, _origin in places:
        candidate = os.path.join(directory, name)
        if not _executable(candidate):
            continue
        problem = probe(ToolPath(candidate, timeout), name)
        if problem is None:
            return candidate
        rejected.append('%s: %s' % (candidate, problem))
    raise _not_found('no %s that runs was found' % name, places, rejected, 'Install etcd or set the path option.')


def find_snapshot_tool(path: Optional[str] = None, dirs: Sequence[str] = (),
                       etcd_binary: Optional[str] = None) -> Tuple[str, str]:
    """(path, kind) of the tool that can read and restore snapshots: etcdutl, else etcdctl (etcd 3.4).

    Directory by directory (the etcd in use first), so the tools that match that etcd win; without
    `etcd_binary` the first etcd that runs counts as the one in use."""
    if path:
        kind = 'etcdutl' if os.path.basename(path).startswith('etcdutl') else 'etcdctl'
        return _explicit(kind, path), kind
    return _search_snapshot_tool(dirs, etcd_binary or _etcd_in_use(dirs))


def _etcd_in_use(dirs: Sequence[str], timeout: Optional[float] = None) -> Optional[str]:
    try:
        return ToolPath(find_binary('etcd', dirs=dirs, timeout=timeout), timeout)
    except BinaryNotFound:
        return None


def _search_snapshot_tool(dirs: Sequence[str], etcd_binary: Optional[str],
                          timeout: Optional[float] = None) -> Tuple[str, str]:
    places = search_places(dirs, etcd_binary)
    rejected: List[str] = []
    for directory, _origin in places:
        for kind in SNAPSHOT_TOOLS:
            candidate = os.path.join(directory, kind)
            if not _executable(candidate):
                continue
            problem = probe(ToolPath(candidate, timeout), kind)
            if problem is None:
                return candidate, kind
            rejected.append('%s: %s' % (candidate, problem))
    raise _not_found('neither etcdutl nor etcdctl found', places, rejected,
                     'They are needed to verify and restore snapshots: install etcd\'s client tools, '
                     'or name their directory (bin_dirs, %s) or the binary (etcdutl_path).' % SEARCH_ENV)


@dataclasses.dataclass(frozen=True)
class EtcdTools:
    """The binaries one module run uses, found once by the shell and passed to the engine as paths."""
    snapshot_tool: str        # etcdutl, or etcdctl for etcd 3.4
    kind: str                 # 'etcdutl' or 'etcdctl'
    etcd: Optional[str]       # None when no working etcd was found (only replaying delta snapshots needs it)


def resolve_tools(etcdutl_path: Optional[str] = None, etcd_path: Optional[str] = None,
                  bin_dirs: Optional[Sequence[str]] = None, tool_timeout: Optional[float] = None) -> EtcdTools:
    """The module options of the etcd_tools doc fragment -> EtcdTools; BinaryNotFound names what is missing.

    An explicit path must work: one that is missing, not executable or does not answer its version command is
    bad input naming its option (InvalidInput `etcdutl_path` / `etcd_path`); the etcd in use (etcd_path, else the
    first etcd that runs) decides where the snapshot tool is looked for first. `tool_timeout` bounds every run
    of the tools found, the version probes included (the paths returned carry it: ToolPath)."""
    timeout = None if tool_timeout is None else validate.timeout(tool_timeout, 'tool_timeout')
    dirs = list(bin_dirs or ())
    etcd = _given('etcd', ToolPath(etcd_path, timeout), 'etcd_path') if etcd_path else _etcd_in_use(dirs, timeout)
    if etcdutl_path:
        kind = 'etcdutl' if os.path.basename(etcdutl_path).startswith('etcdutl') else 'etcdctl'
        tool = _given(kind, ToolPath(etcdutl_path, timeout), 'etcdutl_path')
    else:
        found, kind = _search_snapshot_tool(dirs, etcd, timeout)
        tool = ToolPath(found, timeout)
    return EtcdTools(snapshot_tool=tool, kind=kind, etcd=etcd)


def _given(name: str, path: str, option: str) -> str:
    """A tool path the user named: it exists, may be executed and answers its version command."""
    validate.executable(path, option)
    problem = probe(path, name)
    if problem:
        raise InvalidInput(option, 'runs', '%s at %s cannot run: %s' % (name, path, problem), path)
    return path
