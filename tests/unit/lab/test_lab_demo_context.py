"""The demo's act interface (lab/demo/context.py, lab/demo/main.py): one story line per step with its figures,
the full output in the log, a failing step named with where its log is, and an act that is just a module
with TITLE and run(ctx). (`make demo` itself runs in tests/integration/test_readme_commands.py.)"""

from __future__ import annotations

import importlib
import io

import pytest

from lab.demo import main as demo
from lab.demo.context import DemoContext, DemoFailed, changes


@pytest.fixture
def ctx(tmp_path):
    log = open(str(tmp_path / 'demo.log'), 'w')
    context = DemoContext(state=str(tmp_path), members=3, keys=10, log_dir=str(tmp_path), log=log, out=io.StringIO())
    context.act = 'etcd'
    yield context
    log.close()


def test_a_step_prints_one_line_with_its_figures_and_logs_it(ctx):
    line = ctx.step('backup', lambda: 'Full-1, 324 KiB')
    assert line.endswith('etcd       backup: Full-1, 324 KiB') and ' s  ' in line
    assert ctx.out.getvalue() == line + '\n' and ctx.story == [line]
    ctx.log.flush()
    assert '==> [etcd] backup' in open(ctx.log.name).read()


def test_a_failing_step_is_named_with_its_log_and_stops_the_act(ctx):
    def boom():
        raise SystemExit('verification failed on http://127.0.0.11:2379: 3 keys missing')
    with pytest.raises(DemoFailed) as err:
        ctx.step('verify every key', boom)
    assert 'etcd / verify every key failed (verification failed on http://127.0.0.11:2379: 3 keys missing)' in str(err.value)
    assert ctx.log.name in str(err.value)
    assert 'verify every key: FAILED: verification failed' in ctx.out.getvalue()
    ctx.log.flush()
    assert 'Traceback' in open(ctx.log.name).read()


def test_an_act_is_a_module_with_title_and_run(ctx, tmp_path, monkeypatch):
    (tmp_path / 'acts').mkdir()
    (tmp_path / 'acts' / 'toy_act.py').write_text(
        "TITLE = 'a toy'\n"
        "def run(ctx):\n"
        "    return [ctx.step('one', lambda: '1 thing'), ctx.step('two', lambda: None)]\n")
    monkeypatch.syspath_prepend(str(tmp_path / 'acts'))
    demo.run_acts(ctx, ['toy_act'], package=None)
    assert [line.split('  ', 2)[-1].strip() for line in ctx.story[:2]] == ['toy        one: 1 thing', 'toy        two']
    # after the act, the alerts line (lab/demo/alerts.py; this state dir has no Prometheus)
    assert len(ctx.story) == 3 and 'toy        alerts: no Prometheus in this lab' in ctx.story[2]
    ctx.log.flush()
    assert '#### act toy_act: a toy' in open(ctx.log.name).read()


def test_every_listed_act_has_the_interface():
    for name in demo.ACTS:
        module = importlib.import_module('lab.demo.' + name)
        assert isinstance(module.TITLE, str) and callable(module.run), name


def test_changes_counts_in_words():
    assert [changes(n) for n in (0, 1, 2)] == ['0 changes', '1 change', '2 changes']
