"""watchdog/probe.probe_sequence: the one probe sequence of the prober loop and the watchdog_probe module (the
namespace, then one probe with a fresh client; no Nodes turns probing off), against the Kubernetes API emulator."""

from __future__ import annotations

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.watchdog import constants as c
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.prober_config import parse_prober_config
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.probe import probe_sequence

NS = 'shoot--a'
CONFIG = parse_prober_config({'dependentResourceInfos': [
    {'ref': {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': 'kcm'}, 'scaleUp': {'level': 0}, 'scaleDown': {'level': 0}}]})


def namespace(kube, annotations=None):
    kube.create(api_path('v1', 'namespaces'), {'apiVersion': 'v1', 'kind': 'Namespace',
                                               'metadata': {'name': NS, 'annotations': annotations or {}}})


def test_on_and_no_nodes_the_probe_runs_and_turns_probing_off(kube):
    namespace(kube)
    outcome, off = probe_sequence(kube, CONFIG, NS)
    assert outcome is not None and outcome.error is None and outcome.nodes == 0
    assert off == 'no workers (the probed cluster has no Nodes)'


def test_with_a_node_probing_stays_on(kube):
    namespace(kube)
    kube.create(api_path('v1', 'nodes'), {'apiVersion': 'v1', 'kind': 'Node', 'metadata': {'name': 'n1'}})
    outcome, off = probe_sequence(kube, CONFIG, NS)
    assert outcome is not None and outcome.error is None and outcome.nodes == 1
    assert off == ''


def test_off_by_the_namespace_no_probe_unless_always(kube):
    namespace(kube, {c.HIBERNATED_ANNOTATION: 'true'})
    assert probe_sequence(kube, CONFIG, NS) == (None, 'hibernated (%s)' % c.HIBERNATED_ANNOTATION)
    outcome, off = probe_sequence(kube, CONFIG, NS, always=True)     # the module: probe, report, do nothing
    assert outcome is not None and outcome.error is None
    assert off == 'hibernated (%s)' % c.HIBERNATED_ANNOTATION            # the namespace's reason comes first


def test_namespace_only_never_probes(kube):
    namespace(kube)
    assert probe_sequence(kube, CONFIG, NS, namespace_only=True) == (None, '')
    assert probe_sequence(kube, CONFIG, 'missing', namespace_only=True) == (None, '')   # unreadable stops nothing
