"""The bad-input sweep as a table: every module's argspec-derived and hand-written bad-input cases (the same as
tests/unit/plugins/modules/test_modules_bad_input.py runs), counted per outcome.

    make pytest ARGS=... is for asserting; this prints:  .venv/bin/python tests/bad_input_sweep.py [module ...]
    (from the repository root after `make all`; --failures lists each case that was not refused cleanly;
    --outside runs the outside sweep's cases, tests/support/bad_input_outside.py, instead of the suite's)

Outcomes: refused/answered pass; traceback, hang (past twice the stated timeout), harm (disk or process changed),
silent (success on invalid input) and changed (a failure that says changed) are the issue's defects.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from support.bad_input import OUTCOMES, Servers, all_cases, module_names, run_case  # noqa: E402
from support.bad_input_cases import CASES  # noqa: E402


def cases_of(name, outside):
    """The suite's cases of a module, or with --outside the outside sweep's (support/bad_input_outside.py)."""
    from support.bad_input_outside import OUTSIDE, found_cases  # pylint: disable=import-outside-toplevel
    if outside:
        return OUTSIDE.get(name, [])
    return all_cases(name, CASES[name]) + found_cases(name) if name in CASES else []


def sweep(names, show_failures, outside=False):
    servers = Servers()
    table = collections.OrderedDict()
    try:
        for name in names:
            counts = collections.Counter()
            for case in cases_of(name, outside):
                if show_failures:
                    print('.. %s %s' % (name, case.case_id), file=sys.stderr, flush=True)
                outcome = run_case(name, CASES[name], case, servers)
                counts[outcome.kind] += 1
                if show_failures and outcome.kind not in ('refused', 'answered'):
                    print('%s %s: %s: %s' % (name, case.case_id, outcome.kind, outcome.detail[:200]), file=sys.stderr)
            table[name] = counts
    finally:
        servers.close()
    return table


def print_table(table):
    width = max(len(n) for n in table) + 2
    print('module'.ljust(width) + ''.join(k.rjust(10) for k in OUTCOMES) + '     cases')
    total = collections.Counter()
    for name, counts in table.items():
        total.update(counts)
        print(name.ljust(width) + ''.join(str(counts[k]).rjust(10) for k in OUTCOMES) + str(sum(counts.values())).rjust(10))
    print('total'.ljust(width) + ''.join(str(total[k]).rjust(10) for k in OUTCOMES) + str(sum(total.values())).rjust(10))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    parser.add_argument('modules', nargs='*', help='modules to sweep (default: every module in plugins/modules)')
    parser.add_argument('--failures', action='store_true', help='list each case not refused cleanly on stderr')
    parser.add_argument('--outside', action='store_true', help='the outside sweep\'s cases (support/bad_input_outside.py) '
                        'instead of the suite\'s')
    options = parser.parse_args()
    print_table(sweep(options.modules or module_names(), options.failures, options.outside))


if __name__ == '__main__':
    main()
