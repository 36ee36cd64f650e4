"""Runs one benchmark (bench/<name>.py) at its `--smoke` scale as a user's fresh shell would: the system
interpreter (the bench re-executes itself under .venv/bin/python) and no Makefile exports, so bench/_env.py must
find the venv, the collection link and the etcd binaries itself. Used by tests/integration/test_bench_smoke*.py
(two files, so that pytest-xdist, which hands out whole files (tests/support/schedule.py), runs the lab-heavy etcd_recover beside the others)."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from typing import Any, Dict, List

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# A smoke run takes seconds; the deadline is for a machine under load (the lab ones start processes).
DEADLINE = 300


def benchmarks() -> List[str]:
    """Every bench/*.py that is a benchmark (not the bootstrap or the summary writer)."""
    return sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(REPO, 'bench', '*.py'))
                  if not os.path.basename(p).startswith('_') and os.path.basename(p) != 'summary_file.py')


def clean_env(smoke_dir: str) -> Dict[str, str]:
    """What a user's fresh shell has: no PYTHONPATH, no collection path, no etcd binary dirs, no venv on PATH."""
    keep = ('HOME', 'LANG', 'LC_ALL', 'TMPDIR', 'USER')
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env['PATH'] = '/usr/local/bin:/usr/bin:/bin'
    env['STEWARD_BENCH_SMOKE_DIR'] = smoke_dir
    return env


def run_smoke(name: str, smoke_dir: str) -> Dict[str, Any]:
    """Run bench/<name>.py --smoke; the summary it wrote (AssertionError with its output when it failed)."""
    python = '/usr/bin/python3' if os.path.exists('/usr/bin/python3') else sys.executable
    proc = subprocess.run([python, os.path.join('bench', name + '.py'), '--smoke'], cwd=REPO, env=clean_env(smoke_dir),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=DEADLINE, check=False)
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert 'smoke run' in proc.stdout, proc.stdout[-3000:]
    with open(os.path.join(smoke_dir, name + '.json')) as f:
        return json.load(f)
