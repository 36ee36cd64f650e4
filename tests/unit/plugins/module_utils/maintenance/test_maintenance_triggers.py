# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Trigger plugins: alterAnnotation/alterLabel on the working node; cordon/uncordon/drain/eviction through
kube/drain (replaced by recording fakes here; eviction has its own tests)."""

from __future__ import annotations

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube import drain as kube_drain
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.environment import Environment, PluginParams
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import ConfigError, PluginError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.fields import Fields
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.triggers import (
    AlterAnnotation, AlterLabel, Cordon, Drain, Eviction, Uncordon)

from support.maintenance import make_node


def params(node=None, env=None):
    return PluginParams(node=node or make_node('n1'), profile='p', state='maintenance-required', last_transition=0.0,
                        in_maintenance=False, now=0.0, env=env or Environment(kube='CLIENT'))


def build(cls, config):
    return cls.from_config(Fields(config, 'c'))


@pytest.mark.parametrize('cls, section', [(AlterAnnotation, 'annotations'), (AlterLabel, 'labels')])
@pytest.mark.parametrize('config, before, after', [
    ({'key': 'k', 'value': 'v'}, {}, {'k': 'v'}),
    ({'key': 'k', 'value': 'v'}, {'k': 'old', 'x': '1'}, {'k': 'v', 'x': '1'}),
    ({'key': 'k'}, {}, {'k': ''}),                                  # no value: set to empty, as upstream
    ({'key': 'k', 'remove': True}, {'k': 'v', 'x': '1'}, {'x': '1'}),
    ({'key': 'k', 'remove': 'true'}, {}, {}),                       # removing a missing key is fine
])
def test_alter(cls, section, config, before, after):
    node = make_node('n1', **{section: before})
    build(cls, config).trigger(params(node))
    assert node['metadata'][section] == after


def test_alter_needs_a_key():
    with pytest.raises(ConfigError, match='^c.key: required'):
        build(AlterLabel, {'value': 'x'})


class Recorder:
    def __init__(self, result=None, error=None):
        self.calls = []
        self.result = result
        self.error = error

    def __call__(self, client, node_name, **kwargs):
        self.calls.append((client, node_name, kwargs))
        if self.error:
            raise self.error
        return self.result


def test_cordon_and_uncordon_call_eviction(monkeypatch):
    cordon, uncordon = Recorder(True), Recorder(False)
    monkeypatch.setattr(kube_drain, 'cordon', cordon)
    monkeypatch.setattr(kube_drain, 'uncordon', uncordon)
    build(Cordon, None).trigger(params())
    build(Uncordon, {}).trigger(params())
    assert cordon.calls == [('CLIENT', 'n1', {})] and uncordon.calls == [('CLIENT', 'n1', {})]


def test_drain_passes_its_options(monkeypatch):
    drain = Recorder(kube_drain.DrainResult(evicted=['ns/a'], skipped=[], complete=True, message='drained'))
    monkeypatch.setattr(kube_drain, 'drain', drain)
    env = Environment(kube='CLIENT', clock=lambda: 5.0, sleep=lambda s: None)
    build(Drain, {'timeout': '5m', 'evictionTimeout': '30s', 'protectedNamespaces': ['kube-system'], 'force': True}).trigger(params(env=env))
    [(client, name, kwargs)] = drain.calls
    assert (client, name) == ('CLIENT', 'n1')
    assert kwargs == {'timeout': 300.0, 'eviction_timeout': 30.0, 'protected_namespaces': ['kube-system'], 'force': True,
                      'clock': env.clock, 'sleep': env.sleep}


def test_drain_defaults(monkeypatch):
    drain = Recorder(kube_drain.DrainResult([], [], True, ''))
    monkeypatch.setattr(kube_drain, 'drain', drain)
    build(Drain, None).trigger(params())
    kwargs = drain.calls[0][2]
    assert (kwargs['timeout'], kwargs['eviction_timeout'], kwargs['protected_namespaces'], kwargs['force']) == (600.0, 120.0, [], False)


def test_failed_or_incomplete_drain_is_a_plugin_error(monkeypatch):
    monkeypatch.setattr(kube_drain, 'drain', Recorder(error=kube_drain.DrainError('2 pod(s) left: ns/a: PDB')))
    with pytest.raises(PluginError, match='drain n1: 2 pod\\(s\\) left'):
        build(Drain, None).trigger(params())
    monkeypatch.setattr(kube_drain, 'drain', Recorder(kube_drain.DrainResult([], [], False, 'still going')))
    with pytest.raises(PluginError, match='did not complete: still going'):
        build(Drain, None).trigger(params())


def test_eviction_triggers_need_a_client():
    with pytest.raises(PluginError, match='needs a Kubernetes client'):
        build(Cordon, None).trigger(params(env=Environment()))


def test_upstream_eviction_trigger_maps_onto_the_same_functions(monkeypatch):
    drain, cordon = Recorder(kube_drain.DrainResult([], [], True, '')), Recorder(True)
    monkeypatch.setattr(kube_drain, 'drain', drain)
    monkeypatch.setattr(kube_drain, 'cordon', cordon)
    build(Eviction, {'action': 'drain', 'deletionTimeout': '2m', 'forceEviction': True}).trigger(params())
    build(Eviction, {'action': 'cordon'}).trigger(params())
    kwargs = drain.calls[0][2]
    assert (kwargs['timeout'], kwargs['eviction_timeout'], kwargs['force']) == (120.0, 600.0, True)
    assert len(cordon.calls) == 1
    with pytest.raises(ConfigError, match="^c.action: got invalid eviction action 'reboot'"):
        build(Eviction, {'action': 'reboot'})
