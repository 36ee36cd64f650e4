"""Every benchmark still runs: each bench/*.py at its `--smoke` scale, as its docstring shows it
(`python bench/<name>.py`), from a clean environment (tests/support/bench_smoke.py). A refactor that breaks a
benchmark fails here the same day. The figures of a smoke run mean nothing; what is checked is that the benchmark
finished and wrote its summary. etcd_recover (a lab of three etcd members and four playbook runs) is in
test_bench_smoke_recover.py, so the two files run side by side."""

from __future__ import annotations

import pytest

from support.bench_smoke import benchmarks, run_smoke

SEPARATE = {'etcd_recover'}


def test_every_benchmark_is_covered():
    # a new bench/*.py is picked up by the glob; this names the ones known today, so a lost file is noticed too
    assert {'etcd_snapshot', 'delta_snapshot', 'etcd_recover', 'sabakan_generator', 'maintenance', 'lab_cloud',
            'watchdog', 'provisioning', 'machines', 'etcd_upgrade', 'k8s_upgrade', 'druid_rolling',
            'druid_lifecycle'} <= set(benchmarks())


@pytest.mark.parametrize('name', [b for b in benchmarks() if b not in SEPARATE])
def test_benchmark_runs_at_smoke_scale_from_a_clean_shell(name, tmp_path):
    assert run_smoke(name, str(tmp_path))
