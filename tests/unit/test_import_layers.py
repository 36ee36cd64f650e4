"""The import contract, read from the source (AST; no module is imported): the engine areas are layered

    common  <  kube  <  {etcd, sabakan, maintenance, watchdog}  <  {machines, provisioning}

(an area imports only areas of a lower floor, never a sibling of its own floor), the engine imports neither kopf nor
anything of Ansible (the controller runs it without Ansible's helpers: the maintenance notifiers once pulled in its
URL helper), nothing in `plugins/` or the controller imports the lab, the tests or the benchmarks (and `plugins/`
not the controller), no controller loop imports another loop (`core` is what they share), and the lab never imports
the tests. A drawing tool cannot see this namespace (`ansible_collections.steward.cluster...`), so this test is the
only guard.

Every import counts, the lazy ones inside functions too. A rule that has offenders today, which other work is
removing, lists them by name below: the test fails on any new one, and on a listed one that is gone (so the
list shrinks with the code).
"""

from __future__ import annotations

import ast
import functools
import os
from typing import Dict, FrozenSet, Iterator, List, Set, Tuple

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
ENGINE_PREFIX = 'ansible_collections.steward.cluster.plugins.module_utils.'
PLUGINS_PREFIX = 'ansible_collections.steward.cluster.plugins.'
CONTROLLER = 'steward_controller'

FLOORS: Dict[str, int] = {
    'common': 0,
    'kube': 1,
    'etcd': 2, 'sabakan': 2, 'maintenance': 2, 'watchdog': 2,
    'machines': 3, 'provisioning': 3, 'druid': 3,
}
CONTROLLER_SHARED = ('core',)     # the runtime every loop uses

# Loops that reach into another loop: none (the node informer cache and the watchdog config helpers are in core).
LOOP_TO_LOOP_TODAY = set()
# Lab files that import tests/: none (the environment builders live in lab/env).
LAB_TO_TESTS_TODAY = set()


def python_files(top: str) -> Iterator[str]:
    for root, dirs, files in os.walk(os.path.join(REPO, top)):
        dirs[:] = sorted(d for d in dirs if not d.startswith('.') and d != '__pycache__')
        for name in sorted(files):
            if name.endswith('.py'):
                yield os.path.relpath(os.path.join(root, name), REPO)


def module_of(path: str) -> str:
    """The dotted name a file is imported as (for resolving relative imports)."""
    parts = path[:-len('.py')].split(os.sep)
    if parts[-1] == '__init__':
        parts = parts[:-1]
    if parts[0] == 'plugins':
        return 'ansible_collections.steward.cluster.' + '.'.join(parts)
    if parts[0] == 'controller':
        return '.'.join(parts[1:])
    return '.'.join(parts)


@functools.lru_cache(maxsize=None)
def imports(path: str) -> FrozenSet[str]:
    """Every module `path` imports; for `from package import name` both `package` and `package.name` (the name
    may be a submodule: `from ...maintenance import eviction`)."""
    with open(os.path.join(REPO, path), encoding='utf-8') as f:
        tree = ast.parse(f.read(), path)
    here = module_of(path)
    is_package = path.endswith('__init__.py')
    found: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split('.')
                base = base[:len(base) - node.level + (1 if is_package else 0)]
                module = '.'.join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ''
            found.add(module)
            found.update('%s.%s' % (module, alias.name) for alias in node.names if alias.name != '*')
    return frozenset(found)


def engine_area(module: str) -> str:
    return module[len(ENGINE_PREFIX):].split('.')[0] if module.startswith(ENGINE_PREFIX) else ''


def lab_modules() -> Set[str]:
    """The lab's modules, by the bare names its flat directory is imported with (and as `lab.<name>`)."""
    names = {os.path.basename(p)[:-3] for p in python_files('lab')}
    return names | {'lab'}


def is_lab(module: str, lab: Set[str]) -> bool:
    return module.split('.')[0] in lab


def is_tests(module: str) -> bool:
    return module.split('.')[0] in ('support', 'tests', 'conftest')


def is_bench(module: str) -> bool:
    return module.split('.')[0] == 'bench'


def is_controller(module: str) -> bool:
    return module.split('.')[0] == CONTROLLER


def engine_edges() -> List[Tuple[str, str, str]]:
    """(file, its area, imported area) for every import of one engine area by another."""
    edges = []
    for path in python_files(os.path.join('plugins', 'module_utils')):
        parts = path.split(os.sep)
        if len(parts) < 4:
            continue   # plugins/module_utils/__init__.py
        area = parts[2]
        for module in imports(path):
            other = engine_area(module)
            if other and other != area:
                edges.append((path, area, other))
    return edges


def test_every_engine_area_has_a_floor():
    areas = {p.split(os.sep)[2] for p in python_files(os.path.join('plugins', 'module_utils')) if p.count(os.sep) >= 3}
    assert areas - set(FLOORS) == set(), 'a new engine area: give it a floor in FLOORS (and in docs/design.md)'


def test_engine_areas_import_only_lower_floors():
    wrong = sorted('%s (%s, floor %d) imports %s (floor %d)' % (path, area, FLOORS[area], other, FLOORS.get(other, -1))
                   for path, area, other in engine_edges()
                   if other not in FLOORS or FLOORS[other] >= FLOORS[area])
    assert wrong == []


# The module shell adapter is the one engine file that speaks Ansible: modules can import only from module_utils,
# so it lives here, and it may take Ansible's own missing-library message (nothing else of Ansible).
SHELL_ADAPTER = (os.path.join('plugins', 'module_utils', 'common', 'shell.py'), 'ansible.module_utils.basic')


def test_the_engine_imports_no_shell_controller_lab_or_tests():
    lab = lab_modules()
    wrong = []
    for path in python_files(os.path.join('plugins', 'module_utils')):
        for module in imports(path):
            if path.endswith(SHELL_ADAPTER[0]) and module.startswith(SHELL_ADAPTER[1]):
                continue
            if (is_controller(module) or is_lab(module, lab) or is_tests(module) or is_bench(module)
                    or module.split('.')[0] == 'kopf' or module.split('.')[0] == 'ansible'
                    or (module.startswith(PLUGINS_PREFIX) and not module.startswith(ENGINE_PREFIX)
                        and module != PLUGINS_PREFIX + 'module_utils')):
                wrong.append('%s imports %s' % (path, module))
    assert sorted(wrong) == []


def test_plugins_and_controller_import_no_lab_tests_or_bench():
    lab = lab_modules()
    wrong = ['%s imports %s' % (path, module)
             for top in ('plugins', 'controller') for path in python_files(top) for module in imports(path)
             if is_lab(module, lab) or is_tests(module) or is_bench(module)
             or (top == 'plugins' and is_controller(module))]
    assert sorted(wrong) == []


def loop_edges() -> Set[Tuple[str, str]]:
    """(file, module) for each import of one controller loop by another loop's file (`core` shared)."""
    edges = set()
    for path in python_files(os.path.join('controller', CONTROLLER)):
        parts = path.split(os.sep)
        if len(parts) < 4 or parts[2] in CONTROLLER_SHARED:
            continue   # main.py, __main__.py (the registry of loops) and core
        loop = parts[2]
        for module in imports(path):
            bits = module.split('.')
            if bits[0] == CONTROLLER and len(bits) > 1 and bits[1] not in CONTROLLER_SHARED + (loop,) \
                    and os.path.isdir(os.path.join(REPO, 'controller', CONTROLLER, bits[1])):
                edges.add((path, named_module(bits, os.path.join(REPO, 'controller', CONTROLLER, bits[1]))))
    return edges


def test_no_controller_loop_imports_another_loop():
    edges = loop_edges()
    assert sorted(edges - LOOP_TO_LOOP_TODAY) == [], 'a loop imports another loop: share it through core'
    assert sorted(LOOP_TO_LOOP_TODAY - edges) == [], 'gone: remove these from LOOP_TO_LOOP_TODAY'


def test_core_imports_no_loop():
    wrong = []
    for path in python_files(os.path.join('controller', CONTROLLER, 'core')):
        for module in imports(path):
            bits = module.split('.')
            if bits[0] == CONTROLLER and len(bits) > 1 and bits[1] not in CONTROLLER_SHARED + ('__version__',) \
                    and os.path.isdir(os.path.join(REPO, 'controller', CONTROLLER, bits[1])):
                wrong.append('%s imports %s' % (path, module))
    assert sorted(wrong) == []


def named_module(bits: List[str], package_dir: str) -> str:
    """`a.b.c` when `c` is a module of package `a.b` (at `package_dir`), else `a.b` (`c` is a name in it)."""
    if len(bits) > 2 and (os.path.exists(os.path.join(package_dir, bits[2] + '.py'))
                          or os.path.isdir(os.path.join(package_dir, bits[2]))):
        return '.'.join(bits[:3])
    return '.'.join(bits[:2])


def lab_to_tests() -> Set[Tuple[str, str]]:
    return {(path, module) for path in python_files('lab') for module in imports(path)
            if is_tests(module) and module.count('.') == 1
            and os.path.exists(os.path.join(REPO, 'tests', module.replace('.', os.sep) + '.py'))}


def test_the_lab_imports_no_tests():
    edges = lab_to_tests()
    assert sorted(edges - LAB_TO_TESTS_TODAY) == [], 'the lab must not import tests/: move what it needs into lab/'
    assert sorted(LAB_TO_TESTS_TODAY - edges) == [], 'gone: remove these from LAB_TO_TESTS_TODAY'


@pytest.mark.parametrize('source, expected', [
    ('from ansible_collections.steward.cluster.plugins.module_utils.maintenance import eviction',
     {'ansible_collections.steward.cluster.plugins.module_utils.maintenance',
      'ansible_collections.steward.cluster.plugins.module_utils.maintenance.eviction'}),
    ('def f():\n    import support.ec2\n', {'support.ec2'}),
])
def test_the_reader_sees_lazy_and_from_imports(tmp_path, source, expected):
    """The reader itself: a `from package import submodule` and an import inside a function are both seen."""
    (tmp_path / 'x.py').write_text(source)
    assert imports(str(tmp_path / 'x.py')) == expected
