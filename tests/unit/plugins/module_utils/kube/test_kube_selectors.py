"""metav1.LabelSelector: validation as the API server, the ?labelSelector= form, matching."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.kube.selectors import (
    label_selector_string, labels_match, parse_label_selector, selector_matches, validate_label_selector)

SELECTOR = {'matchLabels': {'app': 'kcm'}, 'matchExpressions': [
    {'key': 'role', 'operator': 'In', 'values': ['b', 'a']}, {'key': 'tier', 'operator': 'NotIn', 'values': ['x']},
    {'key': 'ready', 'operator': 'Exists'}, {'key': 'gone', 'operator': 'DoesNotExist'}]}


def test_string_form_agrees_with_matching():
    clean = validate_label_selector(SELECTOR, 's')
    query = label_selector_string(clean)
    assert query == 'app=kcm,role in (a,b),tier notin (x),ready,!gone'
    assert selector_matches(parse_label_selector(query), {'app': 'kcm', 'role': 'a', 'ready': ''})
    for labels in ({'app': 'kcm', 'role': 'a', 'ready': ''}, {'app': 'kcm', 'role': 'c', 'ready': ''},
                   {'app': 'kcm', 'role': 'a', 'ready': '', 'gone': '1'}, {'app': 'kcm', 'role': 'b', 'tier': 'x', 'ready': ''},
                   {'role': 'a', 'ready': ''}):
        assert selector_matches(clean, labels) == labels_match(labels, query), labels


def test_empty_selects_everything_none_nothing():
    assert label_selector_string(validate_label_selector({}, 's')) == ''
    assert selector_matches({}, {'a': 'b'}) and not selector_matches(None, {'a': 'b'})


@pytest.mark.parametrize('selector, field, rule', [
    ('app=kcm', 's', 'mapping'),
    ({'matchLabels': ['a']}, 's.matchLabels', 'mapping'),
    ({'matchLabels': {'a': 'b c'}}, 's.matchLabels.a', 'label-value'),
    ({'matchExpressions': {'key': 'a'}}, 's.matchExpressions', 'list'),
    ({'matchExpressions': [{'key': 'a', 'operator': 'NotIn', 'values': []}]}, 's.matchExpressions[0].values', 'non-empty'),
    ({'matchExpressions': [{'key': '', 'operator': 'Exists'}]}, 's.matchExpressions[0].key', 'qualified-name'),
])
def test_refusals_name_the_field(selector, field, rule):
    with pytest.raises(InvalidInput) as info:
        validate_label_selector(selector, 's')
    assert (info.value.field, info.value.rule) == (field, rule)


@pytest.mark.parametrize('selector, expected', [
    ('a=1', True), ('a==1', True), ('a=2', False), ('a!=2', True), ('a!=1', False), ('b', True), ('!b', False),
    ('c', False), ('!c', True), ('a=1,b', True), ('a=1,c', False), ('', True),
    ('a in (1,2)', True), ('a in (2,3)', False), ('a notin (2,3)', True), ('a notin (1)', False),
    ('c notin (1)', True), ('c in (1)', False), ('a in (1, 2),b', True), ('a in (2),b', False),
])
def test_labels_match(selector, expected):
    assert labels_match({'a': '1', 'b': ''}, selector) is expected


@pytest.mark.parametrize('text, field, rule', [
    ('a in (x', 'labelSelector.matchExpressions[0].key', 'qualified-name'),
    ('a in ()', 'labelSelector.matchExpressions[0].values', 'non-empty'),
    ('a=b c', 'labelSelector.matchExpressions[0].values[0]', 'label-value'),
    ('bad key=1', 'labelSelector.matchExpressions[0].key', 'qualified-name'),
])
def test_malformed_string_selectors_are_refused(text, field, rule):
    with pytest.raises(InvalidInput) as info:
        parse_label_selector(text)
    assert (info.value.field, info.value.rule) == (field, rule)
