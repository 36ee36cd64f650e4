"""common/golang.parse_bool is Go's strconv.ParseBool: exactly its words, None where Go returns an error."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.golang import parse_bool


@pytest.mark.parametrize('word', ['1', 't', 'T', 'TRUE', 'true', 'True'])
def test_true_words(word):
    assert parse_bool(word) is True


@pytest.mark.parametrize('word', ['0', 'f', 'F', 'FALSE', 'false', 'False'])
def test_false_words(word):
    assert parse_bool(word) is False


@pytest.mark.parametrize('word', ['', 'yes', 'on', 'tRUE', ' true', 'true ', '2', None, True, 1])
def test_anything_else_is_go_s_error(word):
    assert parse_bool(word) is None
