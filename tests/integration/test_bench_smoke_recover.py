"""bench/etcd_recover.py at its `--smoke` scale from a clean environment (see test_bench_smoke.py): a lab of three
etcd members on a random loopback range, both disasters, the playbook and the floor once each."""

from __future__ import annotations

from support.bench_smoke import run_smoke


def test_etcd_recover_benchmark_runs_at_smoke_scale_from_a_clean_shell(tmp_path):
    summary = run_smoke('etcd_recover', str(tmp_path))
    assert set(summary['medians']) == {'2_of_3_lost', 'all_lost_restore'}
