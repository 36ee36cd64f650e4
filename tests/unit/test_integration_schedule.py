"""The integration suite's xdist scheduling (tests/support/schedule.py): units are files or groups of files, the
listed slow units start first, every file that takes the lab lock is in the group `lab`, and the lists name real files."""

from __future__ import annotations

import os
import re
from types import SimpleNamespace

from support.schedule import GROUPS, SLOWEST_FIRST, SlowestFirstScheduling, make_scheduler, unit_of

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
INTEGRATION = os.path.join(REPO, 'tests', 'integration')


def config(dist='loadfile', workers=2):
    values = {'dist': dist, 'tx': ['popen'] * workers}
    return SimpleNamespace(getvalue=values.get, option=SimpleNamespace(loadscopereorder=True))


class Node:
    """What the scheduler talks to: it sends test indexes and may shut the node down."""

    def __init__(self, name):
        self.gateway, self.sent, self.shutting_down = SimpleNamespace(id=name), [], False

    def send_runtest_some(self, indexes):
        self.sent.extend(indexes)

    def shutdown(self):
        self.shutting_down = True


def test_units_are_groups_or_files():
    assert unit_of('tests/integration/test_a.py::test_x') == 'tests/integration/test_a.py'
    assert unit_of('tests/integration/test_a.py::test_x[a::b]') == 'tests/integration/test_a.py'
    assert unit_of('tests/integration/test_readme_commands.py::test_x[block1-make demo]') == 'lab'
    assert unit_of('tests/integration/test_machines_walkthrough.py::test_y') == 'lab'


def test_only_loadfile_gets_this_scheduler():
    assert isinstance(make_scheduler(config(), None), SlowestFirstScheduling)
    assert make_scheduler(config('loadgroup'), None) is None
    assert make_scheduler(config('load'), None) is None


def test_the_listed_slow_units_start_first_and_a_group_stays_on_one_worker():
    collection = (['tests/integration/test_many.py::t%d' % i for i in range(6)]
                  + ['tests/integration/test_readme_commands.py::t%d' % i for i in range(3)]
                  + ['tests/integration/test_machines_safety_freezes.py::t%d' % i for i in range(3)]
                  + ['tests/integration/test_machines_walkthrough.py::t%d' % i for i in range(2)]
                  + ['tests/integration/test_few.py::t0'])
    sched = SlowestFirstScheduling(config())
    a, b = Node('a'), Node('b')
    for node in (a, b):
        sched.add_node(node)
        sched.add_node_collection(node, collection)
    sched.schedule()
    # a: the lab group (README and walk-through, 5 tests) first; b: the next listed file (3 tests) first.
    assert [collection[i] for i in a.sent] == [n for n in collection if 'readme' in n or 'walkthrough' in n]
    assert [collection[i] for i in b.sent][:3] == [n for n in collection if 'safety_freezes' in n]
    # the rest as xdist orders them (most tests first), each file whole on one worker
    assert list(sched.workqueue) == ['tests/integration/test_many.py', 'tests/integration/test_few.py']


def test_every_file_that_takes_the_lab_lock_is_in_the_lab_group():
    lock = re.compile(r'\bLabLock\(')
    takers = set()
    for name in sorted(os.listdir(INTEGRATION)):
        if name.startswith('test_') and name.endswith('.py'):
            with open(os.path.join(INTEGRATION, name), encoding='utf-8') as f:
                if lock.search(f.read()):
                    takers.add(name)
    assert takers and takers == set(GROUPS['lab'])


def test_the_lists_name_files_that_exist():
    files = set(os.listdir(INTEGRATION))
    for unit in SLOWEST_FIRST:
        assert unit in GROUPS or unit in files, unit
    for names in GROUPS.values():
        assert set(names) <= files, names
