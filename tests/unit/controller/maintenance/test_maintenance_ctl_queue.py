# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The maintenance loop's work queue (client-go semantics) and node cache (never back in time)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Dict, List

import pytest

from steward_controller.core.informer import NodeCache, older
from steward_controller.maintenance.queue import WorkQueue


def node(name: str, version: str, state: str = '') -> Dict:
    return {'metadata': {'name': name, 'resourceVersion': version, 'labels': {'s': state}}}


def test_queue_keeps_one_entry_per_name_in_order():
    queue = WorkQueue()
    for name in ['a', 'b', 'a', 'c', 'b']:
        queue.add(name)
    assert queue.depth() == 3
    assert [queue.get(0), queue.get(0), queue.get(0), queue.get(0.01)] == ['a', 'b', 'c', None]
    assert queue.add_all(['x', 'y', 'x']) == 2 and queue.depth() == 2


def test_a_name_in_process_is_not_handed_out_again_but_requeued_after_done():
    queue = WorkQueue()
    queue.add('a')
    assert queue.get(0) == 'a'
    queue.add('a')                         # changed while a worker has it
    queue.add('a')
    assert queue.depth() == 0 and queue.get(0.01) is None and queue.busy() == 1
    queue.done('a')
    assert queue.depth() == 1 and queue.get(0) == 'a'
    queue.done('a')
    assert queue.get(0.01) is None and queue.busy() == 0


def test_close_wakes_waiting_workers_and_refuses_new_work():
    queue = WorkQueue()
    got: List = []
    workers = [threading.Thread(target=lambda: got.append(queue.get())) for _worker in range(3)]
    for w in workers:
        w.start()
    time.sleep(0.05)
    queue.close()
    for w in workers:
        w.join(2)
    assert got == [None, None, None]
    queue.add('a')
    assert queue.depth() == 0 and queue.add_all(['b']) == 0


def test_workers_never_process_one_name_at_the_same_time():
    queue = WorkQueue()
    active: Counter = Counter()
    overlaps: List[str] = []
    processed: Counter = Counter()
    lock = threading.Lock()

    def work() -> None:
        while True:
            name = queue.get(0.5)
            if name is None:
                return
            with lock:
                active[name] += 1
                if active[name] > 1:
                    overlaps.append(name)
            time.sleep(0.001)
            with lock:
                active[name] -= 1
                processed[name] += 1
            queue.done(name)

    workers = [threading.Thread(target=work) for _worker in range(8)]
    for w in workers:
        w.start()
    for round_ in range(50):
        queue.add_all(['n%d' % (i % 10) for i in range(round_, round_ + 30)])
    for w in workers:
        w.join(10)
    assert overlaps == []
    assert set(processed) == {'n%d' % i for i in range(10)} and all(count >= 1 for count in processed.values())


def test_resource_version_order():
    assert older('9', '10') and not older('10', '9') and not older('10', '10')
    assert not older('abc', '10') and not older('', '5')   # not comparable: the newest arrival wins


def test_cache_never_goes_back_in_time():
    cache = NodeCache()
    assert cache.put(node('a', '10', 'patched'))
    assert not cache.put(node('a', '9', 'listed-before-the-patch'))
    assert cache.get('a')['metadata']['labels']['s'] == 'patched'
    assert cache.put(node('a', '11', 'newer'))
    assert not cache.put({'metadata': {}})
    snapshot = cache.snapshot()
    assert cache.snapshot() is snapshot and [n['metadata']['name'] for n in snapshot] == ['a']
    cache.put(node('b', '12'))
    assert cache.snapshot() is not snapshot and len(cache) == 2 and cache.names() == ['a', 'b']


def test_a_full_list_removes_what_is_gone_but_not_what_is_newer_than_the_list():
    cache = NodeCache()
    for name, version in [('a', '5'), ('b', '6'), ('late', '30')]:
        cache.put(node(name, version))
    removed = cache.replace([node('a', '20', 'listed'), node('c', '21')], list_version='25')
    assert removed == ['b']   # 'late' was created after the list was taken
    assert cache.names() == ['a', 'c', 'late'] and cache.get('a')['metadata']['labels']['s'] == 'listed'
    assert sorted(cache.replace([node('a', '20')], list_version='40')) == ['c', 'late']
    cache.remove('a')
    assert cache.names() == [] and cache.snapshot() == []


def test_the_label_index_follows_every_put_remove_and_full_list():
    # maxMaintenance asks "which nodes are in-maintenance" for every node it checks: the cache answers from an
    # index kept as nodes change, so that answer must be exactly what a walk over the cache would give
    cache = NodeCache(index_label='s')

    def labelled(value):
        return sorted(n['metadata']['name'] for n in cache.labelled(value))

    def walked(value):
        return sorted(n['metadata']['name'] for n in cache.snapshot() if n['metadata']['labels'].get('s', '') == value)

    cache.put(node('a', '1', 'in'))
    cache.put(node('b', '2', 'in'))
    cache.put(node('c', '3', 'out'))
    cache.put({'metadata': {'name': 'd', 'resourceVersion': '4'}})   # no label: indexed under ''
    assert labelled('in') == ['a', 'b'] and labelled('out') == ['c'] and labelled('') == ['d']
    cache.put(node('a', '5', 'out'))                      # moves
    assert not cache.put(node('b', '1', 'out'))           # older: neither stored nor moved
    cache.remove('b')
    assert labelled('in') == [] and labelled('out') == ['a', 'c']
    cache.replace([node('c', '9', 'in'), node('e', '10', 'in')], list_version='10')
    for value in ('in', 'out', '', 'never'):
        assert labelled(value) == walked(value)
    assert labelled('in') == ['c', 'e'] and labelled('out') == []
    assert cache.labelled('in')[0] is cache.get('c')      # the cached objects themselves, as snapshot() gives
    with pytest.raises(ValueError, match='index_label'):
        NodeCache().labelled('in')
