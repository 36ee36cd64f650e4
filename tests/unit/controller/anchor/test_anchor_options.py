"""The anchor loop's flags: off without a node name, every value validated with the flag named."""

from __future__ import annotations

import pytest

from steward_controller.core import settings


def test_anchor_is_off_by_default_and_reads_the_downward_api_variables(monkeypatch):
    options = settings.parse([]).options('anchor')
    assert options.node_name == '' and options.root == '/host' and options.interval == 10 and options.cleanup
    monkeypatch.setenv('STEWARD_NODE_NAME', 'cp1')
    monkeypatch.setenv('STEWARD_NODE_IP', '10.0.0.1')
    monkeypatch.setenv('STEWARD_ANCHOR_ETCD_ENDPOINTS', 'https://10.0.0.2:2379, https://10.0.0.3:2379')
    options = settings.parse(['--controllers', 'anchor', '--anchor-no-cleanup']).options('anchor')
    assert (options.node_name, options.node_ip, options.cleanup) == ('cp1', '10.0.0.1', False)
    assert options.etcd_endpoints == ('https://10.0.0.2:2379', 'https://10.0.0.3:2379')


@pytest.mark.parametrize('argv, flag', [
    (['--anchor-root', 'relative'], '--anchor-root'),
    (['--anchor-node-ip', 'not-an-ip'], '--anchor-node-ip'),
    (['--anchor-interval', '0'], '--anchor-interval'),
    (['--anchor-namespace', 'Bad_Namespace'], '--anchor-namespace'),
    (['--anchor-etcd-peer-port', '70000'], '--anchor-etcd-peer-port'),
])
def test_bad_anchor_flags_stop_the_controller_naming_the_flag(argv, flag, capsys):
    with pytest.raises(SystemExit):
        settings.parse(argv)
    assert flag in capsys.readouterr().err
