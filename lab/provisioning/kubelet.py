#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab hosts' kubelet install: a stub script at the kubelet's path that answers `--version` as the kubelet does
(`Kubernetes v1.31.4`). There is no kubelet here; the static-pod supervisor reads this version and reports it in the
Node's `status.nodeInfo.kubeletVersion`. An upgrade "installs" a kubelet by writing the stub again:

    python lab/provisioning/kubelet.py --path .lab/hosts/w1/usr/bin/kubelet --version v1.32.0

(steward.cluster.cluster_upgrade's `kubelet_install_command` on the lab hosts). Standalone: imports nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import List, Optional

STUB = '#!/bin/sh\n# lab kubelet stand-in (lab/provisioning/kubelet.py)\necho "Kubernetes %s"\n'


def install(path: str, version: str) -> None:
    if not re.match(r'^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$', version):
        raise ValueError('not a Kubernetes version: %r' % version)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = '%s.tmp-%d' % (path, os.getpid())
    with open(tmp, 'w') as f:
        f.write(STUB % version)
    os.chmod(tmp, 0o755)
    os.replace(tmp, path)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', 1)[0])
    parser.add_argument('--path', required=True)
    parser.add_argument('--version', required=True)
    args = parser.parse_args(argv)
    install(args.path, args.version)
    return 0


if __name__ == '__main__':
    sys.exit(main())
