# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check-chain parser (precedence, parentheses, error columns) and the && lists of trigger/notify chains."""

from __future__ import annotations

import itertools

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.chain import (
    ChainSyntaxError, evaluate, names, parse_and_list, parse_check_chain, unparse)


@pytest.mark.parametrize('text, tree', [
    ('a', 'a'),
    ('!a', '!a'),
    ('!!a', '!!a'),
    ('a && b', '(a && b)'),
    ('a || b', '(a || b)'),
    ('a || b && c', '(a || (b && c))'),          # && binds tighter than ||
    ('a && b || c', '((a && b) || c)'),
    ('!a && b', '(!a && b)'),                    # ! binds tighter than &&
    ('!(a && b)', '!(a && b)'),
    ('a && b && c', '((a && b) && c)'),          # left-associative
    ('a || b || c', '((a || b) || c)'),
    ('(a || b) && c', '((a || b) && c)'),
    ('transition && !(a || b)', '(transition && !(a || b))'),   # the seed's example
    ('  reboot-ok&&x.y  ', '(reboot-ok && x.y)'),               # names with - and ., no spaces needed
    ('((a))', 'a'),
])
def test_precedence_and_parentheses(text, tree):
    assert unparse(parse_check_chain(text)) == tree


@pytest.mark.parametrize('text', [None, '', '   '])
def test_empty_chain_has_no_expression_and_passes(text):
    expr = parse_check_chain(text)
    assert expr is None
    assert evaluate(expr, {}) is True


@pytest.mark.parametrize('text, message, column', [
    ('a && b)', 'unexpected ")" at column 7', 7),
    ('(a && b', 'unexpected end of expression at column 8 (expected ")" to close "(" at column 1)', 8),
    ('a &&', 'unexpected end of expression at column 5', 5),
    ('&& a', 'unexpected "&&" at column 1', 1),
    ('a b', 'unexpected "b" at column 3', 3),
    ('a & b', 'single "&" at column 3', 3),
    ('a | b', 'single "|" at column 3', 3),
    ('()', 'unexpected ")" at column 2', 2),
    ('!', 'unexpected end of expression at column 2', 2),
    ('a || (b && !)', 'unexpected ")" at column 13', 13),
])
def test_syntax_errors_name_the_column(text, message, column):
    with pytest.raises(ChainSyntaxError) as err:
        parse_check_chain(text)
    assert message in str(err.value)
    assert err.value.column == column


def test_evaluation_matches_python_boolean_semantics_for_every_assignment():
    expr = parse_check_chain('a || !b && (c || !a)')
    for a, b, c in itertools.product([False, True], repeat=3):
        assert evaluate(expr, {'a': a, 'b': b, 'c': c}) == (a or ((not b) and (c or not a)))


def test_names_are_listed_with_columns():
    assert [(n.name, n.column) for n in names(parse_check_chain('x && !(y || x)'))] == [('x', 1), ('y', 8), ('x', 13)]


@pytest.mark.parametrize('text, items', [
    (None, []),
    ('', []),
    ('a', [('a', 1)]),
    ('remove_approval && reboot-ok', [('remove_approval', 1), ('reboot-ok', 20)]),
    ('g&&h', [('g', 1), ('h', 4)]),
])
def test_and_lists(text, items):
    assert parse_and_list(text) == items


@pytest.mark.parametrize('text, message', [
    ('a && ', 'empty instance name at column 5'),
    ('a || b', 'unexpected "|" at column 3'),
    ('a && !b', 'unexpected "!" at column 6'),
])
def test_and_list_errors(text, message):
    with pytest.raises(ChainSyntaxError) as err:
        parse_and_list(text)
    assert message in str(err.value)
