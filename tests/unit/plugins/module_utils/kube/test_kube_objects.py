"""kube/objects.merge_patch is RFC 7386 (its appendix A examples) where the object has the mapping, takes the patch
whole where it has none, and changes neither argument."""

import copy

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.objects import merge_patch


@pytest.mark.parametrize('target, patch, result', [
    ({'a': 'b'}, {'a': 'c'}, {'a': 'c'}),
    ({'a': 'b'}, {'b': 'c'}, {'a': 'b', 'b': 'c'}),
    ({'a': 'b'}, {'a': None}, {}),
    ({'a': 'b', 'b': 'c'}, {'a': None}, {'b': 'c'}),
    ({'a': ['b']}, {'a': 'c'}, {'a': 'c'}),
    ({'a': 'c'}, {'a': ['b']}, {'a': ['b']}),
    ({'a': {'b': 'c'}}, {'a': {'b': 'd', 'c': None}}, {'a': {'b': 'd'}}),
    ({'a': [{'b': 'c'}]}, {'a': [1]}, {'a': [1]}),
    (['a', 'b'], ['c', 'd'], ['c', 'd']),
    ({'a': 'b'}, ['c'], ['c']),
    ({'a': 'foo'}, None, None),
    ({'a': 'foo'}, 'bar', 'bar'),
    ({'e': None}, {'a': 1}, {'e': None, 'a': 1}),
])
def test_rfc7386_appendix_a(target, patch, result):
    before_target, before_patch = copy.deepcopy(target), copy.deepcopy(patch)
    assert merge_patch(target, patch) == result
    assert (target, patch) == (before_target, before_patch)


def test_result_shares_nothing_mutable_with_the_patch():
    patch = {'status': {'conditions': [{'type': 'Ready'}]}}
    merged = merge_patch({}, patch)
    merged['status']['conditions'].append({'type': 'Other'})
    assert patch == {'status': {'conditions': [{'type': 'Ready'}]}}


def test_where_the_base_has_no_mapping_the_patch_is_taken_whole():
    """The one difference from the RFC (which would drop the None values here), kept as the two copies had it."""
    patch = {'status': {'lastOperation': {'step': None, 'state': 'Processing'}}}
    assert merge_patch(None, patch) == patch
    assert merge_patch({'spec': {}}, patch) == {'spec': {}, **patch}
    assert merge_patch({'status': {}}, patch) == {'status': {'lastOperation': {'step': None, 'state': 'Processing'}}}
    assert merge_patch({'status': {'lastOperation': {}}}, patch) == {'status': {'lastOperation': {'state': 'Processing'}}}
