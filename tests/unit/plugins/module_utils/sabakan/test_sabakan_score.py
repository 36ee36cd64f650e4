# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Machine scores of seed 000: (100 - same-rack count) * 10 + lifetime score, +1000 for HEALTHY when removing."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import GeneratorError, MachineError
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.score import (
    score_by_days,
    score_machine,
    score_machine_with_health,
)

NOW = datetime(2018, 12, 2, tzinfo=timezone.utc)


def rfc3339(moment: datetime) -> str:
    return moment.strftime('%Y-%m-%dT%H:%M:%SZ')


def machine(rack: int = 0, retire: datetime = NOW, state: str = 'HEALTHY') -> dict:
    """As CKE's score tests build them: only rack, retire date and state (no serial, no address)."""
    return {'spec': {'rack': rack, 'retireDate': rfc3339(retire)}, 'status': {'state': state}}


def days(count: float) -> datetime:
    return NOW + timedelta(days=count)


# --- score_by_days: +-1 beyond 250, +-2 beyond 500, +-3 beyond 1000 (strictly beyond) ----------------
@pytest.mark.parametrize('day_count, expected', [
    (0, 0), (1, 0), (-1, 0),
    (249, 0), (250, 0), (251, 1),
    (499, 1), (500, 1), (501, 2),
    (999, 2), (1000, 2), (1001, 3), (100000, 3),
    (-249, 0), (-250, 0), (-251, -1),
    (-500, -1), (-501, -2),
    (-1000, -2), (-1001, -3), (-100000, -3),
])
def test_score_by_days_boundaries(day_count, expected):
    assert score_by_days(day_count) == expected


# --- days are truncated toward zero (Go's int(hours / 24)), not floored or rounded -------------------
@pytest.mark.parametrize('offset, expected', [
    (timedelta(days=250, hours=23, minutes=59), 0),      # 250.99 days -> 250 -> not beyond 250
    (timedelta(days=251), 1),                            # exactly 251 days
    (timedelta(days=251) - timedelta(seconds=1), 0),     # one second short of 251 days
    (-timedelta(days=250, hours=23, minutes=59), 0),     # -250.99 -> -250 (floor would give -251 -> -1)
    (-timedelta(days=251), -1),
    (-(timedelta(days=251) - timedelta(seconds=1)), 0),
    (timedelta(days=500, hours=23), 1),
    (timedelta(days=501), 2),
    (-timedelta(days=1000, hours=23), -2),
    (-timedelta(days=1001), -3),
], ids=str)
def test_days_to_retire_truncate_toward_zero(offset, expected):
    assert score_machine(machine(retire=NOW + offset), None, now=NOW) == 1000 + expected


# --- score_machine: the rack term dominates the lifetime term ---------------------------------------
@pytest.mark.parametrize('name, rack, retire, rack_count, expected', [
    ('base', 0, NOW, None, 1000),
    ('empty counts', 0, NOW, {}, 1000),
    ('same rack 3', 1, NOW, {0: 2, 1: 3}, 970),
    ('same rack 13', 1, NOW, {0: 2, 1: 13}, 870),
    ('other racks do not count', 2, NOW, {0: 50, 1: 50}, 1000),
    ('full rack', 1, NOW, {1: 100}, 0),
    ('beyond 100 goes negative', 1, NOW, {1: 103}, -30),
    ('future 250', 1, days(365), None, 1001),
    ('future 500', 1, days(548), None, 1002),
    ('future 1000', 1, days(1096), None, 1003),
    ('past 250', 1, days(-365), None, 999),
    ('past 500', 1, days(-548), None, 998),
    ('past 1000', 1, days(-1096), None, 997),
    ('compound', 2, days(548), {2: 9}, 912),
    ('compound past', 2, days(-1096), {2: 1}, 987),
])
def test_score_machine(name, rack, retire, rack_count, expected):
    assert score_machine(machine(rack, retire), rack_count, now=NOW) == expected


def test_one_more_machine_in_the_rack_outweighs_any_lifetime():
    best_lifetime_in_fuller_rack = score_machine(machine(1, days(5000)), {1: 1}, now=NOW)
    worst_lifetime_in_emptier_rack = score_machine(machine(2, days(-5000)), {1: 1}, now=NOW)
    assert worst_lifetime_in_emptier_rack > best_lifetime_in_fuller_rack


@pytest.mark.parametrize('state', ['HEALTHY', 'UNHEALTHY', 'UNREACHABLE', 'UPDATING', 'RETIRING', 'RETIRED',
                                   'UNINITIALIZED'])
def test_score_machine_ignores_the_state(state):
    assert score_machine(machine(2, days(548), state), {2: 9}, now=NOW) == 912


def test_rack_counts_keyed_by_string_as_json_gives_them():
    assert score_machine(machine(1), {'0': 2, '1': 3}, now=NOW) == 970


def test_bad_rack_counts_are_an_error():
    with pytest.raises(MachineError, match='rack_count'):
        score_machine(machine(1), {'one': 3}, now=NOW)


def test_now_as_string_or_naive_datetime_means_the_same():
    m = machine(0, days(600))
    assert score_machine(m, None, now='2018-12-02T00:00:00Z') == 1002
    assert score_machine(m, None, now=datetime(2018, 12, 2)) == 1002
    assert score_machine(m, None, now='2018-12-02T09:00:00+09:00') == 1002


def test_missing_retire_date_is_go_zero_time_far_in_the_past():
    assert score_machine({'spec': {'rack': 0}, 'status': {'state': 'HEALTHY'}}, None, now=NOW) == 997


def test_malformed_machine_is_a_generator_error():
    with pytest.raises(GeneratorError, match='rack'):
        score_machine({'spec': {'rack': 'first'}, 'status': {'state': 'HEALTHY'}}, None, now=NOW)


# --- score_machine_with_health: removal score, +1000 only for HEALTHY -------------------------------
@pytest.mark.parametrize('name, rack, retire, state, rack_count, expected', [
    ('healthy', 2, days(548), 'HEALTHY', {2: 9}, 1000 + 910 + 2),
    ('unhealthy', 1, NOW, 'UNHEALTHY', {0: 2, 1: 3}, 970),
    ('retiring', 2, days(548), 'RETIRING', {2: 9}, 912),
    ('retired', 2, days(548), 'RETIRED', {2: 9}, 912),
    ('unreachable', 0, days(-548), 'UNREACHABLE', None, 998),
    ('updating', 0, NOW, 'UPDATING', None, 1000),
    ('uninitialized', 0, NOW, 'UNINITIALIZED', None, 1000),
    ('healthy past', 0, days(-1096), 'HEALTHY', {0: 1}, 1000 + 990 - 3),
])
def test_score_machine_with_health(name, rack, retire, state, rack_count, expected):
    assert score_machine_with_health(machine(rack, retire, state), rack_count, now=NOW) == expected


def test_any_healthy_machine_outscores_every_unhealthy_one_for_removal():
    crowded_old_healthy = score_machine_with_health(machine(0, days(-5000)), {0: 99}, now=NOW)
    lonely_new_unhealthy = score_machine_with_health(machine(1, days(5000), 'UNHEALTHY'), {}, now=NOW)
    assert crowded_old_healthy > lonely_new_unhealthy
