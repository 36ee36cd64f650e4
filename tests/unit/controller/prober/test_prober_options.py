"""The prober and weeder flags: off without a config, DWD's client limits (0 means 5 and 10), a bad config file
stops the controller naming the flag, the file and the field."""

from __future__ import annotations

import pytest

from steward_controller.core import settings

PROBER = '''
kcmNodeMonitorGraceDuration: 40s
dependentResourceInfos:
  - ref: {apiVersion: apps/v1, kind: Deployment, name: kube-controller-manager}
    scaleUp: {level: 0}
    scaleDown: {level: 0}
'''


def test_off_without_config_and_dwd_defaults():
    parsed = settings.parse([])
    prober, weeder = parsed.options('prober'), parsed.options('weeder')
    assert prober.config is None and weeder.config is None
    assert (prober.qps, prober.burst, prober.name) == (5.0, 10, 'steward-watchdog-prober')
    assert parsed.health_port == 0


@pytest.mark.parametrize('qps, burst, effective', [('0', '0', (5.0, 10)), ('2.5', '4', (2.5, 4))])
def test_dwd_p11_zero_means_client_go_defaults(qps, burst, effective):
    options = settings.parse(['--kube-api-qps', qps, '--kube-api-burst', burst]).options('weeder')
    assert (options.qps, options.burst) == effective


def test_configs_load(tmp_path):
    path = tmp_path / 'dep-config.yaml'
    path.write_text(PROBER)
    weeder = tmp_path / 'weeder.yaml'
    weeder.write_text('servicesAndDependantSelectors: {etcd: {podSelectors: [{matchLabels: {app: x}}]}}')
    parsed = settings.parse(['--controllers', 'prober,weeder', '--prober-config', str(path), '--prober-name', 'p1',
                             '--weeder-config', str(weeder), '--health-port', '9644'])
    assert parsed.options('prober').config.dependent_resources[0].ref.name == 'kube-controller-manager'
    assert parsed.options('prober').name == 'p1' and parsed.health_port == 9644
    assert parsed.options('weeder').config.watch_duration == 300.0


@pytest.mark.parametrize('flag, content, words', [
    ('--prober-config', PROBER.replace('40s', '0s'), 'kcmNodeMonitorGraceDuration: must be longer than 0s'),
    ('--prober-config', 'dependentResourceInfos: [', 'config: is not valid YAML'),
    ('--weeder-config', 'watchDuration: 5m', 'servicesAndDependantSelectors: must map at least one service'),
    ('--kube-api-qps', None, '--kube-api-qps must be >= 0'),
    ('--prober-config', 'missing', "--prober-config: '/nonexistent/dep-config.yaml' does not exist"),
])
def test_bad_input_stops_the_controller_naming_it(tmp_path, capsys, flag, content, words):
    if content is None:
        argv = [flag, '-1']
    elif content == 'missing':
        argv = [flag, '/nonexistent/dep-config.yaml']
    else:
        path = tmp_path / 'bad.yaml'
        path.write_text(content)
        argv = [flag, str(path)]
    with pytest.raises(SystemExit):
        settings.parse(argv)
    assert words in capsys.readouterr().err
