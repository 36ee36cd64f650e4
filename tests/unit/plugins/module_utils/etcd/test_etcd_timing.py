# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""timing.py: every timed call reaches every listener once, failures too, and a stopped listener hears nothing."""

from __future__ import annotations

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster import timing
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import MembershipError


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        self.now += 1.5
        return self.now


def test_a_call_is_reported_with_its_outcome_and_duration_and_a_failure_still_raises():
    heard, also = [], []
    stop = timing.listen(heard.append)
    stop_also = timing.listen(also.append)
    try:
        assert timing.timed(timing.PROMOTE, 'etcd2', lambda: 'done', clock=Clock()) == 'done'

        def refused():
            raise MembershipError('not now')
        with pytest.raises(MembershipError, match='not now'):
            timing.timed(timing.ADD_LEARNER, 'etcd4', refused, clock=Clock())
    finally:
        stop_also()
    assert heard == also == [timing.EtcdCall('promote', 'etcd2', True, 1.5),
                             timing.EtcdCall('add-learner', 'etcd4', False, 1.5)]
    stop()
    stop()   # twice: harmless
    timing.timed(timing.REMOVE, 'etcd3', lambda: None)
    assert len(heard) == 2 and len(also) == 2
