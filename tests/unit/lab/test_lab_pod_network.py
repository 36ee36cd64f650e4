"""Two labs running at once never share a pod network (they did, by chance, when each drew a random /24)."""

import socket

from lab.pods import network


def test_reservations_held_at_once_are_distinct_and_a_closed_one_is_free_again(monkeypatch):
    monkeypatch.setattr(network, 'FIRST', 150)
    monkeypatch.setattr(network, 'LAST', 151)
    first, second = network.reserve(), network.reserve()
    try:
        assert {first.cidr, second.cidr} == {'127.0.150.0/24', '127.0.151.0/24'}
        try:
            network.reserve()
            raise AssertionError('a third reservation of two networks')
        except RuntimeError as exc:
            assert 'no free pod network' in str(exc)
        freed = first.cidr
        first.close()
        with network.reserve() as again:
            assert again.cidr == freed
    finally:
        first.close()
        second.close()


def test_a_network_whose_addresses_are_in_use_is_not_handed_out(monkeypatch):
    monkeypatch.setattr(network, 'FIRST', 152)
    monkeypatch.setattr(network, 'LAST', 153)
    squatter = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    squatter.bind(('127.0.152.2', 8080))   # a process left by a crashed run
    try:
        with network.reserve() as got:
            assert got.cidr == '127.0.153.0/24'
    finally:
        squatter.close()
