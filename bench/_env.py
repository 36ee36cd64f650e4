# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one bootstrap every benchmark imports first, so `python bench/<name>.py` runs from a clean shell.

The Makefile exports the environment the code under test needs (the collection link on PYTHONPATH, the etcd
binaries in STEWARD_ETCD_BIN_DIRS, the venv's tools on PATH). A benchmark run as its docstring shows has none
of that, and used to fail on the first import or etcd start. Importing this module sets up the same things
from the checkout's own `.venv` and `.build` (what `make all` made); ANSIBLE_COLLECTIONS_PATH,
STEWARD_ETCD_BIN_DIRS and ANSIBLE_PYTHON_INTERPRETER already set are left alone, so `make bench` and a caller's
own choices still win, and PYTHONPATH and PATH get the checkout's entries in front of theirs:

- run by another interpreter than the checkout's venv, it re-executes the benchmark with `.venv/bin/python`
  (the venv has the packages; a system python does not);
- `sys.path` gets the collection link, `controller/`, `tests/` (test support: etcd clusters, emulators),
  `lab/` and `bench/`; the environment gets the same for the subprocesses a benchmark starts;
- STEWARD_ETCD_BIN_DIRS defaults to the `.build/etcd-*` links (3.5 first) and PATH gets `.venv/bin`.

`parse_args` gives every benchmark a `--smoke` option (tiny scale; `smoke_output(name)` is where it writes its
summary, never under bench/results, so a smoke run in the tests never overwrites the measured figures).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
VENV = os.path.join(REPO, '.venv')
BUILD = os.path.join(REPO, '.build')
COLLECTIONS = os.path.join(BUILD, 'collections')
ETCD_BIN_DIRS = (os.path.join(BUILD, 'etcd-3.5'), os.path.join(BUILD, 'etcd-3.4'))
_REEXEC_MARK = 'STEWARD_BENCH_REEXEC'


def _in_venv() -> bool:
    return os.path.realpath(sys.prefix) == os.path.realpath(VENV)


def _reexec_in_venv() -> None:
    """Run this benchmark again under the venv's interpreter (once: the mark stops a loop if the venv is broken)."""
    python = os.path.join(VENV, 'bin', 'python')
    if _in_venv() or os.environ.get(_REEXEC_MARK) or not os.access(python, os.X_OK):
        return
    os.environ[_REEXEC_MARK] = '1'
    os.execv(python, [python] + sys.argv)


def _prepend_path(variable: str, entries: list) -> None:
    current = [p for p in os.environ.get(variable, '').split(os.pathsep) if p]
    os.environ[variable] = os.pathsep.join([e for e in entries if e not in current] + current)


def bootstrap() -> None:
    _reexec_in_venv()
    if not os.path.isdir(os.path.join(COLLECTIONS, 'ansible_collections', 'steward', 'cluster')):
        raise SystemExit('bench: %s has no steward.cluster link: run `make all` in %s first' % (COLLECTIONS, REPO))
    paths = [COLLECTIONS, os.path.join(REPO, 'controller')]
    for entry in reversed([HERE, os.path.join(REPO, 'tests'), REPO] + paths):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    _prepend_path('PYTHONPATH', paths)
    os.environ.setdefault('ANSIBLE_COLLECTIONS_PATH', COLLECTIONS)
    os.environ.setdefault('STEWARD_ETCD_BIN_DIRS', os.pathsep.join(d for d in ETCD_BIN_DIRS if os.path.isdir(d)))
    os.environ.setdefault('ANSIBLE_PYTHON_INTERPRETER', sys.executable)
    _prepend_path('PATH', [os.path.join(VENV, 'bin')])


def smoke_output(name: str) -> str:
    """The summary path of a `--smoke` run: under STEWARD_BENCH_SMOKE_DIR (the smoke test's tmp_path) or a temp
    dir, never bench/results."""
    default = os.path.join(tempfile.gettempdir(), 'steward-bench-smoke-%d' % os.getpid())
    base = os.environ.get('STEWARD_BENCH_SMOKE_DIR') or default
    return os.path.join(base, name + '.json')


def parse_args(parser: argparse.ArgumentParser, name: str, tiny: dict, output: str = 'output') -> argparse.Namespace:
    """Parse the benchmark's options with one more, `--smoke`: the options in `tiny` (a scale that runs in
    seconds; a callable is called, e.g. for a fresh temp dir) and the summary to `smoke_output(name)`. The smoke
    tests (tests/integration/test_bench_smoke*.py) run every benchmark so, so a change that breaks one fails the
    suite the same day; the figures of a smoke run mean nothing."""
    parser.add_argument('--smoke', action='store_true',
                        help='tiny scale (%s), summary to a temp file: proves the benchmark runs, measures nothing'
                        % ', '.join('%s=%s' % (k, '...' if callable(v) else v) for k, v in sorted(tiny.items())))
    args = parser.parse_args()
    if args.smoke:
        for key, value in tiny.items():
            setattr(args, key, value() if callable(value) else value)
        if output:
            setattr(args, output, smoke_output(name))
    return args


def python_calls(fn: Any) -> int:
    """Function calls one run of fn makes (cProfile's count): the work, apart from the machine's caches and load
    (on a shared machine wall times move with the load; this does not)."""
    import cProfile
    import pstats
    profile = cProfile.Profile()
    profile.runcall(fn)
    return pstats.Stats(profile).total_calls


def announce(args: Any) -> None:
    """One line every benchmark prints first: when and under which load it ran (the docs' figures quote both)."""
    import time
    print('%s UTC, load average %.2f %.2f %.2f%s' % ((time.strftime('%Y-%m-%d %H:%M', time.gmtime()),) + os.getloadavg()
                                                     + (' (smoke run: tiny scale, figures mean nothing)'
                                                        if getattr(args, 'smoke', False) else '',)), flush=True)


bootstrap()
