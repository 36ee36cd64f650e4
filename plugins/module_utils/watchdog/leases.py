# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node-lease probe's verdict, from Nodes, Leases (and Machines, when there are any) as read, and `now`.

As DWD v1.x (internal/prober/prober.go, internal/util/node.go):
* a lease is a **candidate** only if a Node of that name exists and that node is not excluded: annotated
  `node.machine.sapcloud.io/not-managed-by-mcm`, unhealthy by one of MCM's conditions (KernelDeadlock,
  ReadonlyFilesystem, DiskPressure, NetworkUnavailable True: MCM replaces those, the watchdog must not stop
  it), in an MCM in-place update, or whose Machine is Failed or Terminating;
* a lease is **expired** when `renewTime + 0.75 x kcmNodeMonitorGraceDuration <= now` (a lease without
  renewTime counts as expired: nothing says the node is alive);
* **zero** candidates: healthy (nothing to protect; scale up); **one** candidate: skipped (a one-node
  cluster cannot tell an outage from a node failure); otherwise the probe fails when
  `expired / candidates >= nodeLeaseFailureFraction`, an exact comparison of the two numbers.

Difference: DWD also drops nodes that have no Machine at all, which in a cluster without MCM would drop
every node; here only a Machine that exists and is Failed or Terminating excludes its node.
"""

from __future__ import annotations

import dataclasses
import datetime
import heapq
import math
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.times import EPOCH, format_rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import parse_micro
from ansible_collections.steward.cluster.plugins.module_utils.watchdog import constants as c

HEALTHY = 'healthy'
FAILED = 'failed'
SKIPPED = 'skipped'
NAMES_SHOWN = 10   # expired lease names kept in a verdict (for logs and status; the counts are complete)

_IN_PLACE_UPDATE = 'InPlaceUpdate'
_IN_PLACE_REASONS = ('ReadyForUpdate', 'UpdateFailed')
_EMPTY: Mapping[str, Any] = {}   # never written: the annotations of a Node without any


@dataclasses.dataclass(frozen=True)
class LeaseVerdict:
    verdict: str                  # HEALTHY, FAILED or SKIPPED
    candidates: int
    expired: int
    threshold: float
    reason: str
    fraction: Optional[float] = None           # expired / candidates (None without candidates)
    expired_names: Tuple[str, ...] = ()        # the first NAMES_SHOWN, sorted
    excluded: Tuple[Tuple[str, int], ...] = ()  # (why, how many nodes) for nodes left out
    # renewTimes (canonical MicroTime text) of the candidate leases not yet expired, and the expiry: what
    # crossing_at() needs; kept out of comparisons and output (5,000 texts)
    pending: Tuple[Sequence[str], float] = dataclasses.field(default=((), 0.0), repr=False, compare=False)

    def crossing_at(self) -> Optional[float]:
        """When this probe's leases would make the next probe fail if none of them is renewed: the instant at
        which `expired / candidates >= threshold` first holds, by the same rules (the lease needed last crosses at
        its renewTime + expiry). None when the verdict is not HEALTHY with two or more candidates, or when even all
        pending leases expiring would not reach the threshold. Computed on demand (a selection over the pending
        renewTimes): the prober asks only while it is in its healthy phase."""
        texts, expiry_seconds = self.pending
        if self.verdict != HEALTHY or self.candidates < 2:
            return None
        needed = 1
        while needed <= len(texts) and (self.expired + needed) / self.candidates < self.threshold:
            needed += 1
        if needed > len(texts):
            return None
        renewed = parse_micro(heapq.nsmallest(needed, texts)[-1])
        return None if renewed is None else renewed + expiry_seconds

    def as_dict(self) -> Dict[str, Any]:
        return {'verdict': self.verdict, 'candidates': self.candidates, 'expired': self.expired,
                'fraction': self.fraction, 'threshold': self.threshold, 'reason': self.reason,
                'expiredLeases': list(self.expired_names), 'excludedNodes': dict(self.excluded)}


def exclusion(node: Mapping[str, Any], unhealthy_conditions: Sequence[str] = c.DEFAULT_UNHEALTHY_NODE_CONDITIONS) -> str:
    """Why a node's lease is not a candidate ('' if it is one)."""
    return _exclusion(node, unhealthy_conditions, frozenset(unhealthy_conditions) | {_IN_PLACE_UPDATE})


def _exclusion(node: Mapping[str, Any], unhealthy_conditions: Sequence[str], watched: frozenset) -> str:
    meta = node.get('metadata') or {}
    if c.NOT_MANAGED_BY_MCM_ANNOTATION in (meta.get('annotations') or {}):
        return 'not managed by MCM'
    for cond in (node.get('status') or {}).get('conditions') or []:
        kind = cond.get('type')
        if kind not in watched:   # Ready, MemoryPressure, ...: one set lookup (5,000 nodes x 4 conditions per probe)
            continue
        if kind in unhealthy_conditions and cond.get('status') == 'True':
            return 'unhealthy (%s)' % kind
        if kind == _IN_PLACE_UPDATE and cond.get('reason') in _IN_PLACE_REASONS:
            return 'in-place update'
    return ''


def gone_machine_nodes(machines: Iterable[Mapping[str, Any]]) -> Set[str]:
    """Names of nodes whose Machine is Failed or Terminating (MCM's `node` label links the two)."""
    names = set()
    for machine in machines:
        node = ((machine.get('metadata') or {}).get('labels') or {}).get(c.MACHINE_NODE_LABEL)
        phase = (((machine.get('status') or {}).get('currentStatus')) or {}).get('phase')
        if node and phase in c.MACHINE_GONE_PHASES:
            names.add(node)
    return names


def candidate_nodes(nodes: Iterable[Mapping[str, Any]], machines: Iterable[Mapping[str, Any]] = ()
                    ) -> Tuple[Set[str], Dict[str, int]]:
    """The names of nodes whose lease counts, and how many were left out for which reason.

    At 5,000 nodes this reads about 50,000 objects per probe, so the usual Node takes one tight pass
    (`_candidates_usual`); anything that pass cannot read goes through `_candidates_checked` from the start, which
    decides every node by the same rules and raises what it always raised."""
    gone = gone_machine_nodes(machines)
    unhealthy = c.DEFAULT_UNHEALTHY_NODE_CONDITIONS
    watched = frozenset(unhealthy) | {_IN_PLACE_UPDATE}
    nodes = nodes if type(nodes) is list else list(nodes)  # pylint: disable=unidiomatic-typecheck
    try:
        return _candidates_usual(nodes, gone, unhealthy, watched)
    except (LookupError, TypeError, AttributeError):
        return _candidates_checked(nodes, gone, unhealthy, watched)


def _candidates_usual(nodes: List[Mapping[str, Any]], gone: Set[str], unhealthy: Sequence[str], watched: frozenset
                      ) -> Tuple[Set[str], Dict[str, int]]:
    """`candidate_nodes` for Nodes as the API server sends them (metadata.name, status.conditions with type and
    status), read by subscript; raises LookupError/TypeError/AttributeError on anything else.

    A node is a candidate outright when no watched condition could exclude it: none is an InPlaceUpdate and no
    unhealthy one is 'True'. A node that might be excluded (annotated, its Machine gone, such a condition) is
    decided by `_exclusion` as before, in the order of the list, so the counts and their order are the same."""
    clean: List[str] = []
    keep = clean.append
    excluded: Dict[str, int] = {}
    for node in nodes:
        meta = node['metadata']
        name = meta['name']
        if not name:
            continue
        if name not in gone and c.NOT_MANAGED_BY_MCM_ANNOTATION not in (meta.get('annotations') or _EMPTY):
            for cond in node['status']['conditions']:
                kind = cond['type']
                if kind in watched and (kind == _IN_PLACE_UPDATE or cond['status'] == 'True'):
                    break
            else:
                keep(name)
                continue
        why = 'machine failed or terminating' if name in gone else _exclusion(node, unhealthy, watched)
        if why:
            excluded[why] = excluded.get(why, 0) + 1
        else:
            keep(name)
    return set(clean), excluded   # a set built once from the list: no growing it 5,000 times


def _candidates_checked(nodes: List[Mapping[str, Any]], gone: Set[str], unhealthy: Sequence[str], watched: frozenset
                        ) -> Tuple[Set[str], Dict[str, int]]:
    """`candidate_nodes` for any input: missing metadata, status or conditions read as empty, nameless nodes left
    out."""
    names: Set[str] = set()
    excluded: Dict[str, int] = {}
    for node in nodes:
        try:  # the usual Node, read by subscript (half the cost of .get); anything else as before
            name = node['metadata']['name']
        except (KeyError, TypeError):
            name = (node.get('metadata') or {}).get('name')
        if not name:
            continue
        why = 'machine failed or terminating' if name in gone else _exclusion(node, unhealthy, watched)
        if why:
            excluded[why] = excluded.get(why, 0) + 1
        else:
            names.add(name)
    return names, excluded


class ExpiryCutoff:
    """`renewTime + expiry <= now` for many leases at one `now`, compared as text where that is exact.

    The API server writes MicroTime as `YYYY-MM-DDTHH:MM:SS.ffffffZ`: fixed width, so for such a text the order of
    the strings is the order of the instants, and "renewed at or before now - expiry" is one string comparison with
    the cutoff written the same way (renewTime has whole microseconds, so the cutoff is rounded down to one).
    A date part is checked once (leases renewed every 10 s share a few dozen seconds); anything else - no
    renewTime, another format, an impossible date - goes through `parse_micro` as before (unreadable: expired).
    Parsing each of 5,000 renewTimes was most of the verdict.
    """

    def __init__(self, now: float, expiry_seconds: float):
        self.now = now
        self.expiry_seconds = expiry_seconds
        micros = math.floor((now - expiry_seconds) * 1e6)
        self.text = format_rfc3339(EPOCH + datetime.timedelta(microseconds=micros), 'us')
        self.dates: Dict[str, bool] = {}   # 'YYYY-MM-DDTHH:MM:SS' -> a real date and time

    def _real_date(self, prefix: str) -> bool:
        known = self.dates.get(prefix)
        if known is None:
            try:
                datetime.datetime.strptime(prefix, '%Y-%m-%dT%H:%M:%S')
                known = True
            except ValueError:
                known = False
            self.dates[prefix] = known
        return known

    def expired(self, text: Any) -> bool:
        # pylint: disable=unidiomatic-typecheck
        # the exact type: a str subclass may compare differently
        if type(text) is str and len(text) == 27 and text[19] == '.' and text[26] == 'Z':  # noqa: E721
            fraction = text[20:26]
            if fraction.isascii() and fraction.isdigit() and self._real_date(text[:19]):
                return text <= self.text
        return self.parsed_expired(text)

    def canonical(self, text: Any) -> Optional[str]:
        """`text` as fixed-width MicroTime text (ordered as its instant), or None when unreadable."""
        # pylint: disable=unidiomatic-typecheck
        if type(text) is str and len(text) == 27 and text[19] == '.' and text[26] == 'Z':  # noqa: E721
            fraction = text[20:26]
            if fraction.isascii() and fraction.isdigit() and self._real_date(text[:19]):
                return text
        renewed = parse_micro(text)
        if renewed is None:
            return None
        return format_rfc3339(EPOCH + datetime.timedelta(microseconds=math.floor(renewed * 1e6)), 'us')

    def parsed_expired(self, text: Any) -> bool:
        renewed = parse_micro(text)
        return renewed is None or renewed + self.expiry_seconds <= self.now


def lease_expired(lease: Mapping[str, Any], now: float, expiry_seconds: float) -> bool:
    return ExpiryCutoff(now, expiry_seconds).expired((lease.get('spec') or {}).get('renewTime'))


def evaluate_leases(leases: Iterable[Mapping[str, Any]], candidates: Set[str], now: float, expiry_seconds: float,
                    failure_fraction: float, excluded: Optional[Mapping[str, int]] = None) -> LeaseVerdict:
    """The verdict over the leases of candidate nodes (a lease is named after its node)."""
    # pylint: disable=unidiomatic-typecheck
    expired: List[str] = []
    pending: List[str] = []   # renewTimes of the leases not expired (LeaseVerdict.crossing_at)
    cutoff = ExpiryCutoff(now, expiry_seconds)
    line, dates = cutoff.text, cutoff.dates
    for lease in leases:   # every counted lease lands in `expired` or `pending`: no counter to keep
        try:  # the usual Lease, read by subscript (half the cost of .get); anything else as before
            name = lease['metadata']['name']
        except (KeyError, TypeError):
            name = (lease.get('metadata') or {}).get('name')
        if name not in candidates:
            continue
        try:
            text = lease['spec']['renewTime']
        except (KeyError, TypeError):
            text = (lease.get('spec') or {}).get('renewTime')
        # ExpiryCutoff.expired inlined (5,000 calls per probe): the common text, its date part already seen. An
        # all-ASCII text (one flag CPython keeps, no copy) needs one slice for the fraction's digits; a text that
        # fails any of these goes through ExpiryCutoff.expired, which checks it as before
        if (type(text) is str and len(text) == 27 and text.isascii() and text[19] == '.'  # noqa: E721
                and text[26] == 'Z' and dates.get(text[:19]) and text[20:26].isdigit()):
            if text <= line:
                expired.append(name)
            else:
                pending.append(text)
        elif cutoff.expired(text):
            expired.append(name)
        else:
            pending.append(cutoff.canonical(text) or '')  # not expired, so readable
    counted = len(expired) + len(pending)
    shown = tuple(sorted(expired)[:NAMES_SHOWN])
    left_out = tuple(sorted((excluded or {}).items()))
    if counted == 0:
        return LeaseVerdict(HEALTHY, 0, 0, failure_fraction, 'no candidate node leases: treated as healthy',
                            excluded=left_out)
    if counted == 1:
        return LeaseVerdict(SKIPPED, 1, len(expired), failure_fraction,
                            'one candidate node lease: a single node cannot tell an outage from a node failure',
                            fraction=float(len(expired)), expired_names=shown, excluded=left_out)
    fraction = len(expired) / counted
    failed = fraction >= failure_fraction
    reason = '%d of %d node leases expired (%.2f %s %.2f)' % (
        len(expired), counted, fraction, '>=' if failed else '<', failure_fraction)
    return LeaseVerdict(FAILED if failed else HEALTHY, counted, len(expired), failure_fraction, reason,
                        fraction=fraction, expired_names=shown, excluded=left_out, pending=(pending, expiry_seconds))
