"""The node-lease verdict: expiry at 0.75 x grace, candidates only for existing, eligible nodes, the
one-candidate skip, zero candidates healthy, the exact >= on the fraction."""

import random

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import format_micro
from ansible_collections.steward.cluster.plugins.module_utils.watchdog import leases

NOW = 1_800_000_000.0
EXPIRY = 30.0   # 0.75 x 40s


def node(name, annotations=None, conditions=None):
    return {'metadata': {'name': name, 'annotations': annotations or {}}, 'status': {'conditions': conditions or []}}


def lease(name, age):
    return {'metadata': {'name': name, 'namespace': 'kube-node-lease'}, 'spec': {'renewTime': format_micro(NOW - age)}}


@pytest.mark.parametrize('age, expired', [(0, False), (29.999, False), (30.0, True), (31, True)])
def test_expiry_is_renew_time_plus_three_quarters_of_the_grace(age, expired):
    assert leases.lease_expired(lease('n', age), NOW, EXPIRY) is expired


def test_a_lease_without_renew_time_is_expired():
    assert leases.lease_expired({'metadata': {'name': 'n'}, 'spec': {}}, NOW, EXPIRY)


@pytest.mark.parametrize('text', [
    '2027-01-15T07:59:30.000000Z',            # exactly at the cutoff (NOW - 30 s): expired
    '2027-01-15T07:59:30.000001Z',            # one microsecond later: not
    '2027-01-15T07:59:29.999999Z',
    '2027-01-15T08:00:00.000000Z',
    '2027-01-15T07:59:30Z',                   # no fraction: another format, parsed
    '2027-01-15T07:59:30.000001+00:00',       # an offset instead of Z: parsed
    '2027-01-15T09:59:30.000001+02:00',
    '2027-13-15T07:59:30.000001Z',            # month 13: unreadable, so expired (also in the fast path's shape)
    '2027-01-15T07:59:30.00000xZ',            # not digits
    '2027-01-15T07:59:30.\u0661\u0662\u0663\u0664\u0665\u0666Z',  # digits, but not ASCII ones
    '', None, 'yesterday',
])
def test_the_text_cutoff_agrees_with_parsing_every_renew_time(text):
    # the verdict compares canonical MicroTime texts with the cutoff as text; it must decide as a parse would
    assert format_micro(NOW - EXPIRY) == '2027-01-15T07:59:30.000000Z'
    parsed = leases.parse_micro(text) if isinstance(text, str) else None
    expected = parsed is None or parsed + EXPIRY <= NOW
    item = {'metadata': {'name': 'n'}, 'spec': {'renewTime': text}}
    assert leases.ExpiryCutoff(NOW, EXPIRY).expired(text) is expected
    assert leases.lease_expired(item, NOW, EXPIRY) is expected
    assert leases.evaluate_leases([item, item], {'n'}, NOW, EXPIRY, 0.5).expired == (2 if expected else 0)


def verdict(total, expired, fraction=0.6):
    names = {'n%d' % i for i in range(total)}
    items = [lease('n%d' % i, 60 if i < expired else 1) for i in range(total)]
    return leases.evaluate_leases(items, names, NOW, EXPIRY, fraction)


@pytest.mark.parametrize('total, expired, result', [
    (10, 6, leases.FAILED),      # 0.6 >= 0.6: DWD's own example
    (10, 5, leases.HEALTHY),     # 0.5 < 0.6
    (5, 3, leases.FAILED),       # ceil(0.6 x 5) = 3
    (5, 2, leases.HEALTHY),
    (3, 2, leases.FAILED),
    (2, 1, leases.HEALTHY),      # 0.5
    (2, 2, leases.FAILED),
    (1, 1, leases.SKIPPED),      # one candidate: skipped, whatever its state
    (1, 0, leases.SKIPPED),
    (0, 0, leases.HEALTHY),      # no candidates: healthy
])
def test_verdicts(total, expired, result):
    v = verdict(total, expired)
    assert v.verdict == result
    assert v.candidates == total


def test_exact_fraction_comparison_at_other_thresholds():
    assert verdict(10, 7, 0.7).verdict == leases.FAILED
    assert verdict(10, 6, 0.7).verdict == leases.HEALTHY
    assert verdict(3, 1, 1 / 3).verdict == leases.FAILED


def test_only_leases_of_candidate_nodes_count():
    nodes = [node('a'), node('b'), node('c', annotations={'node.machine.sapcloud.io/not-managed-by-mcm': ''}),
             node('d', conditions=[{'type': 'DiskPressure', 'status': 'True'}]),
             node('e', conditions=[{'type': 'DiskPressure', 'status': 'False'}, {'type': 'Ready', 'status': 'Unknown'}]),
             node('f', conditions=[{'type': 'InPlaceUpdate', 'status': 'True', 'reason': 'ReadyForUpdate'}]),
             node('g')]
    machines = [{'metadata': {'labels': {'node': 'g'}}, 'status': {'currentStatus': {'phase': 'Terminating'}}},
                {'metadata': {'labels': {'node': 'a'}}, 'status': {'currentStatus': {'phase': 'Running'}}}]
    names, excluded = leases.candidate_nodes(nodes, machines)
    assert names == {'a', 'b', 'e'}
    assert excluded == {'not managed by MCM': 1, 'unhealthy (DiskPressure)': 1, 'in-place update': 1,
                        'machine failed or terminating': 1}
    # A lease without a Node ('ghost') and leases of excluded nodes do not count: 2 of 3 candidates expired.
    items = [lease('a', 60), lease('b', 60), lease('e', 1), lease('c', 60), lease('d', 60), lease('ghost', 60)]
    v = leases.evaluate_leases(items, names, NOW, EXPIRY, 0.6, excluded)
    assert (v.verdict, v.candidates, v.expired) == (leases.FAILED, 3, 2)
    assert v.expired_names == ('a', 'b')
    assert v.as_dict()['excludedNodes']['unhealthy (DiskPressure)'] == 1
    assert '2 of 3 node leases expired (0.67 >= 0.60)' == v.reason


# --- crossing_at: when the leases of a healthy probe would make a probe fail, none renewed -----------------------
CROSSING_AGES = [1.0, 5.5, 12.25, 18.0, 20.0, 20.0, 25.0, 29.5, 40.0, 100.0]   # seconds since renewal at NOW


def crossing_verdict(ages, fraction, renew_texts=None):
    names = {'n%d' % i for i in range(len(ages))}
    items = [lease('n%d' % i, age) for i, age in enumerate(ages)]
    for i, text in (renew_texts or {}).items():
        items[i]['spec']['renewTime'] = text
    return names, items, leases.evaluate_leases(items, names, NOW, EXPIRY, fraction)


@pytest.mark.parametrize('fraction', [0.1, 0.2, 0.25, 0.3, 0.5, 0.6, 0.8, 0.9, 1.0])
def test_crossing_at_is_the_first_instant_a_probe_fails_with_no_lease_renewed(fraction):
    names, items, verdict = crossing_verdict(CROSSING_AGES, fraction)
    crossing = verdict.crossing_at()
    if verdict.verdict != leases.HEALTHY:
        assert crossing is None
        return
    assert crossing is not None and crossing > NOW
    # the same leases judged a microsecond before the crossing pass, at it they fail: the engine's own rules
    assert leases.evaluate_leases(items, names, crossing - 1e-6, EXPIRY, fraction).verdict == leases.HEALTHY
    assert leases.evaluate_leases(items, names, crossing, EXPIRY, fraction).verdict == leases.FAILED


def test_crossing_at_for_the_default_fraction():
    # 2 of 10 expired (40 s, 100 s); 0.6 needs 6: the 4th pending lease to expire is one of the two renewed 20 s ago
    _names, _items, verdict = crossing_verdict(CROSSING_AGES, 0.6)
    assert verdict.verdict == leases.HEALTHY
    assert verdict.crossing_at() == pytest.approx(NOW + 10.0, abs=1e-5)


def test_no_crossing_without_enough_pending_leases_or_candidates_or_once_failed():
    # 1 candidate: skipped; all expired: failed; threshold above 1: never reached
    assert crossing_verdict([5.0], 0.6)[2].crossing_at() is None
    assert crossing_verdict([40.0, 50.0], 0.6)[2].crossing_at() is None
    assert crossing_verdict([1.0, 2.0], 1.5)[2].crossing_at() is None


def test_crossing_at_reads_other_time_formats_like_the_verdict():
    # the lease needed is written with an offset instead of Z (the parsed path): same instant
    _names, _items, verdict = crossing_verdict([1.0, 40.0, 10.0], 0.6, {2: '2027-01-15T09:59:50.000000+02:00'})
    assert verdict.verdict == leases.HEALTHY
    assert verdict.crossing_at() == pytest.approx(leases.parse_micro('2027-01-15T07:59:50Z') + EXPIRY, abs=1e-5)


# --- the tight pass over usual Nodes decides as the checked one ----------------------------------------------------
def random_nodes(rng, count, odd_rate):
    kinds = ['Ready', 'MemoryPressure', 'DiskPressure', 'PIDPressure', 'KernelDeadlock', 'NetworkUnavailable',
             'ReadonlyFilesystem', 'InPlaceUpdate']
    nodes = []
    for i in range(count):
        conditions = []
        for kind in rng.sample(kinds, rng.randint(0, 5)):
            cond = {'type': kind, 'status': rng.choice(['True', 'False', 'Unknown'])}
            if kind == 'InPlaceUpdate':
                cond['reason'] = rng.choice(['ReadyForUpdate', 'UpdateFailed', 'UpdateSuccessful'])
            conditions.append(cond)
        annotations = rng.choice([{}, None, {'x': ''}, {'node.machine.sapcloud.io/not-managed-by-mcm': ''}])
        item = {'metadata': {'name': rng.choice(['n%d' % i, 'n%d' % i, '']), 'annotations': annotations},
                'status': {'conditions': conditions}}
        odd = rng.random() / odd_rate if odd_rate else 1.0
        if odd < 0.25:
            del item['status']['conditions']          # read as no conditions
        elif odd < 0.5:
            item['status']['conditions'] = None
        elif odd < 0.75 and conditions:
            del conditions[0]['status']                 # a condition without status: not 'True'
        elif odd < 1.0:
            del item['metadata']['name']                # nameless: left out
        nodes.append(item)
    return nodes


@pytest.mark.parametrize('seed', range(40))
def test_candidate_nodes_the_usual_pass_agrees_with_the_checked_one(seed):
    rng = random.Random(seed)
    odd_rate = 0.0 if seed % 2 else 0.08   # odd seeds: only usual Nodes, so the tight pass decides alone
    nodes = random_nodes(rng, rng.randint(0, 60), odd_rate)
    machines = [{'metadata': {'labels': {'node': 'n%d' % rng.randint(0, 60)}},
                 'status': {'currentStatus': {'phase': rng.choice(['Running', 'Failed', 'Terminating'])}}}
                for _machine in range(rng.randint(0, 5))]
    gone = leases.gone_machine_nodes(machines)
    unhealthy = leases.c.DEFAULT_UNHEALTHY_NODE_CONDITIONS
    watched = frozenset(unhealthy) | {'InPlaceUpdate'}
    expected_names, expected_excluded = leases._candidates_checked(nodes, gone, unhealthy, watched)
    names, excluded = leases.candidate_nodes(iter(nodes), machines)
    assert names == expected_names
    assert list(excluded.items()) == list(expected_excluded.items())   # the same counts in the same order
    if not odd_rate:
        names, excluded = leases._candidates_usual(nodes, gone, unhealthy, watched)
        assert (names, list(excluded.items())) == (expected_names, list(expected_excluded.items()))
