"""The provisioning API's flags: off without a port, references and TLS validated with the flag named."""

from __future__ import annotations

import pytest

from steward_controller.core import settings


def test_api_is_off_without_a_port_and_parses_its_references():
    assert settings.parse([]).options('provisioning-api').port is None
    options = settings.parse(['--provisioning-api-port', '0', '--provisioning-cluster-config', 'steward-system/cluster',
                              '--provisioning-authority', 'steward-system/ca', '--provisioning-api-allowed-users',
                              'alice, bob']).options('provisioning-api')
    assert options.port == 0 and options.cluster_config == ('steward-system', 'cluster')
    assert options.authority == ('steward-system', 'ca') and options.allowed_users == ('alice', 'bob')
    assert options.allowed_groups == ('system:masters',)


@pytest.mark.parametrize('argv, flag', [
    (['--provisioning-api-port', '99999'], '--provisioning-api-port'),
    (['--provisioning-api-port', 'http'], '--provisioning-api-port'),
    (['--provisioning-cluster-config', 'no-namespace'], '--provisioning-cluster-config'),
    (['--provisioning-authority', 'Bad/x'], '--provisioning-authority'),
    (['--provisioning-api-tls-cert', '/tmp/c.pem'], '--provisioning-api-tls-cert'),
])
def test_bad_api_flags_stop_the_controller_naming_the_flag(argv, flag, capsys):
    with pytest.raises(SystemExit):
        settings.parse(argv)
    assert flag in capsys.readouterr().err
