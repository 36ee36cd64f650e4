"""`python lab/lab.py` as from a user's shell, and the liveness check of a part's pid record, for the tests that run
the lab on a temporary state dir (test_lab_contract.py, test_lab_prometheus.py)."""

from __future__ import annotations

import os
import subprocess
import sys

from lab.kube.api import repo_path

LAB = repo_path('lab', 'lab.py')


def lab(state, *args, check=True):
    """lab.py as from a user's shell without KUBECONFIG or a ~/.kube/config: the parts find the API through
    the state dir's kubeconfig only."""
    env = {k: v for k, v in os.environ.items() if k != 'KUBECONFIG'}
    env['HOME'] = str(state) + '-home'
    result = subprocess.run([sys.executable, LAB] + list(args) + ['--state', str(state)], capture_output=True,
                            text=True, timeout=300, cwd=repo_path(), check=False, env=env)
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def alive(record):
    """The process of a pid record (pid, start_time) still runs and is not a zombie."""
    try:
        with open('/proc/%d/stat' % record['pid']) as f:
            fields = f.read().rsplit(')', 1)[1].split()
    except OSError:
        return False
    return fields[0] != 'Z' and fields[19] == record['start_time']
