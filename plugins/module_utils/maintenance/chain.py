# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Plugin chains: check chains are boolean expressions, trigger and notification chains are `&&` lists.

Check chain grammar (precedence `!` > `&&` > `||`, both binary operators left-associative)::

    expr    := and ( '||' and )*
    and     := unary ( '&&' unary )*
    unary   := '!' unary | primary
    primary := NAME | '(' expr ')'

A NAME is any run of characters other than whitespace, `!`, `&`, `|`, `(` and `)`, so instance names
with `-` or `.` (the seed's own `reboot-ok`) work. Parsing is a recursive descent with 1-based column
numbers in every error; evaluation walks the tree, never `eval`. An empty or missing chain has no
expression and passes (upstream's CheckChain.Execute does the same).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, List, Mapping, Optional, Tuple, Union

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import MaintenanceError

_OPERATOR_CHARS = '!&|()'


class ChainSyntaxError(MaintenanceError):
    """`message` names the problem and the 1-based column (the config loader turns it into a ConfigError
    naming the field)."""

    def __init__(self, message: str, column: int):
        super().__init__(message)
        self.column = column


@dataclasses.dataclass(frozen=True)
class Name:
    name: str
    column: int


@dataclasses.dataclass(frozen=True)
class Not:
    operand: 'Expr'


@dataclasses.dataclass(frozen=True)
class And:
    left: 'Expr'
    right: 'Expr'


@dataclasses.dataclass(frozen=True)
class Or:
    left: 'Expr'
    right: 'Expr'


Expr = Union[Name, Not, And, Or]


@dataclasses.dataclass(frozen=True)
class Token:
    kind: str    # NAME, NOT, AND, OR, LPAREN, RPAREN, END
    text: str
    column: int


def tokenize(text: str) -> List[Token]:
    tokens: List[Token] = []
    pos = 0
    while pos < len(text):
        char = text[pos]
        if char.isspace():
            pos += 1
            continue
        column = pos + 1
        if text.startswith('&&', pos) or text.startswith('||', pos):
            tokens.append(Token('AND' if char == '&' else 'OR', text[pos:pos + 2], column))
            pos += 2
        elif char in '&|':
            raise ChainSyntaxError('single "%s" at column %d (use "%s%s")' % (char, column, char, char), column)
        elif char in '!()':
            tokens.append(Token({'!': 'NOT', '(': 'LPAREN', ')': 'RPAREN'}[char], char, column))
            pos += 1
        else:
            end = pos
            while end < len(text) and not text[end].isspace() and text[end] not in _OPERATOR_CHARS:
                end += 1
            tokens.append(Token('NAME', text[pos:end], column))
            pos = end
    tokens.append(Token('END', '', len(text) + 1))
    return tokens


class _Parser:
    def __init__(self, text: str):
        self.tokens = tokenize(text)
        self.index = 0

    @property
    def current(self) -> Token:
        return self.tokens[self.index]

    def take(self) -> Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def unexpected(self, wanted: str) -> ChainSyntaxError:
        token = self.current
        if token.kind == 'END':
            return ChainSyntaxError('unexpected end of expression at column %d (expected %s)' % (token.column, wanted),
                                    token.column)
        return ChainSyntaxError('unexpected "%s" at column %d (expected %s)' % (token.text, token.column, wanted),
                                token.column)

    def parse(self) -> Expr:
        expr = self.parse_or()
        if self.current.kind != 'END':
            raise self.unexpected('"&&", "||" or the end')
        return expr

    def parse_or(self) -> Expr:
        expr = self.parse_and()
        while self.current.kind == 'OR':
            self.take()
            expr = Or(expr, self.parse_and())
        return expr

    def parse_and(self) -> Expr:
        expr = self.parse_unary()
        while self.current.kind == 'AND':
            self.take()
            expr = And(expr, self.parse_unary())
        return expr

    def parse_unary(self) -> Expr:
        if self.current.kind == 'NOT':
            self.take()
            return Not(self.parse_unary())
        return self.parse_primary()

    def parse_primary(self) -> Expr:
        token = self.current
        if token.kind == 'NAME':
            self.take()
            return Name(token.text, token.column)
        if token.kind == 'LPAREN':
            self.take()
            expr = self.parse_or()
            if self.current.kind != 'RPAREN':
                raise self.unexpected('")" to close "(" at column %d' % token.column)
            self.take()
            return expr
        raise self.unexpected('an instance name, "!" or "("')


def parse_check_chain(text: Optional[str]) -> Optional[Expr]:
    """The expression tree, or None for an empty chain."""
    if text is None or not str(text).strip():
        return None
    return _Parser(str(text)).parse()


def names(expr: Optional[Expr]) -> List[Name]:
    """Every instance reference, left to right (duplicates kept, with their columns)."""
    if expr is None:
        return []
    if isinstance(expr, Name):
        return [expr]
    if isinstance(expr, Not):
        return names(expr.operand)
    return names(expr.left) + names(expr.right)


def evaluate(expr: Optional[Expr], value: Union[Mapping[str, bool], Callable[[str], bool]]) -> bool:
    """Short-circuits like Go's gval; the caller evaluates every instance beforehand anyway."""
    if expr is None:
        return True
    lookup = value if callable(value) else value.__getitem__
    if isinstance(expr, Name):
        return bool(lookup(expr.name))
    if isinstance(expr, Not):
        return not evaluate(expr.operand, lookup)
    if isinstance(expr, And):
        return evaluate(expr.left, lookup) and evaluate(expr.right, lookup)
    return evaluate(expr.left, lookup) or evaluate(expr.right, lookup)


def unparse(expr: Optional[Expr]) -> str:
    """Canonical text with full parentheses, for messages and tests of precedence."""
    if expr is None:
        return ''
    if isinstance(expr, Name):
        return expr.name
    if isinstance(expr, Not):
        return '!' + unparse(expr.operand)
    operator = '&&' if isinstance(expr, And) else '||'
    return '(%s %s %s)' % (unparse(expr.left), operator, unparse(expr.right))


def parse_and_list(text: Optional[str]) -> List[Tuple[str, int]]:
    """A trigger or notification chain `a && b && c` -> [(name, column)]; empty or missing -> []."""
    if text is None or not str(text).strip():
        return []
    text = str(text)
    items: List[Tuple[str, int]] = []
    start = 0
    while True:
        end = text.find('&&', start)
        part = text[start:] if end < 0 else text[start:end]
        name = part.strip()
        column = start + 1 + (len(part) - len(part.lstrip()))
        if not name:
            raise ChainSyntaxError('empty instance name at column %d (chains are names joined by "&&")' % (start + 1), start + 1)
        offset = next((i for i, c in enumerate(name) if c in _OPERATOR_CHARS), None)
        if offset is None and len(name.split()) > 1:   # two names without "&&": point at the second
            offset = len(name) - len(name[len(name.split()[0]):].lstrip())
        if offset is not None:
            token = name[offset] if name[offset] in _OPERATOR_CHARS else name[offset:].split()[0]
            raise ChainSyntaxError('unexpected "%s" at column %d (trigger and notification chains only join names with "&&")'
                                   % (token, column + offset), column + offset)
        items.append((name, column))
        if end < 0:
            return items
        start = end + 2
