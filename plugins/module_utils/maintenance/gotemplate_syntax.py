# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lexing and parsing of Go text/template source into a small tree (see gotemplate for the language).

Text and actions are split first (`{{- ` and ` -}}` trim the adjacent text, `{{/* */}}` comments go),
then each action is tokenised and parsed into pipelines and `if`/`range`/`with` blocks. Positions in
errors are `line L, column C` of the template source.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any, List, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import TemplateError

# --- lexing ----------------------------------------------------------------------------------------

_TOKEN = re.compile(r'''
    (?P<space>\s+)
  | (?P<decl>:=)
  | (?P<field>(?:\.[A-Za-z_][A-Za-z0-9_]*)+)
  | (?P<dot>\.)
  | (?P<var>\$[A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<raw>`[^`]*`)
  | (?P<number>-?\d+(?:\.\d+)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>[|(),=])
''', re.VERBOSE)


@dataclasses.dataclass
class Tok:
    kind: str
    text: str
    pos: int


def where_in(source: str, pos: int) -> str:
    line = source.count('\n', 0, pos) + 1
    return 'line %d, column %d' % (line, pos - (source.rfind('\n', 0, pos) + 1) + 1)


def _lex_action(source: str, start: int, end: int) -> List[Tok]:
    tokens: List[Tok] = []
    pos = start
    while pos < end:
        match = _TOKEN.match(source, pos, end)
        if not match:
            raise TemplateError('template: %s: unexpected %r in action' % (where_in(source, pos), source[pos]))
        kind = match.lastgroup or ''
        if kind != 'space':
            tokens.append(Tok(kind, match.group(), pos))
        pos = match.end()
    return tokens


def _find_close(source: str, pos: int) -> int:
    """Index of the `}}` ending the action that starts at pos, skipping quoted strings."""
    quote = ''
    while pos < len(source):
        char = source[pos]
        if quote:
            if char == '\\' and quote == '"':
                pos += 2
                continue
            if char == quote:
                quote = ''
        elif char in '"`':
            quote = char
        elif source.startswith('}}', pos):
            return pos
        pos += 1
    return -1


def _split(source: str) -> List[Tuple[str, Any, int]]:
    """[('text', str, pos) | ('action', tokens, pos)] with trim markers applied and comments dropped."""
    parts: List[Tuple[str, Any, int]] = []
    pos = 0
    trim_next = False
    while pos <= len(source):
        open_at = source.find('{{', pos)
        text = source[pos:] if open_at < 0 else source[pos:open_at]
        if trim_next:
            text = text.lstrip()
        if open_at < 0:
            parts.append(('text', text, pos))
            break
        inner = open_at + 2
        if source.startswith('- ', inner) or source.startswith('-\t', inner) or source.startswith('-\n', inner):
            text = text.rstrip()
            inner += 2
        parts.append(('text', text, pos))
        stripped = source[inner:].lstrip()
        if stripped.startswith('/*'):
            close = source.find('*/', inner)
            end = source.find('}}', close) if close >= 0 else -1
            if close < 0 or end < 0 or source[close + 2:end].strip() not in ('', '-'):
                raise TemplateError('template: %s: unclosed comment' % where_in(source, open_at))
            trim_next = source[close + 2:end].strip() == '-'
            pos = end + 2
            continue
        close = _find_close(source, inner)
        if close < 0:
            raise TemplateError('template: %s: unclosed action' % where_in(source, open_at))
        body_end = close
        trim_next = re.search(r'\s-$', source[inner:close]) is not None   # ` -}}` trims what follows
        if trim_next:
            body_end = close - 1
        parts.append(('action', _lex_action(source, inner, body_end), open_at))
        pos = close + 2
    return [p for p in parts if not (p[0] == 'text' and p[1] == '')]


# --- parsing ---------------------------------------------------------------------------------------

@dataclasses.dataclass
class Pipeline:
    decl: List[str]            # variables declared with :=
    commands: List[List[Any]]  # each command: a list of operands
    pos: int


@dataclasses.dataclass
class Block:
    keyword: str               # 'if', 'range', 'with'
    pipe: Pipeline
    body: List[Any]
    alternative: List[Any]


class _Parser:
    def __init__(self, source: str):
        self.source = source
        self.parts = _split(source)
        self.index = 0

    def error(self, pos: int, message: str) -> TemplateError:
        return TemplateError('template: %s: %s' % (where_in(self.source, pos), message))

    def parse(self) -> List[Any]:
        nodes, stop = self.parse_list()
        if stop is not None:
            raise self.error(stop[1], 'unexpected {{%s}}' % stop[0])
        return nodes

    def parse_list(self) -> Tuple[List[Any], Optional[Tuple[str, int, List[Tok]]]]:
        nodes: List[Any] = []
        while self.index < len(self.parts):
            kind, value, pos = self.parts[self.index]
            self.index += 1
            if kind == 'text':
                nodes.append(value)
                continue
            tokens: List[Tok] = value
            if not tokens:
                raise self.error(pos, 'missing value for command')
            head = tokens[0]
            if head.kind == 'ident' and head.text in ('end', 'else'):
                return nodes, (head.text, pos, tokens[1:])
            if head.kind == 'ident' and head.text in ('if', 'range', 'with'):
                nodes.append(self.parse_block(head.text, tokens[1:], pos))
                continue
            if head.kind == 'ident' and head.text in ('template', 'define', 'block', 'break', 'continue'):
                raise self.error(pos, '{{%s}} is not supported' % head.text)
            nodes.append(self.parse_pipeline(tokens, pos))
        return nodes, None

    def parse_block(self, keyword: str, tokens: List[Tok], pos: int) -> Block:
        if not tokens:
            raise self.error(pos, 'missing value for %s' % keyword)
        pipe = self.parse_pipeline(tokens, pos)
        body, stop = self.parse_list()
        if stop is None:
            raise self.error(pos, 'unexpected EOF: {{%s}} has no {{end}}' % keyword)
        alternative: List[Any] = []
        if stop[0] == 'else':
            rest = stop[2]
            if rest and rest[0].kind == 'ident' and rest[0].text in ('if', 'with'):
                alternative = [self.parse_block(rest[0].text, rest[1:], stop[1])]
                return Block(keyword, pipe, body, alternative)
            if rest:
                raise self.error(stop[1], 'unexpected tokens after else')
            alternative, stop = self.parse_list()
            if stop is None or stop[0] != 'end':
                raise self.error(pos, 'unexpected EOF: {{%s}} has no {{end}}' % keyword)
        if stop[2]:
            raise self.error(stop[1], 'unexpected tokens after end')
        return Block(keyword, pipe, body, alternative)

    def parse_pipeline(self, tokens: List[Tok], pos: int) -> Pipeline:
        decl: List[str] = []
        for index, token in enumerate(tokens):
            if token.kind == 'decl' or (token.kind == 'punct' and token.text == '='):
                names = [t.text for t in tokens[:index] if not (t.kind == 'punct' and t.text == ',')]
                if not names or any(not n.startswith('$') or '.' in n for n in names):
                    raise self.error(token.pos, 'bad variable declaration')
                decl, tokens = names, tokens[index + 1:]
                break
        commands: List[List[Any]] = [[]]
        index = 0
        while index < len(tokens):
            token = tokens[index]
            if token.kind == 'punct' and token.text == '|':
                commands.append([])
            elif token.kind == 'punct' and token.text == '(':
                depth, end = 1, index + 1
                while end < len(tokens) and depth:
                    if tokens[end].kind == 'punct' and tokens[end].text in '()':
                        depth += 1 if tokens[end].text == '(' else -1
                    end += 1
                if depth:
                    raise self.error(token.pos, 'unclosed left paren')
                commands[-1].append(self.parse_pipeline(tokens[index + 1:end - 1], token.pos))
                index = end
                continue
            elif token.kind == 'punct':
                raise self.error(token.pos, 'unexpected "%s"' % token.text)
            else:
                commands[-1].append(token)
            index += 1
        if any(not command for command in commands):
            raise self.error(pos, 'missing command in pipeline')
        for command in commands[1:]:
            if isinstance(command[0], Tok) and command[0].kind in ('string', 'raw', 'number'):
                raise self.error(command[0].pos, 'cannot pipe into a constant')
        return Pipeline(decl, commands, pos)


@functools.lru_cache(maxsize=256)
def parse(source: str) -> Tuple[Any, ...]:
    """Parse once (cached): a syntax error surfaces at config load."""
    return tuple(_Parser(source).parse())
