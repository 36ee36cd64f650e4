"""metav1.LabelSelector: validation as the API server, the ?labelSelector= form, matching."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import labels_match
from ansible_collections.steward.cluster.plugins.module_utils.kube.selectors import (
    label_selector_string, selector_matches, validate_label_selector)

SELECTOR = {'matchLabels': {'app': 'kcm'}, 'matchExpressions': [
    {'key': 'role', 'operator': 'In', 'values': ['b', 'a']}, {'key': 'tier', 'operator': 'NotIn', 'values': ['x']},
    {'key': 'ready', 'operator': 'Exists'}, {'key': 'gone', 'operator': 'DoesNotExist'}]}


def test_string_form_agrees_with_matching():
    clean = validate_label_selector(SELECTOR, 's')
    query = label_selector_string(clean)
    assert query == 'app=kcm,role in (a,b),tier notin (x),ready,!gone'
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
