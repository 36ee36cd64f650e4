# -*- coding: utf-8 -*-
"""The spans a backlog is read in (snapshot/catch_up.py)."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.catch_up import plan_spans


@pytest.mark.parametrize('start, current, expected', [
    (10, 9, [(10, None)]),                    # nothing behind: the live watch alone
    (10, 10, [(10, None)]),
    (1, 1999, [(1, None)]),                   # under two batches of etcd's: one watch
    (1, 2000, [(1, 1001), (1001, None)]),     # two batches: two spans
    (2, 6251, [(2, 1565), (1565, 3128), (3128, 4691), (4691, None)]),  # bench/delta_snapshot.py's backlog
    (1, 2500, [(1, 835), (835, 1669), (1669, None)]),  # spans of at most one batch while there are few
])
def test_spans(start, current, expected):
    assert plan_spans(start, current) == expected


@pytest.mark.parametrize('start, current, spans', [(1, 2000, 4), (7, 123456, 4), (100, 5099, 3), (1, 10 ** 7, 8)])
def test_spans_cover_the_backlog_in_order_each_revision_once(start, current, spans):
    plan = plan_spans(start, current, spans)
    assert 1 < len(plan) <= spans and plan[0][0] == start and plan[-1][1] is None
    for (first, end), (following, _next_end) in zip(plan, plan[1:]):
        assert first < end == following  # contiguous: no gap, no overlap
        assert end - first >= 1000 or len(plan) == -(-(current - start + 1) // 1000)
    assert current >= plan[-1][0]  # the live watch starts within what is behind
