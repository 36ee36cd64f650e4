# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A deadline over a whole HTTP exchange, the status line and headers included.

A socket timeout bounds each read only: a server that sends its status line and headers a byte at a time (or a
TLS handshake, or a body) holds the caller for as long as it likes, and no client library has a total timeout
(urllib3's `Timeout(total=...)` still restarts for each read). So the sockets of an exchange are watched: while
`watching(deadline)` is active in a context, every connection made through a watched connection class registers
its socket, and one watcher thread shuts the registered sockets down when the deadline passes. The blocked read
returns at once, and `watching` turns whatever the library raised then into DeadlineExceeded, naming what was done,
the endpoint and the time spent (`common/deadline.py`).

Which sockets belong to which deadline is decided by context (contextvars): each thread, and each task a watched
executor runs (`ContextThreadPool`, for S3 transfers), joins the watch active where it was started. Plugged into:
urllib3 pool managers (`watch_pool_manager`: requests' adapters, the kubernetes client, botocore's session) and
urllib openers (`watched_handlers`: sabakan, etcd's health URL, the maintenance notifiers' webhooks) and single sockets
(`watch_socket`: the maintenance mail notifier's SMTP connection).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import heapq
import http.client
import itertools
import socket
import ssl
import threading
import urllib.request
import weakref
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import Deadline, DeadlineExceeded

_CURRENT: 'contextvars.ContextVar[Optional[SocketWatch]]' = contextvars.ContextVar('steward_socket_watch', default=None)


class SocketWatch:
    """The sockets of one exchange (or one module run's store conversation), shut down when `deadline` passes."""

    def __init__(self, deadline: Deadline, endpoint: Optional[str] = None):
        self.deadline = deadline
        self.endpoint = endpoint
        self.fired = False
        self.done = False
        self._sockets: 'weakref.WeakSet[socket.socket]' = weakref.WeakSet()
        self._lock = threading.Lock()

    def register(self, sock: Any) -> None:
        if sock is None:
            return
        with self._lock:
            if not self.fired:
                self._sockets.add(sock)
                return
        _shutdown(sock)

    def fire(self) -> None:
        with self._lock:
            if self.done or self.fired:
                return
            self.fired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shutdown(sock)


def _shutdown(sock: Any) -> None:
    """Wake every read blocked on `sock` (the base class's shutdown: an SSLSocket's own would drop its TLS object
    under the reader's feet). Closing is left to the library that owns the socket."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except (OSError, TypeError, ValueError):
        pass


class _Watcher:
    """One daemon thread for every watch of the process: sleeps until the earliest deadline, fires what is due.
    A deadline moved later (Deadline.extend) is put back with its new time."""

    def __init__(self) -> None:
        self._heap: List[Tuple[float, int, SocketWatch]] = []
        self._cond = threading.Condition()
        self._order = itertools.count()
        self._thread: Optional[threading.Thread] = None

    def add(self, watch: SocketWatch) -> None:
        with self._cond:
            heapq.heappush(self._heap, (watch.deadline.at, next(self._order), watch))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name='steward-http-deadline', daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._heap:
                    self._cond.wait()
                at, _order, watch = self._heap[0]
                if watch.done:
                    heapq.heappop(self._heap)
                    continue
                left = at - watch.deadline.clock()
                if left > 0:
                    self._cond.wait(left)
                    continue
                heapq.heappop(self._heap)
                if watch.deadline.at > at:
                    heapq.heappush(self._heap, (watch.deadline.at, next(self._order), watch))
                    continue
            watch.fire()


_WATCHER = _Watcher()


@contextlib.contextmanager
def watching(deadline: Deadline, endpoint: Optional[str] = None) -> Iterator[SocketWatch]:
    """Run the block with its HTTP sockets watched: at the deadline they are shut down, and any error the block
    raises once the deadline has passed leaves as DeadlineExceeded (naming `endpoint` and the time spent)."""
    watch = SocketWatch(deadline, endpoint)
    token = _CURRENT.set(watch)
    _WATCHER.add(watch)
    try:
        with deadline.spending():
            yield watch
    except DeadlineExceeded:
        raise
    except Exception as exc:
        if watch.fired or deadline.expired():
            raise deadline.exceeded(endpoint, exc) from exc
        raise
    finally:
        watch.done = True
        _CURRENT.reset(token)


def check_deadline() -> None:
    """Raise DeadlineExceeded when the watch active here has run out (a hook before each attempt of a retrying
    library: botocore's before-send event)."""
    watch = _CURRENT.get()
    if watch is not None and (watch.fired or watch.deadline.expired()):
        raise watch.deadline.exceeded(watch.endpoint)


def grant(seconds: float) -> None:
    """Move the deadline of the watch active here `seconds` later: time for work that grows as it happens (bytes
    moved, objects read), granted as it happens - never in advance on a size a server claims."""
    watch = _CURRENT.get()
    if watch is not None:
        watch.deadline.extend(seconds)


def watch_socket(sock: Any) -> Any:
    """Put `sock` under the watch active here (if any) and return it: for a protocol client that makes its own
    sockets (smtplib), and again for the socket TLS wraps around it (STARTTLS)."""
    watch = _CURRENT.get()
    if watch is not None:
        watch.register(sock)
    return sock


class _WatchedConnection:
    """Mixed in before an http.client / urllib3 / botocore connection class: its socket joins the watch active in
    this context when it is created (so a slow TLS handshake is covered too) and again before each response is
    read (a kept-alive connection serves the next exchange)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if hasattr(self, '_create_connection'):   # http.client: the socket is made here, before TLS
            create = self._create_connection  # pylint: disable=access-member-before-definition
            self._create_connection = lambda *a, **k: watch_socket(create(*a, **k))

    def _new_conn(self) -> Any:   # urllib3: the socket is made here, before TLS
        return watch_socket(super()._new_conn())  # type: ignore[misc]  # pylint: disable=no-member

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]  # pylint: disable=no-member
        watch_socket(getattr(self, 'sock', None))

    def getresponse(self, *args: Any, **kwargs: Any) -> Any:
        watch_socket(getattr(self, 'sock', None))
        return super().getresponse(*args, **kwargs)  # type: ignore[misc]  # pylint: disable=no-member


_CLASSES: Dict[type, type] = {}


def watched_connection(base: type) -> type:
    """`base` with its sockets watched (one subclass per base, made once)."""
    if base not in _CLASSES:
        _CLASSES[base] = type('Watched' + base.__name__, (_WatchedConnection, base), {})
    return _CLASSES[base]


def watched_pool(base: type) -> type:
    """A urllib3 connection pool class whose connections are watched."""
    if base not in _CLASSES:
        _CLASSES[base] = type('Watched' + base.__name__, (base,),
                              {'ConnectionCls': watched_connection(base.ConnectionCls)})
    return _CLASSES[base]


def watch_pool_classes(classes: Dict[str, type]) -> None:
    """Make a scheme -> pool class mapping watched, in place (a mapping shared by several managers, as botocore's
    session shares one with its proxy managers, changes for all of them)."""
    for scheme, pool in list(classes.items()):
        if not issubclass(pool.ConnectionCls, _WatchedConnection):
            classes[scheme] = watched_pool(pool)


def watch_pool_manager(manager: Any) -> Any:
    """A urllib3 PoolManager whose connections are watched from now on (pools already made are dropped)."""
    manager.pool_classes_by_scheme = dict(manager.pool_classes_by_scheme)
    watch_pool_classes(manager.pool_classes_by_scheme)
    manager.clear()
    return manager


class _HTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: Any) -> Any:
        return self.do_open(watched_connection(http.client.HTTPConnection), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, context: Optional[ssl.SSLContext] = None):
        super().__init__(context=context)
        self.tls_context = context

    def https_open(self, req: Any) -> Any:
        return self.do_open(watched_connection(http.client.HTTPSConnection), req, context=self.tls_context)


def watched_handlers(context: Optional[ssl.SSLContext] = None) -> List[urllib.request.BaseHandler]:
    """urllib handlers (for build_opener) whose connections are watched; `context` for https."""
    return [_HTTPHandler(), _HTTPSHandler(context)]


class ContextThreadPool(concurrent.futures.ThreadPoolExecutor):
    """A thread pool whose tasks run in the context they were submitted from, so the sockets of a multi-threaded
    transfer (boto3's s3transfer) join the caller's watch."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> 'concurrent.futures.Future[Any]':  # type: ignore[override]
        return super().submit(contextvars.copy_context().run, fn, *args, **kwargs)
