# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A fast structural check of an etcd snapshot (a bbolt database), in milliseconds.

`etcdutl snapshot status` proves the structure by reading every page (bbolt's tx.Check plus a hash of
every key), which costs about a third of taking the snapshot. Right after a snapshot was streamed, its
bytes are already proven by etcd's sha256 trailer; what is left to catch is a file that is not the
database it claims to be. This reads only what answers that:
* both meta pages (magic, version, page size, fnv-1a checksum), the newest valid one chosen as bbolt does;
* the size: the meta's high-water page id times the page size is exactly the database before the trailer;
* the root bucket holds etcd's `key` and `meta` buckets;
* the path to the newest revision: the rightmost branch of the `key` bucket down to its last leaf, every
  page on the way with the right id, kind and bounds; its last key is the snapshot's revision, the
  number `snapshot status` reports.
The full check (`snapshot status`) still runs before anything is restored and in restore verification.
Layout: go.etcd.io/bbolt page.go / node.go / db.go (little-endian headers).
"""

from __future__ import annotations

import mmap
import os
import struct
from typing import Dict, List, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import SnapshotInvalid

MAGIC = 0xED0CDAED
VERSION = 2
PAGE_HEADER = struct.Struct('<QHHI')        # id, flags, count, overflow
META = struct.Struct('<IIIIQQQQQQ')         # magic, version, page size, flags, root pgid, root seq, freelist, pgid, txid, checksum
ELEMENT = struct.Struct('<IIII')            # leaf: flags, pos, ksize, vsize
BRANCH = struct.Struct('<IIQ')              # branch: pos, ksize, pgid
BUCKET = struct.Struct('<QQ')               # root pgid, sequence
BRANCH_PAGE, LEAF_PAGE, META_PAGE = 0x01, 0x02, 0x04
BUCKET_LEAF = 0x01
MAX_DEPTH = 64
REQUIRED_BUCKETS = (b'key', b'meta')
FNV_OFFSET, FNV_PRIME = 0xcbf29ce484222325, 0x100000001b3


def fnv64a(data: bytes) -> int:
    h = FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


class _Db:
    def __init__(self, data: 'mmap.mmap | bytes', size: int, where: str):
        self.data = data
        self.size = size  # database bytes (without etcd's trailer)
        self.where = where
        self.page_size = 4096

    def fail(self, message: str) -> SnapshotInvalid:
        return SnapshotInvalid('%s: bolt structure: %s' % (self.where, message))

    def meta(self) -> Dict[str, int]:
        """The valid meta page with the highest txid (bbolt's choice)."""
        found: List[Dict[str, int]] = []
        problems: List[str] = []
        for index in (0, 1):
            offset = self._meta_offset(index)
            if offset is None or offset + PAGE_HEADER.size + META.size > self.size:
                problems.append('meta page %d is beyond the file' % index)
                continue
            raw = bytes(self.data[offset + PAGE_HEADER.size:offset + PAGE_HEADER.size + META.size])
            fields = META.unpack(raw)
            magic, version, page_size, _flags, root, _seq, _free, pgid, txid, checksum = fields
            if magic != MAGIC:
                problems.append('meta page %d has magic %#x, not %#x' % (index, magic, MAGIC))
            elif version != VERSION:
                problems.append('meta page %d has version %d' % (index, version))
            elif checksum != fnv64a(raw[:-8]):
                problems.append('meta page %d checksum does not match' % index)
            else:
                found.append({'page_size': page_size, 'root': root, 'pgid': pgid, 'txid': txid})
        if not found:
            raise self.fail('no valid meta page (%s)' % '; '.join(problems))
        return max(found, key=lambda m: m['txid'])

    def _meta_offset(self, index: int) -> Optional[int]:
        if index == 0:
            return 0
        # page 1 sits one page size in; the page size is what page 0 says (or the usual 4096 when page 0 is broken)
        page_size = struct.unpack_from('<I', self.data, PAGE_HEADER.size + 8)[0] if self.size >= 64 else 0
        return page_size if page_size in _PAGE_SIZES else 4096

    def page(self, pgid: int, kinds: int) -> Tuple[int, int, int]:
        """(offset of the page, flags, element count) after checking its header."""
        offset = pgid * self.page_size
        if pgid < 2 or offset + PAGE_HEADER.size > self.size:
            raise self.fail('page %d is outside the database (%d pages)' % (pgid, self.size // self.page_size))
        page_id, flags, count, overflow = PAGE_HEADER.unpack_from(self.data, offset)
        if page_id != pgid:
            raise self.fail('page %d says it is page %d' % (pgid, page_id))
        if not flags & kinds:
            raise self.fail('page %d has flags %#x, expected a %s page' % (
                pgid, flags, 'branch or leaf' if kinds == BRANCH_PAGE | LEAF_PAGE else 'leaf'))
        if offset + (overflow + 1) * self.page_size > self.size:
            raise self.fail('page %d with %d overflow pages runs past the end of the database' % (pgid, overflow))
        return offset, flags, count

    def elements(self, offset: int, flags: int, count: int, limit: int) -> List[Tuple[int, bytes, bytes, int]]:
        """(leaf flags or 0, key, value, child pgid) of every element of the page at `offset`."""
        found = []
        base = offset + PAGE_HEADER.size
        for i in range(count):
            at = base + i * ELEMENT.size
            if flags & BRANCH_PAGE:
                pos, ksize, child = BRANCH.unpack_from(self.data, at)
                key, value, leaf_flags = self._slice(at + pos, ksize, limit), b'', 0
            else:
                leaf_flags, pos, ksize, vsize = ELEMENT.unpack_from(self.data, at)
                key, child = self._slice(at + pos, ksize, limit), 0
                value = self._slice(at + pos + ksize, vsize, limit)
            found.append((leaf_flags, key, value, child))
        return found

    def _slice(self, start: int, length: int, limit: int) -> bytes:
        if start + length > limit:
            raise self.fail('an element at byte %d (%d bytes) runs past its page' % (start, length))
        return bytes(self.data[start:start + length])


_PAGE_SIZES = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)


def _last_leaf_element(db: _Db, root: int, inline: Optional[bytes]) -> Optional[Tuple[int, bytes, bytes, int]]:
    """The last element of a bucket (rightmost path from its root page), None for an empty bucket."""
    if root == 0:  # an inline bucket: its page follows the bucket header inside the value
        if not inline or len(inline) < PAGE_HEADER.size:
            raise db.fail('an inline bucket has no page')
        inner = _Db(inline, len(inline), db.where)
        _id, flags, count, _overflow = PAGE_HEADER.unpack_from(inline, 0)
        if not flags & LEAF_PAGE:
            raise db.fail('an inline bucket page is not a leaf')
        items = inner.elements(0, flags, count, len(inline))
        return items[-1] if items else None
    pgid, seen = root, set()
    for _depth in range(MAX_DEPTH):
        if pgid in seen:
            raise db.fail('page %d is its own descendant' % pgid)
        seen.add(pgid)
        offset, flags, count = db.page(pgid, BRANCH_PAGE | LEAF_PAGE)
        limit = offset + (PAGE_HEADER.unpack_from(db.data, offset)[3] + 1) * db.page_size
        if flags & LEAF_PAGE:
            items = db.elements(offset, flags, count, limit)
            return items[-1] if items else None
        if count == 0:
            raise db.fail('branch page %d has no elements' % pgid)
        pgid = db.elements(offset, flags, count, limit)[-1][3]
    raise db.fail('the tree is deeper than %d pages' % MAX_DEPTH)


def _buckets(db: _Db, root: int) -> Dict[bytes, Tuple[int, bytes]]:
    """Top-level buckets: name -> (root pgid, inline page bytes)."""
    found: Dict[bytes, Tuple[int, bytes]] = {}
    pending, seen = [root], set()
    while pending:
        pgid = pending.pop()
        if pgid in seen or len(seen) > 10000:
            raise db.fail('the root bucket tree loops or is implausibly large')
        seen.add(pgid)
        offset, flags, count = db.page(pgid, BRANCH_PAGE | LEAF_PAGE)
        limit = offset + (PAGE_HEADER.unpack_from(db.data, offset)[3] + 1) * db.page_size
        for leaf_flags, key, value, child in db.elements(offset, flags, count, limit):
            if flags & BRANCH_PAGE:
                pending.append(child)
            elif leaf_flags & BUCKET_LEAF:
                if len(value) < BUCKET.size:
                    raise db.fail('bucket %r has a short header' % key)
                found[key] = (BUCKET.unpack_from(value, 0)[0], value[BUCKET.size:])
    return found


def inspect_snapshot(path: str, trailer: int = 32) -> Dict[str, int]:
    """{revision, consistent_index, page_size, db_size}; SnapshotInvalid says what is wrong."""
    size = os.path.getsize(path) - trailer
    if size < 2 * 512:
        raise SnapshotInvalid('%s: bolt structure: %d bytes is too small for a database' % (path, size))
    with open(path, 'rb') as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        db = _Db(data, size, path)
        meta = db.meta()
        db.page_size = meta['page_size']
        if db.page_size not in _PAGE_SIZES:
            raise db.fail('page size %d is not a bbolt page size' % db.page_size)
        if meta['pgid'] * db.page_size != size:
            raise db.fail('the meta page says %d pages of %d bytes (%d bytes), the database has %d bytes' % (
                meta['pgid'], db.page_size, meta['pgid'] * db.page_size, size))
        buckets = _buckets(db, meta['root'])
        missing = [b.decode() for b in REQUIRED_BUCKETS if b not in buckets]
        if missing:
            raise db.fail('no %s bucket: not an etcd database' % ' or '.join(missing))
        last = _last_leaf_element(db, *buckets[b'key'])
        if last is not None and len(last[1]) < 17:
            raise db.fail('the newest key of the key bucket (%d bytes) is not an etcd revision' % len(last[1]))
        revision = int.from_bytes(last[1][:8], 'big') if last is not None else 0
        consistent_index = 0
        meta_root, meta_inline = buckets[b'meta']
        index = _find(db, meta_root, meta_inline, b'consistent_index')
        if index is not None and len(index) == 8:
            consistent_index = int.from_bytes(index, 'big')
        return {'revision': revision, 'consistent_index': consistent_index, 'page_size': db.page_size,
                'db_size': size}


def _find(db: _Db, root: int, inline: bytes, wanted: bytes) -> Optional[bytes]:
    """The value of `wanted` in a small bucket (etcd's meta bucket holds a handful of keys)."""
    if root == 0:
        if len(inline) < PAGE_HEADER.size:
            return None
        _id, flags, count, _overflow = PAGE_HEADER.unpack_from(inline, 0)
        items = _Db(inline, len(inline), db.where).elements(0, flags, count, len(inline))
    else:
        items, pending = [], [root]
        while pending and len(items) < 100000:
            offset, flags, count = db.page(pending.pop(), BRANCH_PAGE | LEAF_PAGE)
            limit = offset + (PAGE_HEADER.unpack_from(db.data, offset)[3] + 1) * db.page_size
            for item in db.elements(offset, flags, count, limit):
                if flags & BRANCH_PAGE:
                    pending.append(item[3])
                else:
                    items.append(item)
    return next((value for _f, key, value, _c in items if key == wanted), None)
