#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`python lab/lab.py up|down|status|partition|heal ...`: the lab manager's command line (the code is
lab/manager.py), kept at the path the docs and muscle memory name.

Run as a script, Python puts lab/ first on sys.path, where `lab` would name this very file instead of the package.
So this file, and lab/hosts.py, make the one sys.path edit of the lab: the repository root (the `lab` package) and
the collection's build tree (the engine, for a shell without the Makefile's PYTHONPATH) take lab/'s place."""

import os
import sys

if __name__ == '__main__':
    _REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path[0:1] = [_REPO, os.path.join(_REPO, '.build', 'collections')]
    from lab.manager import main
    sys.exit(main())
