# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""List, then watch: the informer pattern without a cache, for a loop that needs every change of a few
objects as it happens (the weeder's Endpoints, EndpointSlices and dependant pods).

`ListWatch.run()` lists the collection (each item handed over with `initial=True`), then watches from the
list's resourceVersion, handing over ADDED / MODIFIED / DELETED events. A watch that ends, times out
while idle (`idle_timeout`: also how quickly `stop` is noticed) or breaks is resumed from the last
resourceVersion seen; `410 Gone` (the version was compacted) or an ERROR event lists again. Items are
filtered by the label selector here too (a server may ignore it, as the lab's emulator does), and a
watch that replays objects already known (an emulator does, after a reconnect) is harmless to handlers
that compare with what they saw. Runs until `stop` is set or `deadline` (a clock time) passes.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, error_from
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError, KubeUnavailable
from ansible_collections.steward.cluster.plugins.module_utils.kube.selectors import labels_match

try:
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import ReadTimeoutError
except ImportError:  # reported by KubeClient, which cannot be built without it: no request reaches the except clauses
    pass

INITIAL = 'INITIAL'   # an item of the first list (or of a list after 410 Gone)
RETRY_DELAY = 1.0     # after a failed list or watch request


class ListWatch:
    def __init__(self, client: KubeClient, path: str, handler: Callable[[str, Dict[str, Any]], None],
                 label_selector: str = '', stop: Optional[threading.Event] = None, deadline: Optional[float] = None,
                 idle_timeout: float = 10.0, clock: Callable[[], float] = time.time,
                 on_error: Optional[Callable[[Exception], None]] = None):
        self.client = client
        self.path = path
        self.handler = handler
        self.label_selector = label_selector
        self.stop = stop or threading.Event()
        self.deadline = deadline
        self.idle_timeout = idle_timeout
        self.clock = clock
        self.on_error = on_error
        self.synced = threading.Event()   # set once the first list was handed over

    def _over(self) -> bool:
        return self.stop.is_set() or (self.deadline is not None and self.clock() >= self.deadline)

    def _wait(self, seconds: float) -> None:
        if self.deadline is not None:
            seconds = min(seconds, max(0.0, self.deadline - self.clock()))
        self.stop.wait(seconds)

    def run(self) -> None:
        version: Optional[str] = None
        while not self._over():
            try:
                if version is None:
                    version = self._list()
                version = self._watch(version)
            except _Gone:
                version = None
            except KubeError as exc:
                if self.on_error is not None:
                    self.on_error(exc)
                self._wait(RETRY_DELAY)

    def _selected(self, obj: Dict[str, Any]) -> bool:
        return not self.label_selector or labels_match((obj.get('metadata') or {}).get('labels') or {}, self.label_selector)

    def _list(self) -> str:
        query = [('labelSelector', self.label_selector)] if self.label_selector else []
        answer = self.client.request('GET', self.path, query=query) or {}
        for item in answer.get('items') or []:
            if self._selected(item):
                self.handler(INITIAL, item)
        self.synced.set()
        return str((answer.get('metadata') or {}).get('resourceVersion') or '')

    def _watch(self, version: str) -> str:
        """One watch request; returns the last resourceVersion seen (raises _Gone for 410)."""
        for kind, obj in self._events(version):
            meta = obj.get('metadata') or {}
            if kind == 'ERROR':
                if obj.get('code') == 410:
                    raise _Gone()
                raise KubeError('watch %s: %s' % (self.path, obj.get('message') or obj), int(obj.get('code') or 0))
            if meta.get('resourceVersion'):
                version = str(meta['resourceVersion'])
            if kind in ('ADDED', 'MODIFIED', 'DELETED') and self._selected(obj):
                self.handler(kind, obj)
            if self._over():
                break
        return version

    def _events(self, version: str) -> Iterator[Tuple[str, Dict[str, Any]]]:
        remaining = self.idle_timeout
        if self.deadline is not None:
            remaining = max(0.1, min(self.idle_timeout, self.deadline - self.clock()))
        query: List[Tuple[str, Any]] = [('watch', 'true'), ('allowWatchBookmarks', 'true'),
                                        ('timeoutSeconds', max(1, int(remaining)))]
        if version:
            query.append(('resourceVersion', version))
        if self.label_selector:
            query.append(('labelSelector', self.label_selector))
        api = self.client.api
        try:
            response = api.call_api(self.path, 'GET', query_params=query, header_params={'Accept': 'application/json'},
                                    auth_settings=['BearerToken'], _preload_content=False,
                                    _request_timeout=(self.client.timeout, remaining))
        except ApiException as exc:
            if exc.status == 410:
                raise _Gone() from None
            raise error_from('WATCH', self.path, exc.status, exc.reason, exc.body) from None
        except Exception as exc:  # connection errors
            raise KubeUnavailable('WATCH %s: %s' % (self.path, exc.__class__.__name__)) from exc
        raw = response[0] if isinstance(response, tuple) else response
        buffer = b''
        try:
            for chunk in raw.stream(4096, decode_content=True):
                buffer += chunk
                while b'\n' in buffer:
                    line, buffer = buffer.split(b'\n', 1)
                    if line.strip():
                        event = json.loads(line)
                        yield event.get('type') or '', event.get('object') or {}
                if self._over():
                    return
        except Exception as exc:  # the idle timeout (urllib3's ReadTimeoutError; a bare socket timeout) or a broken stream
            if not isinstance(exc, (ReadTimeoutError, TimeoutError)):
                raise KubeUnavailable('WATCH %s: %s' % (self.path, exc.__class__.__name__)) from exc
        finally:
            raw.release_conn()


class _Gone(Exception):
    """410: the resourceVersion is too old; list again."""
