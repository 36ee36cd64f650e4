# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's calls to the member-side program (`steward-etcd-member`, etcd-backup-restore's HTTP endpoints):
one home for the loops that ask a member for a snapshot (an OnDemandSnaphotTask; the `etcd` loop's full snapshot
before a rolling change)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any, Dict, Sequence, Tuple


class SnapshotRequestFailed(Exception):
    """No member answered the snapshot request; the message lists each one tried and why."""


def request_snapshot(targets: Sequence[Tuple[str, str]], timeout: float) -> Tuple[str, Dict[str, Any]]:
    """GET each (pod, URL) in turn until one answers 200 (the program takes the snapshot before it answers, and its
    Lease write comes first): (pod, the answer's JSON). `timeout` is the deadline of the whole request, every try
    included. SnapshotRequestFailed naming every try otherwise."""
    deadline = time.monotonic() + timeout
    tried = []
    for pod, url in targets:
        left = deadline - time.monotonic()
        if left <= 0:
            tried.append('%s: not tried, the %.0fs deadline passed' % (pod, timeout))
            continue
        try:
            with urllib.request.urlopen(url, timeout=left) as answer:
                return pod, json.loads(answer.read() or b'{}')
        except urllib.error.HTTPError as exc:
            detail = exc.read(2048).decode(errors='replace').strip()
            tried.append('%s: HTTP %d %s' % (pod, exc.code, detail))
        except (OSError, ValueError) as exc:
            tried.append('%s: %s' % (pod, exc))
    raise SnapshotRequestFailed('; '.join(tried) or 'no pod has an address')
