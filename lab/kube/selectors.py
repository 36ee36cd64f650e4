"""Label and field selectors as the Kubernetes API server parses and matches them, for the lab's emulator.

A port of k8s.io/apimachinery/pkg/labels/selector.go (lexer, parser, Requirement.Matches) and of
metav1.LabelSelectorAsSelector, plus fields.ParseSelector. It is deliberately separate from the engine's
selector code in plugins/module_utils: a test double that shares the code under test cannot catch its bugs
(issue 13 §5), so the two are written independently and tested against the same API server behaviour.

    parse_label_selector('app in (web,api), tier!=db, !legacy')  -> LabelSelector (or SelectorError)
    label_selector_from_spec({'matchLabels': {...}, 'matchExpressions': [...]})
    parse_field_selector('metadata.name=x,spec.nodeName!=')

A SelectorError carries the API server's message; the emulator answers it as 400 BadRequest on lists and
watches, and as 422 Invalid for a bad `spec.selector` in a written object.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

# --- the label rules the parser validates with (validation.IsQualifiedName / IsValidLabelValue) ---------------
_DNS_SUBDOMAIN = re.compile(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')
_QUALIFIED_NAME = re.compile(r'^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$')
_LABEL_VALUE = re.compile(r'^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$')
QUALIFIED_NAME_HELP = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                       "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                       "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
LABEL_VALUE_HELP = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
                    "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")


class SelectorError(ValueError):
    """A selector the API server would refuse; str() is the API server's message."""


def qualified_name_errors(key: str) -> List[str]:
    """validation.IsQualifiedName: [prefix/]name, prefix a DNS subdomain of <= 253, name <= 63."""
    parts = key.split('/')
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return ['prefix part must be non-empty']
        if len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix):
            return ['prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '
                    "'-' or '.', and must start and end with an alphanumeric character"]
    else:
        return ["a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                "with an alphanumeric character with an optional DNS subdomain prefix and '/' (e.g. "
                "'example.com/MyName')"]
    if not name:
        return ['name part must be non-empty']
    errors = []
    if len(name) > 63:
        errors.append('name part must be no more than 63 bytes')
    if not _QUALIFIED_NAME.match(name):
        errors.append(QUALIFIED_NAME_HELP)
    return errors


def label_value_errors(value: str) -> List[str]:
    """validation.IsValidLabelValue."""
    errors = []
    if len(value) > 63:
        errors.append('must be no more than 63 bytes')
    if not _LABEL_VALUE.match(value):
        errors.append(LABEL_VALUE_HELP)
    return errors


# --- requirements ------------------------------------------------------------------------------------------------
IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS = 'in', 'notin', '=', '==', '!='
EXISTS, DOES_NOT_EXIST, GREATER_THAN, LESS_THAN = 'exists', '!', 'gt', 'lt'


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: Tuple[str, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Requirement.Matches: absent keys satisfy `!=`/`notin`/`!key` and nothing else."""
        present = self.key in labels
        if self.operator in (IN, EQUALS, DOUBLE_EQUALS):
            return present and labels[self.key] in self.values
        if self.operator in (NOT_IN, NOT_EQUALS):
            return not present or labels[self.key] not in self.values
        if self.operator == EXISTS:
            return present
        if self.operator == DOES_NOT_EXIST:
            return not present
        if not present:  # gt / lt
            return False
        try:
            actual = int(labels[self.key])
        except ValueError:
            return False
        wanted = int(self.values[0])
        return actual > wanted if self.operator == GREATER_THAN else actual < wanted


def new_requirement(key: str, operator: str, values: Sequence[str], path: str = 'key') -> Requirement:
    """labels.NewRequirement: the key and every value checked, the value count checked per operator."""
    errors = qualified_name_errors(key)
    if errors:
        raise SelectorError('%s: Invalid value: "%s": %s' % (path, key, '; '.join(errors)))
    if operator in (IN, NOT_IN) and not values:
        raise SelectorError("values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty")
    if operator in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS) and len(values) != 1:
        raise SelectorError('values: Invalid value: %s: exact-match compatibility requires one single value'
                            % list(values))
    if operator in (EXISTS, DOES_NOT_EXIST) and values:
        raise SelectorError('values: Invalid value: %s: values set must be empty for exists and does not exist'
                            % list(values))
    if operator in (GREATER_THAN, LESS_THAN):
        if len(values) != 1:
            raise SelectorError("values: Invalid value: %s: for 'Gt', 'Lt' operators, exactly one value is required"
                                % list(values))
        if not re.match(r'^[+-]?[0-9]+$', values[0]):
            raise SelectorError("values[0]: Invalid value: \"%s\": for 'Gt', 'Lt' operators, the value must be an "
                                'integer' % values[0])
    for i, value in enumerate(values):
        errors = label_value_errors(value)
        if errors:
            raise SelectorError('values[%d][%s]: Invalid value: "%s": %s' % (i, key, value, '; '.join(errors)))
    return Requirement(key, operator, tuple(sorted(set(values))))


@dataclass(frozen=True)
class LabelSelector:
    """A parsed selector: every requirement must hold. `nothing` is the nil metav1.LabelSelector."""
    requirements: Tuple[Requirement, ...] = ()
    nothing: bool = False

    def matches(self, labels: Optional[Mapping[str, str]]) -> bool:
        if self.nothing:
            return False
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def __str__(self) -> str:
        """The selector in its string form (what a Scale's status.selector carries)."""
        out = []
        for r in sorted(self.requirements, key=lambda r: r.key):
            if r.operator == EXISTS:
                out.append(r.key)
            elif r.operator == DOES_NOT_EXIST:
                out.append('!' + r.key)
            elif r.operator in (IN, NOT_IN):
                out.append('%s %s (%s)' % (r.key, r.operator, ','.join(r.values)))
            elif r.operator in (GREATER_THAN, LESS_THAN):
                out.append('%s%s%s' % (r.key, '>' if r.operator == GREATER_THAN else '<', r.values[0]))
            else:
                out.append('%s%s%s' % (r.key, '!=' if r.operator == NOT_EQUALS else '=', r.values[0]))
        return ','.join(out)


EVERYTHING = LabelSelector()
NOTHING = LabelSelector(nothing=True)

# --- lexer (selector.go: Lexer.Lex) ------------------------------------------------------------------------------
_ERROR, _EOS, _CLOSE, _COMMA, _NOT, _DOUBLE_EQ, _EQ, _GT, _ID, _IN, _LT, _NEQ, _NOTIN, _OPEN = range(14)
_TOKENS = {')': _CLOSE, ',': _COMMA, '!': _NOT, '==': _DOUBLE_EQ, '=': _EQ, '>': _GT, 'in': _IN, '<': _LT,
           '!=': _NEQ, 'notin': _NOTIN, '(': _OPEN}
_SPECIAL = set('=!(),><')
_WHITESPACE = set(' \t\r\n')


def _lex(text: str) -> List[Tuple[int, str]]:
    tokens: List[Tuple[int, str]] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= len(text):
            tokens.append((_EOS, ''))
            return tokens
        if text[pos] in _SPECIAL:
            buffer, token = '', None
            while pos < len(text) and text[pos] in _SPECIAL and (buffer + text[pos]) in _TOKENS:
                buffer += text[pos]
                token = _TOKENS[buffer]
                pos += 1
            if token is None:
                tokens.append((_ERROR, "error expected: keyword found '%s'" % text[pos]))
                tokens.append((_EOS, ''))
                return tokens
            tokens.append((token, buffer))
            continue
        start = pos
        while pos < len(text) and text[pos] not in _SPECIAL and text[pos] not in _WHITESPACE:
            pos += 1
        word = text[start:pos]
        tokens.append((_TOKENS.get(word, _ID) if word in ('in', 'notin') else _ID, word))


# --- parser (selector.go: Parser) --------------------------------------------------------------------------------
class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _lex(text)
        self.pos = 0

    def _token(self, values: bool, advance: bool) -> Tuple[int, str]:
        token, literal = self.tokens[min(self.pos, len(self.tokens) - 1)]
        if advance:
            self.pos += 1
        if values and token in (_IN, _NOTIN):  # in a value (or key) position `in`/`notin` are plain words
            token = _ID
        return token, literal

    def lookahead(self, values: bool = True) -> Tuple[int, str]:
        return self._token(values, False)

    def consume(self, values: bool = True) -> Tuple[int, str]:
        return self._token(values, True)

    def parse(self) -> List[Requirement]:
        requirements: List[Requirement] = []
        while True:
            token, literal = self.lookahead()
            if token in (_ID, _NOT):
                try:
                    requirements.append(self.requirement())
                except SelectorError as exc:
                    raise SelectorError('unable to parse requirement: %s' % exc)
                token, literal = self.consume()
                if token == _EOS:
                    return requirements
                if token != _COMMA:
                    raise SelectorError("found '%s', expected: ',' or 'end of string'" % literal)
                token, literal = self.lookahead()
                if token not in (_ID, _NOT):
                    raise SelectorError("found '%s', expected: identifier after ','" % literal)
            elif token == _EOS:
                return requirements
            else:
                raise SelectorError("found '%s', expected: !, identifier, or 'end of string'" % literal)

    def requirement(self) -> Requirement:
        operator = ''
        token, literal = self.consume()
        if token == _NOT:
            operator = DOES_NOT_EXIST
            token, literal = self.consume()
        if token != _ID:
            raise SelectorError("found '%s', expected: identifier" % literal)
        key = literal
        errors = qualified_name_errors(key)
        if errors:
            raise SelectorError('key: Invalid value: "%s": %s' % (key, '; '.join(errors)))
        if self.lookahead()[0] in (_EOS, _COMMA) and operator != DOES_NOT_EXIST:
            operator = EXISTS
        if operator in (EXISTS, DOES_NOT_EXIST):
            return new_requirement(key, operator, [])
        token, literal = self.consume(values=False)
        operators = {_IN: IN, _EQ: EQUALS, _DOUBLE_EQ: DOUBLE_EQUALS, _GT: GREATER_THAN, _LT: LESS_THAN,
                     _NOTIN: NOT_IN, _NEQ: NOT_EQUALS}
        if token not in operators:
            binary = ['in', 'notin', '=', '==', '!=', 'gt', 'lt']
            raise SelectorError("found '%s', expected: %s" % (literal, ', '.join(
                binary if not literal else binary + ['exists', '!'])))
        operator = operators[token]
        values = self.values() if operator in (IN, NOT_IN) else self.exact_value()
        return new_requirement(key, operator, values)

    def values(self) -> List[str]:
        token, literal = self.consume()
        if token != _OPEN:
            raise SelectorError("found '%s' expected: '('" % literal)
        token, literal = self.lookahead()
        if token == _CLOSE:  # `in ()` is the set {""}
            self.consume()
            return ['']
        if token not in (_ID, _COMMA):
            raise SelectorError("found '%s', expected: ',', ')' or identifier" % literal)
        found = self.identifiers()
        token, literal = self.consume()
        if token != _CLOSE:
            raise SelectorError("found '%s', expected: ')'" % literal)
        return found

    def identifiers(self) -> List[str]:
        found: List[str] = []
        while True:
            token, literal = self.consume()
            if token == _ID:
                found.append(literal)
                token, literal = self.lookahead()
                if token == _COMMA:
                    continue
                if token == _CLOSE:
                    return found
                raise SelectorError("found '%s', expected: ',' or ')'" % literal)
            if token == _COMMA:  # `(,a)`, `(a,)`, `(a,,b)`: the empty value is a member
                if not found:
                    found.append('')
                token, _value = self.lookahead()
                if token == _CLOSE:
                    found.append('')
                    return found
                if token == _COMMA:
                    self.consume()
                    found.append('')
                continue
            raise SelectorError("found '%s', expected: ',', or identifier" % literal)

    def exact_value(self) -> List[str]:
        token, _value = self.lookahead()
        if token in (_EOS, _COMMA):  # `a=` selects the empty value
            return ['']
        token, literal = self.consume()
        if token == _ID:
            return [literal]
        raise SelectorError("found '%s', expected: identifier" % literal)


def parse_label_selector(text: Optional[str]) -> LabelSelector:
    """labels.Parse: the `labelSelector` query parameter. '' and None select everything."""
    if not text:
        return EVERYTHING
    return LabelSelector(tuple(_Parser(text).parse()))


_SPEC_OPERATORS = {'In': IN, 'NotIn': NOT_IN, 'Exists': EXISTS, 'DoesNotExist': DOES_NOT_EXIST}


def label_selector_from_spec(spec: Any, path: str = 'selector') -> LabelSelector:
    """metav1.LabelSelectorAsSelector plus ValidateLabelSelector: None selects nothing, {} everything."""
    if spec is None:
        return NOTHING
    if not isinstance(spec, dict):
        raise SelectorError('%s: Invalid value: %r: must be a label selector object' % (path, spec))
    requirements = []
    match_labels = spec.get('matchLabels') or {}
    if not isinstance(match_labels, dict):
        raise SelectorError('%s.matchLabels: Invalid value: %r: must be a map of strings' % (path, match_labels))
    for key, value in sorted(match_labels.items()):
        requirements.append(new_requirement(key, EQUALS, [str(value)], '%s.matchLabels' % path))
    for i, expr in enumerate(spec.get('matchExpressions') or []):
        where = '%s.matchExpressions[%d]' % (path, i)
        if not isinstance(expr, dict):
            raise SelectorError('%s: Invalid value: %r: must be an object' % (where, expr))
        operator = _SPEC_OPERATORS.get(expr.get('operator'))
        if operator is None:
            raise SelectorError('%s.operator: Invalid value: "%s": not a valid selector operator'
                                % (where, expr.get('operator')))
        values = expr.get('values') or []
        if operator in (IN, NOT_IN) and not values:
            raise SelectorError('%s.values: Required value: must be specified when `operator` is \'In\' or '
                                '\'NotIn\'' % where)
        if operator in (EXISTS, DOES_NOT_EXIST) and values:
            raise SelectorError('%s.values: Forbidden: may not be specified when `operator` is \'Exists\' or '
                                '\'DoesNotExist\'' % where)
        requirements.append(new_requirement(str(expr.get('key')), operator, [str(v) for v in values],
                                            '%s.key' % where))
    return LabelSelector(tuple(requirements))


def selector_string(spec: Any) -> str:
    """A spec selector as a labelSelector string: a metav1.LabelSelector, or a ReplicationController's map."""
    if isinstance(spec, dict) and not ({'matchLabels', 'matchExpressions'} & set(spec)) and spec:
        spec = {'matchLabels': spec}
    return str(label_selector_from_spec(spec)) if spec is not None else ''


# --- field selectors (fields.ParseSelector; only =, ==, !=) -----------------------------------------------------
FieldGetter = Callable[[Dict[str, Any]], str]


def _path(*keys: str) -> FieldGetter:
    def get(obj: Dict[str, Any]) -> str:
        value: Any = obj
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, bool):
            return 'true' if value else 'false'
        return '' if value is None else str(value)
    return get


COMMON_FIELDS: Dict[str, FieldGetter] = {'metadata.name': _path('metadata', 'name'),
                                         'metadata.namespace': _path('metadata', 'namespace')}
# The extra field labels each kind's registry supports (pkg/registry/*/strategy.go ...FieldsSet).
KIND_FIELDS: Dict[str, Dict[str, FieldGetter]] = {
    'pods': {'spec.nodeName': _path('spec', 'nodeName'), 'spec.restartPolicy': _path('spec', 'restartPolicy'),
             'spec.schedulerName': _path('spec', 'schedulerName'),
             'spec.serviceAccountName': _path('spec', 'serviceAccountName'),
             'spec.hostNetwork': _path('spec', 'hostNetwork'), 'status.phase': _path('status', 'phase'),
             'status.podIP': _path('status', 'podIP'), 'status.nominatedNodeName': _path('status', 'nominatedNodeName')},
    'nodes': {'spec.unschedulable': _path('spec', 'unschedulable')},
    'events': {'involvedObject.kind': _path('involvedObject', 'kind'),
               'involvedObject.namespace': _path('involvedObject', 'namespace'),
               'involvedObject.name': _path('involvedObject', 'name'),
               'involvedObject.uid': _path('involvedObject', 'uid'),
               'involvedObject.apiVersion': _path('involvedObject', 'apiVersion'),
               'involvedObject.resourceVersion': _path('involvedObject', 'resourceVersion'),
               'involvedObject.fieldPath': _path('involvedObject', 'fieldPath'),
               'reason': _path('reason'), 'reportingComponent': _path('reportingComponent'),
               'source': _path('source', 'component'), 'type': _path('type')},
    'secrets': {'type': _path('type')},
    'namespaces': {'status.phase': _path('status', 'phase')},
    'replicasets': {'status.replicas': _path('status', 'replicas')},
    'jobs': {'status.successful': _path('status', 'succeeded')},
}


@dataclass(frozen=True)
class FieldSelector:
    terms: Tuple[Tuple[str, bool, str, FieldGetter], ...] = ()  # (field, negated, value, getter)

    def matches(self, obj: Dict[str, Any]) -> bool:
        return all((getter(obj) == value) != negated for _field, negated, value, getter in self.terms)


def parse_field_selector(text: Optional[str], plural: Optional[str] = None) -> FieldSelector:
    """fields.ParseSelector plus the registry's supported field labels (others: `field label not supported`).
    Custom resources support metadata.name and metadata.namespace only."""
    if not text:
        return FieldSelector()
    supported = dict(COMMON_FIELDS, **KIND_FIELDS.get(plural or '', {}))
    terms = []
    for term in _split_unescaped(text, ','):
        if not term.strip():
            continue
        split = _split_term(term)
        if split is None:
            raise SelectorError('invalid selector: \'%s\'; can\'t understand \'%s\'' % (text, term))
        field, negated, value = split
        field = field.strip()
        if field not in supported:
            raise SelectorError('field label not supported: %s' % field)
        terms.append((field, negated, value.strip().replace('\\,', ',').replace('\\=', '=').replace('\\\\', '\\'),
                      supported[field]))
    return FieldSelector(tuple(terms))


def _split_term(term: str) -> Optional[Tuple[str, bool, str]]:
    """fields.splitTerm: the first operator from the left (`!=`, `==`, `=` tried at each position)."""
    for i in range(len(term)):
        for op, negated in (('!=', True), ('==', False), ('=', False)):
            if term.startswith(op, i):
                return term[:i], negated, term[i + len(op):]
    return None


def _split_unescaped(text: str, sep: str) -> List[str]:
    out, current, escaped = [], '', False
    for ch in text:
        if escaped:
            current += '\\' + ch
            escaped = False
        elif ch == '\\':
            escaped = True
        elif ch == sep:
            out.append(current)
            current = ''
        else:
            current += ch
    out.append(current)
    return out
