"""One direction of a TCP forwarder, shared by the test proxies (netcut's cuttable link, the slow proxy)."""

from __future__ import annotations

import socket
from typing import Callable, Optional


def forward(source: socket.socket, sink: socket.socket, on_chunk: Optional[Callable[[], None]] = None) -> None:
    """Pass what `source` sends on to `sink` until either side ends, then shut both down so the other direction
    ends too. `on_chunk` runs before each chunk is passed on (a proxy's delay or count)."""
    try:
        while True:
            chunk = source.recv(65536)
            if not chunk:
                break
            if on_chunk is not None:
                on_chunk()
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
