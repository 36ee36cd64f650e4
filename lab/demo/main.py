"""`make demo`: the whole life of a cluster on the local lab, end to end, with real processes.

The demo is a list of acts (ACTS). Each act is a module in lab/demo/ with `TITLE` and `run(ctx) -> list of
story lines`; it does its steps through `ctx.step(title, fn)`, which runs `fn`, prints one line with the
time and the figures `fn` returns, and keeps the full output in the log. To add an act: write
lab/demo/<area>_act.py and add its name to ACTS. Run as `python -m lab.demo` from the repository root (`make demo`).

The terminal shows the story (one line per step); everything else (playbook runs, lab start, the
controller's logs) goes to .lab/demo/ : demo.log (all of it, in order), one file per playbook run,
story.txt (the lines printed). After each act one line names the alerts the lab's Prometheus fired during the act
and those firing at its end (lab/demo/alerts.py); without Prometheus the line says so.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from typing import Optional

from lab import manager  # (lab/manager.py: reset, lab_up, lab_down, read_inventory)
from lab.demo.alerts import act_alerts
from lab.demo.context import DemoContext, DemoFailed
from lab.paths import REPO

# The acts, in order: lab/demo/<name>.py, each with TITLE and run(ctx) -> list of story lines.
ACTS = (
    'etcd_act',        # back up, lose a majority for good, recover, verify every key
    'controller_act',  # continuous full + delta backups by the controller, SIGKILL, total loss, restore
    'sabakan_act',     # a cluster generated from sabakan, kept right as machines fail, retire, get replaced
    'watchdog_act',    # a partition scales the node-acting controllers down by level, no machine replaced; healing restores
    'provisioning_act',  # genesis, join, a power cut, removal and re-provisioning of the genesis node
    'machines_act',    # a pool on EC2: an instance lost and replaced, a fleet-wide partition frozen, scaled down
)


def run_acts(ctx: DemoContext, names=ACTS, package: Optional[str] = 'lab.demo') -> None:
    """Run the acts `names`, modules of `package` (None: top-level modules)."""
    for name in names:
        module = importlib.import_module(package + '.' + name if package else name)
        ctx.act = name.replace('_act', '')
        ctx.write_log('\n#### act %s: %s' % (name, module.TITLE))
        began = time.monotonic()
        try:
            module.run(ctx)
        finally:   # also after a failed act: what Prometheus saw helps to tell why
            took = time.monotonic() - began
            ctx.say('%6.1f s  %-10s alerts: %s' % (0.0, ctx.act, act_alerts(ctx.state, took)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', 1)[0])
    parser.add_argument('--state', default=os.path.join(REPO, '.lab'))
    parser.add_argument('--members', type=int, default=3)
    parser.add_argument('--keys', type=int, default=2000)
    parser.add_argument('--acts', default=','.join(ACTS), help='comma-separated acts to run (default: all)')
    parser.add_argument('--keep', action='store_true', help='leave the lab running at the end')
    args = parser.parse_args()
    state = os.path.abspath(args.state)
    acts = [a.strip() for a in args.acts.split(',') if a.strip()]
    unknown = sorted(set(acts) - set(ACTS))
    if unknown:
        parser.error('unknown act(s) %s; known: %s' % (', '.join(unknown), ', '.join(ACTS)))
    started = time.monotonic()
    # The demo owns its lab: it starts from a fresh state whatever an earlier run, drill or crash left there
    # (a lab with wiped members would fail `lab up`); what the old state records as ours is stopped first.
    try:
        stopped = manager.reset(state)
    except RuntimeError as exc:
        print('demo: %s' % exc, file=sys.stderr)
        return 1
    log_dir = os.path.join(state, 'demo')
    os.makedirs(log_dir, exist_ok=True)
    reset_note = 'stopped ' + ', '.join(stopped) if stopped else 'no earlier lab running'
    reset_line = '%6.1f s  %-10s %s: %s' % (time.monotonic() - started, 'lab', 'fresh state', reset_note)
    with open(os.path.join(log_dir, 'demo.log'), 'w') as log:
        ctx = DemoContext(state=state, members=args.members, keys=args.keys, log_dir=log_dir, log=log)
        print('steward.cluster demo: %s (full logs in %s)' % (', '.join(acts), log_dir), flush=True)
        ctx.say(reset_line)
        failed: Optional[str] = None
        try:
            ctx.act = 'lab'
            ctx.step('lab up (etcd role, %d members; sabakan; API, EC2, nodes, controller)' % args.members,
                     lambda: _lab_up(ctx))
            run_acts(ctx, acts)
        except DemoFailed as exc:
            failed = str(exc)
        finally:
            if not args.keep:
                ctx.act = 'lab'
                ctx.step('lab down', lambda: 'stopped ' + ', '.join(manager.lab_down(state, purge=False)))
            with open(os.path.join(log_dir, 'story.txt'), 'w') as f:
                f.write('\n'.join(ctx.story) + '\n')
    total = time.monotonic() - started
    if failed:
        print('%6.1f s  demo FAILED: %s' % (total, failed), flush=True)
        return 1
    print('%6.1f s  demo done: %d steps, every check passed' % (total, len(ctx.story)), flush=True)
    return 0


def _lab_up(ctx: DemoContext) -> str:
    result = manager.lab_up(ctx.state, ctx.members, echo=False)
    ctx.write_log(result['output'])
    ctx.hosts.update(manager.read_inventory(ctx.state))
    cloud = ', '.join('%s %s' % (part, info.get('url') or info.get('note') or 'pid %s' % info['pid'])
                      for part, info in result.get('cloud', {}).items())
    return 'etcd on %s; sabakan on %s; %s' % (' '.join(h['ansible_host'] for h in ctx.hosts.values()),
                                              result.get('sabakan_url') or 'nothing (not started)', cloud)


if __name__ == '__main__':
    sys.exit(main())
