"""A pod network of its own for each lab that runs the pod runtime (a test, a benchmark): a loopback /24 no other
lab on this machine holds.

A randomly drawn 127.0.X.0/24 was not enough: two tests running at the same time (pytest's two workers) drew the
same X often enough that a member program found its address taken and crash-looped. A reservation is an exclusive
flock on a file per X under the temp directory, held as long as the reservation is open (a process that dies drops
it with its file descriptors), and X is taken only when its first addresses' ports are also free (a process left by
a crashed run may still hold them)."""

from __future__ import annotations

import fcntl
import os
import random
import socket
import tempfile
from typing import IO, Optional

FIRST, LAST = 101, 199          # 127.0.101.0/24 .. 127.0.199.0/24 (make lab's own pod network is outside this range)
PORTS = (2379, 2380, 8080, 9095)  # etcd client and peer, the member program, the etcd wrapper
HOSTS = 5                       # the first pod IPs checked (.1 .. .5)


class PodNetwork:
    """`cidr` while open; `close()` (or leaving the `with` block) gives it back."""

    def __init__(self, cidr: str, lock: IO[str]):
        self.cidr = cidr
        self._lock: Optional[IO[str]] = lock

    def close(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def __enter__(self) -> 'PodNetwork':
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _ports_free(third: int) -> bool:
    for host in range(1, HOSTS + 1):
        for port in PORTS:
            probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                probe.bind(('127.0.%d.%d' % (third, host), port))
            except OSError:
                return False
            finally:
                probe.close()
    return True


def reserve() -> PodNetwork:
    """A free pod network, reserved until closed; RuntimeError when every one in the range is taken."""
    candidates = list(range(FIRST, LAST + 1))
    random.shuffle(candidates)
    for third in candidates:
        lock = open(os.path.join(tempfile.gettempdir(), 'steward-lab-pod-network-%d.lock' % third), 'a')
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            continue
        if _ports_free(third):
            return PodNetwork('127.0.%d.0/24' % third, lock)
        lock.close()
    raise RuntimeError('no free pod network in 127.0.%d.0/24 .. 127.0.%d.0/24' % (FIRST, LAST))
