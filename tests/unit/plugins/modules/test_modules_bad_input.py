"""Bad input never crashes, hangs or harms (issue 19 §6): every module in plugins/modules joins by being a module.

For each module: the cases derived from its argspec plus its hand-written cases (tests/support/bad_input_cases.py)
and the outside sweep's cases that found something (tests/support/bad_input_outside.py) run in-process through the
module's main(); each must end in a clean fail_json (changed false, a message naming the option or the endpoint, no
traceback) within twice its stated timeout with nothing changed on disk -- or, for an info module's unreachable
endpoint, a report within the timeout that changes nothing. Hypothesis adds drawn values per option type
(derandomised, a bounded number of examples, so CI is deterministic). A sample runs through real `ansible localhost
-m` too. `python tests/bad_input_sweep.py` prints the counts per module and outcome (`--outside`: the outside sweep).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.ansible import REPO, ansible_env
from support.bad_input import (
    BAD_NAMES,
    CASES_FILE,
    PASSING,
    WEEK,
    Servers,
    Case,
    all_cases,
    argspec_of,
    is_input_file,
    module_names,
    run_case,
)
from support.bad_input_cases import CASES, KNOWN_GAPS
from support.bad_input_outside import found_cases

MODULES = module_names()
HOW_TO_ADD = ('add an entry %r: ModuleCases(base={...}) to %s: `base` holds the options a valid call needs, '
              'pointing at the scratch world ({root}, {store}, {kubeconfig}, ...); the suite derives the rest from '
              'the argspec (see the file\'s docstring)')


@pytest.fixture(scope='module')
def servers():
    running = Servers()
    yield running
    running.close()


def test_every_module_has_bad_input_cases():
    missing = [name for name in MODULES if name not in CASES]
    assert not missing, 'modules without bad-input cases: %s; for each, %s' % (
        ', '.join(missing), HOW_TO_ADD % ('<module>', CASES_FILE))
    stale = sorted(set(CASES) - set(MODULES))
    assert not stale, 'bad-input cases for modules that do not exist: %s' % stale


def test_known_gaps_name_real_cases():
    for name, case_id in KNOWN_GAPS:
        assert name in CASES and case_id in [c.case_id for c in all_cases(name, CASES[name])], (name, case_id)


@pytest.mark.parametrize('name', MODULES)
def test_module_refuses_bad_input(name, servers):
    if name not in CASES:
        pytest.fail('%s has no bad-input cases: %s' % (name, HOW_TO_ADD % (name, CASES_FILE)))
    failures, fixed = [], []
    for case in all_cases(name, CASES[name]) + found_cases(name):   # with the outside sweep's finds
        outcome = run_case(name, CASES[name], case, servers)
        known = (name, case.case_id) in KNOWN_GAPS
        if outcome.kind not in PASSING and not known:
            failures.append('%s: %s (%.1fs): %s' % (case.case_id, outcome.kind, outcome.seconds, outcome.detail))
        elif outcome.kind in PASSING and known:
            fixed.append(case.case_id)
    assert not failures, '%s: %d bad inputs not refused cleanly:\n  %s' % (name, len(failures), '\n  '.join(failures))
    assert not fixed, '%s: now refused cleanly, remove from KNOWN_GAPS: %s' % (name, fixed)


# --- property-based: drawn values per option type ------------------------------------------------------------
def _not_a_number():
    return st.text(alphabet='bcdghjkmopqrstuvwxz', min_size=1, max_size=12)


def _multi_line():
    return st.builds(lambda head, bad, tail: head + bad + tail, st.text(max_size=8), st.sampled_from('\n\r\x00'),
                     st.text(max_size=8))


def _with_control_character():
    """Text with a C0 control character (or DEL) somewhere: no option takes one (issue 23 §4)."""
    controls = [chr(c) for c in list(range(1, 9)) + [11, 12] + list(range(14, 32)) + [127]] + ['\x00']
    return st.builds(lambda head, bad, tail: head + bad + tail, st.text(alphabet='abc-.:/', max_size=8),
                     st.sampled_from(controls), st.text(alphabet='abc-.:/', max_size=8))


def bad_value_strategies(name):
    """{option: strategy of values that option must refuse} from the module's argspec and its case data."""
    cases = CASES[name]
    spec, _kwargs = argspec_of(name)
    out = {}
    for option, opt in spec.items():
        kind = opt.get('type', 'str')
        if option in cases.skip:
            continue
        if option.endswith('timeout') and kind == 'float':
            out[option] = st.one_of(st.floats(max_value=0), st.floats(min_value=WEEK * 1.001), st.just(float('nan')),
                                    _not_a_number())
        elif option.endswith('timeout') and kind == 'int':
            out[option] = st.one_of(st.integers(max_value=0), st.integers(min_value=WEEK + 1), _not_a_number())
        elif kind == 'float':
            out[option] = st.one_of(_not_a_number(), st.sampled_from([float('nan'), float('inf'), float('-inf')]))
        elif kind == 'int':
            out[option] = _not_a_number()
        elif option in cases.names:
            out[option] = st.one_of(st.sampled_from(BAD_NAMES), _multi_line())
        elif is_input_file(option, opt, cases):
            out[option] = st.one_of(st.sampled_from(['{missing}', '{dir}']),
                                    st.text(alphabet='abcxyz-_', min_size=1, max_size=10).map('{root}/nope/'.__add__),
                                    _with_control_character())
        elif kind in ('str', 'path') and not opt.get('choices') and option not in cases.text_ok:
            out[option] = _with_control_character()
    return out


@pytest.mark.parametrize('name', [n for n in MODULES if n in CASES])
@settings(max_examples=12, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_module_refuses_drawn_bad_values(name, servers, data):
    strategies = bad_value_strategies(name)
    if not strategies:
        return
    option = data.draw(st.sampled_from(sorted(strategies)), label='option')
    value = data.draw(strategies[option], label='value')
    case = Case('drawn-%s' % option, {option: value})
    outcome = run_case(name, CASES[name], case, servers)
    assert outcome.kind in PASSING, '%s %s=%r: %s: %s' % (name, option, value, outcome.kind, outcome.detail)


# --- a sample as users run modules: real `ansible localhost -m` ----------------------------------------------------
ADHOC = [
    ('etcd_cluster_info', {'endpoints': ['http://127.0.0.1:9'], 'timeout': -1}, 'timeout'),
    ('etcd_data_dir', {'path': 'relative/data'}, 'path'),
    ('sabakan_machine_info', {'url': 'http://127.0.0.1:9', 'timeout': 1e999}, 'timeout'),
]


@pytest.mark.parametrize('name,args,field', ADHOC, ids=[a[0] for a in ADHOC])
def test_adhoc_run_fails_cleanly(name, args, field, tmp_path):
    env = ansible_env({'ANSIBLE_STDOUT_CALLBACK': 'minimal', 'ANSIBLE_LOAD_CALLBACK_PLUGINS': 'False'})
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible'), 'localhost', '-m',
                           'steward.cluster.' + name, '-a', json.dumps(args),
                           '-e', 'ansible_python_interpreter=%s' % sys.executable],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=120, check=False)
    assert proc.returncode == 2, (proc.stdout, proc.stderr, REPO)
    result = json.loads(proc.stdout[proc.stdout.index('FAILED! => ') + len('FAILED! => '):])
    assert result['changed'] is False, result
    assert result.get('field') == field, result
    assert 'Traceback' not in proc.stdout + proc.stderr and 'MODULE FAILURE' not in proc.stdout, proc.stdout
