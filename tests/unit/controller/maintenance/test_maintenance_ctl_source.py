# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the controller reads maintenance.yaml (`--maintenance-config`) and how it follows changes."""

from __future__ import annotations

import base64
from typing import Any, Dict, List, Optional

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeUnavailable
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import ConfigError

from steward_controller.core import settings
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config_source import (
    ConfigSource, extract_text, parse_config_source)

from steward_controller.maintenance.config import ConfigWatcher

GOOD = 'intervals: {requeue: 1m}\nprofiles: [{name: p}]\n'
OTHER = 'intervals: {requeue: 5s}\nprofiles: [{name: q}]\n'
BROKEN = 'intervals: {requeue: 1m}\ninstances: {check: [{type: hasLabl, name: x, config: {key: k}}]}\n'


@pytest.mark.parametrize('text, expected', [
    ('configmap/steward-system/maintenance', ConfigSource('configmap', 'steward-system', 'maintenance', 'maintenance.yaml')),
    ('secret/kube-system/mc/config.yaml', ConfigSource('secret', 'kube-system', 'mc', 'config.yaml')),
    ('ConfigMap/ns/a.b-c/maintenance.yaml', ConfigSource('configmap', 'ns', 'a.b-c', 'maintenance.yaml')),
    ('  secret/ns/x  ', ConfigSource('secret', 'ns', 'x', 'maintenance.yaml')),
    ('', None),
    (None, None),
])
def test_config_source_parses(text, expected):
    assert parse_config_source(text) == expected


@pytest.mark.parametrize('text, error', [
    ('configmap/ns', 'expected secret/<namespace>/<name>[/<key>]'),
    ('configmap/ns/name/key/more', 'expected secret/<namespace>/<name>[/<key>]'),
    ('deployment/ns/name', "unknown kind 'deployment' (secret or configmap)"),
    ('secret/Kube_System/name', "namespace 'Kube_System' is not a valid Kubernetes name"),
    ('secret/ns/', "name '' is not a valid Kubernetes name"),
    ('secret/ns/x/a b', "key 'a b' may only hold letters"),
])
def test_config_source_errors_name_the_part(text, error):
    with pytest.raises(ValueError) as info:
        parse_config_source(text)
    assert error in str(info.value)


def test_source_paths_and_event_object():
    source = parse_config_source('secret/kube-system/mc')
    assert source.path == '/api/v1/namespaces/kube-system/secrets/mc'
    assert parse_config_source('configmap/a/b').path == '/api/v1/namespaces/a/configmaps/b'
    assert source.involved({'metadata': {'uid': 'u1'}}) == {
        'apiVersion': 'v1', 'kind': 'Secret', 'metadata': {'name': 'mc', 'namespace': 'kube-system', 'uid': 'u1'}}
    assert str(source) == 'secret/kube-system/mc/maintenance.yaml'


def test_settings_flag_and_environment(monkeypatch):
    assert settings.parse(['--maintenance-config', 'secret/ns/mc/k']).options('maintenance').config == ConfigSource(
        'secret', 'ns', 'mc', 'k')
    monkeypatch.setenv('STEWARD_MAINTENANCE_CONFIG', 'configmap/ns/mc')
    monkeypatch.setenv('STEWARD_MAINTENANCE_WORKERS', '3')
    parsed = settings.parse([])
    options = parsed.options('maintenance')
    assert options.config == ConfigSource('configmap', 'ns', 'mc') and options.workers == 3
    monkeypatch.setenv('STEWARD_MAINTENANCE_CONFIG', '')
    assert settings.parse([]).options('maintenance').config is None
    with pytest.raises(SystemExit):
        settings.parse(['--maintenance-config', 'pod/ns/x'])
    with pytest.raises(SystemExit):
        settings.parse(['--maintenance-workers', '0'])


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_extract_text_from_secret_and_configmap():
    secret, configmap = parse_config_source('secret/ns/a'), parse_config_source('configmap/ns/a/m.yaml')
    assert extract_text(secret, {'data': {'maintenance.yaml': b64('héllo: 1')}}) == 'héllo: 1'
    assert extract_text(secret, {'stringData': {'maintenance.yaml': 'plain'}}) == 'plain'
    assert extract_text(configmap, {'data': {'m.yaml': 'x: 1'}}) == 'x: 1'
    assert extract_text(configmap, {'binaryData': {'m.yaml': b64('y: 2')}}) == 'y: 2'
    with pytest.raises(ConfigError) as info:
        extract_text(configmap, {'data': {'other': '', 'maintenance.yaml': ''}})
    assert str(info.value) == 'ConfigMap ns/a has no key "m.yaml" (keys: maintenance.yaml, other)'
    with pytest.raises(ConfigError) as info:
        extract_text(secret, {'data': {'maintenance.yaml': '***'}})
    assert 'Secret ns/a key "maintenance.yaml" is not base64-encoded UTF-8 text' in str(info.value)


class FakeObject:
    """The ConfigMap as the API would return it, changed by the test between polls."""

    def __init__(self) -> None:
        self.obj: Optional[Dict[str, Any]] = None
        self.version = 0
        self.down = False
        self.reads = 0

    def set(self, text: str) -> None:
        self.version += 1
        self.obj = {'metadata': {'name': 'mc', 'namespace': 'ns', 'resourceVersion': str(self.version), 'uid': 'u'},
                    'data': {'maintenance.yaml': text}}

    def fetch(self) -> Optional[Dict[str, Any]]:
        self.reads += 1
        if self.down:
            raise KubeUnavailable('GET: the API server did not answer', 0)
        return self.obj


def test_watcher_loads_reloads_and_keeps_the_last_good_config():
    api = FakeObject()
    watcher = ConfigWatcher(parse_config_source('configmap/ns/mc'), api.fetch, environ={})
    outcomes: List[Any] = []

    missing = watcher.poll()
    assert missing.failed and missing.error == 'ConfigMap ns/mc does not exist' and watcher.config is None
    assert not watcher.poll().failed   # judged once: the same (missing) version is not reported again

    api.set(BROKEN)
    broken = watcher.poll()
    assert broken.failed and watcher.config is None
    assert broken.error.startswith('instances.check[0] (name "x"): unknown plugin type "hasLabl"')

    api.set(GOOD)
    loaded = watcher.poll()
    assert loaded.changed and not loaded.failed and loaded.version == '2'
    assert sorted(watcher.config.profiles) == ['default', 'p'] and watcher.config.requeue == 60.0
    outcomes.append(watcher.poll())
    assert not outcomes[-1].changed and not outcomes[-1].failed    # unchanged object: nothing to do

    first = watcher.config
    api.set(BROKEN)
    again = watcher.poll()
    assert again.failed and watcher.config is first and watcher.version == '2' and watcher.error == again.error
    assert not watcher.poll().failed    # still broken, not reported twice

    api.down = True
    down = watcher.poll()
    assert down.unreachable and 'cannot read configmap/ns/mc/maintenance.yaml' in down.error and watcher.config is first

    api.down = False
    api.set(OTHER)
    reloaded = watcher.poll()
    assert reloaded.changed and sorted(watcher.config.profiles) == ['default', 'q'] and watcher.config.requeue == 5.0
    assert watcher.error == '' and watcher.version == '4'


def test_watcher_interpolates_the_environment_and_passes_warnings():
    api = FakeObject()
    api.set('intervals: {requeue: "${REQUEUE}"}\nprofiles: []\nextra: 1\n')
    watcher = ConfigWatcher(parse_config_source('configmap/ns/mc'), api.fetch, environ={'REQUEUE': '30s'})
    outcome = watcher.poll()
    assert outcome.changed and watcher.config.requeue == 30.0
    assert outcome.warnings == ('(top): unknown key "extra" ignored (known: intervals, instances, profiles, dashboard)',)
