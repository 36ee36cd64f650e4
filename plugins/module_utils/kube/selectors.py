# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""metav1.LabelSelector (`matchLabels` + `matchExpressions`) as the API server reads it: the one home of
its validation (the rules of `metav1.LabelSelectorAsSelector`), its string form for `?labelSelector=`
(both ways: label_selector_string, parse_label_selector) and its matching against a set of labels
(selector_matches; labels_match for the string form)."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, field_of, shown
from ansible_collections.steward.cluster.plugins.module_utils.common.names import label_value, qualified_name

OPERATORS = ('In', 'NotIn', 'Exists', 'DoesNotExist')
_SET_TERM = re.compile(r'^([^\s!=,()]+)\s+(in|notin)\s+\(([^)]*)\)$')
_WITH_VALUES = ('In', 'NotIn')


def validate_label_selector(selector: Any, field: str) -> Dict[str, Any]:
    """A LabelSelector checked as the API server checks it; returns a normalised copy
    ({'matchLabels': {...}, 'matchExpressions': [...]}, both always present).

    In/NotIn need at least one value, Exists/DoesNotExist none; keys are qualified names, values label values.
    An empty selector ({}) selects everything, as in Kubernetes."""
    if selector is None:
        selector = {}
    if not isinstance(selector, Mapping):
        raise InvalidInput(field, 'mapping', 'expected a label selector (matchLabels, matchExpressions), got %s'
                           % shown(selector), selector)
    unknown = sorted(set(selector) - {'matchLabels', 'matchExpressions'})
    if unknown:
        raise InvalidInput(field_of(field, unknown[0]), 'unknown-field',
                           'a label selector has only matchLabels and matchExpressions', unknown[0])
    labels = selector.get('matchLabels') or {}
    if not isinstance(labels, Mapping):
        raise InvalidInput(field_of(field, 'matchLabels'), 'mapping', 'expected a mapping of label keys to values, got %s'
                           % shown(labels), labels)
    match_labels = {}
    for key, value in labels.items():
        where = field_of(field_of(field, 'matchLabels'), key)
        match_labels[qualified_name(key, where)] = label_value(value, where)
    expressions = selector.get('matchExpressions') or []
    if not isinstance(expressions, list):
        raise InvalidInput(field_of(field, 'matchExpressions'), 'list', 'expected a list of expressions, got %s'
                           % shown(expressions), expressions)
    match_expressions: List[Dict[str, Any]] = []
    for index, expr in enumerate(expressions):
        where = field_of(field_of(field, 'matchExpressions'), index)
        match_expressions.append(_expression(expr, where))
    return {'matchLabels': match_labels, 'matchExpressions': match_expressions}


def _expression(expr: Any, where: str) -> Dict[str, Any]:
    if not isinstance(expr, Mapping):
        raise InvalidInput(where, 'mapping', 'expected {key, operator, values}, got %s' % shown(expr), expr)
    key = qualified_name(expr.get('key'), field_of(where, 'key'))
    operator = expr.get('operator')
    if operator not in OPERATORS:
        raise InvalidInput(field_of(where, 'operator'), 'choice', 'must be one of %s, got %s'
                           % (', '.join(OPERATORS), shown(operator)), operator)
    values = expr.get('values') or []
    if not isinstance(values, list):
        raise InvalidInput(field_of(where, 'values'), 'list', 'expected a list of values, got %s' % shown(values), values)
    if operator in _WITH_VALUES and not values:
        raise InvalidInput(field_of(where, 'values'), 'non-empty', 'must be non-empty for operator %s' % operator, values)
    if operator not in _WITH_VALUES and values:
        raise InvalidInput(field_of(where, 'values'), 'empty', 'must be empty for operator %s' % operator, values)
    clean = [label_value(v, field_of(field_of(where, 'values'), i)) for i, v in enumerate(values)]
    return {'key': key, 'operator': operator, 'values': clean}


def label_selector_string(selector: Mapping[str, Any]) -> str:
    """The `?labelSelector=` form of a validated selector (`a=b,k in (x,y),k notin (z),k,!k`); '' selects all."""
    terms = ['%s=%s' % (k, v) for k, v in sorted((selector.get('matchLabels') or {}).items())]
    for expr in selector.get('matchExpressions') or []:
        key, operator, values = expr['key'], expr['operator'], expr.get('values') or []
        if operator == 'In':
            terms.append('%s in (%s)' % (key, ','.join(sorted(values))))
        elif operator == 'NotIn':
            terms.append('%s notin (%s)' % (key, ','.join(sorted(values))))
        elif operator == 'Exists':
            terms.append(key)
        else:
            terms.append('!' + key)
    return ','.join(terms)


def selector_matches(selector: Optional[Mapping[str, Any]], labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector (matchLabels + matchExpressions) against labels; None matches nothing, {} all."""
    if selector is None:
        return False
    for key, value in (selector.get('matchLabels') or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get('matchExpressions') or []:
        key, operator, values = expr.get('key'), expr.get('operator'), expr.get('values') or []
        if operator == 'In' and labels.get(key) not in values:
            return False
        if operator == 'NotIn' and key in labels and labels[key] in values:
            return False
        if operator == 'Exists' and key not in labels:
            return False
        if operator == 'DoesNotExist' and key in labels:
            return False
        if operator not in OPERATORS:
            return False
    return True


def parse_label_selector(text: str, field: str = 'labelSelector') -> Dict[str, Any]:
    """The `?labelSelector=` string form as a validated LabelSelector (the inverse of label_selector_string):
    `a=b`, `a==b` (In), `a!=b` (NotIn: a missing key matches too), `a in (x,y)`, `a notin (x,y)`, `a`
    (Exists), `!a` (DoesNotExist); terms joined by commas must all hold, '' selects everything."""
    expressions: List[Dict[str, Any]] = []
    if (text or '').strip() and any(not t.strip() for t in _selector_terms(text, keep_empty=True)):
        raise InvalidInput(field, 'label-selector', 'an empty term between commas in %r (the API server refuses it)'
                           % (text,), text)
    for term in _selector_terms(text or ''):
        match = _SET_TERM.match(term)
        if match:
            values = [v.strip() for v in match.group(3).split(',') if v.strip()]
            expressions.append({'key': match.group(1), 'operator': 'In' if match.group(2) == 'in' else 'NotIn',
                                'values': values})
        elif '!=' in term:
            key, value = [p.strip() for p in term.split('!=', 1)]
            expressions.append({'key': key, 'operator': 'NotIn', 'values': [value]})
        elif '=' in term:
            key, value = [p.strip() for p in term.replace('==', '=', 1).split('=', 1)]
            expressions.append({'key': key, 'operator': 'In', 'values': [value]})
        elif term.startswith('!'):
            expressions.append({'key': term[1:].strip(), 'operator': 'DoesNotExist'})
        else:
            expressions.append({'key': term, 'operator': 'Exists'})
    return validate_label_selector({'matchExpressions': expressions}, field)


def labels_match(labels: Mapping[str, str], selector: str) -> bool:
    """Whether `labels` match the string form of a selector (see parse_label_selector)."""
    return selector_matches(parse_label_selector(selector), labels)


def _selector_terms(selector: str, keep_empty: bool = False) -> List[str]:
    """Split on commas outside parentheses (`a in (x,y),b=c` is two terms)."""
    terms, depth, current = [], 0, ''
    for char in selector:
        depth += char == '('
        depth -= char == ')'
        if char == ',' and depth == 0:
            terms.append(current)
            current = ''
        else:
            current += char
    terms.append(current)
    return [t.strip() for t in terms if keep_empty or t.strip()]
