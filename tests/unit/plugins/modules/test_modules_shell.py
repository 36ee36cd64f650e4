"""Every module has the same shape (issue 24, "one module shell"): its main() builds the AnsibleModule, asks
common/shell for the libraries it needs and hands one entry to shell.run; failing, exiting and checking libraries
happen only in common/shell.py, and a module validates nothing itself - its parameters are parsed once, in its
area's engine (`<area>/params.py`, runner.provision_request, ...), where the controller and the plugins reuse them.
"""

from __future__ import annotations

import ast
import os

import pytest

from support.ansible import REPO

MODULES_DIR = os.path.join(REPO, 'plugins', 'modules')
MODULES = sorted(name[:-3] for name in os.listdir(MODULES_DIR) if name.endswith('.py') and name != '__init__.py')
# What only common/shell.py does: failing, exiting, tracebacks, library checks.
SHELL_ONLY = ('fail_json', 'exit_json', 'missing_required_lib', 'format_exc')
# The validation homes a module must not call: the engine's parsers do.
VALIDATION_MODULES = ('common.validate', 'common.names', 'kube.selectors', 'common.errors')
VALIDATION_NAMES = ('validate', 'names', 'InvalidInput', 'parse_label_selector', 'dns_label', 'dns_subdomain')
MAIN_LINES = 12


def _tree(name):
    with open(os.path.join(MODULES_DIR, name + '.py')) as handle:
        return ast.parse(handle.read())


def test_there_are_modules():
    assert len(MODULES) >= 31


@pytest.mark.parametrize('name', MODULES)
def test_module_fails_and_exits_only_through_the_shell(name):
    tree = _tree(name)
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            problems += ['import %s' % a.name for a in node.names if a.name == 'traceback']
        elif isinstance(node, ast.ImportFrom):
            problems += ['from %s import %s' % (node.module, a.name) for a in node.names
                         if a.name in SHELL_ONLY or node.module == 'traceback']
        elif isinstance(node, ast.Attribute) and node.attr in SHELL_ONLY:
            problems.append('.%s (line %d)' % (node.attr, node.lineno))
        elif isinstance(node, ast.Name) and (node.id in SHELL_ONLY or node.id.startswith('HAS_')):
            problems.append('%s (line %d)' % (node.id, node.lineno))
    assert not problems, '%s fails, exits or checks libraries outside common/shell.py: %s' % (name, problems)


def _reports_failure(node):
    """`raise shell.Failed(...)`: an outcome reported as a failure (a backup that does not verify), not a check."""
    exc = node.exc
    return isinstance(exc, ast.Call) and isinstance(exc.func, ast.Attribute) and exc.func.attr == 'Failed' \
        and isinstance(exc.func.value, ast.Name) and exc.func.value.id == 'shell'


@pytest.mark.parametrize('name', MODULES)
def test_module_validates_nothing_itself(name):
    tree = _tree(name)
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or '').endswith(VALIDATION_MODULES):
            problems += ['from %s import %s' % (node.module, a.name) for a in node.names if a.name != 'about_option']
        elif isinstance(node, ast.ImportFrom):
            problems += ['import %s' % a.name for a in node.names if a.name in VALIDATION_NAMES]
        elif isinstance(node, ast.Raise) and not _reports_failure(node):
            problems.append('raise (line %d)' % node.lineno)
    assert not problems, ('%s validates its own parameters (%s): parse them in its area (parse_%s in <area>/params.py)'
                          % (name, problems, name))


@pytest.mark.parametrize('name', MODULES)
def test_main_is_the_short_shell(name):
    tree = _tree(name)
    mains = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == 'main']
    assert len(mains) == 1, '%s has no main()' % name
    main = mains[0]
    calls = [n for n in ast.walk(main) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and isinstance(n.func.value, ast.Name) and n.func.value.id == 'shell']
    runs = [c for c in calls if c.func.attr == 'run']
    assert len(runs) == 1, '%s: main() must hand its work to shell.run exactly once' % name
    own = [n for n in main.body if not isinstance(n, ast.FunctionDef)]   # an entry closing over the module is fine
    lines = sum(n.end_lineno - n.lineno + 1 for n in own)
    assert lines <= MAIN_LINES, '%s: main() is %d lines; keep it to the module, the libraries and shell.run' % (
        name, lines)
    handlers = [n for n in ast.walk(main) if isinstance(n, (ast.Try, ast.With))]
    assert not handlers, '%s: main() catches or wraps errors itself (line %d)' % (name, handlers[0].lineno)
