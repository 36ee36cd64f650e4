"""common/netaddr.url_host: an IPv6 address goes in brackets in a URL or host:port, anything else as it is."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.netaddr import url_host


@pytest.mark.parametrize('address, expected', [
    ('10.0.0.1', '10.0.0.1'),
    ('::1', '[::1]'),
    ('fd00::10', '[fd00::10]'),
    ('node-1.example.org', 'node-1.example.org'),
])
def test_url_host(address, expected):
    assert url_host(address) == expected
    assert 'https://%s:2380' % url_host(address) == 'https://%s:2380' % expected
