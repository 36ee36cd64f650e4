"""A wrong anchor source (issue 19 §2): no file is synced - leaving the source out would remove the files it wrote
- and the source gets one Warning Event per version naming the annotation, the value and the rule; before, the
InvalidInput left the cycle as a crash with a traceback."""

from __future__ import annotations

from typing import Any, Dict, List

from steward_controller.anchor import AnchorOptions
from steward_controller.anchor.loop import AnchorLoop, AnchorMetrics
from steward_controller.core.metrics import Health, Metrics

PATH = 'cluster.steward.io/anchor-path'


class Client:
    """The two lists the loop makes (ConfigMaps, Secrets) answered from memory."""

    def __init__(self, configmaps: List[Dict[str, Any]]):
        self.configmaps = configmaps

    def list(self, path: str, label_selector: str = '') -> List[Dict[str, Any]]:
        return [dict(o) for o in self.configmaps] if path.endswith('/configmaps') else []


class Runtime:
    def __init__(self, client: Client):
        self.client = client
        self.metrics = Metrics()
        self.health = Health()
        self.reports: List[tuple] = []

    def report(self, body: Any, reason: str, message: str, warning: bool = False, kind: str = '') -> None:
        self.reports.append((body['metadata']['name'], reason, message, warning))


def configmap(name: str, path: str, version: str = '1') -> Dict[str, Any]:
    return {'metadata': {'name': name, 'namespace': 'kube-system', 'uid': 'u-' + name, 'resourceVersion': version,
                         'annotations': {PATH: path}}, 'data': {'a.conf': 'x'}}


def loop(configmaps: List[Dict[str, Any]], tmp_path) -> AnchorLoop:
    runtime = Runtime(Client(configmaps))
    options = AnchorOptions(root=str(tmp_path), node_name='cp1', node_ip='10.0.0.1', namespace='kube-system',
                            selector='', interval=10, cleanup=True, etcd_endpoints=(), etcd_peer_port=2380)
    return AnchorLoop(runtime, options, AnchorMetrics(runtime.metrics.registry))


def test_a_wrong_source_stops_the_sync_and_is_named_once_per_version(tmp_path):
    good, bad = configmap('good', '/etc/kubernetes'), configmap('bad', 'etc/relative')
    anchor_loop = loop([good, bad], tmp_path)
    assert anchor_loop.sources() is None
    anchor_loop.cycle()                        # the cycle ends cleanly, and writes nothing
    assert not (tmp_path / 'etc').exists()
    ((name, reason, message, warning),) = anchor_loop.runtime.reports
    assert (name, reason, warning) == ('bad', 'InvalidAnchorSource', True)
    assert message == ("anchor on node cp1: ConfigMap kube-system/bad: cluster.steward.io/anchor-path: must be an "
                       "absolute path, got 'etc/relative' (rule: absolute-path); no file was changed")
    anchor_loop.runtime.client.configmaps[1] = configmap('bad', 'etc/relative', version='2')   # edited, still wrong
    anchor_loop.cycle()
    assert len(anchor_loop.runtime.reports) == 2


def test_good_sources_are_used(tmp_path):
    anchor_loop = loop([configmap('good', '/etc/kubernetes')], tmp_path)
    assert [s.name for s in anchor_loop.sources()] == ['good'] and anchor_loop.runtime.reports == []
