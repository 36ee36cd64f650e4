"""Every benchmark still runs: each bench/*.py at its `--smoke` scale, as its docstring shows it
(`python bench/<name>.py`), from a clean environment (tests/support/bench_smoke.py). A refactor that breaks a
benchmark fails here the same day. The figures of a smoke run mean nothing; what is checked is that the benchmark
finished and wrote its summary. Two run in files of their own (SEPARATE): etcd_recover (a lab of three etcd members
and four playbook runs) in test_bench_smoke_recover.py, so the two files run side by side, and druid_rolling in
test_druid_rolling_upgrade.py, whose checks read its smoke run's summary (the 3.4 -> 3.5 rolling update runs once
in `make test`, not twice)."""

from __future__ import annotations

import os

import pytest

from support.bench_smoke import benchmarks, run_smoke

# benchmark -> the test file that runs its smoke run
SEPARATE = {'etcd_recover': 'test_bench_smoke_recover.py', 'druid_rolling': 'test_druid_rolling_upgrade.py'}


def test_every_benchmark_is_covered():
    # a new bench/*.py is picked up by the glob; this names the ones known today, so a lost file is noticed too
    assert {'etcd_snapshot', 'delta_snapshot', 'etcd_recover', 'sabakan_generator', 'maintenance', 'lab_cloud',
            'watchdog', 'provisioning', 'machines', 'etcd_upgrade', 'k8s_upgrade', 'druid_rolling',
            'druid_lifecycle'} <= set(benchmarks())


def test_every_separate_benchmark_runs_in_its_file():
    here = os.path.dirname(os.path.abspath(__file__))
    for name, test_file in SEPARATE.items():
        with open(os.path.join(here, test_file)) as f:
            assert "run_smoke('%s'" % name in f.read(), '%s does not run the %s benchmark' % (test_file, name)


@pytest.mark.parametrize('name', [b for b in benchmarks() if b not in SEPARATE])
def test_benchmark_runs_at_smoke_scale_from_a_clean_shell(name, tmp_path):
    assert run_smoke(name, str(tmp_path))
