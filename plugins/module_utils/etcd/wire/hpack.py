# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""HPACK (RFC 7541), as much as one gRPC call needs: our request headers are encoded as plain literals
(never indexed, never Huffman-coded: nothing to keep in step with the server), the server's response
headers and trailers are decoded in full (its dynamic table and Huffman-coded strings), because
`grpc-status` and `grpc-message` come that way from etcd's Go server.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

Header = Tuple[bytes, bytes]


class HpackError(ValueError):
    """The peer's header block cannot be decoded (a protocol error on its side, or not HTTP/2 at all)."""


# RFC 7541 Appendix A: the static table (index 1..61); names only matter for gRPC, values for :status.
STATIC_TABLE: Tuple[Header, ...] = tuple((n.encode(), v.encode()) for n, v in (
    (':authority', ''), (':method', 'GET'), (':method', 'POST'), (':path', '/'), (':path', '/index.html'),
    (':scheme', 'http'), (':scheme', 'https'), (':status', '200'), (':status', '204'), (':status', '206'),
    (':status', '304'), (':status', '400'), (':status', '404'), (':status', '500'), ('accept-charset', ''),
    ('accept-encoding', 'gzip, deflate'), ('accept-language', ''), ('accept-ranges', ''), ('accept', ''),
    ('access-control-allow-origin', ''), ('age', ''), ('allow', ''), ('authorization', ''), ('cache-control', ''),
    ('content-disposition', ''), ('content-encoding', ''), ('content-language', ''), ('content-length', ''),
    ('content-location', ''), ('content-range', ''), ('content-type', ''), ('cookie', ''), ('date', ''),
    ('etag', ''), ('expect', ''), ('expires', ''), ('from', ''), ('host', ''), ('if-match', ''),
    ('if-modified-since', ''), ('if-none-match', ''), ('if-range', ''), ('if-unmodified-since', ''),
    ('last-modified', ''), ('link', ''), ('location', ''), ('max-forwards', ''), ('proxy-authenticate', ''),
    ('proxy-authorization', ''), ('range', ''), ('referer', ''), ('refresh', ''), ('retry-after', ''),
    ('server', ''), ('set-cookie', ''), ('strict-transport-security', ''), ('transfer-encoding', ''),
    ('user-agent', ''), ('vary', ''), ('via', ''), ('www-authenticate', '')))

# RFC 7541 Appendix B: the code length of symbols 0..256 (256 is EOS), 'a' = 5 bits .. 'z' = 30 bits. The code is
# canonical (codes ordered by length, then by symbol), so the lengths alone define it.
_CODE_LENGTHS = (
    'isxxxxxxxtzxxzxxxxxxxxzxxxxxxxxxbffhibdgffdgdbbbaaabbbbbbbcdkbhfibccccccccccccccccccccccdcdioijbkabababbbacc'
    'bbbabcbaabccccckgjixprpprrrsrssssststtrstssssqrsrsstrqprrssqsrrtqrssqqrqsrssprrrsrrsvvporsruvvvwwvtuoqvwwv'
    'wtqqvvxwwwptpqrqqsrruuttvsvwvvwwwwwxwwwwwvz')
EOS = 256


def _canonical_codes() -> Dict[Tuple[int, int], int]:
    """{(bit length, code): symbol}."""
    lengths = [ord(c) - ord('a') + 5 for c in _CODE_LENGTHS]
    table: Dict[Tuple[int, int], int] = {}
    code, previous = -1, min(lengths)
    for symbol in sorted(range(len(lengths)), key=lambda s: (lengths[s], s)):
        code = (code + 1) << (lengths[symbol] - previous)
        previous = lengths[symbol]
        table[(lengths[symbol], code)] = symbol
    return table


_HUFFMAN = _canonical_codes()


def huffman_decode(data: bytes) -> bytes:
    """Header strings are short (a status, an error message): a bit at a time is fast enough."""
    out = bytearray()
    code = length = 0
    for byte in data:
        for shift in range(7, -1, -1):
            code = (code << 1) | ((byte >> shift) & 1)
            length += 1
            symbol = _HUFFMAN.get((length, code))
            if symbol is not None:
                if symbol == EOS:
                    raise HpackError('Huffman-coded string holds EOS')
                out.append(symbol)
                code = length = 0
            elif length > 30:
                raise HpackError('invalid Huffman code')
    if length > 7 or code != (1 << length) - 1:  # padding: at most 7 bits, all ones (the start of EOS)
        raise HpackError('invalid Huffman padding')
    return bytes(out)


def _integer(data: bytes, pos: int, prefix_bits: int) -> Tuple[int, int]:
    """(value, next position) of an integer with an N-bit prefix (RFC 7541 5.1)."""
    if pos >= len(data):
        raise HpackError('header block ends inside an integer')
    limit = (1 << prefix_bits) - 1
    value = data[pos] & limit
    pos += 1
    if value < limit:
        return value, pos
    shift = 0
    while True:
        if pos >= len(data) or shift > 28:
            raise HpackError('header block ends inside an integer, or it is too large')
        byte = data[pos]
        pos += 1
        value += (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _string(data: bytes, pos: int) -> Tuple[bytes, int]:
    if pos >= len(data):
        raise HpackError('header block ends before a string')
    huffman = data[pos] & 0x80
    length, pos = _integer(data, pos, 7)
    if pos + length > len(data):
        raise HpackError('header block ends inside a string')
    raw = bytes(data[pos:pos + length])
    return (huffman_decode(raw) if huffman else raw), pos + length


class Decoder:
    """The decoding side of one connection: its dynamic table persists across header blocks."""

    def __init__(self, max_table_size: int = 4096):
        self.max_table_size = max_table_size
        self.table: List[Header] = []  # newest first
        self.size = 0

    def _entry(self, index: int) -> Header:
        if 1 <= index <= len(STATIC_TABLE):
            return STATIC_TABLE[index - 1]
        dynamic = index - len(STATIC_TABLE) - 1
        if 0 <= dynamic < len(self.table):
            return self.table[dynamic]
        raise HpackError('header index %d is not in the table' % index)

    def _add(self, header: Header) -> None:
        self.table.insert(0, header)
        self.size += len(header[0]) + len(header[1]) + 32
        self._evict()

    def _evict(self) -> None:
        while self.size > self.max_table_size and self.table:
            name, value = self.table.pop()
            self.size -= len(name) + len(value) + 32

    def decode(self, block: bytes) -> List[Header]:
        headers: List[Header] = []
        pos = 0
        while pos < len(block):
            first = block[pos]
            if first & 0x80:                      # indexed field
                index, pos = _integer(block, pos, 7)
                headers.append(self._entry(index))
                continue
            if first & 0xE0 == 0x20:              # dynamic table size update
                size, pos = _integer(block, pos, 5)
                if size > 4096:
                    raise HpackError('table size %d over the 4096 we allow' % size)
                self.max_table_size = size
                self._evict()
                continue
            indexing = first & 0xC0 == 0x40       # literal with incremental indexing; else without / never indexed
            index, pos = _integer(block, pos, 6 if indexing else 4)
            if index:
                name = self._entry(index)[0]
            else:
                name, pos = _string(block, pos)
            value, pos = _string(block, pos)
            headers.append((name, value))
            if indexing:
                self._add((name, value))
        return headers


def _encode_integer(value: int, prefix_bits: int, first: int = 0) -> bytes:
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = bytearray([first | limit])
    value -= limit
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode(headers: List[Header]) -> bytes:
    """Literal fields without indexing, new names, plain strings (RFC 7541 6.2.2)."""
    out = bytearray()
    for name, value in headers:
        out += b'\x00' + _encode_integer(len(name), 7) + name + _encode_integer(len(value), 7) + value
    return bytes(out)
