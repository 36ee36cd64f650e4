"""The machines walk-through of docs/machines.md ("A pool on the lab, step by step"), run exactly as written
against `make lab`: its ```bash blocks, in order, as one script in a clean shell (`env -i`, no venv on PATH),
holding /tmp/steward-lab.lock like every user of the lab's fixed addresses, and `make lab-down` whatever happens.

What the steps show (issue 14 §6, the contract outside checks test with stock clients): boto3 makes the network,
the kubernetes client a Secret, an MCM-style AWS MachineClass and a MachineDeployment of 3 with healthTimeout
30s -> 3 Running machines and 3 instances with the cluster tag; an instance terminated out of band is replaced;
`lab.py partition --all` freezes the fleet and nothing is replaced past the health timeout; `heal` unfreezes with
the same machines; `steward.cluster.machine_deployment` scales to 1 -> one instance; deleting the deployment
leaves no instance with the cluster tag. Each check (lab/machines_walkthrough.py) waits with a deadline and
fails the script with what it saw last. Run time: ~5 min with the lab's default timings (40 s grace, 30 s cloud
sync), most of it waiting as an operator would.
"""

from __future__ import annotations

import os

import pytest

from support.doc_blocks import REPO, LAB_ADDRESS, LabLock, bash_blocks, lab_is_up, run_clean, script_of, section

DOC = os.path.join(REPO, 'docs', 'machines.md')
HEADING = '## A pool on the lab, step by step'
SCRIPT_TIMEOUT = 1500
LOCK_WAIT = 1200


def walkthrough():
    with open(DOC) as f:
        text, first = section(f.read(), HEADING)
    return bash_blocks(text, first)


def test_the_walkthrough_is_there_and_ends_the_lab_it_starts():
    blocks = walkthrough()
    commands = [c for b in blocks for c in b.commands]
    assert commands[0] == 'make lab' and commands[-1] == 'make lab-down', commands
    for step in ('running 3', 'replaced $GONE', 'lab.py partition --state .lab --all', 'frozen', 'lab.py heal --state .lab',
                 'healed', 'steward.cluster.machine_deployment', 'instances 1', 'gone'):
        assert any(step in c for c in commands), 'the walk-through lost its step %r' % step


@pytest.mark.timeout(SCRIPT_TIMEOUT + LOCK_WAIT + 120)
def test_the_machines_walkthrough_runs_as_written_on_make_lab(tmp_path):
    home = str(tmp_path / 'home')
    os.makedirs(home)
    log_path = str(tmp_path / 'walkthrough.log')
    script = 'trap "make lab-down >/dev/null 2>&1" EXIT\n' + ''.join(script_of(b) for b in walkthrough())
    with LabLock(LOCK_WAIT):
        if lab_is_up():
            pytest.skip('a lab is up on %s:%d (someone\'s own): `make lab-down` to run the walk-through' % LAB_ADDRESS)
        proc = run_clean(script, home, log_path, SCRIPT_TIMEOUT)
        assert not lab_is_up(), 'the walk-through left a lab running'
    with open(log_path) as f:
        output = f.read()
    assert proc.returncode == 0, 'the walk-through of docs/machines.md failed (rc=%d); last output:\n%s' % (
        proc.returncode, output[-8000:])
    for seen in ('3 Running machines, 3 instances', 'replaced', 'the fleet frozen', 'nothing replaced in 45 s',
                 'unfrozen with the same machines and instances', '1 machine(s) and instance(s) left',
                 'no deployment, machine or instance'):
        assert seen in output, seen
