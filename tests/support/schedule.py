"""How `make integration` spreads the suite over pytest-xdist's workers (`-n 3 --dist loadfile`).

xdist's own `loadfile` keeps a file's tests on one worker (their module fixtures start once) but hands the files
out most-tests-first: the long single scenarios (the README's `make demo`, the machines walk-through, the
controller role's playbook runs) started last, and one worker ran alone at the end. And the two files that drive
`make lab` each took the lab's lock (/tmp/steward-lab.lock: fixed loopback addresses) on a worker of their own, so
one worker could sit waiting for the other's lab.

Here a work unit is a file, or a group of files that share one resource (GROUPS: they run one after the other on
one worker); the units in SLOWEST_FIRST start first, in that order, the rest follow as xdist orders them (most
tests first). Update SLOWEST_FIRST from the ten slowest tests every run prints (pytest.ini: --durations=10).

Groups are named here, not with xdist's `xdist_group` mark: under pytest 9 `--dist loadgroup` ignores the mark
(xdist 3.8 renames `item._nodeid`, which pytest 9's Node.nodeid no longer reads).
"""

from __future__ import annotations

import os
from typing import Optional

from xdist.scheduler import LoadFileScheduling

# group -> its files: every test file that takes the lab lock (LabLock, tests/support/doc_blocks.py) is in `lab`.
GROUPS = {
    'lab': ('test_readme_commands.py', 'test_machines_walkthrough.py'),
}
# Units by their file or group name, slowest first: every unit of a minute or more, so that none starts late and
# leaves one worker running alone at the end. The figures: the unit's whole time (all its tests) where measured alone
# (2026-11-28, load 3.5-5), else its slowest tests in CI's runs (2 cores, 2 or 3 workers, load 1.5-10).
SLOWEST_FIRST = (
    'lab',                                   # README `make demo` 206-310 s, the machines walk-through 159-183 s,
                                             # the README's `make lab` blocks 78-100 s each: 430-670 s in all
    'test_machines_safety_freezes.py',       # 8 tests, 291 s alone (the slowest 49-52 s)
    'test_bench_smoke.py',                   # 13 benchmarks at smoke scale, 185 s alone (druid_lifecycle 47-55 s)
    'test_cluster_upgrade_etcd.py',          # 60-162 s, one test (etcd static pods and three playbook runs)
    'test_druid_quorum_loss_journey.py',     # 110-197 s, one test (two recoveries)
    'test_controller_deploy.py',             # the role's playbook runs, 135 s alone
    'test_bench_smoke_recover.py',           # 47-116 s, one test
    'test_alerts_drills.py',                 # 50 s + 48 s
    'test_druid_rolling_upgrade.py',         # 81-87 s: bench/druid_rolling.py --smoke (the one rolling run)
    'test_druid_lab_journey.py',             # 70-75 s
    'test_druid_peer_tls_scale_up.py',       # 67-72 s (two tests)
    'test_provisioning_upgrade.py',          # 69 s, and more
    'test_etcd_role.py',                     # 64 s + 28 s + 28 s, and more
    'test_watchdog_deploy.py',               # 54 s
    'test_druid_member_loss_journey.py',     # 49-55 s
    'test_machines_crash_budget.py',         # 41 s + 53 s
    'test_machines_drain.py',                # 34 s, and more
)
_GROUP_OF = {name: group for group, names in GROUPS.items() for name in names}


def unit_of(nodeid: str) -> str:
    """The work unit of a test id: its file's group, or else its file."""
    path = nodeid.split('::', 1)[0]
    return _GROUP_OF.get(os.path.basename(path), path)


def rank(unit: str) -> int:
    """Position in SLOWEST_FIRST; units not listed after all listed ones."""
    name = os.path.basename(unit)
    return SLOWEST_FIRST.index(name) if name in SLOWEST_FIRST else len(SLOWEST_FIRST)


class SlowestFirstScheduling(LoadFileScheduling):
    """LoadFileScheduling with GROUPS as units too, and the SLOWEST_FIRST units handed out first."""

    _ordered = False

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)

    def _assign_work_unit(self, node) -> None:
        # The work queue is complete when the first unit is assigned: order it once (a stable sort keeps xdist's
        # order among the units not listed).
        if not self._ordered:
            units = sorted(self.workqueue.items(), key=lambda unit: rank(unit[0]))
            self.workqueue.clear()
            self.workqueue.update(units)
            self._ordered = True
        super()._assign_work_unit(node)


def make_scheduler(config, log) -> Optional[SlowestFirstScheduling]:
    """The scheduler for `--dist loadfile`; None (xdist's own) for every other mode."""
    if config.getvalue('dist') != 'loadfile':
        return None
    return SlowestFirstScheduling(config, log)
