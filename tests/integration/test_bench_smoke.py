"""Every benchmark still runs: each bench/*.py at its `--smoke` scale, as its docstring shows it
(`python bench/<name>.py`), from a clean environment (no Makefile exports: bench/_env.py must find the venv,
the collection link and the etcd binaries itself). A refactor that breaks a benchmark fails here the same day.

The figures of a smoke run mean nothing; what is checked is that the benchmark finished and wrote its summary."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCHES = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(REPO, 'bench', '*.py'))
                 if not os.path.basename(p).startswith('_') and os.path.basename(p) != 'summary_file.py')
# A smoke run takes seconds; the deadline is for a machine under load (the lab ones start processes).
DEADLINE = 240


def clean_env(tmp_path) -> dict:
    """What a user's fresh shell has: no PYTHONPATH, no collection path, no etcd binary dirs, no venv on PATH."""
    keep = ('HOME', 'LANG', 'LC_ALL', 'TMPDIR', 'USER')
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env['PATH'] = '/usr/local/bin:/usr/bin:/bin'
    env['STEWARD_BENCH_SMOKE_DIR'] = str(tmp_path)
    return env


def test_every_benchmark_is_covered():
    # a new bench/*.py is picked up by the glob; this names the ones known today, so a lost file is noticed too
    assert {'etcd_snapshot', 'delta_snapshot', 'etcd_recover', 'sabakan_generator', 'maintenance', 'lab_cloud',
            'watchdog', 'provisioning', 'machines'} <= set(BENCHES)


@pytest.mark.parametrize('name', BENCHES)
def test_benchmark_runs_at_smoke_scale_from_a_clean_shell(name, tmp_path):
    # the system interpreter, not the venv's: the bench re-executes itself under .venv/bin/python
    python = sys.executable if not os.path.exists('/usr/bin/python3') else '/usr/bin/python3'
    proc = subprocess.run([python, os.path.join('bench', name + '.py'), '--smoke'], cwd=REPO, env=clean_env(tmp_path),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=DEADLINE)
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert 'smoke run' in proc.stdout
    with open(os.path.join(str(tmp_path), name + '.json')) as f:
        summary = json.load(f)
    assert summary, proc.stdout[-3000:]
