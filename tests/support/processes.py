"""Test processes that are what they claim to be when Popen returns."""

from __future__ import annotations

import subprocess
import time
from typing import List


def exec_started(argv: List[str], timeout: float = 10.0) -> subprocess.Popen:
    """Popen(argv), returned once the child has exec'd `argv`: Popen returns while the child is still a copy of
    this Python, so a test that records its command line (or compares /proc with a record) at once races the
    exec and fails now and then on a loaded machine."""
    proc = subprocess.Popen(argv)
    wanted = b'\0'.join(a.encode() for a in argv) + b'\0'
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open('/proc/%d/cmdline' % proc.pid, 'rb') as f:
                if f.read() == wanted:
                    return proc
        except OSError:
            pass
        time.sleep(0.01)
    proc.kill()
    proc.wait()
    raise AssertionError('%s did not exec within %ss' % (argv, timeout))
