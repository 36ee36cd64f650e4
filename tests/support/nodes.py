"""The lab's node emulator (lab/nodes.py: kubelets and node lifecycle controllers for the lab's machines), for tests.

    emulator = NodeEmulator(kube.url, ec2.url, renew_interval=0.5, grace=2, delete_after=1,
                            state_dir=str(tmp_path)).start()
    emulator.partition(['ip-10-0-0-5.eu-west-1.compute.internal'])   # None: every node
    emulator.heal()
    emulator.stop()
"""

from __future__ import annotations

import os
import sys

LAB = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), 'lab')
if LAB not in sys.path:
    sys.path.insert(0, LAB)

from nodes import NodeEmulator, heal, partition, read_faults  # noqa: E402,F401  pylint: disable=wrong-import-position
from node_objects import ADDRESS_ANNOTATION, CLAIM_PREFIX, MARKER, SERIAL_LABEL, UNREACHABLE  # noqa: E402,F401  pylint: disable=wrong-import-position

__all__ = ['NodeEmulator', 'heal', 'partition', 'read_faults', 'ADDRESS_ANNOTATION', 'CLAIM_PREFIX', 'MARKER',
           'SERIAL_LABEL', 'UNREACHABLE']
