"""Free loopback ports for the servers the lab's environments, the tests and the benchmarks start."""

from __future__ import annotations

import random
import socket


_HANDED_OUT: set = set()
_RANDOM = random.SystemRandom()   # a test that seeds the global generator must not make workers pick alike


def _ephemeral_range() -> tuple:
    try:
        with open('/proc/sys/net/ipv4/ip_local_port_range') as f:
            low, high = (int(p) for p in f.read().split())
            return low, high
    except (OSError, ValueError):
        return 32768, 60999


def free_port() -> int:
    """A loopback port nothing listens on, for a server a test starts next.

    Picked below the kernel's ephemeral range when there is room: bind(0) and every outgoing connection take
    their ports from that range, so a port found there can become a client connection's source port before
    the server binds it (a 3-member etcd then never forms; the suite opens thousands of connections).
    Never the same port twice in one process."""
    low = _ephemeral_range()[0]
    candidates = range(20000, low) if low > 21000 else None
    for _attempt in range(200):
        with socket.socket() as s:
            try:
                s.bind(('127.0.0.1', _RANDOM.choice(candidates) if candidates else 0))
            except OSError:
                continue
            port = s.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port
    raise RuntimeError('no free loopback port found in 200 tries')


def port_free(host: str, port: int) -> bool:
    """Whether a server could bind `port` on `host` now (with SO_REUSEADDR, as the lab's servers bind: a port in
    TIME_WAIT counts as free)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True
