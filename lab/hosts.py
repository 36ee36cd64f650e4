#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`python lab/hosts.py up|down|reboot|status ...`: the provisioning hosts' command line (the code is
lab/provisioning/hosts.py), kept at the path the docs name. The sys.path edit is lab/lab.py's, for the same reason:
run as a script, lab/ would come first on sys.path and hide the `lab` package."""

import os
import sys

if __name__ == '__main__':
    _REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path[0:1] = [_REPO, os.path.join(_REPO, '.build', 'collections')]
    from lab.provisioning.hosts import main
    sys.exit(main())
