"""Where the lab runs from: the checkout's paths and the venv's python, one home for every part of the lab.

A lab program runs as a module of the `lab` package (`python -m lab.kube.api serve ...`) from the repository
root (cwd=REPO), which is what puts `lab` on its sys.path: the lab edits no sys.path of its own, except the two
scripts the docs name, lab/lab.py and lab/hosts.py (see there)."""

from __future__ import annotations

import os
import sys
from typing import List

LAB = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(LAB)
COLLECTIONS = os.path.join(REPO, '.build', 'collections')


def venv_python() -> str:
    """The repository's venv python when there is one (every package the lab needs), else this interpreter."""
    candidate = os.path.join(REPO, '.venv', 'bin', 'python')
    return candidate if os.path.exists(candidate) else sys.executable


def module_argv(module: str, *args: str, python: str = '') -> List[str]:
    """The argv that runs lab module `module` as a program; start it with cwd=REPO."""
    return [python or venv_python(), '-m', module] + list(args)


def runs_module(argv: List[str], module: str) -> bool:
    """True when a process's argv (from /proc) is `python -m <module> ...`: how the lab tells its own programs from
    a stranger that reused a recorded pid."""
    return any(a == '-m' and b == module for a, b in zip(argv, argv[1:]))
